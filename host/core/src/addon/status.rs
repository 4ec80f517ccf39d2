//! Conditions and rollout state of add-ons, with OCM's types, reasons and messages:
//!
//! - ManagedClusterAddOn `ManifestApplied` from the deploy works' `Applied` condition, or
//!   `ManifestWorkApplyFailed` when rendering or applying failed;
//! - `Configured` (configs released to the cluster by the rollout or not);
//! - `Progressing` and `lastAppliedConfig` (work annotations against `configReferences`, works
//!   Available and Applied at their generation);
//! - the pre-delete hook steps and `HookManifestCompleted`;
//! - the rollout state of one ManagedClusterAddOn as the rollout engine consumes it;
//! - ClusterManagementAddOn `installProgressions[].conditions` and `lastKnownGoodConfig`.

use std::collections::BTreeMap;

use flotilla_api::addon::consts::managed_cluster_addon as mca;
use flotilla_api::addon::consts::{
    ADDON_PRE_DELETE_FINALIZER, ADDON_PRE_DELETE_FINALIZER_OLD, HOSTING_ADDON_PRE_DELETE_FINALIZER_OLD,
    HOSTING_MANIFESTS_CLEANUP_FINALIZER_OLD, cluster_management_addon as cma,
};
use flotilla_api::addon::v1beta1::{ConfigGroupResource, ConfigReference, InstallProgression};
use flotilla_api::work::consts::{CONFIG_SPEC_HASH_ANNOTATION, manifest_work};
use flotilla_api::work::v1::ManifestWork;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::configs::config_spec_hashes;
use super::works::pre_delete_work_name;
use crate::conditions::{self, FALSE, NewCondition, TRUE};

// === ManifestApplied ===

/// `ManifestApplied` False `ManifestWorkApplyFailed`: the plugin could not render the manifests
/// (error, trap, timeout, invalid output). The last good works stay.
pub fn manifests_not_rendered(error: &str) -> NewCondition<'static> {
    manifest_work_apply_failed(format!("failed to get manifest from agent interface: {error}"))
}

/// `ManifestApplied` False `ManifestWorkApplyFailed`: the works could not be built.
pub fn works_not_built(error: &str) -> NewCondition<'static> {
    manifest_work_apply_failed(format!("failed to build manifestwork: {error}"))
}

/// `ManifestApplied` False `ManifestWorkApplyFailed`: the hub refused a work.
pub fn work_not_applied(error: &str) -> NewCondition<'static> {
    manifest_work_apply_failed(format!("failed to apply manifestWork: {error}"))
}

fn manifest_work_apply_failed(message: String) -> NewCondition<'static> {
    NewCondition {
        type_: mca::CONDITION_MANIFEST_APPLIED,
        status: FALSE,
        reason: mca::REASON_MANIFEST_WORK_APPLY_FAILED,
        message,
        observed_generation: None,
    }
}

/// `ManifestApplied` True when the plugin returned nothing to deploy.
pub fn nothing_to_apply() -> NewCondition<'static> {
    NewCondition {
        type_: mca::CONDITION_MANIFEST_APPLIED,
        status: TRUE,
        reason: mca::REASON_ADDON_MANIFEST_APPLIED,
        message: "no manifest need to apply".into(),
        observed_generation: None,
    }
}

/// Updates `ManifestApplied` in `conditions` from the applied works, one after the other as
/// OCM does: a work whose `Applied` is True sets True `AddonManifestApplied`, False sets False
/// `AddonManifestAppliedFailed`, and a work the agent has not reported on yet only clears a
/// stale False. Returns whether anything changed.
pub fn set_manifest_applied(conditions: &mut Vec<Condition>, works: &[ManifestWork], now: Timestamp) -> bool {
    let mut changed = false;
    for work in works {
        let applied = work
            .status
            .as_ref()
            .and_then(|s| conditions::find(&s.conditions, manifest_work::CONDITION_APPLIED));
        match applied {
            None => {
                let stale = conditions::find(conditions, mca::CONDITION_MANIFEST_APPLIED)
                    .is_some_and(|c| c.status == FALSE);
                if stale {
                    changed |= conditions::remove(conditions, mca::CONDITION_MANIFEST_APPLIED);
                }
            }
            Some(c) => {
                let new = if c.status == TRUE {
                    NewCondition {
                        type_: mca::CONDITION_MANIFEST_APPLIED,
                        status: TRUE,
                        reason: mca::REASON_ADDON_MANIFEST_APPLIED,
                        message: "manifests of addon are applied successfully".into(),
                        observed_generation: None,
                    }
                } else {
                    NewCondition {
                        type_: mca::CONDITION_MANIFEST_APPLIED,
                        status: FALSE,
                        reason: mca::REASON_ADDON_MANIFEST_APPLIED_FAILED,
                        message: "failed to apply the manifests of addon".into(),
                        observed_generation: None,
                    }
                };
                changed |= conditions::set(conditions, new, now);
            }
        }
    }
    changed
}

// === Configured ===

