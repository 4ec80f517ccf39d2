//! Pure rules of a ManifestWorkReplicaSet: the rollout state of one cluster read from its
//! ManifestWork, whether a work carries the current template, the works to create, and the
//! status (`summary`, `placementSummary`, conditions) the hub writes — all as OCM computes them.
//!
//! ```text
//!  ManifestWork ──cluster_rollout_status──► ClusterStatus ──rollout::plan──► Rollout
//!  per-placement outcome + works ──status──► ManifestWorkReplicaSetStatus
//! ```

use std::collections::BTreeMap;

use flotilla_api::work::consts::manifest_work::{
    CONDITION_APPLIED, CONDITION_AVAILABLE, CONDITION_DEGRADED, CONDITION_PROGRESSING,
};
use flotilla_api::work::consts::manifest_work_replica_set::{
    CONDITION_MANIFESTWORK_APPLIED, CONDITION_PLACEMENT_ROLLED_OUT, CONDITION_PLACEMENT_VERIFIED,
    REASON_AS_EXPECTED, REASON_COMPLETE, REASON_NOT_AS_EXPECTED, REASON_PLACEMENT_DECISION_EMPTY,
    REASON_PLACEMENT_DECISION_NOT_FOUND, REASON_PROCESSING, REASON_PROGRESSING,
};
use flotilla_api::work::consts::{MANIFEST_WORK_REPLICA_SET_LABEL, PLACEMENT_NAME_LABEL};
use flotilla_api::work::v1::{Manifest, ManifestWork, ManifestWorkSpec};
use flotilla_api::work::v1alpha1::{
    ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus, ManifestWorkReplicaSetSummary, PlacementSummary,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::conditions::{self, FALSE, NewCondition, TRUE};
use crate::rollout::{ClusterState, ClusterStatus};

/// Value of the replica-set label on its works: `<namespace>.<name>`.
pub fn owner_label_value(namespace: &str, name: &str) -> String {
    format!("{namespace}.{name}")
}

/// Why `<namespace>.<name>` cannot be the owner label of the replica set's works (a label value
/// has at most 63 characters), if it cannot.
pub fn owner_label_problem(namespace: &str, name: &str) -> Option<String> {
    let value = owner_label_value(namespace, name);
    (value.len() > 63).then(|| {
        format!(
            "ManifestWork owner reference {value:?} (namespace.name) is not a valid label value: it has {} characters, \
             at most 63 are allowed; recreate the ManifestWorkReplicaSet with a shorter namespace and/or name",
            value.len()
        )
    })
}

/// The `<namespace>/<name>` of the replica set a work's label names, if it is well formed.
pub fn owner_of_label(value: &str) -> Option<(&str, &str)> {
    let mut parts = value.split('.');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(ns), Some(name), None) if !ns.is_empty() && !name.is_empty() => Some((ns, name)),
        _ => None,
    }
}

