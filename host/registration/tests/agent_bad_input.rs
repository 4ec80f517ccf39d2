//! Bad input never crashes the registration agent: a malformed bootstrap kubeconfig, an
//! unreachable hub, a hub whose CA the kubeconfig does not trust, a missing bootstrap secret
//! and a denied CSR each show up as a clear error in the agent's status and are retried with
//! backoff, and fixing the cause lets registration proceed. A cluster name that can never be
//! a namespace stops the agent with a clear error instead of a retry loop.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::agent_support;

use std::time::Duration;

use agent_support::*;
use base64::{Engine as _, engine::general_purpose::STANDARD};
use flotilla_registration::agent::{Error, Phase};

/// Starts an agent in `namespace` with `bootstrap` as the bootstrap secret's kubeconfig,
/// waits for an error containing `expected`, checks that it is retried with backoff, then
/// puts a good kubeconfig in place and waits for the agent's CSR.
async fn fails_then_recovers(namespace: &str, cluster: &str, bootstrap: Option<&[u8]>, expected: &str) {
    init_tracing();
    let (hub, managed) = planes().await;
    let hub_admin = hub.admin_client().await.unwrap();
    let managed_admin = managed.admin_client().await.unwrap();
    ensure_bootstrap_rbac(&hub_admin).await;
    match bootstrap {
        Some(kubeconfig) => prepare_namespace(&managed_admin, namespace, kubeconfig).await,
        None => create_namespace_only(&managed_admin, namespace).await,
    }

    let agent = RunningAgent::start(managed, options(namespace, Some(cluster))).await;
    let failed = agent
        .wait(&format!("error mentioning {expected:?}"), |s| {
            s.last_error.as_deref().is_some_and(|e| e.contains(expected))
        })
        .await;
    assert_eq!(failed.phase, Phase::Bootstrapping);
    // Retried, with backoff (200 ms doubling to 2 s): a few tries in 4 s, not hundreds.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let later = agent.status.current();
    assert!(!agent.task.is_finished(), "the agent keeps running");
    assert!(later.error_count > failed.error_count, "{later:?}");
    assert!(later.error_count < failed.error_count + 15, "backoff: {later:?}");
    assert_eq!(later.last_error, failed.last_error);
    assert!(cluster_csrs(&hub_admin, cluster).await.is_empty());

    put_bootstrap_secret(&managed_admin, namespace, bootstrap_kubeconfig(hub).as_bytes()).await;
    let status = agent
        .wait("CSR created after the fix", |s| {
            matches!(s.phase, Phase::WaitingForCertificate { .. })
        })
        .await;
    assert_eq!(status.last_error, None, "the error is cleared");
    assert!(managed_cluster(&hub_admin, cluster).await.is_some());
    assert_eq!(cluster_csrs(&hub_admin, cluster).await.len(), 1);
}

