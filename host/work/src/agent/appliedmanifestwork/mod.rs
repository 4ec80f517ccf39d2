//! The AppliedManifestWork controller of the work agent: watches AppliedManifestWorks on the
//! managed cluster. A deleted one has its owned objects removed before its finalizer is
//! released; one of this hub whose ManifestWork is missing from the hub's list is marked
//! (`evictionStartTime`) and deleted after the eviction grace period ([`reconcile`]).

mod reconcile;

pub(crate) use reconcile::reconcile;

use flotilla_api::work::v1::{AppliedManifestWork, AppliedManifestWorkStatus};
use kube::{Api, ResourceExt, api::PostParams};

use super::{Error, Result};

/// Writes the status of `applied` when it differs from `desired`, as a whole-status update
/// (PUT; an emptied list or a cleared eviction time reaches the server with it), guarded by the
/// uid and resourceVersion of `applied`. A PUT costs the apiserver less CPU than the
/// equivalent merge patch (it applies no patch to the stored object; `bench-work`'s write
/// costs measure both).
pub(crate) async fn patch_status(
    api: &Api<AppliedManifestWork>,
    applied: &AppliedManifestWork,
    desired: &AppliedManifestWorkStatus,
) -> Result<()> {
    let current = applied.status.clone().unwrap_or_default();
    if &current == desired {
        return Ok(());
    }
    let name = applied.name_any();
    let written = AppliedManifestWork {
        status: Some(desired.clone()),
        ..applied.clone()
    };
    api.replace_status(&name, &PostParams::default(), &written)
        .await
        .map_err(Error::kube(format!(
            "update status of AppliedManifestWork {name}"
        )))?;
    Ok(())
}
