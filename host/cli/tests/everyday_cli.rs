//! What the admin commands say when they cannot do what was asked, against a real hub control
//! plane prepared by `flotilla init` (issue 30): the exit code and the exact first line, which
//! names the object and what to do, with the apiserver's answer told once.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

mod common;

use std::{
    process::Output,
    time::{Duration, Instant},
};

use common::{flotilla, ok};
use flotilla_api::{
    addon::v1alpha1::{ClusterManagementAddOn, ManagedClusterAddOn},
    cluster::v1::ManagedCluster,
};
use flotilla_testing::ControlPlane;
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, api::PostParams};
use serde_json::json;
use tokio::sync::OnceCell;

/// The hub of this binary, `flotilla init` run once on it.
async fn hub() -> &'static ControlPlane {
    static INIT: OnceCell<()> = OnceCell::const_new();
    let hub = flotilla_testing::shared("everyday-cli").await.unwrap();
    INIT.get_or_init(|| async {
        ok(flotilla(hub.admin_kubeconfig(), &["init"]));
    })
    .await;
    hub
}

/// Creates what the test names, as an admin would (`kubectl create`).
async fn create<K>(api: &Api<K>, object: serde_json::Value)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let object: K = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// A registered cluster `name` with its namespace, as the hub leaves it once accepted.
async fn registered_cluster(client: &kube::Client, name: &str) {
    create(
        &Api::<ManagedCluster>::all(client.clone()),
        json!({
            "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": { "name": name }, "spec": { "hubAcceptsClient": true },
        }),
    )
    .await;
    create(
        &Api::<Namespace>::all(client.clone()),
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } }),
    )
    .await;
}

/// The standard error of a command that must fail (exit code 1).
fn refused(output: Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(1),
        "flotilla must refuse this:\n{}\n{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
    stderr
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

#[tokio::test]
async fn enabling_an_addon_the_hub_does_not_know_is_refused_naming_those_it_knows() {
    let hub = hub().await;
    let client = hub.admin_client().await.unwrap();
    registered_cluster(&client, "addon-c1").await;
    create(
        &Api::<ClusterManagementAddOn>::all(client.clone()),
        json!({
            "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ClusterManagementAddOn",
            "metadata": { "name": "helloworld" }, "spec": {},
        }),
    )
    .await;

    let stderr = refused(flotilla(
        hub.admin_kubeconfig(),
        &["addon", "enable", "--names", "nosuch", "--clusters", "addon-c1"],
    ));
    assert_eq!(
        first_line(&stderr),
        "error: no add-on \"nosuch\" on this hub (no ClusterManagementAddOn or AddOnPlugin of that \
         name); add-ons here: helloworld",
        "{stderr}"
    );
    assert!(stderr.contains("flotilla plugin register"), "{stderr}");
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(client, "addon-c1");
    assert!(addons.get_opt("nosuch").await.unwrap().is_none());
}

#[tokio::test]
async fn a_refused_work_is_told_once_with_what_to_do_and_the_raw_status_only_with_verbose() {
    let hub = hub().await;
    let client = hub.admin_client().await.unwrap();
    registered_cluster(&client, "work-c1").await;
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "kind: ConfigMap\nmetadata: {name: one, namespace: default}\n",
    )
    .unwrap();
    let args = [
        "create",
        "work",
        "w1",
        "-f",
        bad.to_str().unwrap(),
        "--clusters",
        "work-c1",
    ];

    let stderr = refused(flotilla(hub.admin_kubeconfig(), &args));
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "one line of error, one of advice:\n{stderr}");
    assert_eq!(
        lines[0],
        "error: create work w1 on cluster work-c1: ManifestWork.work.open-cluster-management.io \"w1\" \
         is invalid: spec.workload.manifests[0].apiVersion: Required value: must not be empty",
        "{stderr}"
    );
    assert_eq!(
        lines[1],
        "hint: the apiserver refused the object as written: correct the field named above and run the \
         command again"
    );

    let verbose = refused(flotilla(hub.admin_kubeconfig(), &[&args[..], &["-v"]].concat()));
    let raw = verbose
        .lines()
        .find_map(|l| l.strip_prefix("apiserver status: "))
        .unwrap_or_else(|| panic!("-v shows the raw status:\n{verbose}"));
    let status: serde_json::Value = serde_json::from_str(raw).unwrap();
    assert_eq!(status["reason"], "Invalid", "{raw}");
    assert_eq!(status["code"], 422, "{raw}");
    assert_eq!(verbose.lines().count(), 3, "{verbose}");
}

#[tokio::test]
async fn accepting_a_cluster_that_never_registered_is_refused_at_once() {
    let hub = hub().await;
    let started = Instant::now();
    let stderr = refused(flotilla(
        hub.admin_kubeconfig(),
        &["accept", "--clusters", "nosuch"],
    ));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "refused only after {:?} (the default timeout is 60 s)",
        started.elapsed()
    );
    assert_eq!(
        first_line(&stderr),
        "error: accept cluster \"nosuch\": no ManagedCluster \"nosuch\" on this hub: its klusterlet has not \
         registered",
        "{stderr}"
    );
    assert!(stderr.contains("flotilla join"), "{stderr}");
}

#[tokio::test]
async fn accepting_a_registered_cluster_without_a_request_says_it_waits() {
    let hub = hub().await;
    let client = hub.admin_client().await.unwrap();
    create(
        &Api::<ManagedCluster>::all(client),
        json!({
            "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": { "name": "no-request" }, "spec": {},
        }),
    )
    .await;
    let stderr = refused(flotilla(
        hub.admin_kubeconfig(),
        &["accept", "--clusters", "no-request", "--timeout", "3s"],
    ));
    assert_eq!(
        first_line(&stderr),
        "cluster \"no-request\": waiting up to 3s for its klusterlet's certificate request",
        "{stderr}"
    );
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: accept cluster \"no-request\": ManagedCluster \"no-request\" filed no"),
        "{stderr}"
    );
}
