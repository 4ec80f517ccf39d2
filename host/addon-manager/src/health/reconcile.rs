//! One health check of a ManagedClusterAddOn: return early when it is being deleted, its
//! cluster is not accepted, it is not the add-on manager's, or its plugin is not loaded; write
//! `status.healthCheck.mode` from the plugin's health mode; for hub-side probers assess the deploy
//! works (`flotilla_core::addon::health::assess`) and let the checker decide — the workload rule,
//! or the plugin's `probe-health` for `customized`; patch status once if it changed.

use std::sync::Arc;

use flotilla_api::addon::consts::{ADDON_NAME_LABEL, managed_cluster_addon as mca};
use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_api::work::v1::{FieldValue, ValueType};
use flotilla_core::addon::health::{
    Assessment, FieldResult, Prober, Verdict, assess, health_check_mode, probe_condition, workload_check,
};
use flotilla_core::addon::install::is_managed_by_addon_manager;
use flotilla_core::conditions;
use flotilla_kube::events::{self, ConditionEvent};
use flotilla_wasm::inputs;
use flotilla_wasm::types::{FeedbackField, FeedbackValue, HealthStatus, ResourceIdentifier};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::{Context, prober};
use crate::error::Result;
use crate::plugins::Served;

/// The add-on's `Available` changes, reported as Events on the add-on with OCM's reasons
/// (`ProbeAvailable`, `ProbeUnavailable`, `NoProbeResult`, `WorkApplyFailed`, ...): a Warning
/// unless it is available.
const HEALTH_EVENTS: &[ConditionEvent] = &[ConditionEvent {
    type_: mca::CONDITION_AVAILABLE,
    action: "CheckHealth",
    warning: events::unless_true,
}];

/// Checks one add-on's health (see the module docs).
pub(crate) async fn reconcile(addon: Arc<ManagedClusterAddOn>, ctx: Arc<Context>) -> Result<Action> {
    // As it is about to be: the other controllers' changes not written yet included.
    let addon = ctx.writer.view(addon);
    let _heard = ctx.writer.heard_on_return(crate::Writer::Health, &addon);
    if addon.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (name, namespace) = (addon.name_any(), addon.namespace().unwrap_or_default());
    let client = &ctx.client;
    // The caches fill before their answers are trusted; a CMA or cluster that arrives later
    // brings the add-on back through its watch.
    if !crate::caches_ready(&ctx.clusters, &ctx.cmas) {
        return Ok(Action::requeue(crate::CACHE_WAIT));
    }
    let cluster = ctx.clusters.get(&ObjectRef::new(&namespace));
    let Some(cluster) = cluster.filter(|c| c.spec.hub_accepts_client) else {
        return Ok(Action::await_change());
    };
    let cma = ctx.cmas.get(&ObjectRef::new(&name));
    if !cma.is_some_and(|c| is_managed_by_addon_manager(c.metadata.annotations.as_ref())) {
        return Ok(Action::await_change());
    }
    let Served::By(plugin) = ctx.plugins.for_addon(client, &addon).await? else {
        // The AddOnPlugin watch (or the rollout releasing a template) brings the add-on back
        // once something serves it; the deploy controller says why in a condition meanwhile.
        return Ok(Action::requeue(ctx.options.retry));
    };

    let prober = prober(&plugin.options().health);
    let current = addon.status.clone().unwrap_or_default();
    let mut desired = current.clone();
    desired.health_check.mode = Some(health_check_mode(&prober));
    let works: Vec<std::sync::Arc<flotilla_api::work::v1::ManifestWork>> = match prober {
        Prober::Fields(_) | Prober::DeploymentAvailability | Prober::WorkloadAvailability => {
            if !flotilla_kube::controller::cache_ready(ctx.works.store()) {
                return Ok(Action::requeue(crate::CACHE_WAIT));
            }
            ctx.works
                .objects(&namespace)
                .into_iter()
                .filter(|w| w.labels().get(ADDON_NAME_LABEL) == Some(&name))
                .collect()
        }
        Prober::Lease | Prober::Work | Prober::None => Vec::new(),
    };
    let cluster_conditions = cluster
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let condition = match assess(&name, &prober, &current.conditions, &cluster_conditions, &works) {
        Assessment::Keep => None,
        Assessment::Set(condition) => Some(condition),
        Assessment::Check(results) => {
            let verdict = match prober {
                Prober::Fields(_) => probe(&plugin, &cluster, &addon, &results).await,
                _ => match workload_check(&results) {
                    Ok(()) => Verdict::Available,
                    Err(why) => Verdict::Unavailable(why),
                },
            };
            Some(probe_condition(&name, verdict))
        }
    };
    if let Some(condition) = condition {
        conditions::set(&mut desired.conditions, condition, Timestamp::now());
    }
    let api: Api<ManagedClusterAddOn> = Api::namespaced(client.clone(), &namespace);
    if ctx
        .writer
        .submit(crate::Writer::Health, &api, &addon, &desired, &[])?
    {
        tracing::debug!(addon = %name, cluster = %namespace, "health status updated");
        ctx.events
            .conditions(
                addon.as_ref(),
                &current.conditions,
                &desired.conditions,
                HEALTH_EVENTS,
            )
            .await;
    }
    Ok(Action::requeue(ctx.options.resync))
}

/// The plugin's verdict on the feedback; bad inputs and any fault are Unknown, never Available.
async fn probe(
    plugin: &flotilla_wasm::Plugin,
    cluster: &ManagedCluster,
    addon: &ManagedClusterAddOn,
    results: &[FieldResult],
) -> Verdict {
    let default_ns = plugin.options().default_install_namespace.as_deref();
    // Health does not depend on configs; the install namespace falls back to the add-on's own
    // and the plugin's default.
    let (cluster_input, addon_input) = (inputs::cluster(cluster), inputs::addon(addon, &[], default_ns));
    let fields = feedback_fields(results);
    let result = plugin.probe_health(&cluster_input, &addon_input, &fields).await;
    match result.status {
        HealthStatus::Available => Verdict::Available,
        HealthStatus::Unavailable => Verdict::Unavailable(result.message),
        HealthStatus::Unknown => {
            tracing::warn!(addon = %addon.name_any(), cluster = %cluster.name_any(), message = %result.message, "probe-health gave no verdict");
            Verdict::Unknown(format!("probe-health gave no verdict: {}", result.message))
        }
    }
}

/// The feedback as the plugin's `probe-health` takes it.
fn feedback_fields(results: &[FieldResult]) -> Vec<FeedbackField> {
    results
        .iter()
        .flat_map(|r| {
            r.values.iter().filter_map(move |v| {
                Some(FeedbackField {
                    resource: ResourceIdentifier {
                        group: r.resource.group.clone(),
                        resource: r.resource.resource.clone(),
                        name: r.resource.name.clone(),
                        namespace: r.resource.namespace.clone(),
                    },
                    name: v.name.clone(),
                    value: value(&v.value)?,
                })
            })
        })
        .collect()
}

/// A feedback value in the contract's terms; None when the typed field is missing.
fn value(value: &FieldValue) -> Option<FeedbackValue> {
    Some(match value.type_ {
        ValueType::Integer => FeedbackValue::Integer(value.integer?),
        ValueType::String => FeedbackValue::Text(value.string.clone()?),
        ValueType::Boolean => FeedbackValue::Boolean(value.boolean?),
        ValueType::JsonRaw => FeedbackValue::Json(value.json_raw.clone()?),
    })
}
