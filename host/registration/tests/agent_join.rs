//! The registration agent joins a hub the way OCM's agent does, against two real control
//! planes (hub and managed cluster). The test plays the hub admin: it approves the first CSR
//! and accepts the cluster (`flotilla accept`), creating what acceptance creates.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::agent_support;

use std::{collections::BTreeMap, time::Duration};

use agent_support::*;
use flotilla_api::cluster::{
    consts::{CLUSTER_NAME_LABEL, SPOKE_ONLY_LABEL, managed_cluster as mc},
    v1::ClientConfig,
    v1alpha1::{ClusterClaim, ClusterClaimSpec},
};
use flotilla_core::{registration::agent::identity::key_matches_certificate, x509};
use flotilla_registration::{
    agent::{Phase, kubeconfig::HubKubeconfig},
    names,
};
use k8s_openapi::{ByteString, api::certificates::v1::CertificateSigningRequest};
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
};

#[tokio::test]
async fn an_agent_joins_the_hub_and_reports_lease_health_version_and_claims() {
    init_tracing();
    let (hub, managed) = planes().await;
    let hub_admin = hub.admin_client().await.unwrap();
    let managed_admin = managed.admin_client().await.unwrap();
    ensure_bootstrap_rbac(&hub_admin).await;
    let (namespace, cluster) = ("agent-join", "join-c1");
    prepare_namespace(&managed_admin, namespace, bootstrap_kubeconfig(hub).as_bytes()).await;
    create_claims(&managed_admin).await;

    let mut opts = options(namespace, Some(cluster));
    opts.lease_duration_seconds = 2;
    opts.cluster_client_configs = vec![ClientConfig {
        url: managed.server().to_owned(),
        ca_bundle: Some(ByteString(managed.ca_pem().as_bytes().to_vec())),
    }];
    opts.cluster_annotations = BTreeMap::from([
        (
            "agent.open-cluster-management.io/owner".to_owned(),
            "team-a".to_owned(),
        ),
        ("example.com/ignored".to_owned(), "x".to_owned()),
    ]);
    let agent = RunningAgent::start(managed, opts).await;

    // The ManagedCluster, as the bootstrap identity creates it.
    let created = wait_cluster(&hub_admin, cluster, "ManagedCluster created", |_| true).await;
    assert!(!created.spec.hub_accepts_client);
    assert_eq!(created.spec.lease_duration_seconds, 2);
    assert_eq!(
        created.spec.managed_cluster_client_configs[0].url,
        managed.server()
    );
    let annotations = created.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("agent.open-cluster-management.io/owner")
            .map(String::as_str),
        Some("team-a")
    );
    assert!(!annotations.contains_key("example.com/ignored"));

    // The CSR, exactly as OCM's agent makes it.
    let csr = wait_csrs(&hub_admin, cluster, 1).await.remove(0);
    let csr_name = csr.metadata.name.clone().unwrap();
    assert!(csr_name.starts_with("join-c1-"), "{csr_name}");
    assert_eq!(csr.metadata.generate_name.as_deref(), Some("join-c1-"));
    assert_eq!(
        csr.metadata
            .labels
            .as_ref()
            .unwrap()
            .get(CLUSTER_NAME_LABEL)
            .map(String::as_str),
        Some(cluster)
    );
    assert_eq!(csr.spec.signer_name, "kubernetes.io/kube-apiserver-client");
    assert_eq!(
        csr.spec.usages.clone().unwrap(),
        ["digital signature", "key encipherment", "client auth"]
    );
    assert_eq!(csr.spec.expiration_seconds, None);
    assert_eq!(csr.spec.username.as_deref(), Some(BOOTSTRAP_USER));
    let request = x509::parse_request(&csr.spec.request.0).unwrap();
    let status = agent
        .wait(
            "waiting for the certificate",
            |s| matches!(&s.phase, Phase::WaitingForCertificate { csr } if *csr == csr_name),
        )
        .await;
    let agent_name = status.agent_name.clone().unwrap();
    assert_eq!(agent_name.len(), 5);
    assert!(agent_name.bytes().all(|b| b.is_ascii_lowercase()));
    assert_eq!(
        request.subject.common_name,
        format!("system:open-cluster-management:join-c1:{agent_name}")
    );
    assert_eq!(
        request.subject.organizations,
        [
            "system:open-cluster-management:join-c1",
            "system:open-cluster-management:managed-clusters"
        ]
    );

    // Approved: the agent writes its hub kubeconfig secret.
    decide_csr(&hub_admin, &csr_name, true).await;
    agent
        .wait("certificate written", |s| s.phase == Phase::WaitingForAcceptance)
        .await;
    let secret = hub_secret(&managed_admin, namespace)
        .await
        .expect("hub kubeconfig secret");
    let keys: Vec<&String> = secret.data.as_ref().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["agent-name", "cluster-name", "kubeconfig", "tls.crt", "tls.key"]
    );
    assert_eq!(secret_data(&secret, "cluster-name"), cluster.as_bytes());
    assert_eq!(secret_data(&secret, "agent-name"), agent_name.as_bytes());
    let cert = secret_data(&secret, "tls.crt");
    let key = secret_data(&secret, "tls.key");
    // The key is ECDSA P-256 (nothing else parses here) and belongs to the certificate.
    assert!(key_matches_certificate(cert, key).unwrap());
    let info = x509::parse_certificate(cert).unwrap();
    assert_eq!(info.subject.common_name, request.subject.common_name);
    let kubeconfig = HubKubeconfig::parse(
        std::str::from_utf8(secret_data(&secret, "kubeconfig")).unwrap(),
        "hub",
    )
    .unwrap();
    assert_eq!(kubeconfig.server(), hub.server());
    assert_eq!(
        kubeconfig.kubeconfig.current_context.as_deref(),
        Some("default-context")
    );
    let user = &kubeconfig.kubeconfig.auth_infos[0];
    assert_eq!(user.name, "default-auth");
    let bootstrap = HubKubeconfig::parse(&bootstrap_kubeconfig(hub), "bootstrap").unwrap();
    assert_eq!(kubeconfig.endpoint(), bootstrap.endpoint());

    // Not accepted yet: nothing but the condition-less record.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pending = managed_cluster(&hub_admin, cluster).await.unwrap();
    assert!(condition(&pending, mc::CONDITION_JOINED).is_none());

    // Accepted: joined, available, version, claims; the lease is renewed.
    accept(&hub_admin, cluster).await;
    let accepted_at = lease_renew_time(&hub_admin, cluster).await.unwrap();
    let joined = wait_cluster(&hub_admin, cluster, "joined and available with claims", |c| {
        has_condition(c, mc::CONDITION_JOINED, "True", mc::REASON_JOINED)
            && has_condition(c, mc::CONDITION_AVAILABLE, "True", mc::REASON_AVAILABLE)
            && c.status.as_ref().is_some_and(|s| !s.cluster_claims.is_empty())
    })
    .await;
    let status = joined.status.clone().unwrap();
    let version = managed_admin.apiserver_version().await.unwrap().git_version;
    assert_eq!(status.version.kubernetes, version);
    assert!(status.capacity.is_empty(), "the local control plane has no nodes");
    let claims: Vec<(&str, &str)> = status
        .cluster_claims
        .iter()
        .map(|c| (c.name.as_str(), c.value.as_str()))
        .collect();
    let mut expected = vec![
        ("id.k8s.io", "join-test-id"),
        ("kubeversion.open-cluster-management.io", "v1.33"),
    ];
    let custom: Vec<String> = (0..20).map(|i| format!("custom-{i:02}.example.com")).collect();
    expected.extend(custom.iter().map(|n| (n.as_str(), "value")));
    assert_eq!(
        claims, expected,
        "reserved first, spoke-only hidden, 20 custom at most"
    );
    let message = &condition(&joined, mc::CONDITION_AVAILABLE).unwrap().message;
    assert_eq!(message, "Managed cluster is available");

    let first = wait_lease_after(&hub_admin, cluster, accepted_at).await;
    wait_lease_after(&hub_admin, cluster, first).await;
    let status = agent
        .wait("joined", |s| s.phase == Phase::Joined && s.lease_renewals >= 2)
        .await;
    assert_eq!(status.last_error, None);

    // Converged: no further status writes while nothing changes.
    let before = managed_cluster(&hub_admin, cluster)
        .await
        .unwrap()
        .metadata
        .resource_version;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = managed_cluster(&hub_admin, cluster)
        .await
        .unwrap()
        .metadata
        .resource_version;
    assert_eq!(before, after, "status is written only when it changes");
}

