//! One reconcile of an AppliedManifestWork: finalize when deleting, else eviction
//! bookkeeping for records of this hub, held while the hub looks restored from a backup
//! ([`flotilla_core::work::agent::eviction`]); records of this hub made under a URL it is no
//! longer reached at are removed once the record under the current one exists.

use std::{sync::Arc, time::Duration};

use flotilla_api::work::{
    consts::APPLIED_MANIFEST_WORK_FINALIZER,
    v1::{AppliedManifestWork, AppliedManifestWorkStatus, ManifestWork},
};
use flotilla_core::work::agent::eviction::{
    self, EVICTION_HELD_ANNOTATION, HUB_RESOURCE_VERSION_ANNOTATION, MANIFEST_WORK_UID_ANNOTATION,
};
use flotilla_core::work::agent::names::{applied_manifest_work_name, work_name_of};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
    runtime::{controller::Action, reflector::ObjectRef},
};

use crate::agent::{Context, Error, Result, cleanup::cleanup_resources};

/// Reason of the Event on an AppliedManifestWork whose work left the hub: the grace period
/// starts (OCM only logs it; the name is Flotilla's).
const REASON_EVICTION_STARTED: &str = "AppliedManifestWorkEvictionStarted";
/// Reason of the Event on an AppliedManifestWork deleted once the grace period ran out.
const REASON_EVICTED: &str = "AppliedManifestWorkEvicted";
/// Reason of the Event on an AppliedManifestWork whose eviction is held
/// ([`flotilla_core::work::agent::eviction`]).
const REASON_EVICTION_HELD: &str = "AppliedManifestWorkEvictionHeld";

/// Reason of the Event on an AppliedManifestWork of this hub made under another URL, removed
/// once the record under the current one exists.
const REASON_SUPERSEDED: &str = "AppliedManifestWorkSuperseded";

/// What supersedes a record of another hub hash.
enum Supersession {
    /// The record of the same work under this hub hash (its name), and the work's name.
    By(String, String),
    /// The work is this hub's, but its record under this hub hash is not made yet.
    Pending,
}

/// Whether `applied`, made under another hub hash by this agent's records, records a work this
/// agent sees on its hub (by the work's uid): the same hub reached under another URL.
fn superseded_by(ctx: &Context, applied: &AppliedManifestWork) -> Option<Supersession> {
    if applied.spec.hub_hash == ctx.hub_hash {
        return None;
    }
    let uid = applied.annotations().get(MANIFEST_WORK_UID_ANNOTATION)?;
    let work = ctx
        .works
        .state()
        .into_iter()
        .find(|w| w.metadata.uid.as_ref() == Some(uid))?;
    let record = applied_manifest_work_name(&ctx.hub_hash, &work.name_any());
    if ctx.applied.get(&ObjectRef::new(&record)).is_some() {
        Some(Supersession::By(record, work.name_any()))
    } else {
        Some(Supersession::Pending)
    }
}

