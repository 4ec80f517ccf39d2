//! ManifestWorkReplicaSet on a real control plane: the hub creates one ManifestWork per chosen
//! cluster and rolls out by strategy — never more in flight than `maxConcurrency`, stopping once
//! failures exceed `maxFailures`, group after group — removes the work of a cluster that leaves
//! the placement, and cleans up on deletion by its cascade policy. Placements are written as a
//! placement controller would write them; the clusters' agents are played by
//! `mwrs_support::agent`. Each step is observed on a watch, in the API server's order.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::mwrs_support;

use std::collections::BTreeMap;
use std::pin::pin;

use flotilla_api::work::consts::MANIFEST_WORK_REPLICA_SET_FINALIZER;
use flotilla_api::work::consts::manifest_work_replica_set::{
    CONDITION_PLACEMENT_ROLLED_OUT, CONDITION_PLACEMENT_VERIFIED, REASON_COMPLETE, REASON_PROGRESSING,
};
use flotilla_api::work::v1::ManifestWork;
use flotilla_api::work::v1alpha1::ManifestWorkReplicaSet;
use futures::{Stream, StreamExt};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::watcher::Event;
use kube::{Api, Client, ResourceExt};
use mwrs_support::agent::{self, Report};
use mwrs_support::view::{Seen, View, seen};
use mwrs_support::*;
use serde_json::json;

const CP: &str = "mwrs";

/// Plays the agents of a rollout with at most `limit` clusters in flight until `total` clusters
/// are done, asserting the limit at every change of every work; returns the most in flight seen.
/// New works are reported progressing; one cluster is finished at a time, and only once the
/// window is full, so the controller must fill it to the limit each time.
async fn roll_within(
    admin: &Client,
    events: &mut (impl Stream<Item = Event<ManifestWork>> + Unpin),
    view: &mut View,
    total: usize,
    limit: usize,
) -> usize {
    let mut most_in_flight = 0;
    while view.count(Seen::Done) < total {
        let event = next(events, view).await;
        let Some(cluster) = view.apply(event) else {
            continue;
        };
        let in_flight = view.in_flight();
        assert!(
            in_flight <= limit,
            "{in_flight} clusters in flight after a change of {cluster}'s work"
        );
        most_in_flight = most_in_flight.max(in_flight);
        if view.state(&cluster) == Some(Seen::New) {
            agent::report(admin, &view.works[&cluster], Report::Progressing).await;
        }
        let window = limit.min(total - view.count(Seen::Done));
        if window > 0 && in_flight == window && view.count(Seen::Progressing) == window {
            let first = view
                .works
                .values()
                .find(|w| view.seen(w) == Seen::Progressing)
                .unwrap();
            agent::report(admin, first, Report::Done).await;
        }
    }
    most_in_flight
}

/// The next event, failing after [`TIMEOUT`] with what was seen so far.
async fn next(
    events: &mut (impl Stream<Item = Event<ManifestWork>> + Unpin),
    view: &View,
) -> Event<ManifestWork> {
    let states: BTreeMap<&String, Seen> = view.works.iter().map(|(c, w)| (c, seen(w))).collect();
    tokio::time::timeout(TIMEOUT, events.next())
        .await
        .unwrap_or_else(|_| panic!("no work event within {TIMEOUT:?}; works: {states:?}"))
        .expect("work watch ended")
}

async fn setup(client: &Client, ns: &str, clusters: &[String]) {
    namespace(client, ns).await;
    for cluster in clusters {
        namespace(client, cluster).await;
    }
}

fn clusters(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}-c{i}")).collect()
}

fn refs(clusters: &[String]) -> Vec<&str> {
    clusters.iter().map(String::as_str).collect()
}

fn condition(set: &ManifestWorkReplicaSet, type_: &str) -> Option<(String, String)> {
    let c = set
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone()))
}

fn rolled_out(set: Option<&ManifestWorkReplicaSet>) -> bool {
    set.and_then(|s| condition(s, CONDITION_PLACEMENT_ROLLED_OUT))
        == Some(("True".to_owned(), REASON_COMPLETE.to_owned()))
}