/// `Configured`: True `ConfigurationsConfigured` once the rollout released the desired configs
/// to the cluster (or it has none), False `ConfigurationsNotConfigured` while they wait.
pub fn configured(released: bool) -> NewCondition<'static> {
    if released {
        NewCondition {
            type_: mca::CONDITION_CONFIGURED,
            status: TRUE,
            reason: mca::REASON_CONFIGURATIONS_CONFIGURED,
            message: "Configurations configured".into(),
            observed_generation: None,
        }
    } else {
        NewCondition {
            type_: mca::CONDITION_CONFIGURED,
            status: FALSE,
            reason: mca::REASON_CONFIGURATIONS_NOT_CONFIGURED,
            message: "Configurations updated and not configured yet".into(),
            observed_generation: None,
        }
    }
}

// === Progressing ===

/// What `Progressing` is computed from.
#[derive(Clone, Copy, Debug)]
pub struct ProgressingInput<'a> {
    /// The add-on's name.
    pub addon_name: &'a str,
    /// The first config type in `spec.configs` the add-on does not support (see
    /// [`super::configs::first_unsupported`]).
    pub unsupported: Option<&'a ConfigGroupResource>,
    /// The ManagedClusterAddOn's current conditions.
    pub conditions: &'a [Condition],
    /// Whether the add-on runs in hosted mode (has a hosting cluster).
    pub hosted: bool,
    /// The add-on's works in the cluster namespace (the pre-delete work is skipped).
    pub works: &'a [ManifestWork],
    /// The ManagedClusterAddOn's `status.configReferences`.
    pub config_references: &'a [ConfigReference],
    /// The plugin revision released to the add-on, if any (see [`super::revision`]): a work
    /// rendered by another revision is still progressing.
    pub plugin_revision: Option<&'a str>,
}

/// The `Progressing` condition and whether the rollout completed on this cluster (then the
/// caller sets `lastAppliedConfig` with [`mark_applied`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progressing {
    /// The condition to set.
    pub condition: NewCondition<'static>,
    /// Whether the configs are applied (`Completed`).
    pub completed: bool,
}

fn progressing_condition(
    status: &'static str,
    reason: &'static str,
    message: String,
) -> NewCondition<'static> {
    NewCondition {
        type_: mca::CONDITION_PROGRESSING,
        status,
        reason,
        message,
        observed_generation: None,
    }
}

/// OCM's `Progressing` rules for one ManagedClusterAddOn, in order: unsupported config →
/// False `ConfigurationUnsupported`; no `ManifestApplied` (or `HostingManifestApplied` when
/// hosted) yet → False `WaitingFor...`; no works, a work rendered for other config hashes, or a
/// work not Available and Applied at its generation → True `Progressing`; else False
/// `Completed`. Flotilla adds one rule beside the config hashes: a work rendered by another
/// plugin revision than the one released to the add-on is still progressing.
pub fn progressing(input: ProgressingInput<'_>) -> Progressing {
    let not_done = |condition| Progressing {
        condition,
        completed: false,
    };
    if let Some(gr) = input.unsupported {
        return not_done(progressing_condition(
            FALSE,
            mca::REASON_CONFIGURATION_UNSUPPORTED,
            format!(
                "Configuration with gvr {}/{} is not supported for this addon",
                gr.group, gr.resource
            ),
        ));
    }
    if conditions::find(input.conditions, mca::CONDITION_MANIFEST_APPLIED).is_none() {
        return not_done(progressing_condition(
            FALSE,
            mca::REASON_WAITING_FOR_MANIFEST_APPLIED,
            "Waiting for ManagedClusterAddOn ManifestApplied condition".into(),
        ));
    }
    if input.hosted && conditions::find(input.conditions, mca::CONDITION_HOSTING_MANIFEST_APPLIED).is_none() {
        return not_done(progressing_condition(
            FALSE,
            mca::REASON_WAITING_FOR_HOSTING_MANIFEST_APPLIED,
            "Waiting for ManagedClusterAddOn HostingManifestApplied condition".into(),
        ));
    }
    let in_progress = |why: &str| {
        not_done(progressing_condition(
            TRUE,
            mca::REASON_PROGRESSING,
            format!("progressing... {why}"),
        ))
    };
    if input.works.is_empty() {
        return in_progress("no addon works");
    }
    for work in input.works {
        let name = work.metadata.name.as_deref().unwrap_or_default();
        if name.starts_with(&pre_delete_work_name(input.addon_name)) {
            continue;
        }
        if !work_configs_match(work, input.config_references) {
            return in_progress("mca and work configs mismatch");
        }
        if input
            .plugin_revision
            .is_some_and(|r| super::revision::work_revision(work) != Some(r))
        {
            return in_progress("mca and work plugin revisions mismatch");
        }
        if !work_is_ready(work) {
            return in_progress("work is not ready");
        }
    }
    Progressing {
        condition: progressing_condition(FALSE, mca::REASON_COMPLETED, "completed with no errors.".into()),
        completed: true,
    }
}

