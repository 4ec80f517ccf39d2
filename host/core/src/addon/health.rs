//! Pure decisions about an add-on's health: the ManagedClusterAddOn `Available` condition, its
//! `status.healthCheck.mode`, and the `feature.open-cluster-management.io/addon-<name>` cluster
//! label that mirrors it.
//!
//! ```text
//!  prober (plugin describe)  mode        who decides Available
//!  lease (default) ────────▶ Lease ────▶ klusterlet: Lease <addon> in the install namespace
//!                                        (hub cluster namespace as fallback) ▶ lease_verdict
//!  work (no fields) ───────▶ Customized ▶ hub: True WorkApplied
//!  customized(fields) ─────▶ Customized ▶ hub: works' feedback ▶ plugin probe-health
//!  deployment-/workload- ──▶ Customized ▶ hub: works' feedback ▶ workload_check
//!    availability
//!  none ───────────────────▶ Customized ▶ the add-on itself
//! ```
//!
//! The rules, reasons and messages are those of OCM's registration agent (add-on lease
//! controller), its hub (add-on feature discovery) and addon-framework's health check syncer
//! (`shared/design/ocm-reference.md` §5 "Health"), so tools reading the conditions or the
//! cluster labels see what they see with OCM.

use std::collections::BTreeMap;
use std::time::Duration;

use flotilla_api::addon::consts::{
    DEFAULT_INSTALL_NAMESPACE, V1ALPHA1_INSTALL_NAMESPACE_ANNOTATION, managed_cluster_addon as mca,
};
use flotilla_api::addon::v1alpha1::{HealthCheckMode, ManagedClusterAddOn};
use flotilla_api::cluster::consts::managed_cluster::CONDITION_AVAILABLE as CLUSTER_AVAILABLE;
use flotilla_api::work::consts::manifest_work::CONDITION_AVAILABLE as WORK_AVAILABLE;
use flotilla_api::work::v1::{FeedbackValue, ManifestCondition, ManifestWork, ResourceIdentifier};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;

use crate::addon::works::{deploy_work_index, work_objects};
use crate::conditions::{self, FALSE, NewCondition, TRUE, UNKNOWN};

/// How many lease periods may pass without a renewal before the add-on counts as stopped (OCM's
/// `leaseDurationTimes`).
pub const LEASE_GRACE_PERIODS: u32 = 5;
/// The period an add-on agent renews its lease at (OCM's
/// `AddOnLeaseControllerLeaseDurationSeconds`).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(60);
/// Prefix of the cluster label that mirrors each add-on's health.
pub const FEATURE_LABEL_PREFIX: &str = "feature.open-cluster-management.io/addon-";
/// Label value of an add-on whose `Available` is True.
pub const FEATURE_AVAILABLE: &str = "available";
/// Label value of an add-on whose `Available` is False.
pub const FEATURE_UNHEALTHY: &str = "unhealthy";
/// Label value of an add-on whose `Available` is Unknown or missing.
pub const FEATURE_UNREACHABLE: &str = "unreachable";

/// How an add-on's health is probed: the host's view of the plugin's `describe` health mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prober {
    /// The agent renews Lease `<addon>`; the klusterlet decides.
    Lease,
    /// Available once the deploy works exist (OCM's Work prober without a WorkProber).
    Work,
    /// Feedback of these objects (`*` wildcards in name and namespace) goes to the plugin's
    /// `probe-health`.
    Fields(Vec<ResourceIdentifier>),
    /// Every Deployment in the deploy works with a non-zero replica count must have a ready
    /// replica.
    DeploymentAvailability,
    /// As [`Prober::DeploymentAvailability`], and every DaemonSet fully ready.
    WorkloadAvailability,
    /// The add-on sets `Available` itself.
    None,
}

/// `status.healthCheck.mode` for a prober: Lease only for the lease prober (addon-framework).
pub fn health_check_mode(prober: &Prober) -> HealthCheckMode {
    match prober {
        Prober::Lease => HealthCheckMode::Lease,
        _ => HealthCheckMode::Customized,
    }
}

/// Whether the klusterlet judges this add-on by its lease: every mode but Customized (unset
/// means Lease).
pub fn uses_lease(addon: &ManagedClusterAddOn) -> bool {
    addon
        .status
        .as_ref()
        .and_then(|s| s.health_check.mode)
        .unwrap_or_default()
        == HealthCheckMode::Lease
}