#[tokio::test]
async fn progressive_rollout_over_five_clusters_never_has_more_than_two_in_flight_then_finishes() {
    let admin = hub(CP).await.admin_client().await.unwrap();
    let (ns, members) = ("progressive", clusters("pr", 5));
    setup(&admin, ns, &members).await;
    place(&admin, ns, "five", &[("", &refs(&members))]).await;
    let mut events = pin!(work_events(&admin, ns, "rs"));
    let strategy = json!({"type": "Progressive", "progressive": {"maxConcurrency": 2}});
    replica_set(&admin, ns, "rs", "five", strategy, "Background").await;

    let mut view = View::default();
    let most_in_flight = roll_within(&admin, &mut events, &mut view, members.len(), 2).await;
    assert_eq!(most_in_flight, 2, "the rollout used its whole window");

    let set = wait_set(&admin, ns, "rs", "rolled out", rolled_out)
        .await
        .unwrap();
    let status = set.status.unwrap();
    assert_eq!(
        (
            status.summary.total,
            status.summary.available,
            status.summary.progressing
        ),
        (5, 5, 0)
    );
    assert_eq!(
        condition_of(&set_conditions(&status), CONDITION_PLACEMENT_VERIFIED),
        ("True", "AsExpected")
    );
    let works = works(&admin, ns, "rs").await;
    assert_eq!(works.len(), 5, "one work per cluster");
    for work in &works {
        assert!(
            work.metadata.name.as_deref().unwrap().starts_with("rs"),
            "generateName is the replica set name"
        );
        assert_eq!(
            work.labels()
                .get("work.open-cluster-management.io/placementname")
                .map(String::as_str),
            Some("five")
        );
    }
}

fn set_conditions(
    status: &flotilla_api::work::v1alpha1::ManifestWorkReplicaSetStatus,
) -> Vec<(String, String, String)> {
    status
        .conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
        .collect()
}

fn condition_of<'a>(conditions: &'a [(String, String, String)], type_: &str) -> (&'a str, &'a str) {
    let (_, status, reason) = conditions
        .iter()
        .find(|(t, _, _)| t == type_)
        .expect("condition set");
    (status.as_str(), reason.as_str())
}

#[tokio::test]
async fn a_failing_cluster_beyond_max_failures_stops_the_rollout() {
    let admin = hub(CP).await.admin_client().await.unwrap();
    let (ns, members) = ("failing", clusters("fa", 5));
    setup(&admin, ns, &members).await;
    place(&admin, ns, "five", &[("", &refs(&members))]).await;
    let mut events = pin!(work_events(&admin, ns, "rs"));
    let strategy = json!({"type": "Progressive", "progressive": {"maxConcurrency": 2, "maxFailures": 0}});
    replica_set(&admin, ns, "rs", "five", strategy, "Background").await;

    // fa-c1 fails, fa-c2 succeeds; nothing else may start.
    let mut view = View::default();
    while view.state("fa-c2") != Some(Seen::Done) {
        let event = next(&mut events, &view).await;
        let Some(cluster) = view.apply(event) else {
            continue;
        };
        assert!(
            ["fa-c1", "fa-c2"].contains(&cluster.as_str()),
            "{cluster} started after a failure"
        );
        match (cluster.as_str(), view.state(&cluster)) {
            ("fa-c1", Some(Seen::New)) => agent::report(&admin, &view.works[&cluster], Report::Failed).await,
            (_, Some(Seen::New)) => agent::report(&admin, &view.works[&cluster], Report::Progressing).await,
            (_, Some(Seen::Progressing)) => agent::report(&admin, &view.works[&cluster], Report::Done).await,
            _ => {}
        }
    }
    // The status is computed from the snapshot the rollout was planned from: once it shows
    // fa-c2 done beside fa-c1 failed, that plan has been acted on.
    let set = wait_set(&admin, ns, "rs", "fa-c2 done and fa-c1 failed counted", |set| {
        set.and_then(|s| s.status.as_ref())
            .is_some_and(|s| s.summary.applied == 2 && s.summary.progressing == 1 && s.summary.degraded == 1)
    })
    .await
    .unwrap();
    let mut works: Vec<String> = works(&admin, ns, "rs")
        .await
        .iter()
        .map(|w| w.namespace().unwrap())
        .collect();
    works.sort();
    assert_eq!(works, ["fa-c1", "fa-c2"], "no cluster started after the failure");
    assert_eq!(
        condition(&set, CONDITION_PLACEMENT_ROLLED_OUT),
        Some(("False".to_owned(), REASON_PROGRESSING.to_owned()))
    );
}