/// `Progressing` False `Failed` with `message` (OCM's reason when the works cannot be listed).
pub fn progressing_failed(message: String) -> NewCondition<'static> {
    progressing_condition(FALSE, mca::REASON_FAILED, message)
}

/// Sets `lastAppliedConfig := desiredConfig` on every reference (after `Completed`).
pub fn mark_applied(references: &mut [ConfigReference]) {
    for reference in references {
        reference.last_applied_config = reference.desired_config.clone();
    }
}

/// Whether `work` was rendered from the configs in `references`: its config-spec-hash
/// annotation equals theirs, and no hash on either side is empty. A work without the annotation
/// matches only an add-on without configs.
pub fn work_configs_match(work: &ManifestWork, references: &[ConfigReference]) -> bool {
    let Some(annotation) = work
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONFIG_SPEC_HASH_ANNOTATION))
    else {
        return references.is_empty();
    };
    let Ok(work_hashes) = serde_json::from_str::<BTreeMap<String, String>>(annotation) else {
        return false;
    };
    if work_hashes.values().any(String::is_empty) {
        return false;
    }
    let all_hashed = references
        .iter()
        .all(|r| r.desired_config.as_ref().is_some_and(|d| !d.spec_hash.is_empty()));
    all_hashed && work_hashes == config_spec_hashes(references)
}

/// Whether a work is Available and Applied, both observed at its current generation.
pub fn work_is_ready(work: &ManifestWork) -> bool {
    let generation = work.metadata.generation.unwrap_or(0);
    let Some(status) = work.status.as_ref() else {
        return false;
    };
    [
        manifest_work::CONDITION_AVAILABLE,
        manifest_work::CONDITION_APPLIED,
    ]
    .iter()
    .all(|type_| {
        conditions::find(&status.conditions, type_)
            .is_some_and(|c| c.status == TRUE && c.observed_generation.unwrap_or(0) == generation)
    })
}

// === Rollout state of one ManagedClusterAddOn ===

/// Where one cluster's add-on stands in a config rollout (the rollout engine's cluster states).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RolloutState {
    /// The desired configs are not yet released to the cluster.
    ToApply,
    /// Released, not yet applied.
    Progressing,
    /// Applied.
    Succeeded,
    /// Applying failed.
    Failed,
}

/// A cluster's rollout state and the time it entered it, when known (from `Progressing`).
#[derive(Clone, Debug, PartialEq)]
pub struct AddonRolloutStatus {
    /// The state.
    pub state: RolloutState,
    /// `lastTransitionTime` of `Progressing` when it says the same (OCM's rule).
    pub since: Option<Time>,
}

/// The rollout state of one add-on, by OCM's rules: ToApply while `status.configReferences`
/// differ from `desired` (same configs with the same hashes); Progressing or Failed (by the
/// `Progressing` reason) while a released config's `lastAppliedConfig` differs from its
/// `desiredConfig`; else Succeeded.
pub fn rollout_status(
    desired: &[ConfigReference],
    status: &[ConfigReference],
    conditions: &[Condition],
) -> AddonRolloutStatus {
    let to_apply = AddonRolloutStatus {
        state: RolloutState::ToApply,
        since: None,
    };
    if desired.len() != status.len() {
        return to_apply;
    }
    for actual in status {
        let Some(actual_desired) = actual.desired_config.as_ref() else {
            return to_apply;
        };
        let wanted = desired.iter().find(|d| {
            d.group_resource == actual.group_resource
                && d.desired_config
                    .as_ref()
                    .is_some_and(|c| c.referent == actual_desired.referent)
        });
        let Some(wanted) = wanted else {
            return to_apply;
        };
        if wanted.desired_config != actual.desired_config {
            return to_apply;
        }
        if actual.last_applied_config != actual.desired_config {
            return released_not_applied(conditions);
        }
    }
    all_applied(conditions)
}

/// The state of an add-on released something it has not applied yet: Failed or Progressing by
/// the `Progressing` reason, since its transition (no start when the reason says neither).
pub fn released_not_applied(conditions: &[Condition]) -> AddonRolloutStatus {
    let progressing = conditions::find(conditions, mca::CONDITION_PROGRESSING);
    let since = progressing.map(|c| c.last_transition_time.clone());
    match progressing.map(|c| c.reason.as_str()) {
        Some(mca::REASON_FAILED) => AddonRolloutStatus {
            state: RolloutState::Failed,
            since,
        },
        Some(mca::REASON_PROGRESSING) => AddonRolloutStatus {
            state: RolloutState::Progressing,
            since,
        },
        _ => AddonRolloutStatus {
            state: RolloutState::Progressing,
            since: None,
        },
    }
}

/// The state of an add-on that applied everything released to it: Succeeded, since the
/// `Progressing` transition when it says `Completed` (the start of `minSuccessTime`).
pub fn all_applied(conditions: &[Condition]) -> AddonRolloutStatus {
    let progressing = conditions::find(conditions, mca::CONDITION_PROGRESSING);
    AddonRolloutStatus {
        state: RolloutState::Succeeded,
        since: progressing
            .filter(|c| c.reason == mca::REASON_COMPLETED)
            .map(|c| c.last_transition_time.clone()),
    }
}

