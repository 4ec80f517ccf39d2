//! Shared pieces of the ManifestWorkReplicaSet integration tests: one real control plane per
//! test binary with the hub work controllers running against it, placements written as a
//! placement controller would write them, and a stand-in for the managed clusters' work agents.
//!
//! The hub runs on its own thread and Tokio runtime, because each `#[tokio::test]` has a runtime
//! of its own that ends with the test; the thread lives as long as the test binary.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    dead_code,
    reason = "test support: fail loudly; not every binary uses every helper"
)]

pub mod agent;
pub mod view;

use std::time::Duration;

use flotilla_api::cluster::consts::{DECISION_GROUP_INDEX_LABEL, DECISION_GROUP_NAME_LABEL, PLACEMENT_LABEL};
use flotilla_api::cluster::v1beta1::{Placement, PlacementDecision};
use flotilla_api::work::consts::MANIFEST_WORK_REPLICA_SET_LABEL;
use flotilla_api::work::v1::ManifestWork;
use flotilla_api::work::v1alpha1::ManifestWorkReplicaSet;
use flotilla_testing::ControlPlane;
use flotilla_work::hub::{self, HubOptions};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::{Value, json};

/// How long a test waits for the hub to act.
pub const TIMEOUT: Duration = Duration::from_secs(90);

/// The control plane `name` of this test binary with the hub work controllers running against
/// it as the admin (started on first use).
pub async fn hub(name: &str) -> &'static ControlPlane {
    let cp = flotilla_testing::shared(name).await.expect("start control plane");
    flotilla_testing::spawn_controllers_once(name, cp, |client| async move {
        hub::run(
            client,
            HubOptions {
                resync: Duration::from_secs(30),
            },
        )
        .await;
    });
    cp
}

/// Creates namespace `name` (a replica set's namespace or a cluster namespace).
pub async fn namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
}

/// Writes Placement `name` in `namespace` and its PlacementDecisions (one per group, named
/// `<name>-decision-<n>` from 1) exactly as a placement controller would, creating them on first
/// use and replacing their decisions afterwards. `groups` are `(group name, clusters)` by index.
pub async fn place(client: &Client, namespace: &str, name: &str, groups: &[(&str, &[&str])]) {
    let placements: Api<Placement> = Api::namespaced(client.clone(), namespace);
    let decisions: Api<PlacementDecision> = Api::namespaced(client.clone(), namespace);
    if placements.get_opt(name).await.unwrap().is_none() {
        let placement: Placement = serde_json::from_value(json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
            "metadata": {"name": name, "namespace": namespace}, "spec": {}
        }))
        .unwrap();
        placements
            .create(&PostParams::default(), &placement)
            .await
            .expect("create Placement");
    }
    let mut group_status = Vec::new();
    let mut selected = 0;
    for (index, (group, clusters)) in groups.iter().enumerate() {
        let decision_name = format!("{name}-decision-{}", index + 1);
        if decisions.get_opt(&decision_name).await.unwrap().is_none() {
            let decision: PlacementDecision = serde_json::from_value(json!({
                "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "PlacementDecision",
                "metadata": {"name": decision_name, "namespace": namespace, "labels": {
                    PLACEMENT_LABEL: name, DECISION_GROUP_NAME_LABEL: group,
                    DECISION_GROUP_INDEX_LABEL: index.to_string()}}
            }))
            .unwrap();
            decisions
                .create(&PostParams::default(), &decision)
                .await
                .expect("create PlacementDecision");
        }
        let list: Vec<Value> = clusters
            .iter()
            .map(|c| json!({"clusterName": c, "reason": ""}))
            .collect();
        decisions
            .patch_status(
                &decision_name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"decisions": list}})),
            )
            .await
            .expect("write decisions");
        selected += clusters.len();
        group_status.push(json!({"decisionGroupIndex": index, "decisionGroupName": group,
            "decisions": [decision_name], "clusterCount": clusters.len()}));
    }
    placements
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"numberOfSelectedClusters": selected, "decisionGroups": group_status}}),
            ),
        )
        .await
        .expect("write placement status");
}

/// Creates ManifestWorkReplicaSet `name` in `namespace` over placement `placement` with a
/// one-ConfigMap template.
pub async fn replica_set(
    client: &Client,
    namespace: &str,
    name: &str,
    placement: &str,
    strategy: Value,
    cascade: &str,
) {
    let set: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.open-cluster-management.io/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
                 "data": {"k": "v"}}
            ]}},
            "placementRefs": [{"name": placement, "rolloutStrategy": strategy}],
            "cascadeDeletionPolicy": cascade,
        }
    }))
    .unwrap();
    Api::<ManifestWorkReplicaSet>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &set)
        .await
        .expect("create ManifestWorkReplicaSet");
}

/// Every change to the works of replica set `<namespace>/<name>`, in the order the API server
/// made them (one watch across all cluster namespaces).
pub fn work_events(
    client: &Client,
    namespace: &str,
    name: &str,
) -> impl Stream<Item = watcher::Event<ManifestWork>> + Send {
    let selector = format!("{MANIFEST_WORK_REPLICA_SET_LABEL}={namespace}.{name}");
    watcher(
        Api::<ManifestWork>::all(client.clone()),
        watcher::Config::default().labels(&selector),
    )
    .map(|event| event.expect("watch works"))
}

/// Waits (on a watch) until the replica set satisfies `check`, failing after [`TIMEOUT`].
pub async fn wait_set(
    client: &Client,
    namespace: &str,
    name: &str,
    what: &str,
    check: impl Fn(Option<&ManifestWorkReplicaSet>) -> bool,
) -> Option<ManifestWorkReplicaSet> {
    let api = Api::<ManifestWorkReplicaSet>::namespaced(client.clone(), namespace);
    tokio::time::timeout(TIMEOUT, kube::runtime::wait::await_condition(api, name, check))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for replica set {namespace}/{name}: {what}"))
        .expect("watch replica set")
}

/// The works of replica set `<namespace>/<name>` now.
pub async fn works(client: &Client, namespace: &str, name: &str) -> Vec<ManifestWork> {
    let selector = format!("{MANIFEST_WORK_REPLICA_SET_LABEL}={namespace}.{name}");
    Api::<ManifestWork>::all(client.clone())
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .expect("list works")
        .items
}