/// Reconciles `applied`.
pub(crate) async fn reconcile(applied: Arc<AppliedManifestWork>, ctx: Arc<Context>) -> Result<Action> {
    let api: Api<AppliedManifestWork> = Api::all(ctx.managed.clone());
    let name = applied.name_any();
    let status = applied.status.clone().unwrap_or_default();

    let superseded = superseded_by(&ctx, &applied);
    if applied.meta().deletion_timestamp.is_some() {
        let ours = applied.spec.hub_hash == ctx.hub_hash || superseded.is_some();
        if !ours || !flotilla_kube::finalizer::has(applied.as_ref(), APPLIED_MANIFEST_WORK_FINALIZER) {
            return Ok(Action::await_change());
        }
        let uid = applied.uid().unwrap_or_default();
        let reason = format!("AppliedManifestWork {name} is deleted");
        let pending = cleanup_resources(&ctx.managed, &status.applied_resources, &uid, &reason).await?;
        if pending.is_empty() {
            flotilla_kube::finalizer::remove(&api, applied.as_ref(), &[APPLIED_MANIFEST_WORK_FINALIZER])
                .await?;
            return Ok(Action::await_change());
        }
        let desired = AppliedManifestWorkStatus {
            applied_resources: pending,
            ..status.clone()
        };
        super::patch_status(&api, applied.as_ref(), &desired).await?;
        return Ok(Action::requeue(Duration::from_secs(1)));
    }

    // Records of another hub (or another agent) are not ours to evict; a record of this hub
    // under a URL it is no longer reached at is superseded by the record under the new one.
    let Some(work_name) = work_name_of(&ctx.hub_hash, &name) else {
        return match superseded {
            Some(Supersession::By(record, work)) => {
                tracing::info!(applied = %name, by = %record, "record superseded: the hub is reached under another URL");
                api.delete(&name, &DeleteParams::default())
                    .await
                    .map_err(Error::kube(format!(
                        "delete superseded AppliedManifestWork {name}"
                    )))?;
                ctx.managed_events
                    .normal(
                        applied.as_ref(),
                        REASON_SUPERSEDED,
                        "Supersede",
                        format!(
                            "the hub of ManifestWork {work} is now reached under another URL; AppliedManifestWork \
                             {record} records it from now on, and this record is removed (what both record is kept)"
                        ),
                    )
                    .await;
                Ok(Action::await_change())
            }
            // The work is this hub's, but its record under the new URL is not made yet.
            Some(Supersession::Pending) => Ok(Action::requeue(Duration::from_secs(2))),
            None => Ok(Action::await_change()),
        };
    };
    if applied.spec.agent_id != ctx.agent_id {
        return Ok(Action::await_change());
    }
    let key = ObjectRef::<ManifestWork>::new(work_name).within(&ctx.cluster);
    let present = ctx.works.get(&key).is_some();
    let held = applied.annotations().contains_key(EVICTION_HELD_ANNOTATION);
    if present && held {
        annotate_held(&api, &name, None).await?;
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    // Held until the work returns (looked for every resync) or the record is deleted.
    let held_requeue = ctx.options.resync_interval.min(Duration::from_secs(60));
    if !present && held {
        return Ok(Action::requeue(held_requeue));
    }
    if !present && status.eviction_start_time.is_none() {
        let current = crate::agent::hub_resource_version(&ctx).await?;
        let recorded = applied.annotations().get(HUB_RESOURCE_VERSION_ANNOTATION);
        if let Some(why) = eviction::hold(recorded.map(String::as_str), &current) {
            tracing::warn!(applied = %name, %why, "eviction held");
            annotate_held(&api, &name, Some(&why)).await?;
            ctx.managed_events
                .warning(
                    applied.as_ref(),
                    REASON_EVICTION_HELD,
                    "Evict",
                    format!(
                        "ManifestWork {work_name} is gone from the hub, but {why}; its resources are kept: \
                         create the work on the hub again, or delete this AppliedManifestWork to remove them"
                    ),
                )
                .await;
            return Ok(Action::requeue(held_requeue));
        }
    }
    let grace = ctx.options.eviction_grace_period;
    let now = Timestamp::now();
    let (desired_start, action) = match (&status.eviction_start_time, present) {
        (_, true) => (None, Action::requeue(Duration::from_secs(60))),
        (None, false) => (
            Some(Time(now)),
            Action::requeue(grace.min(Duration::from_secs(60))),
        ),
        (Some(start), false) => {
            let elapsed = now.duration_since(start.0);
            let elapsed = Duration::try_from(elapsed).unwrap_or_default();
            if elapsed >= grace {
                tracing::info!(applied = %name, "evicting: the work is gone from the hub for the whole grace period");
                api.delete(&name, &DeleteParams::default())
                    .await
                    .map_err(Error::kube(format!("evict AppliedManifestWork {name}")))?;
                ctx.managed_events
                    .warning(
                        applied.as_ref(),
                        REASON_EVICTED,
                        "Evict",
                        format!(
                            "ManifestWork {work_name} is gone from the hub for the whole eviction grace period ({}s); its resources are deleted",
                            grace.as_secs()
                        ),
                    )
                    .await;
                return Ok(Action::await_change());
            }
            (
                Some(start.clone()),
                Action::requeue((grace - elapsed).min(Duration::from_secs(60))),
            )
        }
    };
    let starts = status.eviction_start_time.is_none() && desired_start.is_some();
    let desired = AppliedManifestWorkStatus {
        eviction_start_time: desired_start,
        ..status.clone()
    };
    super::patch_status(&api, applied.as_ref(), &desired).await?;
    if starts {
        ctx.managed_events
            .normal(
                applied.as_ref(),
                REASON_EVICTION_STARTED,
                "Evict",
                format!(
                    "ManifestWork {work_name} is gone from the hub; its resources are deleted unless it returns within {}s",
                    grace.as_secs()
                ),
            )
            .await;
    }
    Ok(action)
}

/// Sets (with why) or removes the held annotation of record `name`.
async fn annotate_held(api: &Api<AppliedManifestWork>, name: &str, why: Option<&str>) -> Result<()> {
    let patch = serde_json::json!({"metadata": {"annotations": {EVICTION_HELD_ANNOTATION: why}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!("annotate AppliedManifestWork {name}")))?;
    Ok(())
}
