//! ManifestWorkReplicaSet rollouts carried out by real work agents: the hub's replica set
//! controller creates the works, each cluster's own agent applies its work on a real managed
//! control plane and reports, and a watcher on the hub checks every change of every work.
//!
//! The clusters' agents share one managed control plane, each reaching the hub through its own
//! loopback proxy: a distinct hub URL gives each a distinct hub hash, so their
//! AppliedManifestWorks do not collide and the ConfigMap they all apply is shared by all of
//! them. A failing cluster is one whose agent runs on a second managed control plane that lacks
//! the namespace the template writes into.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::agent_support;
use crate::mwrs_support;

use std::pin::pin;

use agent_support::{Agent, HubProxy, options, start_agent_on};
use flotilla_api::work::consts::manifest_work_replica_set::{
    CONDITION_PLACEMENT_ROLLED_OUT, REASON_COMPLETE, REASON_PROGRESSING,
};
use flotilla_api::work::v1::ManifestWork;
use flotilla_api::work::v1alpha1::ManifestWorkReplicaSet;
use flotilla_testing::ControlPlane;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::runtime::watcher::Event;
use kube::{Api, Client, ResourceExt};
use mwrs_support::view::{Seen, View};
use mwrs_support::{TIMEOUT, place, wait_set, work_events};
use serde_json::{Value, json};

const HUB: &str = "mwrs-agents-hub";
/// The managed control plane where the template's namespace exists.
const MANAGED: &str = "mwrs-agents-managed";
/// The managed control plane of failing clusters: it lacks [`APPS`].
const BARE: &str = "mwrs-agents-bare";
/// The namespace the template writes into.
const APPS: &str = "apps";

/// Running agents (and their proxies) of one test's clusters.
struct Fleet {
    _agents: Vec<Agent>,
    _proxies: Vec<HubProxy>,
}

/// Starts a real work agent for each of `clusters` (on [`BARE`] for those in `failing`, else on
/// [`MANAGED`]) and returns the hub admin client.
async fn fleet(clusters: &[&str], failing: &[&str]) -> (Client, Fleet) {
    let hub = mwrs_support::hub(HUB).await;
    let managed = flotilla_testing::shared(MANAGED)
        .await
        .expect("start managed cluster");
    agent_support::namespace(&managed.admin_client().await.unwrap(), APPS).await;
    let mut fleet = Fleet {
        _agents: Vec::new(),
        _proxies: Vec::new(),
    };
    for cluster in clusters {
        let plane: &ControlPlane = if failing.contains(cluster) {
            flotilla_testing::shared(BARE).await.expect("start bare cluster")
        } else {
            managed
        };
        let proxy = HubProxy::start(hub.server().trim_start_matches("https://").to_owned()).await;
        let agent = start_agent_on(hub, plane, cluster, options(cluster), Some(&proxy.url)).await;
        fleet._agents.push(agent);
        fleet._proxies.push(proxy);
    }
    (hub.admin_client().await.unwrap(), fleet)
}

/// Creates replica set `name` in `namespace` (created here) over placement `placement`,
/// writing one ConfigMap into [`APPS`].
async fn replica_set(client: &Client, namespace: &str, name: &str, placement: &str, strategy: Value) {
    agent_support::namespace(client, namespace).await;
    let set: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.open-cluster-management.io/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": APPS},
                 "data": {"from": namespace}}
            ]}},
            "placementRefs": [{"name": placement, "rolloutStrategy": strategy}],
            "cascadeDeletionPolicy": "Background",
        }
    }))
    .unwrap();
    Api::<ManifestWorkReplicaSet>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &set)
        .await
        .expect("create ManifestWorkReplicaSet");
}

/// The next work event, failing after [`TIMEOUT`] with what was seen so far.
async fn next(
    events: &mut (impl Stream<Item = Event<ManifestWork>> + Unpin),
    view: &View,
) -> Event<ManifestWork> {
    let states: Vec<(&String, Seen)> = view.works.iter().map(|(c, w)| (c, view.seen(w))).collect();
    tokio::time::timeout(TIMEOUT, events.next())
        .await
        .unwrap_or_else(|_| panic!("no work event within {TIMEOUT:?}; works: {states:?}"))
        .expect("work watch ended")
}

fn rolled_out(set: Option<&ManifestWorkReplicaSet>) -> Option<(String, String)> {
    let condition = set?
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_PLACEMENT_ROLLED_OUT)?;
    Some((condition.status.clone(), condition.reason.clone()))
}

