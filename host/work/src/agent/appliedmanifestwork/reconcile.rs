//! One reconcile of an AppliedManifestWork: finalize when deleting, else eviction
//! bookkeeping for records of this hub, held while the hub looks restored from a backup
//! ([`flotilla_core::work::agent::eviction`]).

use std::{sync::Arc, time::Duration};

use flotilla_api::work::{
    consts::APPLIED_MANIFEST_WORK_FINALIZER,
    v1::{AppliedManifestWork, AppliedManifestWorkStatus, ManifestWork},
};
use flotilla_core::work::agent::eviction::{self, EVICTION_HELD_ANNOTATION, HUB_RESOURCE_VERSION_ANNOTATION};
use flotilla_core::work::agent::names::work_name_of;
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams},
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

/// Reconciles `applied`.
pub(crate) async fn reconcile(applied: Arc<AppliedManifestWork>, ctx: Arc<Context>) -> Result<Action> {
    let api: Api<AppliedManifestWork> = Api::all(ctx.managed.clone());
    let name = applied.name_any();
    let status = applied.status.clone().unwrap_or_default();

    if applied.meta().deletion_timestamp.is_some() {
        if applied.spec.hub_hash != ctx.hub_hash
            || !flotilla_kube::finalizer::has(applied.as_ref(), APPLIED_MANIFEST_WORK_FINALIZER)
        {
            return Ok(Action::await_change());
        }
        let uid = applied.uid().unwrap_or_default();
        let reason = format!("AppliedManifestWork {name} is deleted");
        let pending = cleanup_resources(&ctx.managed, &status.applied_resources, &uid, &reason).await?;
        if pending.is_empty() {
            flotilla_kube::finalizer::remove(&api, applied.as_ref(), APPLIED_MANIFEST_WORK_FINALIZER).await?;
            return Ok(Action::await_change());
        }
        let desired = AppliedManifestWorkStatus {
            applied_resources: pending,
            ..status.clone()
        };
        super::patch_status(&api, applied.as_ref(), &desired).await?;
        return Ok(Action::requeue(Duration::from_secs(1)));
    }

    // Records of another hub (or another agent) are not ours to evict.
    let Some(work_name) = work_name_of(&ctx.hub_hash, &name) else {
        return Ok(Action::await_change());
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
        let current = hub_resource_version(&ctx).await?;
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

/// The hub's current resourceVersion for the cluster's works (a list of at most one).
async fn hub_resource_version(ctx: &Context) -> Result<String> {
    let works: Api<ManifestWork> = Api::namespaced(ctx.hub.clone(), &ctx.cluster);
    let list = works
        .list_metadata(&ListParams::default().limit(1))
        .await
        .map_err(Error::kube(format!("list ManifestWorks in {}", ctx.cluster)))?;
    Ok(list.metadata.resource_version.unwrap_or_default())
}

/// Sets (with why) or removes the held annotation of record `name`.
async fn annotate_held(api: &Api<AppliedManifestWork>, name: &str, why: Option<&str>) -> Result<()> {
    let patch = serde_json::json!({"metadata": {"annotations": {EVICTION_HELD_ANNOTATION: why}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!("annotate AppliedManifestWork {name}")))?;
    Ok(())
}
