//! The registration agent renews its hub client certificate before it expires, with its
//! current identity, and switches to the new certificate without losing the hub: on a hub
//! whose signer issues two-minute certificates, the agent keeps renewing its lease after the
//! first certificate's `notAfter`. The test plays the hub's renewal approver.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::agent_support;

use std::time::{Duration, SystemTime};

use agent_support::*;
use flotilla_api::cluster::consts::managed_cluster as mc;
use flotilla_core::{registration::agent::identity::key_matches_certificate, x509};
use flotilla_registration::{agent::Phase, names};
use flotilla_testing::{ControlPlane, wait};
use k8s_openapi::jiff::Timestamp;

/// Lifetime of certificates the test hub issues. Kubernetes backdates `notBefore` by five
/// minutes, so a certificate lives 420 s on paper and is renewed 15–36 s after issue.
const SIGNING: Duration = Duration::from_secs(120);

#[tokio::test]
async fn the_agent_rotates_its_certificate_before_expiry_and_keeps_the_hub() {
    init_tracing();
    let hub = ControlPlane::builder("agent-rotation-hub")
        .signing_duration(SIGNING)
        .start()
        .await
        .unwrap();
    let managed = ControlPlane::start("agent-rotation-managed").await.unwrap();
    let hub_admin = hub.admin_client().await.unwrap();
    let managed_admin = managed.admin_client().await.unwrap();
    ensure_bootstrap_rbac(&hub_admin).await;
    let (namespace, cluster) = ("agent-rotation", "rotation-c1");
    prepare_namespace(&managed_admin, namespace, bootstrap_kubeconfig(&hub).as_bytes()).await;
    let mut opts = options(namespace, Some(cluster));
    opts.lease_duration_seconds = 2;
    let agent = RunningAgent::start(&managed, opts).await;

    // Join: approve the bootstrap CSR and accept.
    let first_csr = wait_csrs(&hub_admin, cluster, 1).await.remove(0);
    decide_csr(&hub_admin, first_csr.metadata.name.as_deref().unwrap(), true).await;
    agent
        .wait("certificate written", |s| s.phase == Phase::WaitingForAcceptance)
        .await;
    accept(&hub_admin, cluster).await;
    let status = agent.wait("joined", |s| s.phase == Phase::Joined).await;
    let old = hub_secret(&managed_admin, namespace).await.unwrap();
    let old_cert = secret_data(&old, "tls.crt").to_vec();
    let old_info = x509::parse_certificate(&old_cert).unwrap();
    assert_eq!(status.certificate_not_after, Some(old_info.not_after));
    let life = old_info.not_after.duration_since(old_info.not_before).unwrap();
    assert!(
        life <= SIGNING + Duration::from_secs(301),
        "short-lived: {life:?}"
    );

    // Renewal CSRs: the test approves what the hub's auto-approver would.
    let approver = {
        let hub_admin = hub_admin.clone();
        tokio::spawn(async move {
            loop {
                approve_pending(&hub_admin, cluster).await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };

    // Rotated well before the old certificate expires.
    let rotated = wait::until("tls.crt rotated", SIGNING, || async {
        let secret = hub_secret(&managed_admin, namespace).await.unwrap();
        let cert = secret_data(&secret, "tls.crt").to_vec();
        Ok::<_, String>((cert != old_cert).then_some(secret))
    })
    .await
    .unwrap();
    assert!(SystemTime::now() < old_info.not_after, "renewed before expiry");
    let new_cert = secret_data(&rotated, "tls.crt");
    let new_info = x509::parse_certificate(new_cert).unwrap();
    assert_eq!(new_info.subject, old_info.subject);
    assert!(new_info.not_after > old_info.not_after);
    assert!(key_matches_certificate(new_cert, secret_data(&rotated, "tls.key")).unwrap());
    assert_ne!(
        secret_data(&rotated, "tls.key"),
        secret_data(&old, "tls.key"),
        "a new key"
    );

    // The renewal was requested with the agent's current identity, not the bootstrap one.
    let csrs = cluster_csrs(&hub_admin, cluster).await;
    assert!(csrs.len() >= 2);
    assert_eq!(
        csrs[1].spec.username.as_deref(),
        Some(names::agent_user(cluster, status.agent_name.as_deref().unwrap()).as_str())
    );
    wait_cluster(&hub_admin, cluster, "ClusterCertificateRotated", |c| {
        has_condition(
            c,
            mc::CONDITION_CLUSTER_CERTIFICATE_ROTATED,
            "True",
            mc::REASON_CLIENT_CERTIFICATE_UPDATED,
        )
    })
    .await;
    let status = agent.wait("rotation counted", |s| s.rotations >= 1).await;
    assert!(status.certificate_not_after > Some(old_info.not_after));

    // After the old certificate's notAfter, the agent still reaches the hub: only the new
    // certificate can authenticate the lease renewals seen from then on.
    let expired_at = Timestamp::try_from(old_info.not_after).unwrap();
    let remaining = old_info
        .not_after
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    tokio::time::sleep(remaining + Duration::from_secs(1)).await;
    let renewed = wait::until(
        "lease renewed after the old certificate expired",
        TIMEOUT,
        || async {
            let renewed = lease_renew_time(&hub_admin, cluster).await;
            Ok::<_, String>(renewed.filter(|t| *t > expired_at))
        },
    )
    .await
    .unwrap();
    assert!(renewed > expired_at);
    wait_cluster(&hub_admin, cluster, "still available", |c| {
        has_condition(c, mc::CONDITION_AVAILABLE, "True", mc::REASON_AVAILABLE)
    })
    .await;
    let status = agent.status.current();
    assert_eq!(status.phase, Phase::Joined);
    assert!(!agent.task.is_finished());
    approver.abort();
}
