//! One reconcile of a ManifestWork, in OCM's order of steps (one file each):
//!
//! 1. gone → nothing; deleting → `Deleting`, delete the AppliedManifestWork, wait for its
//!    clean-up, release the finalizer ([`finalize`]); `Complete` → leave it;
//! 2. no finalizer → add it, and at the same time ensure the AppliedManifestWork
//!    `<hubHash>-<work>` (finalizer, the work's labels; read from the store when it has it)
//!    ([`record`]);
//! 3. apply every manifest in kind order with its strategy (executor checked first), the
//!    manifests of one rank at once ([`apply`]);
//! 4. record the applied objects (sorted, with uids) and clean up those no longer in the spec
//!    ([`prune`]);
//! 5. from each object as written or read: `Available`, feedback, condition rules; aggregate
//!    the work's conditions ([`status`]); write the record, then the status, each only if
//!    changed;
//! 6. watch the objects whose feedback is watched (`feedbackScrapeType: Watch`); requeue
//!    after the status-sync interval only when polled status needs it.
//!
//! A new work costs two requests on the hub (finalizer, status) and, on the managed cluster,
//! the record's create and status beside one write per object; in four round trips plus one
//! per rank. Statuses are written whole (`flotilla_kube::status::replace_if_changed`), which
//! costs the apiservers less than a merge patch.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use flotilla_api::work::{
    consts::{MANIFEST_WORK_FINALIZER, manifest_work::CONDITION_COMPLETE},
    v1::{AppliedManifestWork, ManifestWork},
};
use flotilla_core::{
    conditions::is_true,
    work::agent::{names, ownership::owner_reference},
};
use k8s_openapi::jiff::Timestamp;
use kube::{Api, Resource, ResourceExt, runtime::controller::Action};

use super::{apply, finalize, prune, record, status};
use crate::agent::{AgentOptions, Context, Error, Result, appliedmanifestwork};

/// Reconciles `work`.
pub(crate) async fn reconcile(work: Arc<ManifestWork>, ctx: Arc<Context>) -> Result<Action> {
    let works: Api<ManifestWork> = Api::namespaced(ctx.hub.clone(), &ctx.cluster);
    let applied_name = names::applied_manifest_work_name(&ctx.hub_hash, &work.name_any());
    let applied_api: Api<AppliedManifestWork> = Api::all(ctx.managed.clone());

    if work.meta().deletion_timestamp.is_some() {
        return finalize::finalize(&ctx, &work, &works, &applied_api, &applied_name).await;
    }
    let current = work.status.clone().unwrap_or_default();
    let has_finalizer = flotilla_kube::finalizer::has(work.as_ref(), MANIFEST_WORK_FINALIZER);
    if is_true(&current.conditions, CONDITION_COMPLETE) {
        ctx.watches.set(&work.name_any(), BTreeMap::new());
        if !has_finalizer {
            finalize::add(&works, &work).await?;
        }
        return Ok(Action::await_change());
    }
    // A new work: add the finalizer and make sure of its AppliedManifestWork at once (nothing
    // is applied before both are written: a work deleted meanwhile leaves only an empty
    // record, which eviction removes), and go on with the object the finalizer write returned
    // (its resourceVersion guards the status write below).
    let (work, applied) = if has_finalizer {
        let applied = record::ensure(&ctx, &work, &applied_api, &applied_name).await?;
        (work, applied)
    } else {
        let (work, applied) = futures::try_join!(
            finalize::add(&works, &work),
            record::ensure(&ctx, &work, &applied_api, &applied_name),
        )?;
        (Arc::new(work), applied)
    };
    if applied.meta().deletion_timestamp.is_some() {
        return Err(Error::Waiting(format!(
            "AppliedManifestWork {applied_name} to finish deleting"
        )));
    }

    let owner = owner_reference(&applied_name, &applied.uid().unwrap_or_default());
    let recorded = applied.status.clone().unwrap_or_default().applied_resources;
    let (results, executor_denied) = apply::apply_all(&ctx, &work, &current, &owner, &recorded).await;
    let pruned = prune::record_and_prune(&ctx, &work, &current, &applied, &results).await;
    let desired = status::desired(&work, &current, &results, Timestamp::now());

    // The record first: the work reports Applied only once every object it applied is
    // recorded. Written at once, a failed record write (a conflict) beside a successful status
    // write let a spec change that followed at once forget a dropped object, left behind.
    appliedmanifestwork::patch_status(&applied_api, &applied, &pruned.status).await?;
    status::write(&ctx, &works, &work, &current.conditions, desired.status).await?;
    ctx.watches.set(&work.name_any(), desired.watched);

    if let Some(error) = pruned.error {
        return Err(error);
    }
    let status_pending = desired.needs_polling || !desired.all_done;
    Ok(Action::requeue(requeue_after(
        &ctx.options,
        pruned.still_deleting,
        executor_denied,
        status_pending,
    )))
}

/// When to look at a work again: soon while dropped objects are still being deleted, after the
/// executor retry interval when an executor was denied, after the status-sync interval while
/// status is polled or not yet `Applied` and `Available`, else after the resync interval ±50 %
/// (which reverts drift nothing watches).
fn requeue_after(
    options: &AgentOptions,
    still_deleting: bool,
    executor_denied: bool,
    status_pending: bool,
) -> Duration {
    if still_deleting {
        Duration::from_secs(1)
    } else if executor_denied {
        options.executor_retry_interval
    } else if status_pending {
        options.status_sync_interval
    } else {
        jittered(options.resync_interval)
    }
}

/// `base` ±50 %.
fn jittered(base: Duration) -> Duration {
    base.mul_f64(0.5 + fastrand::f64())
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::deleting_dropped_objects_first(true, true, true, Duration::from_secs(1))]
    #[case::executor_denied(false, true, true, AgentOptions::default().executor_retry_interval)]
    #[case::status_pending(false, false, true, AgentOptions::default().status_sync_interval)]
    fn a_work_with_something_pending_is_looked_at_again_sooner(
        #[case] still_deleting: bool,
        #[case] executor_denied: bool,
        #[case] status_pending: bool,
        #[case] expected: Duration,
    ) {
        let options = AgentOptions::default();
        let after = requeue_after(&options, still_deleting, executor_denied, status_pending);
        assert_eq!(after, expected);
    }

    #[test]
    fn a_settled_work_is_resynced_within_half_the_interval_either_way() {
        let options = AgentOptions::default();
        let after = requeue_after(&options, false, false, false);
        assert!(after >= options.resync_interval / 2 && after <= options.resync_interval * 3 / 2);
    }
}
