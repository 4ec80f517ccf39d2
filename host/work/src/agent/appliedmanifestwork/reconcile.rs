//! One reconcile of an AppliedManifestWork, in steps (one file each):
//!
//! 1. deleting → when the record is ours (this hub's, or superseded by one of this hub's) and
//!    holds the finalizer: clean up what it owns, then release the finalizer ([`finalize`]);
//! 2. not named under this hub hash → a record of this hub made under a URL it is no longer
//!    reached at is deleted once the record under the current one exists; any other is left
//!    alone ([`supersede`]);
//! 3. another agent's → left alone;
//! 4. the work gone from the hub while the hub looks restored from a backup → hold the
//!    eviction; a held record waits for its work ([`hold`]);
//! 5. the work gone → mark the record, delete it once the grace period ran out; the work back
//!    → clear the mark ([`evict`]).

use std::sync::Arc;

use flotilla_api::work::{
    consts::APPLIED_MANIFEST_WORK_FINALIZER,
    v1::{AppliedManifestWork, ManifestWork},
};
use flotilla_core::work::agent::names::work_name_of;
use kube::{
    Api, Resource, ResourceExt,
    runtime::{controller::Action, reflector::ObjectRef},
};

use super::{evict, finalize, hold, supersede};
use crate::agent::{Context, Result};

/// Reconciles `applied`.
pub(crate) async fn reconcile(applied: Arc<AppliedManifestWork>, ctx: Arc<Context>) -> Result<Action> {
    let api: Api<AppliedManifestWork> = Api::all(ctx.managed.clone());
    let name = applied.name_any();
    let superseded = supersede::superseded_by(&ctx, &applied);

    if applied.meta().deletion_timestamp.is_some() {
        let ours = applied.spec.hub_hash == ctx.hub_hash || superseded.is_some();
        if !ours || !flotilla_kube::finalizer::has(applied.as_ref(), APPLIED_MANIFEST_WORK_FINALIZER) {
            return Ok(Action::await_change());
        }
        return finalize::finalize(&ctx, &api, &applied).await;
    }
    // Records of another hub (or another agent) are not ours to evict; a record of this hub
    // under a URL it is no longer reached at is superseded by the record under the new one.
    let Some(work_name) = work_name_of(&ctx.hub_hash, &name) else {
        return supersede::supersede(&ctx, &api, &applied, superseded).await;
    };
    if applied.spec.agent_id != ctx.agent_id {
        return Ok(Action::await_change());
    }

    let key = ObjectRef::<ManifestWork>::new(work_name).within(&ctx.cluster);
    let present = ctx.works.get(&key).is_some();
    if let Some(action) = hold::hold(&ctx, &api, &applied, work_name, present).await? {
        return Ok(action);
    }
    evict::evict(&ctx, &api, &applied, work_name, present).await
}