/// The namespace the add-on's agent runs in on the managed cluster: `status.namespace`, else the
/// v1alpha1 `spec.installNamespace` (or its v1beta1 annotation), else
/// `open-cluster-management-agent-addon`.
pub fn install_namespace(addon: &ManagedClusterAddOn) -> String {
    let status = addon.status.as_ref().map(|s| s.namespace.as_str());
    let annotation = addon
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(V1ALPHA1_INSTALL_NAMESPACE_ANNOTATION))
        .map(String::as_str);
    [status, Some(addon.spec.install_namespace.as_str()), annotation]
        .into_iter()
        .flatten()
        .find(|n| !n.is_empty())
        .unwrap_or(DEFAULT_INSTALL_NAMESPACE)
        .to_owned()
}

/// What the klusterlet found of an add-on's lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseSeen {
    /// No Lease `<addon>` where it was looked for.
    Missing,
    /// The lease, with its `spec.renewTime` (None when never renewed).
    Found(Option<Timestamp>),
}

/// The `Available` condition from a lease, and when it must be judged again without any
/// change: the moment a fresh lease would go stale.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseVerdict {
    /// The condition to set.
    pub condition: NewCondition<'static>,
    /// Time until a fresh lease goes stale; None when nothing changes without a write.
    pub recheck_in: Option<Duration>,
}

/// Judges add-on `addon` by its lease at `now`: renewed within `LEASE_GRACE_PERIODS ×
/// lease_duration` ⇒ True `ManagedClusterAddOnLeaseUpdated`; older (or never renewed) ⇒ False
/// `ManagedClusterAddOnLeaseUpdateStopped`; missing ⇒ Unknown `ManagedClusterAddOnLeaseNotFound`.
pub fn lease_verdict(addon: &str, seen: LeaseSeen, lease_duration: Duration, now: Timestamp) -> LeaseVerdict {
    let grace = lease_duration.saturating_mul(LEASE_GRACE_PERIODS);
    let available = |status, reason, message| NewCondition {
        type_: mca::CONDITION_AVAILABLE,
        status,
        reason,
        message,
        observed_generation: None,
    };
    match seen {
        LeaseSeen::Missing => LeaseVerdict {
            condition: available(
                UNKNOWN,
                mca::REASON_LEASE_NOT_FOUND,
                format!("The status of {addon} add-on is unknown."),
            ),
            recheck_in: None,
        },
        LeaseSeen::Found(renewed) => {
            let left = renewed.and_then(|renewed| {
                let age = Duration::try_from(now.duration_since(renewed)).unwrap_or(Duration::ZERO);
                grace.checked_sub(age).filter(|left| !left.is_zero())
            });
            match left {
                Some(left) => LeaseVerdict {
                    condition: available(
                        TRUE,
                        mca::REASON_LEASE_UPDATED,
                        format!("{addon} add-on is available."),
                    ),
                    recheck_in: Some(left),
                },
                None => LeaseVerdict {
                    condition: available(
                        FALSE,
                        mca::REASON_LEASE_UPDATE_STOPPED,
                        format!("{addon} add-on is not available."),
                    ),
                    recheck_in: None,
                },
            }
        }
    }
}

/// The feature label value for an add-on with these conditions.
pub fn feature_label_value(addon_conditions: &[Condition]) -> &'static str {
    match conditions::find(addon_conditions, mca::CONDITION_AVAILABLE).map(|c| c.status.as_str()) {
        Some(TRUE) => FEATURE_AVAILABLE,
        Some(FALSE) => FEATURE_UNHEALTHY,
        _ => FEATURE_UNREACHABLE,
    }
}

/// One add-on of a cluster as the feature labels see it.
#[derive(Clone, Copy, Debug)]
pub struct AddonHealth<'a> {
    /// Add-on name.
    pub name: &'a str,
    /// Being deleted (its label goes).
    pub deleting: bool,
    /// Its conditions.
    pub conditions: &'a [Condition],
}