async fn create_namespace_only(managed_admin: &kube::Client, namespace: &str) {
    prepare_namespace(managed_admin, namespace, b"").await;
    kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(managed_admin.clone(), namespace)
        .delete(
            flotilla_registration::names::BOOTSTRAP_SECRET,
            &Default::default(),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_malformed_bootstrap_kubeconfig_is_reported_and_retried_until_fixed() {
    fails_then_recovers(
        "agent-bad-yaml",
        "bad-yaml",
        Some(b"clusters: [ {name: hub, cluster: {server: "),
        "parse bootstrap kubeconfig in secret agent-bad-yaml/bootstrap-hub-kubeconfig",
    )
    .await;
}

#[tokio::test]
async fn a_bootstrap_kubeconfig_without_a_server_is_reported_and_retried_until_fixed() {
    fails_then_recovers(
        "agent-no-context",
        "no-context",
        Some(b"apiVersion: v1\nkind: Config\nclusters: []\n"),
        "no current-context",
    )
    .await;
}

/// A path no file is at yet, for an exec plugin to create.
fn fresh_marker(test: &str) -> std::path::PathBuf {
    let marker = std::env::temp_dir().join(format!("flotilla-exec-ran-{test}-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    marker
}

/// `kubeconfig` with every user replaced by an exec plugin that creates `marker`: what anyone
/// who may write the secret could make the agent's host run.
fn with_exec_plugin(kubeconfig: &str, marker: &std::path::Path) -> String {
    let mut parsed = kube::config::Kubeconfig::from_yaml(kubeconfig).unwrap();
    for user in &mut parsed.auth_infos {
        user.auth_info = Some(
            serde_json::from_value(serde_json::json!({ "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": "/bin/sh",
                "args": ["-c", format!("touch {}", marker.display())],
                "interactiveMode": "Never",
            }}))
            .unwrap(),
        );
    }
    serde_yaml::to_string(&parsed).unwrap()
}

#[tokio::test]
async fn a_bootstrap_kubeconfig_with_an_exec_plugin_is_refused_without_running_it() {
    let (hub, _) = planes().await;
    let marker = fresh_marker("bootstrap");
    let kubeconfig = with_exec_plugin(&bootstrap_kubeconfig(hub), &marker);
    fails_then_recovers(
        "agent-exec",
        "exec",
        Some(kubeconfig.as_bytes()),
        "refuse bootstrap kubeconfig in secret agent-exec/bootstrap-hub-kubeconfig: users[",
    )
    .await;
    assert!(!marker.exists(), "the exec plugin ran on the agent's host");
}

/// Hosted mode reads the managed cluster's kubeconfig from a secret on the hosting cluster,
/// which whoever may write secrets there controls: an exec plugin in it is reported as the
/// secret's problem, and never run.
#[tokio::test]
async fn a_hosted_managed_kubeconfig_with_an_exec_plugin_is_refused_without_running_it() {
    use flotilla_registration::{agent::hosted, names::EXTERNAL_MANAGED_KUBECONFIG_SECRET};
    use k8s_openapi::{ByteString, api::core::v1::Secret};

    init_tracing();
    let (_, hosting) = planes().await;
    let hosting_admin = hosting.admin_client().await.unwrap();
    let namespace = "agent-hosted-exec";
    create_namespace_only(&hosting_admin, namespace).await;
    let marker = fresh_marker("hosted");
    let managed_kubeconfig = std::fs::read_to_string(hosting.admin_kubeconfig()).unwrap();
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": { "name": EXTERNAL_MANAGED_KUBECONFIG_SECRET, "namespace": namespace },
    }))
    .unwrap();
    let secrets = kube::Api::<Secret>::namespaced(hosting_admin.clone(), namespace);
    let mut secret = secret;
    secret.data = Some(
        [(
            "kubeconfig".to_owned(),
            ByteString(with_exec_plugin(&managed_kubeconfig, &marker).into_bytes()),
        )]
        .into(),
    );
    secrets.create(&Default::default(), &secret).await.unwrap();

    let options = options(namespace, Some("hosted-exec"));
    let status = options.status.clone();
    let waiting =
        tokio::spawn(async move { hosted::managed_client(&hosting_admin, &options).await.kubeconfig });
    let failed = wait_status(&status, "the exec plugin refused", TIMEOUT, |s| {
        s.last_error.as_deref().is_some_and(|e| e.contains(".user.exec"))
    })
    .await;
    let message = failed.last_error.unwrap();
    assert!(
        message.contains(&format!(
            "secret {namespace}/{EXTERNAL_MANAGED_KUBECONFIG_SECRET} on the hosting cluster"
        )) && message.contains("would run a command"),
        "{message}"
    );
    // Retried, and never run.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !waiting.is_finished(),
        "a client was made from the refused kubeconfig"
    );
    assert!(!marker.exists(), "the exec plugin ran on the klusterlet's host");

    // The admin's own kubeconfig, self-contained, is taken.
    secret.data = Some(
        [(
            "kubeconfig".to_owned(),
            ByteString(managed_kubeconfig.clone().into_bytes()),
        )]
        .into(),
    );
    secrets
        .replace(EXTERNAL_MANAGED_KUBECONFIG_SECRET, &Default::default(), &secret)
        .await
        .unwrap();
    let taken = tokio::time::timeout(TIMEOUT, waiting).await.unwrap().unwrap();
    assert_eq!(taken, managed_kubeconfig);
}

