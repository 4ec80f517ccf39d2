//! The work's finalizer: added before anything is applied, so the work cannot leave the hub
//! before what it applied is removed; released only once its AppliedManifestWork is gone. A
//! deleting work reports `Deleting` and has its AppliedManifestWork deleted, whose own
//! finalizer removes the objects it owns: that removal lives in one place, the
//! AppliedManifestWork controller, for a deleted work as for an evicted record.

use std::{collections::BTreeMap, time::Duration};

use flotilla_api::work::{
    consts::MANIFEST_WORK_FINALIZER,
    v1::{AppliedManifestWork, ManifestWork, ManifestWorkStatus},
};
use flotilla_core::work::agent::conditions::deleting;
use k8s_openapi::jiff::Timestamp;
use kube::{Api, Resource, ResourceExt, api::DeleteParams, runtime::controller::Action};

use crate::agent::{Context, Error, Result};

/// Adds the work finalizer; returns the work as written.
pub(super) async fn add(works: &Api<ManifestWork>, work: &ManifestWork) -> Result<ManifestWork> {
    let written = flotilla_kube::finalizer::add(works, work, MANIFEST_WORK_FINALIZER).await?;
    Ok(written.unwrap_or_else(|| work.clone()))
}

/// Deleting work: `Deleting`, then the AppliedManifestWork (whose own finalizer removes the
/// objects), then the work's finalizer once the record is gone. Its watches stop at once.
pub(super) async fn finalize(
    ctx: &Context,
    work: &ManifestWork,
    works: &Api<ManifestWork>,
    applied_api: &Api<AppliedManifestWork>,
    applied_name: &str,
) -> Result<Action> {
    ctx.watches.set(&work.name_any(), BTreeMap::new());
    if !flotilla_kube::finalizer::has(work, MANIFEST_WORK_FINALIZER) {
        return Ok(Action::await_change());
    }
    let applied = applied_api
        .get_opt(applied_name)
        .await
        .map_err(Error::kube(format!("read AppliedManifestWork {applied_name}")))?;
    let Some(applied) = applied else {
        flotilla_kube::finalizer::remove(works, work, &[MANIFEST_WORK_FINALIZER]).await?;
        return Ok(Action::await_change());
    };
    let status = work.status.clone().unwrap_or_default();
    let remaining = applied.status.as_ref().map_or(0, |s| s.applied_resources.len());
    let generation = work.meta().generation.unwrap_or_default();
    let mut conditions = status.conditions.clone();
    flotilla_core::conditions::set(
        &mut conditions,
        deleting(generation, remaining).as_new(),
        Timestamp::now(),
    );
    let desired = ManifestWorkStatus { conditions, ..status };
    // The work may be gone by the time the status is written; that is fine.
    if let Err(error) =
        flotilla_kube::status::patch_if_changed(works, work, work.status.as_ref(), &desired).await
    {
        tracing::debug!(%error, "could not set Deleting");
    }
    if applied.meta().deletion_timestamp.is_none() {
        applied_api
            .delete(applied_name, &DeleteParams::default())
            .await
            .map_err(Error::kube(format!("delete AppliedManifestWork {applied_name}")))?;
    }
    Ok(Action::requeue(Duration::from_secs(1)))
}