#[tokio::test]
async fn real_agents_roll_out_five_clusters_never_more_than_two_in_flight() {
    let clusters = ["pa-c1", "pa-c2", "pa-c3", "pa-c4", "pa-c5"];
    let (admin, _fleet) = fleet(&clusters, &[]).await;
    let ns = "agents-progressive";
    agent_support::namespace(&admin, ns).await;
    place(&admin, ns, "five", &[("", &clusters)]).await;
    let mut events = pin!(work_events(&admin, ns, "rs-pa"));
    replica_set(
        &admin,
        ns,
        "rs-pa",
        "five",
        json!({"type": "Progressive", "progressive": {"maxConcurrency": 2}}),
    )
    .await;

    let mut view = View::default();
    while view.count(Seen::Done) < clusters.len() {
        let event = next(&mut events, &view).await;
        if let Some(cluster) = view.apply(event) {
            let in_flight = view.in_flight();
            assert!(
                in_flight <= 2,
                "{in_flight} clusters in flight after a change of {cluster}'s work"
            );
            assert_ne!(
                view.state(&cluster),
                Some(Seen::Failed),
                "{cluster} failed: {:#?}",
                view.works[&cluster].status
            );
        }
    }
    let set = wait_set(&admin, ns, "rs-pa", "rolled out", |set| {
        rolled_out(set) == Some(("True".into(), REASON_COMPLETE.into()))
    })
    .await
    .unwrap();
    let summary = set.status.unwrap().summary;
    assert_eq!((summary.total, summary.available, summary.progressing), (5, 5, 0));

    // The one ConfigMap every agent applied is owned by each cluster's AppliedManifestWork.
    let managed = flotilla_testing::shared(MANAGED)
        .await
        .unwrap()
        .admin_client()
        .await
        .unwrap();
    let cm = Api::<ConfigMap>::namespaced(managed, APPS)
        .get("rs-pa")
        .await
        .unwrap();
    let owners: Vec<&str> = cm
        .owner_references()
        .iter()
        .filter(|o| o.kind == "AppliedManifestWork")
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(owners.len(), 5, "one owner per cluster's agent: {owners:?}");
}

#[tokio::test]
async fn failing_clusters_count_toward_max_failures_and_stop_the_rollout_once_exceeded() {
    let clusters = ["fb-c1", "fb-c2", "fb-c3", "fb-c4", "fb-c5"];
    let (admin, _fleet) = fleet(&clusters, &["fb-c1", "fb-c2"]).await;
    let ns = "agents-failing";
    agent_support::namespace(&admin, ns).await;
    place(&admin, ns, "five", &[("", &clusters)]).await;
    let mut events = pin!(work_events(&admin, ns, "rs-fb"));
    let strategy = json!({"type": "Progressive", "progressive": {
        "maxConcurrency": 1, "maxFailures": 1, "progressDeadline": "5s"}});
    replica_set(&admin, ns, "rs-fb", "five", strategy).await;

    // fb-c1 fails on its cluster and holds the one slot until its progress deadline; one failure
    // is tolerated, so fb-c2 starts next, fails too, and that second failure stops the rollout.
    let mut view = View::default();
    while view.state("fb-c1") != Some(Seen::Failed) || view.state("fb-c2") != Some(Seen::Failed) {
        let event = next(&mut events, &view).await;
        let Some(cluster) = view.apply(event) else {
            continue;
        };
        assert!(
            ["fb-c1", "fb-c2"].contains(&cluster.as_str()),
            "{cluster} started"
        );
        if cluster == "fb-c2" {
            assert_eq!(
                view.state("fb-c1"),
                Some(Seen::Failed),
                "fb-c2 started before fb-c1 failed"
            );
        }
    }
    let failed = &view.works["fb-c1"];
    let status = failed.status.as_ref().unwrap();
    let applied = status.conditions.iter().find(|c| c.type_ == "Applied").unwrap();
    assert_eq!(applied.status, "False");
    let message = status.resource_status.manifests[0]
        .conditions
        .iter()
        .find(|c| c.type_ == "Applied")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(message.contains(APPS), "names the missing namespace: {message}");

    // Past fb-c2's own deadline the plan still starts nothing: watch every work change for
    // longer than that.
    let quiet = tokio::time::sleep(std::time::Duration::from_secs(10));
    let mut quiet = pin!(quiet);
    loop {
        tokio::select! {
            () = &mut quiet => break,
            event = events.next() => {
                if let Some(cluster) = view.apply(event.expect("work watch ended")) {
                    assert!(["fb-c1", "fb-c2"].contains(&cluster.as_str()), "{cluster} started after two failures");
                }
            }
        }
    }
    let set = wait_set(&admin, ns, "rs-fb", "both failures counted", |set| {
        set.and_then(|s| s.status.as_ref())
            .is_some_and(|s| s.summary.total == 2 && s.summary.degraded == 2)
    })
    .await
    .unwrap();
    assert_eq!(
        rolled_out(Some(&set)),
        Some(("False".into(), REASON_PROGRESSING.into()))
    );
}

#[tokio::test]
async fn real_agents_finish_group_zero_before_group_one_starts() {
    let (canary, rest) = (["gr-c1", "gr-c2"], ["gr-c3", "gr-c4", "gr-c5"]);
    let all: Vec<&str> = canary.iter().chain(&rest).copied().collect();
    let (admin, _fleet) = fleet(&all, &[]).await;
    let ns = "agents-per-group";
    agent_support::namespace(&admin, ns).await;
    place(&admin, ns, "groups", &[("canary", &canary), ("rest", &rest)]).await;
    let mut events = pin!(work_events(&admin, ns, "rs-gr"));
    replica_set(
        &admin,
        ns,
        "rs-gr",
        "groups",
        json!({"type": "ProgressivePerGroup"}),
    )
    .await;

    let mut view = View::default();
    while view.count(Seen::Done) < all.len() {
        let event = next(&mut events, &view).await;
        if let Some(cluster) = view.apply(event)
            && rest.contains(&cluster.as_str())
        {
            let unfinished: Vec<&str> = canary
                .iter()
                .copied()
                .filter(|c| view.state(c) != Some(Seen::Done))
                .collect();
            assert!(
                unfinished.is_empty(),
                "{cluster} of group 1 changed while group 0 had {unfinished:?} unfinished"
            );
        }
    }
    wait_set(&admin, ns, "rs-gr", "rolled out", |set| {
        rolled_out(set) == Some(("True".into(), REASON_COMPLETE.into()))
    })
    .await;
}