/// What the configuration step writes on one ManagedClusterAddOn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigurationUpdate {
    /// New `status.configReferences`, when the rollout released the desired configs.
    pub references: Option<Vec<ConfigReference>>,
    /// `Configured` to set, if any.
    pub configured: Option<NewCondition<'static>>,
}

/// OCM's configuration step for one add-on: in the rollout batch, its `configReferences`
/// take the desired configs (see [`super::configs::merge_config_references`]) and
/// `Configured` turns True; waiting outside the batch (ToApply), `Configured` is False;
/// Succeeded, it is True; otherwise (Progressing or Failed outside the batch) nothing changes.
pub fn configuration_update(
    status: &AddonRolloutStatus,
    in_batch: bool,
    current: &[ConfigReference],
    desired: &[ConfigReference],
) -> ConfigurationUpdate {
    if in_batch {
        return ConfigurationUpdate {
            references: Some(super::configs::merge_config_references(current, desired)),
            configured: Some(configured(true)),
        };
    }
    let configured = match status.state {
        RolloutState::ToApply => Some(configured(false)),
        RolloutState::Succeeded => Some(configured(true)),
        RolloutState::Progressing | RolloutState::Failed => None,
    };
    ConfigurationUpdate {
        references: None,
        configured,
    }
}

// === Pre-delete hooks ===

/// What the pre-delete hook step of a reconcile does (OCM's order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookStep {
    /// The output has no hook: remove the pre-delete finalizer if present.
    RemoveFinalizer,
    /// There are hooks and no finalizer yet: add it (and nothing else this time).
    AddFinalizer,
    /// The add-on is not being deleted: nothing to run yet.
    Wait,
    /// Being deleted: apply the pre-delete work and check [`super::works::hook_work_completed`].
    RunHooks,
}

/// The hook step for an add-on with or without hooks in its output, with or without the
/// finalizer, being deleted or not.
pub fn hook_step(has_hooks: bool, finalizers: &[String], deleting: bool) -> HookStep {
    if !has_hooks {
        HookStep::RemoveFinalizer
    } else if !finalizers.iter().any(|f| f == ADDON_PRE_DELETE_FINALIZER) {
        HookStep::AddFinalizer
    } else if !deleting {
        HookStep::Wait
    } else {
        HookStep::RunHooks
    }
}

/// Old finalizers OCM drops whenever it adds or removes the pre-delete finalizer.
const DEPRECATED_FINALIZERS: [&str; 3] = [
    HOSTING_MANIFESTS_CLEANUP_FINALIZER_OLD,
    ADDON_PRE_DELETE_FINALIZER_OLD,
    HOSTING_ADDON_PRE_DELETE_FINALIZER_OLD,
];

/// `finalizers` without the pre-delete finalizer and the deprecated ones, or None if unchanged.
pub fn without_pre_delete_finalizer(finalizers: &[String]) -> Option<Vec<String>> {
    let kept: Vec<String> = finalizers
        .iter()
        .filter(|f| *f != ADDON_PRE_DELETE_FINALIZER && !DEPRECATED_FINALIZERS.contains(&f.as_str()))
        .cloned()
        .collect();
    (kept.len() != finalizers.len()).then_some(kept)
}

/// `finalizers` with the pre-delete finalizer added (deprecated ones dropped), or None if it
/// is already there.
pub fn with_pre_delete_finalizer(finalizers: &[String]) -> Option<Vec<String>> {
    if finalizers.iter().any(|f| f == ADDON_PRE_DELETE_FINALIZER) {
        return None;
    }
    let mut kept: Vec<String> = finalizers
        .iter()
        .filter(|f| !DEPRECATED_FINALIZERS.contains(&f.as_str()))
        .cloned()
        .collect();
    kept.push(ADDON_PRE_DELETE_FINALIZER.to_owned());
    Some(kept)
}

/// `HookManifestCompleted` for the hook work `work_name`.
pub fn hook_manifest_completed(work_name: &str, completed: bool) -> NewCondition<'static> {
    if completed {
        NewCondition {
            type_: mca::CONDITION_HOOK_MANIFEST_COMPLETED,
            status: TRUE,
            reason: mca::REASON_HOOK_MANIFEST_IS_COMPLETED,
            message: format!("hook manifestWork {work_name} is completed."),
            observed_generation: None,
        }
    } else {
        NewCondition {
            type_: mca::CONDITION_HOOK_MANIFEST_COMPLETED,
            status: FALSE,
            reason: mca::REASON_HOOK_MANIFEST_IS_NOT_COMPLETED,
            message: format!("hook manifestWork {work_name} is not completed."),
            observed_generation: None,
        }
    }
}

// === ClusterManagementAddOn install progressions ===

