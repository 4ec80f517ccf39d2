//! One reconcile of a ClusterManagementAddOn's config rollout, in OCM's shape: return early,
//! read, plan purely, then write the add-ons and, once they are written, the CMA's status:
//!
//! ```text
//!  deleting, or lifecycle not ours ─▶ nothing
//!  read     the add-on's ManagedClusterAddOns (cache), each install placement (missing?
//!           decisions, groups, clustersPerDecisionGroup), every config they may use (hash,
//!           generation)
//!  plan     flotilla_core::addon::rollout::plan_configuration, with the plugin revision its
//!           AddOnPlugin serves
//!  release  per add-on: configReferences (when released) + Configured, and the released
//!           plugin revision annotation when the batch releases it ─▶ submitted to the writer
//!  status   CMA: defaultconfigReferences + installProgressions ─▶ one status patch if changed,
//!           once the add-ons' changes are written
//!  requeue at the nearest progressDeadline / minSuccessTime end
//! ```
//!
//! The add-ons are read as written, with this controller's own changes submitted and not
//! written yet, so a batch is planned on its own last steps and a rollout never has more
//! add-ons in flight than its strategy allows because of a stale read. Other controllers'
//! changes count once written, so they only make an add-on look in flight a little longer.

use std::sync::Arc;

use flotilla_api::addon::v1alpha1::{ClusterManagementAddOn, ManagedClusterAddOn};
use flotilla_api::addon::v1beta1::InstallStrategyType;
use flotilla_core::addon::configs::default_configs_v1alpha1;
use flotilla_core::addon::install::is_managed_by_addon_manager;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::{Context, plan, read, release, status};
use crate::error::Result;

/// Releases configs to the add-ons of `cma` as its rollout strategies allow.
pub(crate) async fn reconcile(cma: Arc<ClusterManagementAddOn>, ctx: Arc<Context>) -> Result<Action> {
    if cma.meta().deletion_timestamp.is_some()
        || !is_managed_by_addon_manager(cma.metadata.annotations.as_ref())
    {
        return Ok(Action::await_change());
    }
    let name = cma.name_any();
    // A batch is planned on the add-ons as written, with this controller's own last steps
    // whether written or not: another controller's step (an add-on done) counts once it is
    // written, so no observer ever sees more add-ons in flight than the strategy allows.
    if !flotilla_kube::controller::cache_ready(&ctx.addons) {
        return Ok(Action::requeue(crate::CACHE_WAIT));
    }
    let addons: Vec<Arc<ManagedClusterAddOn>> = ctx
        .addons
        .state()
        .into_iter()
        .filter(|a| a.name_any() == name)
        .map(|a| ctx.writer.view_of(crate::Writer::Rollout, a))
        .filter(|a| a.meta().deletion_timestamp.is_none())
        .collect();
    // Placements count only for the Placements install strategy, as in OCM.
    let strategies = match cma.spec.install_strategy.type_ {
        InstallStrategyType::Placements => cma.spec.install_strategy.placements.as_slice(),
        _ => &[],
    };
    let placements = read::placements(&ctx, strategies).await?;
    let defaults = default_configs_v1alpha1(&cma.spec);
    let configs = read::configs(&ctx, &defaults, strategies, &addons).await?;

    let previous = cma.status.clone().unwrap_or_default();
    let serving = ctx.plugins.loaded(&name).map(|p| p.digest().to_string());
    let now = Timestamp::now();
    let plan = plan::plan(
        plan::Inputs {
            serving: serving.as_deref(),
            defaults: &defaults,
            strategies,
            placements,
            previous: &previous,
            addons: &addons,
            configs: &configs,
        },
        now,
    );

    if !release::release(&ctx, &name, &addons, &plan, now).await? {
        return Ok(Action::requeue(crate::CACHE_WAIT));
    }
    let desired = status::desired(&defaults, &configs, &previous, &plan);
    status::patch(&ctx, &cma, &previous, &desired).await?;
    Ok(Action::requeue(plan::recheck_after(&plan, ctx.options.resync)))
}
