//! The AppliedManifestWork controller of the work agent: watches AppliedManifestWorks on the
//! managed cluster. A deleted one has its owned objects removed before its finalizer is
//! released; one of this hub whose ManifestWork is missing from the hub's list is marked
//! (`evictionStartTime`) and deleted after the eviction grace period ([`reconcile`]).

mod reconcile;

pub(crate) use reconcile::reconcile;

use flotilla_api::work::v1::{AppliedManifestWork, AppliedManifestWorkStatus};
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
};
use serde_json::json;

use super::{Error, Result};

/// Writes the status of `applied` when it differs from `desired`, with every field explicit
/// (an emptied list or a cleared eviction time must reach the server, which a merge patch of
/// the serialised status would skip), guarded by uid and resourceVersion.
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
    let patch = json!({
        "metadata": { "uid": applied.metadata.uid, "resourceVersion": applied.metadata.resource_version },
        "status": {
            "appliedResources": desired.applied_resources,
            "evictionStartTime": desired.eviction_start_time,
        },
    });
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!("patch status of AppliedManifestWork {name}")))?;
    Ok(())
}