#[tokio::test]
async fn progressive_per_group_finishes_group_zero_before_group_one_starts() {
    let admin = hub(CP).await.admin_client().await.unwrap();
    let ns = "pergroup";
    let (first, second) = (clusters("g0", 2), clusters("g1", 3));
    let all: Vec<String> = first.iter().chain(&second).cloned().collect();
    setup(&admin, ns, &all).await;
    place(
        &admin,
        ns,
        "groups",
        &[("canary", &refs(&first)), ("", &refs(&second))],
    )
    .await;
    let mut events = pin!(work_events(&admin, ns, "rs"));
    replica_set(
        &admin,
        ns,
        "rs",
        "groups",
        json!({"type": "ProgressivePerGroup"}),
        "Background",
    )
    .await;

    let mut view = View::default();
    while view.count(Seen::Done) < all.len() {
        let event = next(&mut events, &view).await;
        let Some(cluster) = view.apply(event) else {
            continue;
        };
        if second.contains(&cluster) {
            let pending: Vec<&String> = first
                .iter()
                .filter(|c| view.state(c) != Some(Seen::Done))
                .collect();
            assert!(
                pending.is_empty(),
                "{cluster} (group 1) has a work while group 0 has {pending:?} pending"
            );
        }
        match view.state(&cluster) {
            Some(Seen::New) => agent::report(&admin, &view.works[&cluster], Report::Progressing).await,
            Some(Seen::Progressing) => agent::report(&admin, &view.works[&cluster], Report::Done).await,
            _ => {}
        }
    }
    wait_set(&admin, ns, "rs", "rolled out", rolled_out).await;
}

#[tokio::test]
async fn a_cluster_that_leaves_the_placement_loses_its_work() {
    let admin = hub(CP).await.admin_client().await.unwrap();
    let (ns, members) = ("leaving", clusters("le", 3));
    setup(&admin, ns, &members).await;
    place(&admin, ns, "three", &[("", &refs(&members))]).await;
    let mut events = pin!(work_events(&admin, ns, "rs"));
    replica_set(&admin, ns, "rs", "three", json!({"type": "All"}), "Background").await;

    let mut view = View::default();
    while view.count(Seen::Done) < members.len() {
        let event = next(&mut events, &view).await;
        let Some(cluster) = view.apply(event) else {
            continue;
        };
        if view.state(&cluster) == Some(Seen::New) {
            agent::report(&admin, &view.works[&cluster], Report::Done).await;
        }
    }
    place(&admin, ns, "three", &[("", &["le-c1", "le-c2"])]).await;
    while view.works.contains_key("le-c3") {
        let event = next(&mut events, &view).await;
        view.apply(event);
    }
    assert_eq!(view.works.keys().collect::<Vec<_>>(), ["le-c1", "le-c2"]);
    // The placement's own status (numberOfSelectedClusters) follows its decisions; the replica
    // set reports against both once both changed.
    wait_set(&admin, ns, "rs", "two of two clusters applied, rolled out", |set| {
        let summary = set.and_then(|s| s.status.as_ref()).map(|s| (s.summary.total, s.placements_summary.as_deref()));
        rolled_out(set)
            && matches!(summary, Some((2, Some([p]))) if p.available_decision_groups == "1 (2 / 2 clusters applied)")
    })
    .await;
}