#[tokio::test]
async fn a_restarted_agent_reuses_its_cluster_name_agent_name_and_certificate() {
    init_tracing();
    let (hub, managed) = planes().await;
    let hub_admin = hub.admin_client().await.unwrap();
    let managed_admin = managed.admin_client().await.unwrap();
    ensure_bootstrap_rbac(&hub_admin).await;
    let namespace = "agent-restart";
    prepare_namespace(&managed_admin, namespace, bootstrap_kubeconfig(hub).as_bytes()).await;

    // No names given: a UUID cluster name and a random agent name.
    let agent = RunningAgent::start(managed, options(namespace, None)).await;
    let status = agent
        .wait("CSR created", |s| {
            matches!(s.phase, Phase::WaitingForCertificate { .. })
        })
        .await;
    let cluster = status.cluster_name.clone().unwrap();
    let agent_name = status.agent_name.clone().unwrap();
    assert_eq!(cluster.len(), 36);
    assert_eq!(cluster.matches('-').count(), 4);
    assert_eq!(&cluster[14..15], "4", "a version-4 UUID: {cluster}");
    let Phase::WaitingForCertificate { csr } = status.phase else {
        unreachable!()
    };
    decide_csr(&hub_admin, &csr, true).await;
    agent
        .wait("certificate written", |s| s.phase == Phase::WaitingForAcceptance)
        .await;
    let written = hub_secret(&managed_admin, namespace).await.unwrap();
    agent.stop().await;

    // A new agent with the same options (no names) picks up the stored identity.
    let restarted = RunningAgent::start(managed, options(namespace, None)).await;
    let status = restarted
        .wait("stored identity reused", |s| {
            s.phase == Phase::WaitingForAcceptance
        })
        .await;
    assert_eq!(status.cluster_name.as_deref(), Some(cluster.as_str()));
    assert_eq!(status.agent_name.as_deref(), Some(agent_name.as_str()));
    accept(&hub_admin, &cluster).await;
    restarted.wait("joined", |s| s.phase == Phase::Joined).await;
    wait_cluster(&hub_admin, &cluster, "joined", |c| {
        has_condition(c, mc::CONDITION_JOINED, "True", mc::REASON_JOINED)
    })
    .await;
    assert_eq!(cluster_csrs(&hub_admin, &cluster).await.len(), 1, "no new CSR");
    let kept = hub_secret(&managed_admin, namespace).await.unwrap();
    assert_eq!(secret_data(&kept, "tls.crt"), secret_data(&written, "tls.crt"));
    assert_eq!(secret_data(&kept, "tls.key"), secret_data(&written, "tls.key"));
}