#[tokio::test]
async fn a_missing_bootstrap_secret_is_reported_and_retried_until_created() {
    fails_then_recovers(
        "agent-no-secret",
        "no-secret",
        None,
        "bootstrap secret agent-no-secret/bootstrap-hub-kubeconfig does not exist",
    )
    .await;
}

#[tokio::test]
async fn an_unreachable_hub_is_reported_and_retried_until_fixed() {
    let (hub, _) = planes().await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let kubeconfig = bootstrap_kubeconfig(hub).replace(hub.server(), &format!("https://127.0.0.1:{closed}"));
    fails_then_recovers(
        "agent-unreachable",
        "unreachable",
        Some(kubeconfig.as_bytes()),
        "Connection refused",
    )
    .await;
}

#[tokio::test]
async fn a_hub_ca_mismatch_is_reported_and_retried_until_fixed() {
    let (hub, managed) = planes().await;
    // The managed cluster's CA does not sign the hub's serving certificate.
    let kubeconfig =
        bootstrap_kubeconfig(hub).replace(&STANDARD.encode(hub.ca_pem()), &STANDARD.encode(managed.ca_pem()));
    assert_ne!(kubeconfig, bootstrap_kubeconfig(hub));
    fails_then_recovers(
        "agent-wrong-ca",
        "wrong-ca",
        Some(kubeconfig.as_bytes()),
        "invalid peer certificate",
    )
    .await;
}

#[tokio::test]
async fn a_denied_csr_is_reported_and_a_new_one_follows_after_backoff() {
    init_tracing();
    let (hub, managed) = planes().await;
    let hub_admin = hub.admin_client().await.unwrap();
    let managed_admin = managed.admin_client().await.unwrap();
    ensure_bootstrap_rbac(&hub_admin).await;
    let (namespace, cluster) = ("agent-denied", "denied-c1");
    prepare_namespace(&managed_admin, namespace, bootstrap_kubeconfig(hub).as_bytes()).await;
    let agent = RunningAgent::start(managed, options(namespace, Some(cluster))).await;

    let first = wait_csrs(&hub_admin, cluster, 1).await.remove(0);
    let first_name = first.metadata.name.unwrap();
    decide_csr(&hub_admin, &first_name, false).await;
    agent
        .wait("denial reported", |s| {
            s.last_error
                .as_deref()
                .is_some_and(|e| e.contains(&format!("CSR {first_name} was denied: DeniedByTest")))
        })
        .await;
    // Creation times have one-second resolution, so the list order can tie; the new CSR is
    // the one that is not the first.
    let csrs = wait_csrs(&hub_admin, cluster, 2).await;
    let second = csrs
        .iter()
        .filter_map(|csr| csr.metadata.name.clone())
        .find(|name| *name != first_name)
        .unwrap();
    decide_csr(&hub_admin, &second, true).await;
    let status = agent
        .wait("certificate written", |s| s.phase == Phase::WaitingForAcceptance)
        .await;
    assert_eq!(status.last_error, None);
    assert!(hub_secret(&managed_admin, namespace).await.is_some());
}

#[tokio::test]
async fn a_cluster_name_that_is_not_a_namespace_name_stops_the_agent_with_a_clear_error() {
    init_tracing();
    let (hub, managed) = planes().await;
    let hub_admin = hub.admin_client().await.unwrap();
    let managed_admin = managed.admin_client().await.unwrap();
    let namespace = "agent-bad-name";
    prepare_namespace(&managed_admin, namespace, bootstrap_kubeconfig(hub).as_bytes()).await;

    let mut agent = RunningAgent::start(managed, options(namespace, Some("Not_A_Namespace"))).await;
    let error = agent
        .finished(TIMEOUT)
        .await
        .expect("the agent stops")
        .expect_err("an invalid name is an error");
    assert!(matches!(error, Error::InvalidName(_)));
    assert!(error.is_terminal());
    assert_eq!(
        error.to_string(),
        "cluster name \"Not_A_Namespace\" is not a valid namespace name (DNS-1123 label): \
         must consist of lower case alphanumeric characters or '-'"
    );
    let status = agent.status.current();
    assert_eq!(status.phase, Phase::Failed);
    assert_eq!(status.last_error, Some(error.to_string()));
    assert!(managed_cluster(&hub_admin, "Not_A_Namespace").await.is_none());
}