/// The label changes that bring a cluster's feature labels in step with its add-ons: a label
/// per live add-on, none for add-ons that are gone or being deleted (`None` = remove). Empty
/// when nothing changes. Nothing is written while the cluster has no `Available` condition
/// (not reporting yet), as in OCM.
pub fn feature_label_changes(
    cluster_labels: &BTreeMap<String, String>,
    cluster_conditions: &[Condition],
    addons: &[AddonHealth<'_>],
) -> BTreeMap<String, Option<String>> {
    let mut changes = BTreeMap::new();
    if conditions::find(cluster_conditions, CLUSTER_AVAILABLE).is_none() {
        return changes;
    }
    let desired: BTreeMap<String, &str> = addons
        .iter()
        .filter(|a| !a.deleting)
        .map(|a| {
            (
                format!("{FEATURE_LABEL_PREFIX}{}", a.name),
                feature_label_value(a.conditions),
            )
        })
        .collect();
    for (key, value) in &desired {
        if cluster_labels.get(key).map(String::as_str) != Some(*value) {
            changes.insert(key.clone(), Some((*value).to_owned()));
        }
    }
    for key in cluster_labels.keys() {
        if key.starts_with(FEATURE_LABEL_PREFIX) && !desired.contains_key(key) {
            changes.insert(key.clone(), None);
        }
    }
    changes
}

/// Status feedback of one probed object.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldResult {
    /// The object, as the work agent reported it.
    pub resource: ResourceIdentifier,
    /// Its feedback values (never empty).
    pub values: Vec<FeedbackValue>,
}

/// What the hub does with `Available` for a work-based prober.
#[derive(Clone, Debug, PartialEq)]
pub enum Assessment {
    /// Leave `Available` as it is.
    Keep,
    /// Set this condition.
    Set(NewCondition<'static>),
    /// The feedback is in: the prober's checker decides (the plugin for
    /// [`Prober::Fields`], [`workload_check`] otherwise).
    Check(Vec<FieldResult>),
}

fn available(status: &'static str, reason: &'static str, message: String) -> NewCondition<'static> {
    NewCondition {
        type_: mca::CONDITION_AVAILABLE,
        status,
        reason,
        message,
        observed_generation: None,
    }
}

/// addon-framework's health check for the hub-side probers, up to the checker: nothing for
/// Lease and None; True `WorkApplied` for Work; for probers reading feedback, nothing before
/// `ManifestApplied` exists or while the cluster is Unknown (the hub marks add-ons Unknown
/// then), Unknown `WorkNotFound` without deploy works, Unknown/False `WorkNotApplied` while a
/// deploy work is not Available, Unknown `NoProbeResult` when no probed object has feedback yet.
pub fn assess(
    addon: &str,
    prober: &Prober,
    addon_conditions: &[Condition],
    cluster_conditions: &[Condition],
    works: &[impl std::borrow::Borrow<ManifestWork>],
) -> Assessment {
    match prober {
        Prober::Lease | Prober::None => return Assessment::Keep,
        Prober::Work => {
            return Assessment::Set(available(
                TRUE,
                mca::REASON_WORK_APPLIED,
                "Addon manifestWork is applied".to_owned(),
            ));
        }
        Prober::Fields(_) | Prober::DeploymentAvailability | Prober::WorkloadAvailability => {}
    }
    if conditions::find(addon_conditions, mca::CONDITION_MANIFEST_APPLIED).is_none()
        || conditions::find(cluster_conditions, CLUSTER_AVAILABLE).is_some_and(|c| c.status == UNKNOWN)
    {
        return Assessment::Keep;
    }
    let deploy: Vec<&ManifestWork> = works
        .iter()
        .map(std::borrow::Borrow::borrow)
        .filter(|w: &&ManifestWork| {
            w.metadata
                .name
                .as_deref()
                .is_some_and(|n| deploy_work_index(addon, n).is_some())
        })
        .collect();
    if deploy.is_empty() {
        return Assessment::Set(available(
            UNKNOWN,
            mca::REASON_WORK_NOT_FOUND,
            "Addon manifestWork is not found".to_owned(),
        ));
    }
    let mut manifests: Vec<&ManifestCondition> = Vec::new();
    for work in &deploy {
        let status = work.status.as_ref();
        let work_conditions = status.map(|s| s.conditions.as_slice()).unwrap_or_default();
        match conditions::find(work_conditions, WORK_AVAILABLE) {
            None => {
                return Assessment::Set(available(
                    UNKNOWN,
                    mca::REASON_WORK_NOT_APPLIED,
                    "Addon manifestWork is not applied yet".to_owned(),
                ));
            }
            Some(c) if c.status == FALSE => {
                return Assessment::Set(available(FALSE, mca::REASON_WORK_NOT_APPLIED, c.message.clone()));
            }
            Some(_) => {}
        }
        manifests.extend(status.iter().flat_map(|s| s.resource_status.manifests.iter()));
    }
    let fields = probe_fields(prober, &deploy);
    let results: Vec<FieldResult> = fields
        .iter()
        .flat_map(|field| {
            manifests
                .iter()
                .filter(move |m| matches(m, field) && !m.status_feedbacks.values.is_empty())
                .map(|m| FieldResult {
                    resource: ResourceIdentifier {
                        group: m.resource_meta.group.clone(),
                        resource: m.resource_meta.resource.clone(),
                        name: m.resource_meta.name.clone(),
                        namespace: m.resource_meta.namespace.clone(),
                    },
                    values: m.status_feedbacks.values.clone(),
                })
        })
        .collect();
    if !fields.is_empty() && results.is_empty() {
        return Assessment::Set(available(
            UNKNOWN,
            mca::REASON_NO_PROBE_RESULT,
            "Probe results are not returned".to_owned(),
        ));
    }
    Assessment::Check(results)
}