#[tokio::test]
async fn no_csr_is_created_while_ten_of_the_clusters_csrs_exist() {
    init_tracing();
    let (hub, managed) = planes().await;
    let hub_admin = hub.admin_client().await.unwrap();
    let managed_admin = managed.admin_client().await.unwrap();
    ensure_bootstrap_rbac(&hub_admin).await;
    let (namespace, cluster) = ("agent-limit", "limit-c1");
    prepare_namespace(&managed_admin, namespace, bootstrap_kubeconfig(hub).as_bytes()).await;
    let csrs: Api<CertificateSigningRequest> = Api::all(hub_admin.clone());
    for i in 0..10 {
        let made = x509::client_request(&format!("someone-{i}"), &[], &[], &[]).unwrap();
        let csr = CertificateSigningRequest {
            metadata: ObjectMeta {
                name: Some(format!("{cluster}-pre-{i}")),
                labels: Some(BTreeMap::from([(
                    CLUSTER_NAME_LABEL.to_owned(),
                    cluster.to_owned(),
                )])),
                ..Default::default()
            },
            spec: k8s_openapi::api::certificates::v1::CertificateSigningRequestSpec {
                request: ByteString(made.request_pem.into_bytes()),
                signer_name: names::KUBE_APISERVER_CLIENT_SIGNER.to_owned(),
                usages: Some(vec!["client auth".into()]),
                ..Default::default()
            },
            status: None,
        };
        csrs.create(&PostParams::default(), &csr).await.unwrap();
    }

    let agent = RunningAgent::start(managed, options(namespace, Some(cluster))).await;
    let first = agent
        .wait("refused to create a CSR", |s| {
            s.last_error
                .as_deref()
                .is_some_and(|e| e.contains("already has 10 CSRs"))
        })
        .await;
    agent
        .wait("retried", |s| s.error_count >= first.error_count + 2)
        .await;
    assert!(!agent.task.is_finished());
    assert_eq!(cluster_csrs(&hub_admin, cluster).await.len(), 10);

    // Below the limit again: the agent asks.
    csrs.delete(&format!("{cluster}-pre-0"), &Default::default())
        .await
        .unwrap();
    let status = agent
        .wait("CSR created", |s| {
            matches!(s.phase, Phase::WaitingForCertificate { .. })
        })
        .await;
    let Phase::WaitingForCertificate { csr } = status.phase else {
        unreachable!()
    };
    assert!(csr.starts_with("limit-c1-"));
    assert_eq!(cluster_csrs(&hub_admin, cluster).await.len(), 10);
}

