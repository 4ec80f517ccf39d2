//! The ManifestWorkReplicaSet controller: one ManifestWork per cluster its Placements choose,
//! rolled out by the shared rollout engine, with OCM's labels, status and deletion.
//!
//! ```text
//!  ManifestWorkReplicaSet ────────────────────────────┐
//!  ManifestWork with label manifestworkreplicaset ────┤ (label <ns>.<name> names the owner)
//!  PlacementDecision (placement label, shared feed) ─┼─▶ reconcile(replica set)
//!  Placement (shared feed) ───────────────────────────┘     (replica sets referring to it)
//! ```
//!
//! The reconcile reads works, decisions and placements straight from the API server rather than
//! from watch caches: works are created with `generateName`, and a cache that has not yet seen a
//! work created a moment ago would make the next reconcile create a second one.
//!
//! `reconcile.rs` reads the replica set and its works and runs the steps in order, each a file
//! of its own: [`finalize`], [`prune`], [`deploy`], [`status`] ([`works`] holds the
//! ManifestWork requests they share).

mod deploy;
mod finalize;
mod prune;
mod reconcile;
mod status;
mod works;

use std::sync::Arc;

use flotilla_api::cluster::consts::PLACEMENT_LABEL;
use flotilla_api::cluster::v1beta1::{Placement, PlacementDecision};
use flotilla_api::work::consts::MANIFEST_WORK_REPLICA_SET_LABEL;
use flotilla_api::work::v1::ManifestWork;
use flotilla_api::work::v1alpha1::ManifestWorkReplicaSet;
use flotilla_core::work::replicaset::owner_of_label;
use flotilla_kube::feed::Feeds;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, ResourceExt};

use super::HubOptions;

/// What one reconcile needs.
pub(super) struct Context {
    /// Client with the hub's identity.
    pub(super) client: Client,
    /// Longest requeue.
    pub(super) options: HubOptions,
    /// Events on the replica sets.
    pub(super) events: flotilla_kube::events::Events,
}

/// The replica sets in `namespace` that refer to placement `placement`.
fn referring(
    store: &Store<ManifestWorkReplicaSet>,
    namespace: &str,
    placement: &str,
) -> Vec<ObjectRef<ManifestWorkReplicaSet>> {
    store
        .state()
        .iter()
        .filter(|rs| rs.namespace().as_deref() == Some(namespace))
        .filter(|rs| rs.spec.placement_refs.iter().any(|p| p.name == placement))
        .map(|rs| ObjectRef::from_obj(rs.as_ref()))
        .collect()
}

/// Subscribes the controller to the Placements and PlacementDecisions of `feeds` now, and
/// returns it: it runs until dropped, once `feeds` runs.
pub(super) fn start(
    feeds: &mut Feeds,
    client: Client,
    options: HubOptions,
) -> impl Future<Output = ()> + use<> {
    let (_, decision_changes) = feeds
        .feed::<PlacementDecision>(Some(PLACEMENT_LABEL), None)
        .subscribe_all();
    let (_, placement_changes) = feeds.feed::<Placement>(None, None).subscribe_all();
    let controller = Controller::new(
        Api::<ManifestWorkReplicaSet>::all(client.clone()),
        watcher::Config::default(),
    );
    let by_decision = controller.store();
    let by_placement = controller.store();
    let controller = controller
        .watches(
            Api::<ManifestWork>::all(client.clone()),
            watcher::Config::default().labels(MANIFEST_WORK_REPLICA_SET_LABEL),
            |work| {
                let owner = work.labels().get(MANIFEST_WORK_REPLICA_SET_LABEL)?;
                let (namespace, name) = owner_of_label(owner)?;
                Some(ObjectRef::new(name).within(namespace))
            },
        )
        .watches_stream(decision_changes, move |decision| {
            let namespace = decision.namespace().unwrap_or_default();
            match decision.labels().get(PLACEMENT_LABEL) {
                Some(placement) => referring(&by_decision, &namespace, placement),
                None => Vec::new(),
            }
        })
        .watches_stream(placement_changes, move |placement| {
            referring(
                &by_placement,
                &placement.namespace().unwrap_or_default(),
                &placement.name_any(),
            )
        });
    let events =
        flotilla_kube::events::Events::new(client.clone(), flotilla_registration::hub::EVENT_REPORTER);
    let context = Arc::new(Context {
        client,
        options,
        events,
    });
    flotilla_kube::controller::run(
        "manifestworkreplicaset",
        controller,
        reconcile::reconcile,
        context,
    )
}
