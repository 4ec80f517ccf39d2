//! One reconcile of one ManifestWorkReplicaSet, as a sequence of steps (one file each):
//!
//! ```text
//!  deleting? ─▶ finalize: delete its works; Foreground: wait until they are gone; drop the finalizer
//!  no finalizer? ─▶ add work.open-cluster-management.io/manifest-work-cleanup
//!  owner label <ns>.<name> too long? ─▶ status: ManifestworkApplied False InvalidManifestWorkName
//!  prune: works of placements no longer referenced ─▶ delete
//!  deploy, per placement ref: Placement missing ─▶ PlacementVerified False PlacementDecisionNotFound, stop
//!                     decisions → groups; current works → cluster states; rollout::plan
//!                     ToApply clusters ─▶ create (generateName) or update their work
//!                     clusters that left ─▶ delete their work
//!  status (summary, placementSummary, conditions) ─▶ one patch if changed
//!  requeue at the nearest rollout deadline or soak end
//! ```
//!
//! A failed work write does not stop the others: it is kept in the [`Pass`], the status is
//! still written, and the first such error is returned after it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use flotilla_api::work::consts::MANIFEST_WORK_REPLICA_SET_FINALIZER;
use flotilla_api::work::v1alpha1::ManifestWorkReplicaSet;
use flotilla_core::work::replicaset::{self, PlacementOutcome};
use flotilla_kube::finalizer;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::deploy::Deploy;
use super::{Context, finalize, prune, status, works};
use crate::hub::error::{Error, Result};

/// What the write steps of one reconcile leave for the status and the requeue.
#[derive(Debug, Default)]
pub(super) struct Pass {
    /// Failed work writes, in the order they happened.
    pub(super) errors: Vec<Error>,
    /// Works deleted by this reconcile, by uid, left out of the status counts.
    pub(super) deleted: BTreeSet<String>,
    /// The nearest rollout deadline or soak end over the placements.
    pub(super) recheck: Option<SignedDuration>,
}

/// Reconciles one ManifestWorkReplicaSet (see the module docs).
pub(super) async fn reconcile(set: Arc<ManifestWorkReplicaSet>, context: Arc<Context>) -> Result<Action> {
    let namespace = set.namespace().unwrap_or_default();
    let name = set.name_any();
    let client = &context.client;
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(client.clone(), &namespace);
    let owner = replicaset::owner_label_value(&namespace, &name);
    let works = works::list(&Api::all(client.clone()), &owner).await?;

    if set.metadata.deletion_timestamp.is_some() {
        return finalize::finalize(client, &sets, &set, &works).await;
    }
    if finalizer::add(&sets, set.as_ref(), MANIFEST_WORK_REPLICA_SET_FINALIZER)
        .await?
        .is_some()
    {
        // The write changes the object and so comes back as a new reconcile.
        return Ok(Action::await_change());
    }

    let now = Timestamp::now();
    let previous = set.status.clone().unwrap_or_default();
    if let Some(problem) = replicaset::owner_label_problem(&namespace, &name) {
        let desired = status::invalid_name(&previous, problem, now);
        status::write(&context.events, &sets, &set, &desired).await?;
        return Ok(Action::await_change());
    }

    let mut pass = Pass::default();
    prune::unreferenced(client, &set, &works, &mut pass).await;
    let deploy = Deploy {
        client,
        set: &set,
        owner: &owner,
        works: &works,
        now,
    };
    let mut outcomes = Vec::new();
    for reference in &set.spec.placement_refs {
        let outcome = deploy.placement(reference, &mut pass).await?;
        let missing = outcome == PlacementOutcome::NotFound;
        outcomes.push(outcome);
        if missing {
            break;
        }
    }

    let template = &set.spec.manifest_work_template;
    let desired = status::rolled_out(&previous, &outcomes, &works, &pass.deleted, template, now);
    status::write(&context.events, &sets, &set, &desired).await?;
    if let Some(error) = pass.errors.into_iter().next() {
        return Err(error);
    }
    Ok(Action::requeue(requeue_after(
        pass.recheck,
        context.options.resync,
    )))
}

/// The requeue: at `recheck` (the nearest rollout deadline or soak end), at most `resync`.
fn requeue_after(recheck: Option<SignedDuration>, resync: Duration) -> Duration {
    recheck
        .and_then(|d| Duration::try_from(d).ok())
        .map_or(resync, |d| d.min(resync))
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    const RESYNC: Duration = Duration::from_secs(30 * 60);

    #[rstest]
    #[case::nothing_pending(None, RESYNC)]
    #[case::a_deadline_before_the_resync(Some(SignedDuration::from_secs(90)), Duration::from_secs(90))]
    #[case::a_deadline_after_the_resync(Some(SignedDuration::from_hours(2)), RESYNC)]
    #[case::a_deadline_already_past(Some(SignedDuration::from_secs(-5)), RESYNC)]
    fn a_replica_set_is_requeued_at_its_nearest_deadline_at_most_a_resync_away(
        #[case] recheck: Option<SignedDuration>,
        #[case] expected: Duration,
    ) {
        assert_eq!(requeue_after(recheck, RESYNC), expected);
    }
}