/// The rollout state of a cluster from its ManifestWork.
///
/// Failed when the agent reports that applying failed (`Applied` False with `Progressing` and
/// `Degraded` True, all at the work's current generation). Otherwise
/// ToApply until the agent reports `Applied` True and both `Applied` and `Progressing` (and
/// `Degraded`, when present) observed the work's current generation. Then: `Progressing` True
/// with `Degraded` True is Failed, `Progressing` True is Progressing, `Progressing` False is
/// Succeeded, anything else Progressing. The time is that of the deciding condition.
pub fn cluster_rollout_status(cluster: &str, work: &ManifestWork) -> ClusterStatus {
    let generation = work.metadata.generation.unwrap_or_default();
    let found = |type_: &str| {
        work.status
            .as_ref()
            .and_then(|s| conditions::find(&s.conditions, type_))
    };
    let observed = |c: &Condition| c.observed_generation.unwrap_or_default() == generation;
    let (applied, progressing, degraded) = (
        found(CONDITION_APPLIED),
        found(CONDITION_PROGRESSING),
        found(CONDITION_DEGRADED),
    );

    let to_apply = ClusterStatus::new(cluster, ClusterState::ToApply, None);
    let reported = |c: Option<&Condition>, status: &str| c.is_some_and(|c| observed(c) && c.status == status);
    // OCM reads `Applied` False as "not applied yet" (ToApply), so a work that cannot be applied
    // holds its rollout slot forever. Flotilla's agent says when applying failed (`Progressing`
    // and `Degraded` True at the same generation); that is a failure, counted against
    // `maxFailures`. An OCM agent never writes that combination itself.
    if reported(applied, FALSE) && reported(progressing, TRUE) && reported(degraded, TRUE) {
        let since = degraded.map(|d| d.last_transition_time.0);
        return ClusterStatus::new(cluster, ClusterState::Failed, since);
    }
    if !reported(applied, TRUE) {
        return to_apply;
    }
    let Some(progressing) = progressing.filter(|c| observed(c)) else {
        return to_apply;
    };
    if degraded.is_some_and(|c| !observed(c)) {
        return to_apply;
    }
    let (state, since) = match (progressing.status.as_str(), degraded) {
        (TRUE, Some(d)) if d.status == TRUE => (ClusterState::Failed, d.last_transition_time.0),
        (TRUE, _) => (ClusterState::Progressing, progressing.last_transition_time.0),
        (FALSE, _) => (ClusterState::Succeeded, progressing.last_transition_time.0),
        _ => (ClusterState::Progressing, progressing.last_transition_time.0),
    };
    ClusterStatus::new(cluster, state, Some(since))
}

/// A manifest as compared: without `metadata.creationTimestamp` and
/// `spec.template.metadata.creationTimestamp`, which Go clients add as `null` when they round-trip
/// an object.
fn comparable(manifest: &Manifest) -> Value {
    let mut value = manifest.0.clone();
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("creationTimestamp");
    }
    if let Some(meta) = value
        .pointer_mut("/spec/template/metadata")
        .and_then(Value::as_object_mut)
    {
        meta.remove("creationTimestamp");
    }
    value
}

/// Whether a work's spec equals the replica set's template (manifests compared as above).
pub fn work_is_current(work: &ManifestWork, template: &ManifestWorkSpec) -> bool {
    let mut a = work.spec.clone();
    let mut b = template.clone();
    for spec in [&mut a, &mut b] {
        for manifest in &mut spec.workload.manifests {
            *manifest = Manifest(comparable(manifest));
        }
    }
    a == b
}

/// The work to create or update for `cluster`: the template's spec, the replica set's labels
/// plus the owner and placement labels, and either the existing work's name or
/// `generateName: <replica set name>`.
pub fn desired_work(
    replica_set: &ManifestWorkReplicaSet,
    cluster: &str,
    placement: &str,
    existing_name: Option<&str>,
) -> ManifestWork {
    let mut labels: BTreeMap<String, String> = replica_set.metadata.labels.clone().unwrap_or_default();
    let namespace = replica_set.metadata.namespace.clone().unwrap_or_default();
    let name = replica_set.metadata.name.clone().unwrap_or_default();
    labels.insert(
        MANIFEST_WORK_REPLICA_SET_LABEL.to_owned(),
        owner_label_value(&namespace, &name),
    );
    labels.insert(PLACEMENT_NAME_LABEL.to_owned(), placement.to_owned());
    let mut work = ManifestWork::new("", replica_set.spec.manifest_work_template.clone());
    work.metadata.namespace = Some(cluster.to_owned());
    work.metadata.labels = Some(labels);
    match existing_name {
        Some(existing) => work.metadata.name = Some(existing.to_owned()),
        None => {
            work.metadata.name = None;
            work.metadata.generate_name = Some(name);
        }
    }
    work
}

/// The text of `availableDecisionGroups`: `"<groups> (<works> / <selected> clusters applied)"`.
pub fn available_decision_groups(groups: usize, works: usize, selected: i32) -> String {
    format!("{groups} ({works} / {selected} clusters applied)")
}

