//! The deploy's share of the add-on's status: `supportedConfigs`, `ManifestApplied`,
//! `Progressing`, `HookManifestCompleted` and the config references `Progressing` marks
//! applied (`lastAppliedConfig`).
//!
//! The steps write nothing themselves: each sets what it found in the [`Report`], and
//! [`submit`] hands the result to the add-on writer once, with the Events of the conditions
//! that changed, so one reconcile is at most one write of the add-on. The conditions come from
//! the pure rules in `flotilla_core::addon::status`.

use flotilla_api::addon::consts::managed_cluster_addon as mca;
use flotilla_api::addon::v1alpha1::{ManagedClusterAddOn, ManagedClusterAddOnStatus};
use flotilla_api::addon::v1beta1::{ConfigGroupResource, ConfigReference};
use flotilla_api::work::v1::ManifestWork;
use flotilla_core::addon::configs::{config_reference_from_v1alpha1, config_reference_to_v1alpha1};
use flotilla_core::addon::revision::{APPLIED_REVISION_ANNOTATION, AddonRevisions, applied_revision};
use flotilla_core::addon::status::{
    ProgressingInput, manifests_not_rendered, mark_applied, nothing_to_apply, progressing,
    set_manifest_applied,
};
use flotilla_core::conditions::{self, NewCondition};
use flotilla_kube::events::{self, ConditionEvent};
use flotilla_wasm::Plugin;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::{Api, ResourceExt};

use super::Context;
use crate::error::Result;

/// The add-on conditions whose changes the deploy reports as Events on the add-on, with OCM's
/// reasons: `ManifestApplied` (`AddonManifestApplied`, `ManifestWorkApplyFailed`, ...) and
/// `Progressing` (`Progressing`, `Completed`, `Failed`, ...).
const DEPLOY_EVENTS: &[ConditionEvent] = &[
    ConditionEvent {
        type_: mca::CONDITION_MANIFEST_APPLIED,
        action: "Deploy",
        warning: events::when_false,
    },
    ConditionEvent {
        type_: mca::CONDITION_PROGRESSING,
        action: "Deploy",
        warning: progress_failed,
    },
];

/// `Progressing` is a Warning only when the rollout to the add-on failed.
fn progress_failed(condition: &Condition) -> bool {
    condition.reason == mca::REASON_FAILED
}

/// Whether the rollout has released configs to the add-on of `status` (`Configured` True, or
/// config references it wrote).
pub(super) fn configs_released(status: &ManagedClusterAddOnStatus) -> bool {
    conditions::find(&status.conditions, mca::CONDITION_CONFIGURED)
        .is_some_and(|c| c.status == conditions::TRUE || !status.config_references.is_empty())
}

/// `status` with the config types `plugin` supports as its `supportedConfigs`: where every
/// step starts from.
pub(super) fn with_supported_configs(
    status: &ManagedClusterAddOnStatus,
    plugin: &Plugin,
) -> ManagedClusterAddOnStatus {
    ManagedClusterAddOnStatus {
        supported_configs: plugin
            .options()
            .supported_configs
            .iter()
            .map(ConfigGroupResource::from)
            .collect(),
        ..status.clone()
    }
}

/// The add-on's status as the steps of one reconcile leave it.
pub(super) struct Report<'a> {
    /// The desired status; its config references stay as read until [`Report::follow`].
    status: ManagedClusterAddOnStatus,
    /// The status's config references (v1beta1 form), which `Progressing` marks applied.
    references: Vec<ConfigReference>,
    /// The add-on's name, which `Progressing` messages carry.
    name: String,
    /// The plugin revisions released to the add-on and applied by it.
    revisions: AddonRevisions<'a>,
    /// When the conditions changed.
    now: Timestamp,
    /// The plugin revision the works applied, once `Progressing` completed.
    applied: Option<String>,
}

impl<'a> Report<'a> {
    /// Starts from `status` for `addon`.
    pub(super) fn new(
        addon: &'a ManagedClusterAddOn,
        status: ManagedClusterAddOnStatus,
        now: Timestamp,
    ) -> Self {
        let references = status
            .config_references
            .iter()
            .map(config_reference_from_v1alpha1)
            .collect();
        Report {
            status,
            references,
            name: addon.name_any(),
            revisions: AddonRevisions::from_annotations(addon.metadata.annotations.as_ref()),
            now,
            applied: None,
        }
    }

