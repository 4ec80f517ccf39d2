//! Placement by score, end to end, on real nodes: the resource-usage-collect add-on is enabled
//! on both clusters, its agent runs as a pod on each cluster's node with only the hub
//! credential the klusterlet obtained for it, and writes AddOnPlacementScore
//! `resource-usage-score` in its cluster namespace. Pause workloads request different shares of
//! each node's CPU; a Placement of one cluster, prioritized by the agents' `cpuAvailable`
//! alone, picks the emptier cluster, and once the load moves (one workload shrinks, the other
//! grows) the scores refresh and the decision follows.
//!
//! ```text
//!   cluster1 node: load ×3 ─┐ agent ─▶ hub cluster1/resource-usage-score ─┐
//!   cluster2 node: load ×1 ─┘ agent ─▶ hub cluster2/resource-usage-score ─┴─▶ Placement emptiest
//!                                                                             (numberOfClusters 1)
//! ```
//!
//! The emptiest cluster is first cluster2, which the placement's tie-break by name would never
//! pick, then cluster1. The agents score every [`PERIOD`] seconds, set through the add-on's
//! AddOnDeploymentConfig, so the refresh costs seconds rather than OCM's minute.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::time::Duration;

use common::{Fleet, flotilla_at, ok};
use flotilla_api::cluster::{
    consts::PLACEMENT_LABEL, v1alpha1::AddOnPlacementScore, v1beta1::PlacementDecision,
};
use flotilla_test_plugins as plugins;
use flotilla_testing::{image, kubectl, pause_deployment, until_ready_replicas, wait};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Node};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};

/// The add-on, as the plugin names it.
const ADDON: &str = "resource-usage-collect";
/// The AddOnPlacementScore the agents write.
const SCORES: &str = "resource-usage-score";
/// The score the placement ranks by: the cluster's free CPU.
const SCORE_NAME: &str = "cpuAvailable";
/// Seconds between the agents' scorings.
const PERIOD: &str = "2";
/// The hub namespace of the Placement and the AddOnDeploymentConfig.
const NAMESPACE: &str = "scheduling";
/// The Placement.
const PLACEMENT: &str = "emptiest";
/// The workload on each managed cluster, in `default`.
const LOAD: &str = "load";
/// Shares of a node's CPU that a replica of the load requests.
const SHARES: i64 = 4;
const TIMEOUT: Duration = Duration::from_secs(120);
const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";

#[tokio::test]
async fn a_placement_by_resource_score_picks_the_emptiest_cluster_and_follows_the_load_when_it_moves() {
    let fleet = Fleet::start_on_nodes("score", &[]).await;
    let (agent, pause) = tokio::join!(
        image::push_resource_usage_agent(&fleet.registry),
        image::push_pause(&fleet.registry)
    );
    let (_, pause) = (agent.unwrap(), pause.unwrap());
    let hub = fleet.hub.admin_client().await.unwrap();
    let (one, two) = (
        fleet.one.admin_client().await.unwrap(),
        fleet.two.admin_client().await.unwrap(),
    );

    // The add-on on both clusters, scoring every PERIOD seconds.
    common::register_plugin(
        fleet.state(),
        fleet.admin(),
        &fleet.registry,
        ADDON,
        plugins::RESOURCE_USAGE,
    );
    apply(&fleet.hub, &hub_objects());
    let cmas: Api<flotilla_api::addon::v1alpha1::ClusterManagementAddOn> = Api::all(hub.clone());
    wait::until(&format!("ClusterManagementAddOn {ADDON}"), TIMEOUT, || async {
        cmas.get_opt(ADDON).await.map(|c| c.map(|_| ()))
    })
    .await
    .unwrap();
    let config =
        format!("addon.open-cluster-management.io/addondeploymentconfigs/{NAMESPACE}/score-settings");
    ok(flotilla_at(
        fleet.state(),
        fleet.admin(),
        &[
            "addon",
            "enable",
            "--names",
            ADDON,
            "--clusters",
            "cluster1,cluster2",
            "--config",
            &config,
        ],
    ));

    // cluster1 carries three quarters of its node's CPU, cluster2 one quarter.
    let (load_one, load_two) = (
        Api::<Deployment>::namespaced(one.clone(), "default"),
        Api::<Deployment>::namespaced(two.clone(), "default"),
    );
    for (client, deployments, replicas) in [(&one, &load_one, 3), (&two, &load_two, 1)] {
        let workload = load(&pause, &replica_cpu(client).await, replicas);
        deployments
            .create(&PostParams::default(), &serde_json::from_value(workload).unwrap())
            .await
            .unwrap();
    }
    until_ready_replicas(&load_one, LOAD, 3, TIMEOUT).await.unwrap();
    until_ready_replicas(&load_two, LOAD, 1, TIMEOUT).await.unwrap();
    ok(flotilla_at(
        fleet.state(),
        fleet.admin(),
        &["clusterset", "bind", "global", "--namespace", NAMESPACE],
    ));
    apply(&fleet.hub, &placement());

    let before = until_decided(&fleet, &hub, "cluster2", "cluster1").await;
    eprintln!("loaded cluster1: {SCORE_NAME} {before:?}, decision cluster2");

    // The load moves: cluster1 shrinks to one replica, cluster2 grows to three.
    for (deployments, replicas) in [(&load_one, 1), (&load_two, 3)] {
        deployments
            .patch(
                LOAD,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "spec": { "replicas": replicas } })),
            )
            .await
            .unwrap();
    }
    let after = until_decided(&fleet, &hub, "cluster1", "cluster2").await;
    eprintln!("loaded cluster2: {SCORE_NAME} {after:?}, decision cluster1");
}