/// The objects a prober reads: its own fields, or the workloads in the deploy works
/// (Deployments asking for zero replicas are skipped; a missing count means one).
fn probe_fields(prober: &Prober, works: &[&ManifestWork]) -> Vec<ResourceIdentifier> {
    let daemonsets = match prober {
        Prober::Fields(fields) => return fields.clone(),
        Prober::DeploymentAvailability => false,
        Prober::WorkloadAvailability => true,
        Prober::Lease | Prober::Work | Prober::None => return Vec::new(),
    };
    let mut fields = Vec::new();
    for object in works.iter().flat_map(|w| work_objects(w)) {
        if object.group() != "apps" {
            continue;
        }
        let resource = match object.kind.as_str() {
            "Deployment" if object.replicas != Some(0) => "deployments",
            "DaemonSet" if daemonsets => "daemonsets",
            _ => continue,
        };
        fields.push(ResourceIdentifier {
            group: "apps".to_owned(),
            resource: resource.to_owned(),
            name: object.name,
            namespace: object.namespace,
        });
    }
    fields
}

/// Whether a manifest's status belongs to a probe field (`*` wildcards in name and namespace).
fn matches(manifest: &ManifestCondition, field: &ResourceIdentifier) -> bool {
    let meta = &manifest.resource_meta;
    meta.group == field.group
        && meta.resource == field.resource
        && wildcard_match(&meta.namespace, &field.namespace)
        && wildcard_match(&meta.name, &field.name)
}

/// addon-framework's wildcard match: `*` stands for any run of characters and everything else
/// is literal. Hand-written because glob crates also give `?` and `[` meanings, which OCM's
/// probe fields do not have.
fn wildcard_match(value: &str, pattern: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = value.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// addon-framework's workload availability check over the feedback: a Deployment is healthy
/// with zero desired replicas or at least one ready; a DaemonSet when every scheduled pod is
/// ready. The error says which object is not, in OCM's words.
pub fn workload_check(results: &[FieldResult]) -> Result<(), String> {
    for result in results {
        let id = &result.resource;
        if id.resource != "deployments" && id.resource != "daemonsets" {
            return Err(format!("unsupported resource type {}", id.resource));
        }
        if id.group != "apps" {
            return Err(format!("unsupported resource group {}", id.group));
        }
        let value = |names: [&str; 2]| {
            result
                .values
                .iter()
                .filter(|v| names.contains(&v.name.as_str()))
                .filter_map(|v| v.value.integer)
                .next_back()
        };
        let Some(ready) = value(["ReadyReplicas", "NumberReady"]) else {
            return Err("readyReplica is not probed".to_owned());
        };
        let Some(desired) = value(["Replicas", "DesiredNumberScheduled"]) else {
            return Err("desiredNumberReplicas is not probed".to_owned());
        };
        let healthy = match id.resource.as_str() {
            "deployments" => desired == 0 || ready >= 1,
            _ => ready == desired,
        };
        if !healthy {
            return Err(format!(
                "desiredNumberReplicas is {desired} but readyReplica is {ready} for {} {}/{}",
                id.resource, id.namespace, id.name
            ));
        }
    }
    Ok(())
}

/// A checker's verdict on the feedback.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Healthy.
    Available,
    /// Unhealthy, with why.
    Unavailable(String),
    /// No verdict (the plugin said unknown, or failed), with why.
    Unknown(String),
}

/// `Available` from a checker's verdict: True `ProbeAvailable`, False `ProbeUnavailable`, or
/// Unknown `NoProbeResult` (no verdict, which includes a plugin fault — never Available).
pub fn probe_condition(addon: &str, verdict: Verdict) -> NewCondition<'static> {
    match verdict {
        Verdict::Available => available(
            TRUE,
            mca::REASON_PROBE_AVAILABLE,
            format!("{addon} add-on is available."),
        ),
        Verdict::Unavailable(why) => available(
            FALSE,
            mca::REASON_PROBE_UNAVAILABLE,
            format!("Probe addon unavailable with err {why}"),
        ),
        Verdict::Unknown(why) => available(UNKNOWN, mca::REASON_NO_PROBE_RESULT, why),
    }
}

