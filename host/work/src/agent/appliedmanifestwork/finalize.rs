//! A deleted AppliedManifestWork of this hub: the objects it owns are removed before its
//! finalizer is released, for a deleted work as for an evicted or superseded record. What is
//! still being removed stays in the record's list, so the record shows what it waits for.

use std::time::Duration;

use flotilla_api::work::{
    consts::APPLIED_MANIFEST_WORK_FINALIZER,
    v1::{AppliedManifestWork, AppliedManifestWorkStatus},
};
use kube::{Api, ResourceExt, runtime::controller::Action};

use crate::agent::{Context, Result, cleanup::cleanup_resources};

/// Cleans up the objects `applied` owns; releases its finalizer once none is left, else
/// records the ones still being deleted and looks again shortly.
pub(super) async fn finalize(
    ctx: &Context,
    api: &Api<AppliedManifestWork>,
    applied: &AppliedManifestWork,
) -> Result<Action> {
    let name = applied.name_any();
    let status = applied.status.clone().unwrap_or_default();
    let uid = applied.uid().unwrap_or_default();
    let reason = format!("AppliedManifestWork {name} is deleted");
    let pending = cleanup_resources(&ctx.managed, &status.applied_resources, &uid, &reason).await?;
    if pending.is_empty() {
        flotilla_kube::finalizer::remove(api, applied, &[APPLIED_MANIFEST_WORK_FINALIZER]).await?;
        return Ok(Action::await_change());
    }
    let desired = AppliedManifestWorkStatus {
        applied_resources: pending,
        ..status
    };
    super::patch_status(api, applied, &desired).await?;
    Ok(Action::requeue(Duration::from_secs(1)))
}
