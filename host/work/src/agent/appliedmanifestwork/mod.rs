//! The AppliedManifestWork controller of the work agent: watches AppliedManifestWorks on the
//! managed cluster. A deleted one has its owned objects removed before its finalizer is
//! released; one of this hub whose ManifestWork is missing from the hub's list is marked
//! (`evictionStartTime`) and deleted after the eviction grace period ([`reconcile`]).
//!
//! `reconcile.rs` reads the record and runs the steps in order; each step is a file of its
//! own: [`finalize`], [`supersede`], [`hold`], [`evict`].

mod evict;
mod finalize;
mod hold;
mod reconcile;
mod supersede;

pub(crate) use reconcile::reconcile;

use flotilla_api::work::v1::{AppliedManifestWork, AppliedManifestWorkStatus};
use kube::Api;

use super::Result;

/// Writes the status of `applied` when it differs from `desired`, whole
/// ([`flotilla_kube::status::replace_if_changed`]: an emptied list or a cleared eviction time
/// reaches the server with it), guarded by the uid and resourceVersion of `applied`.
pub(crate) async fn patch_status(
    api: &Api<AppliedManifestWork>,
    applied: &AppliedManifestWork,
    desired: &AppliedManifestWorkStatus,
) -> Result<()> {
    // No status reads as an empty one: a new record is not written just to hold `{}` (such a
    // write raced the work controller's first write of the record).
    let current = applied.status.clone().unwrap_or_default();
    flotilla_kube::status::replace_if_changed(api, applied, Some(&current), desired.clone(), |a, status| {
        a.status = Some(status)
    })
    .await?;
    Ok(())
}