/// What the deploy step found for one placement reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlacementOutcome {
    /// The Placement does not exist: status stops here, as in OCM.
    NotFound,
    /// The rollout strategy (or the decisions) could not be read; the message says why.
    Invalid(String),
    /// Rolled out.
    RolledOut {
        /// Placement name.
        name: String,
        /// Number of the placement's decision groups (`status.decisionGroups`).
        decision_groups: usize,
        /// The placement's `status.numberOfSelectedClusters`.
        selected_clusters: i32,
        /// Clusters with a current work after this step.
        clusters_with_work: usize,
        /// Clusters whose current work Succeeded.
        succeeded: usize,
    },
}

/// Counts of a work set's conditions (only works carrying the current template, not deleting).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkCounts {
    /// `Applied` True.
    pub applied: i64,
    /// `Progressing` True.
    pub progressing: i64,
    /// `Available` True.
    pub available: i64,
    /// `Degraded` True.
    pub degraded: i64,
}

impl WorkCounts {
    /// Counts `works` that are not being deleted and carry `template`.
    pub fn of<'a>(works: impl IntoIterator<Item = &'a ManifestWork>, template: &ManifestWorkSpec) -> Self {
        let mut counts = Self::default();
        for work in works {
            if work.metadata.deletion_timestamp.is_some() || !work_is_current(work, template) {
                continue;
            }
            let is_true = |type_: &str| {
                work.status
                    .as_ref()
                    .and_then(|s| conditions::find(&s.conditions, type_))
                    .is_some_and(|c| c.status == TRUE)
            };
            counts.applied += i64::from(is_true(CONDITION_APPLIED));
            counts.progressing += i64::from(is_true(CONDITION_PROGRESSING));
            counts.available += i64::from(is_true(CONDITION_AVAILABLE));
            counts.degraded += i64::from(is_true(CONDITION_DEGRADED));
        }
        counts
    }
}

/// A status condition of a replica set: True for the success reason, False otherwise; empty
/// message, as OCM writes them.
fn condition<'a>(type_: &'a str, reason: &'a str, success: &str, message: String) -> NewCondition<'a> {
    NewCondition {
        type_,
        status: if reason == success { TRUE } else { FALSE },
        reason,
        message,
        observed_generation: None,
    }
}