/// The Namespace of the Placement and the AddOnDeploymentConfig that sets the agents' period.
fn hub_objects() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            { "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": NAMESPACE } },
            {
                "apiVersion": "addon.open-cluster-management.io/v1alpha1",
                "kind": "AddOnDeploymentConfig",
                "metadata": { "name": "score-settings", "namespace": NAMESPACE },
                "spec": { "customizedVariables": [{ "name": "PERIOD_SECONDS", "value": PERIOD }] },
            },
        ],
    })
}

/// One cluster of the global set, ranked by the agents' score alone (mode Exact: no steadiness
/// bonus for the cluster already decided).
fn placement() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": { "name": PLACEMENT, "namespace": NAMESPACE },
        "spec": {
            "numberOfClusters": 1,
            "clusterSets": ["global"],
            "prioritizerPolicy": {
                "mode": "Exact",
                "configurations": [{
                    "weight": 1,
                    "scoreCoordinate": {
                        "type": "AddOn",
                        "addOn": { "resourceName": SCORES, "scoreName": SCORE_NAME },
                    },
                }],
            },
        },
    })
}

/// `kubectl apply` of `object` on `cp`.
fn apply(cp: &flotilla_testing::ControlPlane, object: &serde_json::Value) {
    let path = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(path.path(), object.to_string()).unwrap();
    kubectl(cp, &["apply", "-f", path.path().to_str().unwrap()]);
}

/// The CPU one replica of the load requests: a [`SHARES`]th of what the cluster's node has
/// allocatable, so that the figures hold whatever the machine's size.
async fn replica_cpu(client: &Client) -> String {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let [node] = nodes.items.as_slice() else {
        panic!("{} nodes, not one", nodes.items.len());
    };
    let cpu = &node.status.as_ref().unwrap().allocatable.as_ref().unwrap()["cpu"].0;
    let millis = match cpu.strip_suffix('m') {
        Some(millis) => millis.parse::<i64>().unwrap(),
        None => cpu.parse::<i64>().unwrap() * 1000,
    };
    format!("{}m", millis / SHARES)
}

/// [`LOAD`]: `replicas` pause pods requesting `cpu` each.
fn load(pause: &str, cpu: &str, replicas: i32) -> serde_json::Value {
    let mut deployment = pause_deployment(LOAD, "default", pause, replicas, 0);
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"] =
        serde_json::json!({ "requests": { "cpu": cpu } });
    deployment
}

/// Waits until `emptier`'s agent scores more free CPU than `fuller`'s and the Placement
/// decides `emptier`; returns the two scores.
async fn until_decided(fleet: &Fleet, hub: &Client, emptier: &str, fuller: &str) -> [i32; 2] {
    let decisions: Api<PlacementDecision> = Api::namespaced(hub.clone(), NAMESPACE);
    let by_placement = ListParams::default().labels(&format!("{PLACEMENT_LABEL}={PLACEMENT}"));
    let found = wait::until(
        &format!("{emptier} scored emptier than {fuller} and decided"),
        TIMEOUT,
        || async {
            let scores = [score(hub, emptier).await?, score(hub, fuller).await?];
            let decided: Vec<String> = decisions
                .list(&by_placement)
                .await
                .map_err(|e| e.to_string())?
                .into_iter()
                .flat_map(|d| d.status.map(|s| s.decisions).unwrap_or_default())
                .map(|d| d.cluster_name)
                .collect();
            match scores {
                [Some(e), Some(f)] if e > f && decided == [emptier] => Ok(Some([e, f])),
                _ => Err(format!(
                    "{SCORE_NAME} {emptier}, {fuller}: {scores:?}; decided {decided:?}"
                )),
            }
        },
    )
    .await;
    found.unwrap_or_else(|e| {
        let log = std::fs::read_to_string(fleet.state().join("hub.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        panic!(
            "{e}\nhub log:\n{}\nagents:\n{}\n{}",
            lines[lines.len().saturating_sub(30)..].join("\n"),
            fleet.nodes[0].pod_log_tail(INSTALL_NAMESPACE, "resource-usage-collect-agent", 10),
            fleet.nodes[1].pod_log_tail(INSTALL_NAMESPACE, "resource-usage-collect-agent", 10),
        )
    })
}

/// `cluster`'s [`SCORE_NAME`], if its agent has written one.
async fn score(hub: &Client, cluster: &str) -> Result<Option<i32>, String> {
    let scores: Api<AddOnPlacementScore> = Api::namespaced(hub.clone(), cluster);
    let found = scores.get_opt(SCORES).await.map_err(|e| e.to_string())?;
    Ok(found
        .and_then(|s| s.status)
        .and_then(|s| s.scores.into_iter().find(|s| s.name == SCORE_NAME))
        .map(|s| s.value))
}
