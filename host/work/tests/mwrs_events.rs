//! The ManifestWorkReplicaSet controller's Events on a real control plane (issue 30): a missing
//! placement is warned about, and a rollout reported once complete, with OCM's condition
//! reasons, on the replica set; reconciling it again sends neither again.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::mwrs_support;

use std::time::Duration;

use flotilla_api::cluster::v1beta1::Placement;
use flotilla_api::work::consts::manifest_work_replica_set::{
    CONDITION_PLACEMENT_ROLLED_OUT, CONDITION_PLACEMENT_VERIFIED, REASON_COMPLETE,
};
use flotilla_api::work::v1alpha1::ManifestWorkReplicaSet;
use flotilla_testing::events;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};
use mwrs_support::agent::{self, Report};
use mwrs_support::*;
use serde_json::json;

const CP: &str = "mwrs-events";
const KIND: &str = "ManifestWorkReplicaSet";

/// The one Event about replica set `name` with `reason`.
async fn only_event(client: &Client, name: &str, reason: &str) -> Event {
    let mut found = events::about(client, KIND, name, reason).await.unwrap();
    assert_eq!(found.len(), 1, "one {reason} Event: {found:#?}");
    let event = found.remove(0);
    assert!(event.series.is_none(), "{reason} was sent again: {event:#?}");
    event
}

/// Makes the controller reconcile the replica set `times` more times (an annotation change
/// wakes it) and gives it time to act.
async fn reconcile_again(client: &Client, ns: &str, name: &str, times: usize) {
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(client.clone(), ns);
    for n in 0..times {
        let patch = json!({"metadata": {"annotations": {"test/poke": n.to_string()}}});
        sets.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn a_missing_placement_then_a_complete_rollout_are_reported_once_each() {
    let admin = hub(CP).await.admin_client().await.unwrap();
    let (ns, cluster) = ("events", "ev-c1");
    namespace(&admin, ns).await;
    namespace(&admin, cluster).await;
    replica_set(
        &admin,
        ns,
        "reported",
        "later",
        json!({"type": "All"}),
        "Background",
    )
    .await;

    let missing = events::wait_for(&admin, KIND, "reported", "PlacementDecisionNotFound", TIMEOUT)
        .await
        .unwrap();
    assert_eq!(missing.type_.as_deref(), Some("Warning"));
    assert_eq!(missing.action.as_deref(), Some("VerifyPlacement"));
    assert_eq!(missing.reporting_controller.as_deref(), Some("flotilla-hub"));
    assert_eq!(missing.metadata.namespace.as_deref(), Some(ns));
    reconcile_again(&admin, ns, "reported", 3).await;
    only_event(&admin, "reported", "PlacementDecisionNotFound").await;

    // The placement appears; the cluster's agent reports its work done.
    place(&admin, ns, "later", &[("", &[cluster])]).await;
    let work = tokio::time::timeout(TIMEOUT, async {
        loop {
            if let Some(work) = works(&admin, ns, "reported").await.into_iter().next() {
                return work;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .expect("a work for the chosen cluster");
    agent::report(&admin, &work, Report::Done).await;
    wait_set(&admin, ns, "reported", "rolled out", |set| {
        set.and_then(|s| s.status.as_ref())
            .and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == CONDITION_PLACEMENT_ROLLED_OUT)
            })
            .is_some_and(|c| c.status == "True" && c.reason == REASON_COMPLETE)
    })
    .await;

    let complete = events::wait_for(&admin, KIND, "reported", REASON_COMPLETE, TIMEOUT)
        .await
        .unwrap();
    assert_eq!(complete.type_.as_deref(), Some("Normal"));
    assert_eq!(complete.action.as_deref(), Some("RollOut"));
    let regarding = complete.regarding.as_ref().unwrap();
    assert_eq!(regarding.namespace.as_deref(), Some(ns));
    assert!(!complete.note.unwrap_or_default().is_empty());
    events::wait_for(&admin, KIND, "reported", "AsExpected", TIMEOUT)
        .await
        .unwrap();

    reconcile_again(&admin, ns, "reported", 3).await;
    only_event(&admin, "reported", REASON_COMPLETE).await;
    only_event(&admin, "reported", "PlacementDecisionNotFound").await;
}

#[tokio::test]
async fn a_placement_that_comes_and_goes_is_reported_missing_once_within_the_window() {
    let admin = hub(CP).await.admin_client().await.unwrap();
    let (ns, cluster) = ("flapping", "fl-c1");
    namespace(&admin, ns).await;
    namespace(&admin, cluster).await;
    replica_set(
        &admin,
        ns,
        "flapping",
        "flap",
        json!({"type": "All"}),
        "Background",
    )
    .await;
    let placements: Api<Placement> = Api::namespaced(admin.clone(), ns);
    for _ in 0..3 {
        wait_verified(&admin, ns, "flapping", "PlacementDecisionNotFound").await;
        place(&admin, ns, "flap", &[("", &[cluster])]).await;
        wait_verified(&admin, ns, "flapping", "AsExpected").await;
        placements.delete("flap", &DeleteParams::default()).await.unwrap();
        wait_gone(&placements, "flap").await;
    }
    wait_verified(&admin, ns, "flapping", "PlacementDecisionNotFound").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    only_event(&admin, "flapping", "PlacementDecisionNotFound").await;
}

/// Waits until the replica set's `PlacementVerified` has `reason`.
async fn wait_verified(client: &Client, ns: &str, name: &str, reason: &str) {
    wait_set(client, ns, name, reason, |set| {
        set.and_then(|s| s.status.as_ref())
            .and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == CONDITION_PLACEMENT_VERIFIED)
            })
            .is_some_and(|c| c.reason == reason)
    })
    .await;
}

/// Waits until Placement `name` is gone (its finalizers, if any, done).
async fn wait_gone(placements: &Api<Placement>, name: &str) {
    tokio::time::timeout(TIMEOUT, async {
        while placements.get_opt(name).await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .expect("Placement deleted");
}