/// The replica set's status after a reconcile, from the previous status, the outcome per
/// placement reference (in spec order) and the works of each placement (keyed by name).
///
/// - A missing Placement sets `PlacementVerified` False `PlacementDecisionNotFound` and leaves
///   everything else as it was.
/// - Otherwise `placementSummary` lists the rolled-out placements; `summary.total` counts
///   clusters with a current work; `PlacementVerified` is `AsExpected` (or
///   `PlacementDecisionEmpty` with no work at all); `PlacementRolledOut` is `Complete` once every
///   selected cluster Succeeded; `ManifestworkApplied` is `AsExpected` when all works are
///   Available and none Progressing or Degraded, `Processing` while some progress and none is
///   degraded, else `NotAsExpected`. `desiredTotal` and `updated` stay 0, as OCM leaves them.
pub fn status(
    previous: &ManifestWorkReplicaSetStatus,
    outcomes: &[PlacementOutcome],
    works_by_placement: &BTreeMap<String, Vec<&ManifestWork>>,
    template: &ManifestWorkSpec,
    now: Timestamp,
) -> ManifestWorkReplicaSetStatus {
    let mut status = previous.clone();
    let conds = &mut status.conditions;
    let mut summaries = Vec::new();
    let (mut with_work, mut selected, mut succeeded) = (0usize, 0i64, 0usize);
    for outcome in outcomes {
        match outcome {
            PlacementOutcome::NotFound => {
                let c = condition(
                    CONDITION_PLACEMENT_VERIFIED,
                    REASON_PLACEMENT_DECISION_NOT_FOUND,
                    REASON_AS_EXPECTED,
                    String::new(),
                );
                conditions::set(conds, c, now);
                return status;
            }
            PlacementOutcome::Invalid(message) => {
                let c = condition(
                    CONDITION_PLACEMENT_VERIFIED,
                    REASON_NOT_AS_EXPECTED,
                    REASON_AS_EXPECTED,
                    message.clone(),
                );
                conditions::set(conds, c, now);
            }
            PlacementOutcome::RolledOut {
                name,
                decision_groups,
                selected_clusters,
                clusters_with_work,
                succeeded: done,
            } => {
                summaries.push(PlacementSummary {
                    name: name.clone(),
                    available_decision_groups: available_decision_groups(
                        *decision_groups,
                        *clusters_with_work,
                        *selected_clusters,
                    ),
                    summary: ManifestWorkReplicaSetSummary {
                        total: i64::try_from(*clusters_with_work).unwrap_or(i64::MAX),
                        ..Default::default()
                    },
                });
                with_work += clusters_with_work;
                selected += i64::from(*selected_clusters);
                succeeded += done;
            }
        }
    }

    status.summary.total = i64::try_from(with_work).unwrap_or(i64::MAX);
    let verified = if with_work == 0 {
        status.summary.applied = 0;
        status.summary.available = 0;
        status.summary.degraded = 0;
        status.summary.progressing = 0;
        REASON_PLACEMENT_DECISION_EMPTY
    } else {
        REASON_AS_EXPECTED
    };
    // A placement whose strategy could not be read keeps its message while the others are fine.
    let invalid = outcomes.iter().find_map(|o| match o {
        PlacementOutcome::Invalid(message) => Some(message.clone()),
        _ => None,
    });
    let conds = &mut status.conditions;
    // OCM overwrites an unreadable strategy's NotAsExpected here and only logs the error; keeping
    // it (same reason, with the message) tells a person what to fix.
    let verified_condition = match invalid {
        Some(message) => condition(
            CONDITION_PLACEMENT_VERIFIED,
            REASON_NOT_AS_EXPECTED,
            REASON_AS_EXPECTED,
            message,
        ),
        None => condition(
            CONDITION_PLACEMENT_VERIFIED,
            verified,
            REASON_AS_EXPECTED,
            String::new(),
        ),
    };
    conditions::set(conds, verified_condition, now);
    let rolled_out = if i64::try_from(succeeded).unwrap_or(i64::MAX) == selected {
        REASON_COMPLETE
    } else {
        REASON_PROGRESSING
    };
    conditions::set(
        conds,
        condition(
            CONDITION_PLACEMENT_ROLLED_OUT,
            rolled_out,
            REASON_COMPLETE,
            String::new(),
        ),
        now,
    );

    if with_work == 0 {
        status.placements_summary = (!summaries.is_empty()).then_some(summaries);
        let reason = if verified == REASON_PLACEMENT_DECISION_EMPTY {
            verified
        } else {
            REASON_NOT_AS_EXPECTED
        };
        conditions::set(
            conds,
            condition(
                CONDITION_MANIFESTWORK_APPLIED,
                reason,
                REASON_AS_EXPECTED,
                String::new(),
            ),
            now,
        );
        return status;
    }

    let mut total = WorkCounts::default();
    for summary in &mut summaries {
        let works = works_by_placement
            .get(&summary.name)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let counts = WorkCounts::of(works.iter().copied(), template);
        summary.summary.applied = counts.applied;
        summary.summary.progressing = counts.progressing;
        summary.summary.available = counts.available;
        summary.summary.degraded = counts.degraded;
        total.applied += counts.applied;
        total.progressing += counts.progressing;
        total.available += counts.available;
        total.degraded += counts.degraded;
    }
    status.placements_summary = (!summaries.is_empty()).then_some(summaries);
    status.summary.applied = total.applied;
    status.summary.progressing = total.progressing;
    status.summary.available = total.available;
    status.summary.degraded = total.degraded;
    let applied = if total.available == status.summary.total && total.progressing == 0 && total.degraded == 0
    {
        REASON_AS_EXPECTED
    } else if total.progressing > 0 && total.degraded == 0 {
        REASON_PROCESSING
    } else {
        REASON_NOT_AS_EXPECTED
    };
    conditions::set(
        &mut status.conditions,
        condition(
            CONDITION_MANIFESTWORK_APPLIED,
            applied,
            REASON_AS_EXPECTED,
            String::new(),
        ),
        now,
    );
    status
}

#[cfg(test)]
mod tests;