/// Reserved claims, 22 custom ones and a spoke-only one on the managed cluster.
async fn create_claims(managed_admin: &kube::Client) {
    let api: Api<ClusterClaim> = Api::all(managed_admin.clone());
    let mut claims = vec![
        ("id.k8s.io".to_owned(), "join-test-id".to_owned(), false),
        (
            "kubeversion.open-cluster-management.io".to_owned(),
            "v1.33".to_owned(),
            false,
        ),
        ("secret.example.com".to_owned(), "hidden".to_owned(), true),
    ];
    claims.extend((0..22).map(|i| (format!("custom-{i:02}.example.com"), "value".to_owned(), false)));
    for (name, value, spoke_only) in claims {
        let claim = ClusterClaim {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: spoke_only.then(|| BTreeMap::from([(SPOKE_ONLY_LABEL.to_owned(), String::new())])),
                ..Default::default()
            },
            spec: ClusterClaimSpec { value },
        };
        match api.create(&PostParams::default(), &claim).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => panic!("create claim {name}: {e}"),
        }
    }
}

/// Waits until the lease's `renewTime` is later than `after`, and returns it.
async fn wait_lease_after(
    hub_admin: &kube::Client,
    cluster: &str,
    after: k8s_openapi::jiff::Timestamp,
) -> k8s_openapi::jiff::Timestamp {
    flotilla_testing::wait::until("lease renewed", TIMEOUT, || async {
        let renewed = lease_renew_time(hub_admin, cluster).await;
        Ok::<_, String>(renewed.filter(|t| *t > after))
    })
    .await
    .unwrap()
}

