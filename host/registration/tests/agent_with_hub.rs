//! Flotilla's registration agent against Flotilla's hub controllers (`hub::run`), each on its
//! own control plane: the hub admin only approves the first CSR and sets
//! `spec.hubAcceptsClient` (what `flotilla accept` does); the hub creates the cluster
//! namespace, RBAC and lease and sets `HubAcceptedManagedCluster`; the agent joins and
//! reports; and when its short-lived certificate nears its end, the hub's CSR controller
//! approves the renewal the agent requests with its own identity. Deleted on the hub, the
//! cluster is created again by the running agent.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::agent_support;

use std::time::Duration;

use agent_support::*;
use flotilla_api::cluster::{consts::managed_cluster as mc, v1::ManagedCluster};
use flotilla_registration::{
    agent::Phase,
    hub::{self, HubOptions},
    names,
};
use flotilla_testing::{ControlPlane, wait};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

/// Certificates live two minutes (plus Kubernetes' five minutes of backdating), so the agent
/// renews 15–36 s after each issue.
const SIGNING: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_joins_flotillas_hub_and_its_renewal_is_auto_approved() {
    init_tracing();
    let hub_plane = ControlPlane::builder("agent-with-hub")
        .signing_duration(SIGNING)
        .start()
        .await
        .unwrap();
    let managed = ControlPlane::start("agent-with-hub-managed").await.unwrap();
    let hub_admin = hub_plane.admin_client().await.unwrap();
    let managed_admin = managed.admin_client().await.unwrap();
    let controllers = tokio::spawn(hub::run(
        hub_admin.clone(),
        HubOptions {
            resync: Duration::from_secs(10),
            ..HubOptions::default()
        },
    ));
    ensure_bootstrap_binding(&hub_admin).await;
    let (namespace, cluster) = ("agent-with-hub", "with-hub-c1");
    prepare_namespace(
        &managed_admin,
        namespace,
        bootstrap_kubeconfig(&hub_plane).as_bytes(),
    )
    .await;
    let mut opts = options(namespace, Some(cluster));
    opts.lease_duration_seconds = 2;
    let agent = RunningAgent::start(&managed, opts).await;

    // `flotilla accept`: approve the bootstrap CSR, accept the cluster.
    let first = wait_csrs(&hub_admin, cluster, 1).await.remove(0);
    decide_csr(&hub_admin, first.metadata.name.as_deref().unwrap(), true).await;
    Api::<ManagedCluster>::all(hub_admin.clone())
        .patch(
            cluster,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "hubAcceptsClient": true } })),
        )
        .await
        .unwrap();

    // The hub accepts (namespace, RBAC, lease); the agent joins and reports.
    wait_cluster(&hub_admin, cluster, "accepted, joined and available", |c| {
        has_condition(
            c,
            mc::CONDITION_HUB_ACCEPTED,
            "True",
            mc::REASON_HUB_CLUSTER_ADMIN_ACCEPTED,
        ) && has_condition(c, mc::CONDITION_JOINED, "True", mc::REASON_JOINED)
            && has_condition(c, mc::CONDITION_AVAILABLE, "True", mc::REASON_AVAILABLE)
    })
    .await;
    let status = agent.wait("joined", |s| s.phase == Phase::Joined).await;
    let agent_user = names::agent_user(cluster, status.agent_name.as_deref().unwrap());
    let joined_at = wait::until("lease renewed by the agent", TIMEOUT, || async {
        Ok::<_, String>(lease_renew_time(&hub_admin, cluster).await)
    })
    .await
    .unwrap();

    // Renewal: requested by the agent itself, approved by the hub, then used.
    let old = hub_secret(&managed_admin, namespace).await.unwrap();
    let old_cert = secret_data(&old, "tls.crt").to_vec();
    wait::until("tls.crt rotated", SIGNING, || async {
        let secret = hub_secret(&managed_admin, namespace).await.unwrap();
        Ok::<_, String>((secret_data(&secret, "tls.crt") != old_cert).then_some(()))
    })
    .await
    .unwrap();
    let renewal = cluster_csrs(&hub_admin, cluster)
        .await
        .into_iter()
        .find(|c| c.spec.username.as_deref() == Some(agent_user.as_str()))
        .expect("a renewal CSR requested by the agent");
    let approval = renewal
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Approved"))
        .expect("approved");
    assert_eq!(
        approval.reason.as_deref(),
        Some("AutoApprovedByHubCSRApprovingController")
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
    let rotated_at = k8s_openapi::jiff::Timestamp::now();
    wait::until("lease renewed with the new certificate", TIMEOUT, || async {
        let renewed = lease_renew_time(&hub_admin, cluster).await;
        Ok::<_, String>(renewed.filter(|t| *t > rotated_at && *t > joined_at))
    })
    .await
    .unwrap();
    assert_eq!(agent.status.current().phase, Phase::Joined);

    // Deleted on the hub under the running agent: the agent creates it again (not accepted),
    // and once the admin accepts it again it is joined and available with the same identity.
    let clusters = Api::<ManagedCluster>::all(hub_admin.clone());
    let old_uid = clusters.get(cluster).await.unwrap().metadata.uid;
    clusters.delete(cluster, &Default::default()).await.unwrap();
    let recreated = wait_cluster(&hub_admin, cluster, "created again by the agent", |c| {
        c.metadata.uid != old_uid && c.metadata.deletion_timestamp.is_none()
    })
    .await;
    assert!(
        !recreated.spec.hub_accepts_client,
        "a recreated cluster waits for the admin"
    );
    clusters
        .patch(
            cluster,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "hubAcceptsClient": true } })),
        )
        .await
        .unwrap();
    wait_cluster(&hub_admin, cluster, "joined and available again", |c| {
        c.metadata.uid != old_uid
            && has_condition(c, mc::CONDITION_JOINED, "True", mc::REASON_JOINED)
            && has_condition(c, mc::CONDITION_AVAILABLE, "True", mc::REASON_AVAILABLE)
    })
    .await;
    controllers.abort();
}