/// Counts over the add-ons of one install placement, from the rollout result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InstallCounts {
    /// Add-ons in the current rollout batch (to apply, progressing or failed within the
    /// deadline, succeeded within `minSuccessTime`).
    pub progressing: usize,
    /// Add-ons done: Succeeded, out of the batch, on the placement's configs.
    pub succeeded: usize,
    /// Add-ons Failed past the deadline, on the placement's configs.
    pub failed: usize,
    /// Add-ons timed out.
    pub timed_out: usize,
    /// Clusters the placement selects.
    pub selected: usize,
    /// Of those, clusters where this placement's configs apply (not overridden by a later
    /// placement).
    pub configured: usize,
}

/// One add-on of an install placement, as the install progression counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlacementAddon {
    /// Its rollout state (see [`rollout_status`]).
    pub state: RolloutState,
    /// Whether the rollout engine put it in the current batch (clusters to roll out).
    pub in_batch: bool,
    /// Whether its configs are the placement's (see
    /// [`super::configs::inherits_placement_configs`]).
    pub inherits_placement_configs: bool,
}

/// The counts of an install progression, as OCM counts them: add-ons in the batch are
/// progressing; out of the batch, those on the placement's configs are done when Succeeded
/// and failed when Failed. `timed_out` is the rollout engine's timed-out cluster count,
/// `selected` the placement's clusters and `configured` those where its configs apply (see
/// [`super::configs::configured_clusters`]).
pub fn install_counts(
    addons: &[PlacementAddon],
    timed_out: usize,
    selected: usize,
    configured: usize,
) -> InstallCounts {
    let settled = |state| {
        addons
            .iter()
            .filter(|a| a.state == state && !a.in_batch && a.inherits_placement_configs)
            .count()
    };
    InstallCounts {
        progressing: addons.iter().filter(|a| a.in_batch).count(),
        succeeded: settled(RolloutState::Succeeded),
        failed: settled(RolloutState::Failed),
        timed_out,
        selected,
        configured,
    }
}

/// Sets the `Progressing` condition of one install progression (True `Progressing` until
/// every configured add-on is done; 0/0 is not done), and when done, `lastAppliedConfig` and
/// `lastKnownGoodConfig` to the desired configs. Returns whether anything changed.
pub fn set_install_progression(
    progression: &mut InstallProgression,
    counts: InstallCounts,
    now: Timestamp,
) -> bool {
    let InstallCounts {
        progressing,
        succeeded: done,
        failed,
        timed_out,
        selected,
        configured,
    } = counts;
    let mut changed = false;
    let condition = if (configured == 0 && done == 0) || done != configured {
        NewCondition {
            type_: cma::CONDITION_PROGRESSING,
            status: TRUE,
            reason: cma::REASON_PROGRESSING,
            message: format!(
                "selected clusters {selected}. configured addons {}/{configured} progressing..., {failed} failed {timed_out} timeout.",
                progressing + done
            ),
            observed_generation: None,
        }
    } else {
        for reference in &mut progression.config_references {
            if reference.last_applied_config != reference.desired_config
                || reference.last_known_good_config != reference.desired_config
            {
                reference.last_applied_config = reference.desired_config.clone();
                reference.last_known_good_config = reference.desired_config.clone();
                changed = true;
            }
        }
        NewCondition {
            type_: cma::CONDITION_PROGRESSING,
            status: FALSE,
            reason: cma::REASON_COMPLETED,
            message: format!(
                "selected clusters {selected}. configured addons {done}/{configured} completed with no errors, {failed} failed {timed_out} timeout."
            ),
            observed_generation: None,
        }
    };
    conditions::set(&mut progression.conditions, condition, now) || changed
}