/// OCM's agent watches its ManagedCluster; so does this one between status passes, so a new
/// `leaseDurationSeconds` takes effect at once, not after the (here ten-minute) status interval.
#[tokio::test]
async fn a_new_lease_duration_takes_effect_without_waiting_for_the_status_interval() {
    init_tracing();
    let (hub, managed) = planes().await;
    let hub_admin = hub.admin_client().await.unwrap();
    let managed_admin = managed.admin_client().await.unwrap();
    ensure_bootstrap_rbac(&hub_admin).await;
    let (namespace, cluster) = ("agent-lease-change", "lease-change-c1");
    prepare_namespace(&managed_admin, namespace, bootstrap_kubeconfig(hub).as_bytes()).await;
    let mut opts = options(namespace, Some(cluster));
    opts.lease_duration_seconds = 3600;
    opts.status_interval = Duration::from_secs(600);
    let agent = RunningAgent::start(managed, opts).await;
    wait_csrs(&hub_admin, cluster, 1).await;
    approve_pending(&hub_admin, cluster).await;
    accept(&hub_admin, cluster).await;
    agent.wait("joined", |s| s.phase == Phase::Joined).await;
    wait_cluster(&hub_admin, cluster, "available", |c| {
        has_condition(c, mc::CONDITION_AVAILABLE, "True", mc::REASON_AVAILABLE)
    })
    .await;

    Api::<flotilla_api::cluster::v1::ManagedCluster>::all(hub_admin.clone())
        .patch(
            cluster,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({ "spec": { "leaseDurationSeconds": 1 } })),
        )
        .await
        .unwrap();
    // With an hour-long lease the agent renews once at join; three renewals after the change
    // show the one-second period in force.
    let mut seen = std::collections::BTreeSet::new();
    let deadline = std::time::Instant::now() + TIMEOUT;
    while seen.len() < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent kept the old lease period: renewals seen {seen:?}"
        );
        if let Some(renewed) = lease_renew_time(&hub_admin, cluster).await {
            seen.insert(renewed);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// OCM's agent watches ClusterClaims; so does this one, so a claim made on the managed cluster
/// reaches the ManagedCluster's status at once, not after the (here ten-minute) status
/// interval (issue 30). A managed control plane of its own: claims are cluster-wide, and the
/// claims test above counts them.
#[tokio::test]
async fn a_new_cluster_claim_reaches_the_hub_without_waiting_for_the_status_interval() {
    init_tracing();
    let (hub, _) = planes().await;
    let managed = flotilla_testing::shared("agent-claims-managed")
        .await
        .expect("start managed cluster");
    let hub_admin = hub.admin_client().await.unwrap();
    let managed_admin = managed.admin_client().await.unwrap();
    ensure_bootstrap_rbac(&hub_admin).await;
    let (namespace, cluster) = ("agent-claim-event", "claim-event-c1");
    prepare_namespace(&managed_admin, namespace, bootstrap_kubeconfig(hub).as_bytes()).await;
    let mut opts = options(namespace, Some(cluster));
    opts.status_interval = Duration::from_secs(600);
    let agent = RunningAgent::start(managed, opts).await;
    wait_csrs(&hub_admin, cluster, 1).await;
    approve_pending(&hub_admin, cluster).await;
    accept(&hub_admin, cluster).await;
    agent.wait("joined", |s| s.phase == Phase::Joined).await;
    wait_cluster(&hub_admin, cluster, "available", |c| {
        has_condition(c, mc::CONDITION_AVAILABLE, "True", mc::REASON_AVAILABLE)
    })
    .await;

    let claim = ClusterClaim {
        metadata: ObjectMeta {
            name: Some("region.example.com".to_owned()),
            ..Default::default()
        },
        spec: ClusterClaimSpec {
            value: "eu-west".to_owned(),
        },
    };
    Api::<ClusterClaim>::all(managed_admin)
        .create(&PostParams::default(), &claim)
        .await
        .unwrap();
    let created = std::time::Instant::now();
    wait_cluster(&hub_admin, cluster, "the new claim in status", |c| {
        c.status.as_ref().is_some_and(|s| {
            s.cluster_claims
                .iter()
                .any(|claim| claim.name == "region.example.com" && claim.value == "eu-west")
        })
    })
    .await;
    assert!(
        created.elapsed() < Duration::from_secs(30),
        "the claim took {:?} to reach the hub",
        created.elapsed()
    );
}