    /// The status so far.
    pub(super) fn status(&self) -> &ManagedClusterAddOnStatus {
        &self.status
    }

    /// The config references released to the add-on, which its works record.
    pub(super) fn references(&self) -> &[ConfigReference] {
        &self.references
    }

    /// Sets `condition`.
    pub(super) fn set(&mut self, condition: NewCondition<'_>) {
        conditions::set(&mut self.status.conditions, condition, self.now);
    }

    /// Sets `Progressing` from `works` (`unsupported`: the first config type the add-on does not
    /// support) and, once it completed, marks the configs applied and records the plugin
    /// revision the works applied.
    pub(super) fn progress(&mut self, works: &[ManifestWork], unsupported: Option<&ConfigGroupResource>) {
        let outcome = progressing(ProgressingInput {
            addon_name: &self.name,
            unsupported,
            conditions: &self.status.conditions,
            hosted: false,
            works,
            config_references: &self.references,
            plugin_revision: self.revisions.released,
        });
        if outcome.completed {
            mark_applied(&mut self.references);
        }
        self.set(outcome.condition);
        self.applied = outcome
            .completed
            .then(|| applied_revision(works).map(str::to_owned))
            .flatten();
    }

    /// Makes `Progressing` and the config references follow `works`.
    pub(super) fn follow(&mut self, works: &[ManifestWork]) {
        self.progress(works, None);
        self.status.config_references = self.references.iter().map(config_reference_to_v1alpha1).collect();
    }

    /// Makes the whole status follow `works` as they are on the hub: `ManifestApplied` from
    /// them (`nothing`: the output has nothing to apply and no work is left), then
    /// [`Report::follow`].
    pub(super) fn follow_applied(&mut self, works: &[ManifestWork], nothing: bool) {
        if nothing {
            self.set(nothing_to_apply());
        } else {
            set_manifest_applied(&mut self.status.conditions, works, self.now);
        }
        self.follow(works);
    }
}

/// Submits the status the steps left in `report` over `before`, the add-on's status as read,
/// with the plugin revision the works applied, and reports the conditions that changed as
/// Events.
pub(super) async fn submit(
    ctx: &Context,
    api: &Api<ManagedClusterAddOn>,
    addon: &ManagedClusterAddOn,
    before: &ManagedClusterAddOnStatus,
    report: Report<'_>,
) -> Result<()> {
    let Report {
        status: desired,
        applied,
        ..
    } = report;
    // Until the rollout releases configs, supportedConfigs alone is not written: it goes out
    // with the first status the add-on needs anyway, one write (and conflict) less per new add-on.
    let only_supported_configs = ManagedClusterAddOnStatus {
        supported_configs: before.supported_configs.clone(),
        ..desired.clone()
    } == *before;
    let write_status = configs_released(&desired) || !only_supported_configs;
    let applied_revision: Vec<(&str, &str)> = applied
        .as_deref()
        .map(|revision| (APPLIED_REVISION_ANNOTATION, revision))
        .into_iter()
        .collect();
    if write_status || !applied_revision.is_empty() {
        let submitted = if write_status { &desired } else { before };
        ctx.writer
            .submit(crate::Writer::Deploy, api, addon, submitted, &applied_revision)?;
    }
    if write_status {
        ctx.events
            .conditions(addon, &before.conditions, &desired.conditions, DEPLOY_EVENTS)
            .await;
    }
    Ok(())
}

/// Submits why the add-on's manifests were not rendered (`message`), touching nothing else of
/// its status: when no plugin can serve it, the steps do not run and its works stay as they are.
pub(super) async fn submit_not_rendered(
    ctx: &Context,
    api: &Api<ManagedClusterAddOn>,
    addon: &ManagedClusterAddOn,
    message: &str,
) -> Result<()> {
    let before = addon.status.clone().unwrap_or_default();
    let mut status = before.clone();
    conditions::set(
        &mut status.conditions,
        manifests_not_rendered(message),
        Timestamp::now(),
    );
    ctx.writer
        .submit(crate::Writer::Deploy, api, addon, &status, &[])?;
    ctx.events
        .conditions(addon, &before.conditions, &status.conditions, DEPLOY_EVENTS)
        .await;
    Ok(())
}