#[cfg(test)]
mod tests {
    use flotilla_api::addon::v1beta1::{ConfigReferent, ConfigSpecHash, InstallConfigReference};
    use flotilla_api::work::v1::{ManifestWorkSpec, ManifestWorkStatus};
    use rstest::rstest;

    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn cond(type_: &str, status: &str, reason: &str, generation: Option<i64>) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: generation,
            last_transition_time: Time(at(100)),
        }
    }

    fn work(name: &str, annotation: Option<&str>, generation: i64, status: Vec<Condition>) -> ManifestWork {
        let mut work = ManifestWork::new(name, ManifestWorkSpec::default());
        work.metadata.generation = Some(generation);
        work.metadata.labels = Some(
            [(
                flotilla_api::addon::consts::ADDON_NAME_LABEL.to_owned(),
                "hello".to_owned(),
            )]
            .into(),
        );
        work.metadata.annotations =
            annotation.map(|a| [(CONFIG_SPEC_HASH_ANNOTATION.to_owned(), a.to_owned())].into());
        work.status = Some(ManifestWorkStatus {
            conditions: status,
            ..Default::default()
        });
        work
    }

    fn ready(generation: i64) -> Vec<Condition> {
        vec![
            cond("Applied", "True", "r", Some(generation)),
            cond("Available", "True", "r", Some(generation)),
        ]
    }

    fn reference(name: &str, desired: &str, applied: Option<&str>) -> ConfigReference {
        let hash = |h: &str| ConfigSpecHash {
            referent: ConfigReferent {
                namespace: "ns".into(),
                name: name.into(),
            },
            spec_hash: h.into(),
        };
        ConfigReference {
            group_resource: ConfigGroupResource {
                group: "addon.open-cluster-management.io".into(),
                resource: "addondeploymentconfigs".into(),
            },
            last_observed_generation: 1,
            desired_config: Some(hash(desired)),
            last_applied_config: applied.map(hash),
        }
    }

    const ANNOTATION: &str = r#"{"addondeploymentconfigs.addon.open-cluster-management.io/ns/a":"h1"}"#;

    #[rstest]
    #[case::applied(Some("True"), None, Some(("True", "AddonManifestApplied")))]
    #[case::failed(Some("False"), None, Some(("False", "AddonManifestAppliedFailed")))]
    #[case::unreported_clears_stale_false(None, Some("False"), None)]
    #[case::unreported_keeps_true(None, Some("True"), Some(("True", "AddonManifestApplied")))]
    #[case::unreported_adds_nothing(None, None, None)]
    fn manifest_applied_follows_the_works(
        #[case] work_applied: Option<&str>,
        #[case] current: Option<&str>,
        #[case] expected: Option<(&str, &str)>,
    ) {
        let status = work_applied
            .map(|s| vec![cond("Applied", s, "x", Some(1))])
            .unwrap_or_default();
        let mut conditions: Vec<Condition> = current
            .map(|s| {
                let reason = if s == "True" {
                    "AddonManifestApplied"
                } else {
                    "AddonManifestAppliedFailed"
                };
                vec![cond("ManifestApplied", s, reason, None)]
            })
            .unwrap_or_default();
        set_manifest_applied(
            &mut conditions,
            &[work("addon-hello-deploy-0", None, 1, status)],
            at(200),
        );
        let found =
            conditions::find(&conditions, "ManifestApplied").map(|c| (c.status.as_str(), c.reason.as_str()));
        assert_eq!(found, expected);
    }

    #[test]
    fn a_render_failure_says_why() {
        let c = manifests_not_rendered("plugin trapped");
        assert_eq!((c.status, c.reason), ("False", "ManifestWorkApplyFailed"));
        assert_eq!(
            c.message,
            "failed to get manifest from agent interface: plugin trapped"
        );
    }

    /// Status, reason, message and completion of a `Progressing` outcome.
    type Outcome = (String, String, String, bool);

    fn progressing_of(
        unsupported: Option<&ConfigGroupResource>,
        conditions: &[Condition],
        works: &[ManifestWork],
        references: &[ConfigReference],
    ) -> Outcome {
        let p = progressing(ProgressingInput {
            addon_name: "hello",
            unsupported,
            conditions,
            hosted: false,
            works,
            config_references: references,
            plugin_revision: None,
        });
        (
            p.condition.status.into(),
            p.condition.reason.into(),
            p.condition.message,
            p.completed,
        )
    }

    #[test]
    fn a_work_rendered_by_another_plugin_revision_is_still_progressing() {
        let applied = vec![cond("ManifestApplied", "True", "AddonManifestApplied", None)];
        let mut good = work("addon-hello-deploy-0", None, 2, ready(2));
        let outcome = |work: &ManifestWork, released| {
            let p = progressing(ProgressingInput {
                addon_name: "hello",
                unsupported: None,
                conditions: &applied,
                hosted: false,
                works: std::slice::from_ref(work),
                config_references: &[],
                plugin_revision: released,
            });
            (p.condition.reason, p.completed)
        };
        assert_eq!(
            outcome(&good, None),
            ("Completed", true),
            "nothing released: no check"
        );
        assert_eq!(outcome(&good, Some("b")), ("Progressing", false));
        good.metadata.annotations = Some(BTreeMap::from([(
            super::super::revision::WORK_REVISION_ANNOTATION.to_owned(),
            "a".to_owned(),
        )]));
        assert_eq!(outcome(&good, Some("b")), ("Progressing", false));
        assert_eq!(outcome(&good, Some("a")), ("Completed", true));
    }

    #[test]
    fn progressing_follows_ocm_rules_in_order() {
        let applied = vec![cond("ManifestApplied", "True", "AddonManifestApplied", None)];
        let refs = vec![reference("a", "h1", None)];
        let good = work("addon-hello-deploy-0", Some(ANNOTATION), 2, ready(2));
        let gr = ConfigGroupResource {
            group: "".into(),
            resource: "configmaps".into(),
        };

        let cases: Vec<(&str, Outcome)> = vec![
            (
                "unsupported",
                progressing_of(Some(&gr), &applied, std::slice::from_ref(&good), &refs),
            ),
            (
                "waiting",
                progressing_of(None, &[], std::slice::from_ref(&good), &refs),
            ),
            ("no works", progressing_of(None, &applied, &[], &refs)),
            (
                "mismatch",
                progressing_of(
                    None,
                    &applied,
                    &[work("addon-hello-deploy-0", Some("{}"), 2, ready(2))],
                    &refs,
                ),
            ),
            (
                "stale generation",
                progressing_of(
                    None,
                    &applied,
                    &[work("addon-hello-deploy-0", Some(ANNOTATION), 3, ready(2))],
                    &refs,
                ),
            ),
            (
                "pre-delete work ignored",
                progressing_of(
                    None,
                    &applied,
                    &[good.clone(), work("addon-hello-pre-delete", None, 1, vec![])],
                    &refs,
                ),
            ),
            ("completed", progressing_of(None, &applied, &[good], &refs)),
        ];
        let expected = [
            (
                "False",
                "ConfigurationUnsupported",
                "Configuration with gvr /configmaps is not supported for this addon",
                false,
            ),
            (
                "False",
                "WaitingForManifestApplied",
                "Waiting for ManagedClusterAddOn ManifestApplied condition",
                false,
            ),
            ("True", "Progressing", "progressing... no addon works", false),
            (
                "True",
                "Progressing",
                "progressing... mca and work configs mismatch",
                false,
            ),
            ("True", "Progressing", "progressing... work is not ready", false),
            ("False", "Completed", "completed with no errors.", true),
            ("False", "Completed", "completed with no errors.", true),
        ];
        for ((name, got), want) in cases.into_iter().zip(expected) {
            assert_eq!(
                got,
                (want.0.to_owned(), want.1.to_owned(), want.2.to_owned(), want.3),
                "case {name}"
            );
        }
    }

    #[rstest]
    #[case::same(Some(ANNOTATION), vec![reference("a", "h1", None)], true)]
    #[case::other_hash(Some(ANNOTATION), vec![reference("a", "h2", None)], false)]
    #[case::empty_desired_hash(Some(r#"{"addondeploymentconfigs.addon.open-cluster-management.io/ns/a":""}"#), vec![reference("a", "", None)], false)]
    #[case::no_annotation_no_configs(None, vec![], true)]
    #[case::no_annotation_with_configs(None, vec![reference("a", "h1", None)], false)]
    #[case::unparseable(Some("nope"), vec![], false)]
    fn work_annotations_are_compared_with_the_config_references(
        #[case] annotation: Option<&str>,
        #[case] references: Vec<ConfigReference>,
        #[case] matches: bool,
    ) {
        assert_eq!(
            work_configs_match(&work("w", annotation, 1, vec![]), &references),
            matches
        );
    }

    #[test]
    fn completing_sets_last_applied_to_desired() {
        let mut refs = vec![reference("a", "h2", Some("h1"))];
        mark_applied(&mut refs);
        assert_eq!(refs[0].last_applied_config, refs[0].desired_config);
    }

    #[rstest]
    #[case::nothing_released(vec![reference("a", "h1", None)], vec![], None, RolloutState::ToApply, false)]
    #[case::hash_changed(vec![reference("a", "h2", None)], vec![reference("a", "h1", Some("h1"))], None, RolloutState::ToApply, false)]
    #[case::other_config(vec![reference("b", "h1", None)], vec![reference("a", "h1", Some("h1"))], None, RolloutState::ToApply, false)]
    #[case::released_progressing(vec![reference("a", "h2", None)], vec![reference("a", "h2", Some("h1"))], Some("Progressing"), RolloutState::Progressing, true)]
    #[case::released_failed(vec![reference("a", "h2", None)], vec![reference("a", "h2", Some("h1"))], Some("Failed"), RolloutState::Failed, true)]
    #[case::released_waiting(vec![reference("a", "h2", None)], vec![reference("a", "h2", None)], Some("WaitingForManifestApplied"), RolloutState::Progressing, false)]
    #[case::applied(vec![reference("a", "h2", None)], vec![reference("a", "h2", Some("h2"))], Some("Completed"), RolloutState::Succeeded, true)]
    #[case::no_configs(vec![], vec![], None, RolloutState::Succeeded, false)]
    fn rollout_state_follows_ocm(
        #[case] desired: Vec<ConfigReference>,
        #[case] status: Vec<ConfigReference>,
        #[case] reason: Option<&str>,
        #[case] state: RolloutState,
        #[case] has_time: bool,
    ) {
        let conditions: Vec<Condition> = reason
            .map(|r| vec![cond("Progressing", "True", r, None)])
            .unwrap_or_default();
        let got = rollout_status(&desired, &status, &conditions);
        assert_eq!(got.state, state);
        assert_eq!(got.since.is_some(), has_time);
    }

    #[rstest]
    #[case::no_hooks(false, false, true, HookStep::RemoveFinalizer)]
    #[case::first_sight(true, false, false, HookStep::AddFinalizer)]
    #[case::alive(true, true, false, HookStep::Wait)]
    #[case::deleting(true, true, true, HookStep::RunHooks)]
    fn hook_steps_follow_ocm(
        #[case] hooks: bool,
        #[case] finalizer: bool,
        #[case] deleting: bool,
        #[case] step: HookStep,
    ) {
        let finalizers: Vec<String> = finalizer
            .then(|| ADDON_PRE_DELETE_FINALIZER.to_owned())
            .into_iter()
            .collect();
        assert_eq!(hook_step(hooks, &finalizers, deleting), step);
    }

    #[test]
    fn pre_delete_finalizers_drop_deprecated_forms() {
        let old = vec![ADDON_PRE_DELETE_FINALIZER_OLD.to_owned(), "other".to_owned()];
        assert_eq!(
            with_pre_delete_finalizer(&old),
            Some(vec!["other".to_owned(), ADDON_PRE_DELETE_FINALIZER.to_owned()])
        );
        let current = vec![ADDON_PRE_DELETE_FINALIZER.to_owned(), "other".to_owned()];
        assert_eq!(with_pre_delete_finalizer(&current), None);
        assert_eq!(
            without_pre_delete_finalizer(&current),
            Some(vec!["other".to_owned()])
        );
        assert_eq!(without_pre_delete_finalizer(&["other".to_owned()]), None);
        let c = hook_manifest_completed("addon-hello-pre-delete", true);
        assert_eq!(
            (c.reason, c.message.as_str()),
            (
                "HookManifestIsCompleted",
                "hook manifestWork addon-hello-pre-delete is completed."
            )
        );
    }

    fn progression() -> InstallProgression {
        let desired = reference("a", "h2", None).desired_config;
        InstallProgression {
            config_references: vec![InstallConfigReference {
                group_resource: reference("a", "h2", None).group_resource,
                desired_config: desired,
                last_known_good_config: None,
                last_applied_config: None,
            }],
            ..Default::default()
        }
    }

    #[rstest]
    #[case::nothing_configured(InstallCounts { selected: 0, ..Default::default() },
        "True", "selected clusters 0. configured addons 0/0 progressing..., 0 failed 0 timeout.")]
    #[case::rolling(InstallCounts { progressing: 2, succeeded: 1, failed: 1, timed_out: 0, selected: 5, configured: 4 },
        "True", "selected clusters 5. configured addons 3/4 progressing..., 1 failed 0 timeout.")]
    #[case::done(InstallCounts { progressing: 0, succeeded: 4, failed: 0, timed_out: 0, selected: 5, configured: 4 },
        "False", "selected clusters 5. configured addons 4/4 completed with no errors, 0 failed 0 timeout.")]
    fn install_progressions_use_ocm_messages(
        #[case] counts: InstallCounts,
        #[case] status: &str,
        #[case] message: &str,
    ) {
        let mut p = progression();
        assert!(set_install_progression(&mut p, counts, at(10)));
        let c = conditions::find(&p.conditions, "Progressing").unwrap();
        assert_eq!((c.status.as_str(), c.message.as_str()), (status, message));
        let r = &p.config_references[0];
        let done = status == "False";
        assert_eq!(r.last_applied_config == r.desired_config, done);
        assert_eq!(r.last_known_good_config == r.desired_config, done);
        assert!(
            !set_install_progression(&mut p, counts, at(20)),
            "a second identical pass changes nothing"
        );
    }

    #[test]
    fn install_counts_count_settled_add_ons_only_on_placement_configs() {
        let addon = |state, in_batch, inherits| PlacementAddon {
            state,
            in_batch,
            inherits_placement_configs: inherits,
        };
        let addons = [
            addon(RolloutState::Succeeded, false, true),
            addon(RolloutState::Succeeded, false, false),
            addon(RolloutState::Succeeded, true, true),
            addon(RolloutState::Failed, false, true),
            addon(RolloutState::ToApply, true, true),
        ];
        assert_eq!(
            install_counts(&addons, 1, 6, 5),
            InstallCounts {
                progressing: 2,
                succeeded: 1,
                failed: 1,
                timed_out: 1,
                selected: 6,
                configured: 5,
            }
        );
    }

    #[rstest]
    #[case::released(RolloutState::ToApply, true, true, Some("True"))]
    #[case::waiting(RolloutState::ToApply, false, false, Some("False"))]
    #[case::done(RolloutState::Succeeded, false, false, Some("True"))]
    #[case::progressing_untouched(RolloutState::Progressing, false, false, None)]
    #[case::failed_untouched(RolloutState::Failed, false, false, None)]
    fn configs_reach_the_add_on_only_when_released(
        #[case] state: RolloutState,
        #[case] in_batch: bool,
        #[case] written: bool,
        #[case] configured_status: Option<&str>,
    ) {
        let status = AddonRolloutStatus { state, since: None };
        let desired = vec![reference("a", "h2", None)];
        let update = configuration_update(&status, in_batch, &[reference("a", "h1", Some("h1"))], &desired);
        assert_eq!(update.references.is_some(), written);
        if let Some(refs) = update.references {
            assert_eq!(refs, vec![reference("a", "h2", Some("h1"))]);
        }
        assert_eq!(update.configured.map(|c| c.status), configured_status);
    }
}