/// Creates a two-cluster replica set with `cascade`, lets the agents adopt and finish its works,
/// then deletes it; returns the works as they were.
async fn deleted_replica_set(admin: &Client, ns: &str, cascade: &str) -> Vec<ManifestWork> {
    let members = clusters(ns, 2);
    setup(admin, ns, &members).await;
    place(admin, ns, "two", &[("", &refs(&members))]).await;
    let mut events = pin!(work_events(admin, ns, "rs"));
    replica_set(admin, ns, "rs", "two", json!({"type": "All"}), cascade).await;
    let mut view = View::default();
    while view.count(Seen::Done) < members.len() {
        let event = next(&mut events, &view).await;
        let Some(cluster) = view.apply(event) else {
            continue;
        };
        let work = &view.works[&cluster];
        if view.state(&cluster) == Some(Seen::New) {
            agent::adopt(admin, work).await;
            agent::report(admin, work, Report::Done).await;
        }
    }
    let set = wait_set(admin, ns, "rs", "finalizer", |s| {
        s.is_some_and(|s| {
            s.finalizers()
                .iter()
                .any(|f| f == MANIFEST_WORK_REPLICA_SET_FINALIZER)
        })
    })
    .await
    .unwrap();
    Api::<ManifestWorkReplicaSet>::namespaced(admin.clone(), ns)
        .delete(&set.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    view.works.into_values().collect()
}

#[tokio::test]
async fn foreground_deletion_waits_for_the_works_to_be_gone() {
    let admin = hub(CP).await.admin_client().await.unwrap();
    let ns = "foreground";
    let works = deleted_replica_set(&admin, ns, "Foreground").await;
    let mut events = pin!(work_events(&admin, ns, "rs"));
    let mut view = View::default();
    while view.works.len() < works.len()
        || view
            .works
            .values()
            .any(|w| w.metadata.deletion_timestamp.is_none())
    {
        let event = next(&mut events, &view).await;
        view.apply(event);
    }
    // Every work is being deleted, held by its agent: the replica set waits.
    let sets = Api::<ManifestWorkReplicaSet>::namespaced(admin.clone(), ns);
    let (last, rest) = works.split_last().unwrap();
    for work in rest {
        agent::release(&admin, work).await;
    }
    assert!(
        sets.get_opt("rs").await.unwrap().is_some(),
        "the replica set went while a work remained"
    );
    agent::release(&admin, last).await;
    wait_set(&admin, ns, "rs", "gone", |s| s.is_none()).await;
}

#[tokio::test]
async fn background_deletion_goes_at_once_and_deletes_the_works() {
    let admin = hub(CP).await.admin_client().await.unwrap();
    let ns = "background";
    let works = deleted_replica_set(&admin, ns, "Background").await;
    wait_set(&admin, ns, "rs", "gone", |s| s.is_none()).await;
    let remaining = mwrs_support::works(&admin, ns, "rs").await;
    assert_eq!(remaining.len(), works.len(), "the agents still hold the works");
    assert!(
        remaining.iter().all(|w| w.metadata.deletion_timestamp.is_some()),
        "every work is being deleted"
    );
    for work in &works {
        agent::release(&admin, work).await;
    }
}

#[tokio::test]
async fn a_template_change_rolls_out_again_within_max_concurrency() {
    let admin = hub(CP).await.admin_client().await.unwrap();
    let (ns, members) = ("update", clusters("up", 4));
    setup(&admin, ns, &members).await;
    place(&admin, ns, "four", &[("", &refs(&members))]).await;
    let mut events = pin!(work_events(&admin, ns, "rs"));
    let strategy = json!({"type": "Progressive", "progressive": {"maxConcurrency": 2}});
    replica_set(&admin, ns, "rs", "four", strategy, "Background").await;
    let mut view = View::default();
    roll_within(&admin, &mut events, &mut view, members.len(), 2).await;

    let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "rs", "namespace": "default"}, "data": {"k": "v2"}});
    Api::<ManifestWorkReplicaSet>::namespaced(admin.clone(), ns)
        .patch(
            "rs",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"manifestWorkTemplate": {"workload": {"manifests": [manifest]}}}})),
        )
        .await
        .unwrap();
    // Every work is at generation 1 until the controller updates it to the new template.
    view.min_generation = 2;
    let most_in_flight = roll_within(&admin, &mut events, &mut view, members.len(), 2).await;
    assert_eq!(most_in_flight, 2, "the update used its whole window");
    for work in view.works.values() {
        assert_eq!(
            work.spec.workload.manifests[0].0["data"]["k"],
            "v2",
            "{} updated",
            work.name_any()
        );
    }
}

#[tokio::test]
async fn a_missing_placement_is_reported_until_it_appears() {
    let admin = hub(CP).await.admin_client().await.unwrap();
    let (ns, members) = ("missing", clusters("mi", 1));
    setup(&admin, ns, &members).await;
    let mut events = pin!(work_events(&admin, ns, "rs"));
    replica_set(&admin, ns, "rs", "later", json!({"type": "All"}), "Background").await;
    wait_set(&admin, ns, "rs", "PlacementDecisionNotFound", |set| {
        set.and_then(|s| condition(s, CONDITION_PLACEMENT_VERIFIED))
            == Some(("False".to_owned(), "PlacementDecisionNotFound".to_owned()))
    })
    .await;
    place(&admin, ns, "later", &[("", &refs(&members))]).await;
    let mut view = View::default();
    while view.works.is_empty() {
        let event = next(&mut events, &view).await;
        view.apply(event);
    }
    assert_eq!(view.works.keys().collect::<Vec<_>>(), ["mi-c1"]);
}

#[tokio::test]
async fn an_unreadable_strategy_says_which_field_to_fix() {
    let admin = hub(CP).await.admin_client().await.unwrap();
    let (ns, members) = ("unreadable", clusters("un", 1));
    setup(&admin, ns, &members).await;
    place(&admin, ns, "one", &[("", &refs(&members))]).await;
    let strategy = json!({"type": "Progressive", "progressive": {"minSuccessTime": "a while"}});
    replica_set(&admin, ns, "rs", "one", strategy, "Background").await;
    let set = wait_set(&admin, ns, "rs", "PlacementVerified NotAsExpected", |set| {
        set.and_then(|s| condition(s, CONDITION_PLACEMENT_VERIFIED))
            == Some(("False".to_owned(), "NotAsExpected".to_owned()))
    })
    .await
    .unwrap();
    let verified = set
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == CONDITION_PLACEMENT_VERIFIED);
    let message = verified.unwrap().message;
    assert!(
        message.contains("minSuccessTime \"a while\" is invalid"),
        "{message}"
    );
    assert!(
        mwrs_support::works(&admin, ns, "rs").await.is_empty(),
        "nothing rolled out"
    );
}