#[cfg(test)]
mod tests {
    use flotilla_api::work::v1::{
        FieldValue, ManifestResourceMeta, ManifestResourceStatus, ManifestWorkSpec, ManifestWorkStatus,
        ManifestsTemplate, StatusFeedbackResult, ValueType,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use rstest::rstest;
    use serde_json::Value;

    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn condition(type_: &str, status: &str) -> Condition {
        Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: "R".to_owned(),
            message: "work failed".to_owned(),
            observed_generation: None,
            last_transition_time: Time(at(0)),
        }
    }

    #[rstest]
    #[case::fresh_lease_is_available(
        LeaseSeen::Found(Some(at(1000))),
        1010,
        TRUE,
        mca::REASON_LEASE_UPDATED,
        Some(290)
    )]
    #[case::lease_just_renewed_waits_five_periods(
        LeaseSeen::Found(Some(at(1000))),
        1000,
        TRUE,
        mca::REASON_LEASE_UPDATED,
        Some(300)
    )]
    #[case::lease_at_the_grace_limit_is_stopped(
        LeaseSeen::Found(Some(at(1000))),
        1300,
        FALSE,
        mca::REASON_LEASE_UPDATE_STOPPED,
        None
    )]
    #[case::old_lease_is_stopped(
        LeaseSeen::Found(Some(at(1000))),
        5000,
        FALSE,
        mca::REASON_LEASE_UPDATE_STOPPED,
        None
    )]
    #[case::lease_never_renewed_is_stopped(
        LeaseSeen::Found(None),
        1000,
        FALSE,
        mca::REASON_LEASE_UPDATE_STOPPED,
        None
    )]
    #[case::lease_renewed_ahead_of_the_clock_is_available(
        LeaseSeen::Found(Some(at(1100))),
        1000,
        TRUE,
        mca::REASON_LEASE_UPDATED,
        Some(300)
    )]
    #[case::missing_lease_is_unknown(LeaseSeen::Missing, 1000, UNKNOWN, mca::REASON_LEASE_NOT_FOUND, None)]
    fn lease_verdicts_follow_ocm_with_five_periods_of_grace(
        #[case] seen: LeaseSeen,
        #[case] now: i64,
        #[case] status: &str,
        #[case] reason: &str,
        #[case] recheck: Option<u64>,
    ) {
        let verdict = lease_verdict("helloworld", seen, DEFAULT_LEASE_DURATION, at(now));
        assert_eq!(verdict.condition.type_, mca::CONDITION_AVAILABLE);
        assert_eq!(
            (verdict.condition.status, verdict.condition.reason),
            (status, reason)
        );
        assert_eq!(verdict.recheck_in, recheck.map(Duration::from_secs));
    }

    #[test]
    fn lease_grace_scales_with_the_lease_duration() {
        let seen = LeaseSeen::Found(Some(at(1000)));
        let verdict = lease_verdict("a", seen, Duration::from_secs(1), at(1004));
        assert_eq!(verdict.condition.status, TRUE);
        assert_eq!(verdict.recheck_in, Some(Duration::from_secs(1)));
        assert_eq!(
            lease_verdict("a", seen, Duration::from_secs(1), at(1005))
                .condition
                .status,
            FALSE
        );
    }

    #[rstest]
    #[case::status_namespace_first(Some("status-ns"), "spec-ns", Some("anno-ns"), "status-ns")]
    #[case::then_the_v1alpha1_spec(None, "spec-ns", Some("anno-ns"), "spec-ns")]
    #[case::then_the_annotation(None, "", Some("anno-ns"), "anno-ns")]
    #[case::else_the_default(None, "", None, DEFAULT_INSTALL_NAMESPACE)]
    fn install_namespace_follows_ocm_precedence(
        #[case] status: Option<&str>,
        #[case] spec: &str,
        #[case] annotation: Option<&str>,
        #[case] expected: &str,
    ) {
        let mut addon = ManagedClusterAddOn::new("a", Default::default());
        addon.spec.install_namespace = spec.to_owned();
        if let Some(ns) = status {
            addon.status = Some(Default::default());
            addon.status.as_mut().unwrap().namespace = ns.to_owned();
        }
        if let Some(ns) = annotation {
            addon.metadata.annotations =
                Some([(V1ALPHA1_INSTALL_NAMESPACE_ANNOTATION.to_owned(), ns.to_owned())].into());
        }
        assert_eq!(install_namespace(&addon), expected);
    }

    #[rstest]
    #[case::lease(Prober::Lease, HealthCheckMode::Lease)]
    #[case::work(Prober::Work, HealthCheckMode::Customized)]
    #[case::fields(Prober::Fields(vec![]), HealthCheckMode::Customized)]
    #[case::deployment(Prober::DeploymentAvailability, HealthCheckMode::Customized)]
    #[case::workload(Prober::WorkloadAvailability, HealthCheckMode::Customized)]
    #[case::none(Prober::None, HealthCheckMode::Customized)]
    fn only_the_lease_prober_uses_lease_mode(#[case] prober: Prober, #[case] mode: HealthCheckMode) {
        assert_eq!(health_check_mode(&prober), mode);
    }

    #[rstest]
    #[case::true_is_available(Some(TRUE), FEATURE_AVAILABLE)]
    #[case::false_is_unhealthy(Some(FALSE), FEATURE_UNHEALTHY)]
    #[case::unknown_is_unreachable(Some(UNKNOWN), FEATURE_UNREACHABLE)]
    #[case::missing_is_unreachable(None, FEATURE_UNREACHABLE)]
    fn feature_label_values_follow_available(#[case] status: Option<&str>, #[case] value: &str) {
        let conditions: Vec<Condition> = status
            .map(|s| condition(mca::CONDITION_AVAILABLE, s))
            .into_iter()
            .collect();
        assert_eq!(feature_label_value(&conditions), value);
    }

    #[test]
    fn feature_labels_are_added_updated_and_removed_in_step_with_addons() {
        let key = |n: &str| format!("{FEATURE_LABEL_PREFIX}{n}");
        let labels: BTreeMap<String, String> = [
            (key("same"), FEATURE_AVAILABLE.to_owned()),
            (key("moved"), FEATURE_AVAILABLE.to_owned()),
            (key("gone"), FEATURE_AVAILABLE.to_owned()),
            (key("deleting"), FEATURE_AVAILABLE.to_owned()),
            ("other".to_owned(), "x".to_owned()),
        ]
        .into();
        let cluster = [condition(CLUSTER_AVAILABLE, TRUE)];
        let up = [condition(mca::CONDITION_AVAILABLE, TRUE)];
        let down = [condition(mca::CONDITION_AVAILABLE, FALSE)];
        let addons = [
            AddonHealth {
                name: "same",
                deleting: false,
                conditions: &up,
            },
            AddonHealth {
                name: "moved",
                deleting: false,
                conditions: &down,
            },
            AddonHealth {
                name: "new",
                deleting: false,
                conditions: &[],
            },
            AddonHealth {
                name: "deleting",
                deleting: true,
                conditions: &up,
            },
        ];
        let changes = feature_label_changes(&labels, &cluster, &addons);
        let expected: BTreeMap<String, Option<String>> = [
            (key("moved"), Some(FEATURE_UNHEALTHY.to_owned())),
            (key("new"), Some(FEATURE_UNREACHABLE.to_owned())),
            (key("gone"), None),
            (key("deleting"), None),
        ]
        .into();
        assert_eq!(changes, expected);
        assert!(
            feature_label_changes(&labels, &[], &addons).is_empty(),
            "no Available: nothing written"
        );
    }

    fn int(name: &str, value: i64) -> FeedbackValue {
        FeedbackValue {
            name: name.to_owned(),
            value: FieldValue {
                type_: ValueType::Integer,
                integer: Some(value),
                ..Default::default()
            },
        }
    }

    fn deployment(name: &str, replicas: Option<i64>) -> Value {
        let mut object = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "ns"}, "spec": {}});
        if let Some(r) = replicas {
            object["spec"]["replicas"] = r.into();
        }
        object
    }

    fn work(
        name: &str,
        objects: Vec<Value>,
        available: Option<&str>,
        feedback: Vec<(&str, &str, Vec<FeedbackValue>)>,
    ) -> ManifestWork {
        let mut work = ManifestWork::new(name, ManifestWorkSpec::default());
        work.spec.workload = ManifestsTemplate {
            manifests: objects
                .into_iter()
                .map(|o| serde_json::from_value(o).unwrap())
                .collect(),
        };
        work.status = Some(ManifestWorkStatus {
            conditions: available
                .map(|s| condition(WORK_AVAILABLE, s))
                .into_iter()
                .collect(),
            resource_status: ManifestResourceStatus {
                manifests: feedback
                    .into_iter()
                    .map(|(resource, name, values)| ManifestCondition {
                        resource_meta: ManifestResourceMeta {
                            group: "apps".to_owned(),
                            resource: resource.to_owned(),
                            name: name.to_owned(),
                            namespace: "ns".to_owned(),
                            ..Default::default()
                        },
                        status_feedbacks: StatusFeedbackResult { values },
                        conditions: Vec::new(),
                    })
                    .collect(),
            },
        });
        work
    }

    fn agent_field() -> ResourceIdentifier {
        ResourceIdentifier {
            group: "apps".to_owned(),
            resource: "deployments".to_owned(),
            name: "agent".to_owned(),
            namespace: "ns".to_owned(),
        }
    }

    fn ready_feedback() -> Vec<(&'static str, &'static str, Vec<FeedbackValue>)> {
        vec![(
            "deployments",
            "agent",
            vec![int("Replicas", 1), int("ReadyReplicas", 1)],
        )]
    }

    enum Expect {
        Keep,
        Set(&'static str, &'static str),
        Check(usize),
    }

    #[rstest]
    #[case::lease_is_the_klusterlets_business(Prober::Lease, true, TRUE, vec![], Expect::Keep)]
    #[case::none_leaves_it_to_the_addon(Prober::None, true, TRUE, vec![], Expect::Keep)]
    #[case::work_without_fields_is_applied(Prober::Work, false, TRUE, vec![], Expect::Set(TRUE, mca::REASON_WORK_APPLIED))]
    #[case::nothing_before_manifest_applied(Prober::Fields(vec![agent_field()]), false, TRUE, vec![], Expect::Keep)]
    #[case::nothing_while_the_cluster_is_unknown(Prober::Fields(vec![agent_field()]), true, UNKNOWN, vec![], Expect::Keep)]
    #[case::no_deploy_work(Prober::Fields(vec![agent_field()]), true, TRUE,
        vec![work("other-work", vec![], Some(TRUE), ready_feedback())], Expect::Set(UNKNOWN, mca::REASON_WORK_NOT_FOUND))]
    #[case::work_not_reported_yet(Prober::Fields(vec![agent_field()]), true, TRUE,
        vec![work("addon-a-deploy-0", vec![], None, vec![])], Expect::Set(UNKNOWN, mca::REASON_WORK_NOT_APPLIED))]
    #[case::work_not_available(Prober::Fields(vec![agent_field()]), true, TRUE,
        vec![work("addon-a-deploy-0", vec![], Some(FALSE), vec![])], Expect::Set(FALSE, mca::REASON_WORK_NOT_APPLIED))]
    #[case::no_feedback_yet(Prober::Fields(vec![agent_field()]), true, TRUE,
        vec![work("addon-a-deploy-0", vec![], Some(TRUE), vec![("deployments", "agent", vec![])])],
        Expect::Set(UNKNOWN, mca::REASON_NO_PROBE_RESULT))]
    #[case::feedback_goes_to_the_checker(Prober::Fields(vec![agent_field()]), true, TRUE,
        vec![work("addon-a-deploy-0", vec![], Some(TRUE), ready_feedback())], Expect::Check(1))]
    #[case::wildcard_fields_match_every_object(Prober::Fields(vec![ResourceIdentifier { name: "*".into(), namespace: "*".into(), ..agent_field() }]),
        true, TRUE, vec![work("addon-a-deploy-0", vec![], Some(TRUE),
            vec![("deployments", "agent", vec![int("Replicas", 1)]), ("deployments", "other", vec![int("Replicas", 1)])])],
        Expect::Check(2))]
    #[case::deployments_come_from_the_works(Prober::DeploymentAvailability, true, TRUE,
        vec![work("addon-a-deploy-0", vec![deployment("agent", None)], Some(TRUE), ready_feedback())], Expect::Check(1))]
    #[case::zero_replica_deployments_are_not_probed(Prober::DeploymentAvailability, true, TRUE,
        vec![work("addon-a-deploy-0", vec![deployment("agent", Some(0))], Some(TRUE), ready_feedback())], Expect::Check(0))]
    #[case::a_deployment_without_feedback_has_no_result(Prober::WorkloadAvailability, true, TRUE,
        vec![work("addon-a-deploy-0", vec![deployment("agent", Some(2))], Some(TRUE), vec![])],
        Expect::Set(UNKNOWN, mca::REASON_NO_PROBE_RESULT))]
    fn hub_probers_follow_addon_framework(
        #[case] prober: Prober,
        #[case] manifest_applied: bool,
        #[case] cluster_available: &str,
        #[case] works: Vec<ManifestWork>,
        #[case] expect: Expect,
    ) {
        let addon: Vec<Condition> = manifest_applied
            .then(|| condition(mca::CONDITION_MANIFEST_APPLIED, TRUE))
            .into_iter()
            .collect();
        let cluster = [condition(CLUSTER_AVAILABLE, cluster_available)];
        let assessment = assess("a", &prober, &addon, &cluster, &works);
        match (assessment, expect) {
            (Assessment::Keep, Expect::Keep) => {}
            (Assessment::Set(c), Expect::Set(status, reason)) => {
                assert_eq!(
                    (c.type_, c.status, c.reason),
                    (mca::CONDITION_AVAILABLE, status, reason)
                );
            }
            (Assessment::Check(results), Expect::Check(n)) => assert_eq!(results.len(), n),
            (other, _) => panic!("unexpected assessment {other:?}"),
        }
    }

    #[rstest]
    #[case::exact("agent", "agent", true)]
    #[case::different("agent", "agents", false)]
    #[case::star("anything", "*", true)]
    #[case::prefix("agent-1", "agent-*", true)]
    #[case::infix("a-mid-z", "a-*-z", true)]
    #[case::infix_needs_both_ends("a-mid", "a-*-z", false)]
    #[case::overlap_is_not_a_match("ab", "ab*b", false)]
    #[case::question_mark_is_literal("ab", "a?", false)]
    fn wildcards_only_know_the_star(#[case] value: &str, #[case] pattern: &str, #[case] matched: bool) {
        assert_eq!(wildcard_match(value, pattern), matched);
    }

    fn result(resource: &str, values: Vec<FeedbackValue>) -> FieldResult {
        FieldResult {
            resource: ResourceIdentifier {
                resource: resource.to_owned(),
                ..agent_field()
            },
            values,
        }
    }

    #[rstest]
    #[case::deployment_with_a_ready_replica(result("deployments", vec![int("Replicas", 3), int("ReadyReplicas", 1)]), None)]
    #[case::deployment_scaled_to_zero(result("deployments", vec![int("Replicas", 0), int("ReadyReplicas", 0)]), None)]
    #[case::deployment_without_ready_replicas(result("deployments", vec![int("Replicas", 2), int("ReadyReplicas", 0)]),
        Some("desiredNumberReplicas is 2 but readyReplica is 0 for deployments ns/agent"))]
    #[case::deployment_missing_ready(result("deployments", vec![int("Replicas", 2)]), Some("readyReplica is not probed"))]
    #[case::deployment_missing_desired(result("deployments", vec![int("ReadyReplicas", 2)]), Some("desiredNumberReplicas is not probed"))]
    #[case::daemonset_fully_ready(result("daemonsets", vec![int("DesiredNumberScheduled", 2), int("NumberReady", 2)]), None)]
    #[case::daemonset_partly_ready(result("daemonsets", vec![int("DesiredNumberScheduled", 2), int("NumberReady", 1)]),
        Some("desiredNumberReplicas is 2 but readyReplica is 1 for daemonsets ns/agent"))]
    #[case::other_kinds_are_refused(result("statefulsets", vec![int("Replicas", 1)]), Some("unsupported resource type statefulsets"))]
    fn workload_check_follows_addon_framework(#[case] result: FieldResult, #[case] error: Option<&str>) {
        assert_eq!(workload_check(&[result]).err().as_deref(), error);
    }

    #[rstest]
    #[case::available(
        Verdict::Available,
        TRUE,
        mca::REASON_PROBE_AVAILABLE,
        "a add-on is available."
    )]
    #[case::unavailable(Verdict::Unavailable("down".into()), FALSE, mca::REASON_PROBE_UNAVAILABLE, "Probe addon unavailable with err down")]
    #[case::fault_is_unknown(Verdict::Unknown("plugin fault (trap): boom".into()), UNKNOWN, mca::REASON_NO_PROBE_RESULT, "plugin fault (trap): boom")]
    fn probe_verdicts_become_ocm_conditions(
        #[case] verdict: Verdict,
        #[case] status: &str,
        #[case] reason: &str,
        #[case] message: &str,
    ) {
        let c = probe_condition("a", verdict);
        assert_eq!(
            (c.status, c.reason, c.message.as_str()),
            (status, reason, message)
        );
    }
}
