//! A replica set being deleted: its works go first, so nothing it placed outlives it. With
//! `cascadeDeletionPolicy: Foreground` the finalizer is held until the works are gone (their
//! agents have removed what they applied); with `Background` it is released at once and the
//! works finish deleting on their own.

use flotilla_api::work::consts::MANIFEST_WORK_REPLICA_SET_FINALIZER;
use flotilla_api::work::v1::ManifestWork;
use flotilla_api::work::v1alpha1::{CascadeDeletionPolicy, ManifestWorkReplicaSet};
use flotilla_kube::finalizer;
use kube::Api;
use kube::runtime::controller::Action;

use super::works;
use crate::hub::error::Result;

/// Deletes the works of `set` (`works`, as just listed) and then releases its finalizer.
pub(super) async fn finalize(
    client: &kube::Client,
    sets: &Api<ManifestWorkReplicaSet>,
    set: &ManifestWorkReplicaSet,
    works: &[ManifestWork],
) -> Result<Action> {
    if !finalizer::has(set, MANIFEST_WORK_REPLICA_SET_FINALIZER) {
        return Ok(Action::await_change());
    }
    for work in works.iter().filter(|w| w.metadata.deletion_timestamp.is_none()) {
        works::delete(client, work).await?;
    }
    // Foreground: the works' own deletion (the agents' clean-up) wakes this reconcile.
    if set.spec.cascade_deletion_policy == CascadeDeletionPolicy::Foreground && !works.is_empty() {
        return Ok(Action::await_change());
    }
    finalizer::remove(sets, set, &[MANIFEST_WORK_REPLICA_SET_FINALIZER]).await?;
    Ok(Action::await_change())
}
