//! Releasing the batch: each add-on the plan names gets its config references (when
//! released), `Configured`, and the released plugin revision annotation, submitted to the
//! add-on writer. The add-ons go first and the CMA's status waits until they are written, so a
//! CMA status that shows a step was taken never precedes the step.

use std::sync::Arc;
use std::time::Duration;

use flotilla_api::addon::v1alpha1::{ManagedClusterAddOn, ManagedClusterAddOnStatus};
use flotilla_core::addon::configs::config_reference_to_v1alpha1;
use flotilla_core::addon::revision::RELEASED_REVISION_ANNOTATION;
use flotilla_core::addon::rollout::ConfigurationPlan;
use flotilla_core::addon::status::ConfigurationUpdate;
use flotilla_core::conditions;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::Context;
use crate::error::Result;

/// How long the CMA's status waits for the add-ons' changes to be written: it never says a
/// step was taken before the step is written, and a write still failing by then is retried
/// by the writer while the rollout looks again.
const ADDONS_WRITTEN_WITHIN: Duration = Duration::from_secs(30);

/// Submits the `plan`'s changes to the `addons` of add-on `name` and waits for them to be
/// written; returns whether they were within [`ADDONS_WRITTEN_WITHIN`].
pub(super) async fn release(
    ctx: &Context,
    name: &str,
    addons: &[Arc<ManagedClusterAddOn>],
    plan: &ConfigurationPlan,
    now: Timestamp,
) -> Result<bool> {
    let mut submitted = Vec::new();
    for addon in addons {
        let cluster = addon.namespace().unwrap_or_default();
        let Some(update) = plan.addons.get(&cluster) else {
            continue;
        };
        let current = addon.status.clone().unwrap_or_default();
        let desired = released_status(&current, update, now);
        let revision = plan.revisions.get(&cluster);
        let released: Vec<(&str, &str)> = revision
            .map(|r| (RELEASED_REVISION_ANNOTATION, r.as_str()))
            .into_iter()
            .collect();
        let api: Api<ManagedClusterAddOn> = Api::namespaced(ctx.client.clone(), &cluster);
        if ctx
            .writer
            .submit(crate::Writer::Rollout, &api, addon, &desired, &released)?
        {
            if desired.config_references != current.config_references {
                tracing::info!(addon = %name, %cluster, "configs released");
            }
            if let Some(revision) = revision {
                tracing::info!(addon = %name, %cluster, %revision, "plugin revision released");
            }
            submitted.push(ObjectRef::from_obj(addon.as_ref()));
        }
    }
    for addon in addons {
        ctx.writer
            .heard(crate::Writer::Rollout, &ObjectRef::from_obj(addon.as_ref()));
    }
    if !ctx.writer.flushed(&submitted, ADDONS_WRITTEN_WITHIN).await {
        tracing::debug!(addon = %name, submitted = submitted.len(), "add-on changes not written yet; looking again");
        return Ok(false);
    }
    Ok(true)
}

/// The add-on status `current` with the plan's `update` made at `now`.
fn released_status(
    current: &ManagedClusterAddOnStatus,
    update: &ConfigurationUpdate,
    now: Timestamp,
) -> ManagedClusterAddOnStatus {
    let mut desired = current.clone();
    if let Some(references) = &update.references {
        desired.config_references = references.iter().map(config_reference_to_v1alpha1).collect();
    }
    if let Some(condition) = update.configured.clone() {
        conditions::set(&mut desired.conditions, condition, now);
    }
    desired
}
