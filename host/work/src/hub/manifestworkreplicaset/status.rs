//! The replica set's status: computed from what the other steps found (pure), then written
//! once per reconcile, only if it changed, with an Event for each reported condition that
//! changed.

use std::collections::{BTreeMap, BTreeSet};

use flotilla_api::work::consts::{
    PLACEMENT_NAME_LABEL,
    manifest_work_replica_set::{
        CONDITION_MANIFESTWORK_APPLIED, CONDITION_PLACEMENT_ROLLED_OUT, CONDITION_PLACEMENT_VERIFIED,
        REASON_INVALID_MANIFEST_WORK_NAME, REASON_PROCESSING,
    },
};
use flotilla_api::work::v1::{ManifestWork, ManifestWorkSpec};
use flotilla_api::work::v1alpha1::{ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus};
use flotilla_core::conditions::{self, FALSE, NewCondition};
use flotilla_core::work::replicaset::{self, PlacementOutcome};
use flotilla_kube::events::{self, ConditionEvent, Events};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::{Api, ResourceExt};

use crate::hub::error::Result;

/// The conditions whose changes are reported as Events on the replica set, with OCM's reasons:
/// placements found or not, the rollout progressing and complete, works applied or failing.
const SET_EVENTS: &[ConditionEvent] = &[
    ConditionEvent {
        type_: CONDITION_PLACEMENT_VERIFIED,
        action: "VerifyPlacement",
        warning: events::when_false,
    },
    ConditionEvent {
        type_: CONDITION_PLACEMENT_ROLLED_OUT,
        action: "RollOut",
        warning: events::never,
    },
    ConditionEvent {
        type_: CONDITION_MANIFESTWORK_APPLIED,
        action: "Apply",
        warning: failed_not_processing,
    },
];

/// `ManifestworkApplied` False is a Warning unless the works are still being processed.
fn failed_not_processing(condition: &Condition) -> bool {
    events::when_false(condition) && condition.reason != REASON_PROCESSING
}

/// `previous` with `ManifestworkApplied` False `InvalidManifestWorkName`: the owner label
/// cannot be written, so no work is made and `problem` says what to do.
pub(super) fn invalid_name(
    previous: &ManifestWorkReplicaSetStatus,
    problem: String,
    now: Timestamp,
) -> ManifestWorkReplicaSetStatus {
    let mut desired = previous.clone();
    let condition = NewCondition {
        type_: CONDITION_MANIFESTWORK_APPLIED,
        status: FALSE,
        reason: REASON_INVALID_MANIFEST_WORK_NAME,
        message: problem,
        observed_generation: None,
    };
    conditions::set(&mut desired.conditions, condition, now);
    desired
}

/// The status after a rollout: [`replicaset::status`] of the placements' `outcomes` and of
/// `works` grouped by placement, leaving out those deleted in this reconcile (`deleted`, by
/// uid). The works are the snapshot the rollout was planned from (works created just now have
/// no conditions yet), so a status always shows what the decisions were based on.
pub(super) fn rolled_out(
    previous: &ManifestWorkReplicaSetStatus,
    outcomes: &[PlacementOutcome],
    works: &[ManifestWork],
    deleted: &BTreeSet<String>,
    template: &ManifestWorkSpec,
    now: Timestamp,
) -> ManifestWorkReplicaSetStatus {
    let mut by_placement: BTreeMap<String, Vec<&ManifestWork>> = BTreeMap::new();
    for work in works
        .iter()
        .filter(|w| !deleted.contains(&w.uid().unwrap_or_default()))
    {
        if let Some(placement) = work.labels().get(PLACEMENT_NAME_LABEL) {
            by_placement.entry(placement.clone()).or_default().push(work);
        }
    }
    replicaset::status(previous, outcomes, &by_placement, template, now)
}

/// Patches the status of `set` to `desired` if it changed, then reports its conditions'
/// changes as Events.
pub(super) async fn write(
    events: &Events,
    sets: &Api<ManifestWorkReplicaSet>,
    set: &ManifestWorkReplicaSet,
    desired: &ManifestWorkReplicaSetStatus,
) -> Result<()> {
    flotilla_kube::status::patch_if_changed(sets, set, set.status.as_ref(), desired).await?;
    let previous = set
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    events
        .conditions(set, previous, &desired.conditions, SET_EVENTS)
        .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use flotilla_api::work::v1::ManifestWorkStatus;
    use flotilla_core::conditions::find;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    /// A work of placement `p1` with the empty template, `Applied` True.
    fn applied_work(uid: &str) -> ManifestWork {
        let mut work = ManifestWork::new("", ManifestWorkSpec::default());
        work.metadata.uid = Some(uid.to_owned());
        work.metadata.labels = Some([(PLACEMENT_NAME_LABEL.to_owned(), "p1".to_owned())].into());
        work.status = Some(ManifestWorkStatus {
            conditions: vec![Condition {
                type_: "Applied".into(),
                status: "True".into(),
                reason: "AppliedManifestWorkComplete".into(),
                message: String::new(),
                last_transition_time: Time(Timestamp::now()),
                observed_generation: None,
            }],
            ..ManifestWorkStatus::default()
        });
        work
    }

    #[test]
    fn an_owner_label_too_long_is_reported_on_manifestwork_applied() {
        let desired = invalid_name(
            &ManifestWorkReplicaSetStatus::default(),
            "too long".into(),
            Timestamp::now(),
        );
        let condition = find(&desired.conditions, CONDITION_MANIFESTWORK_APPLIED).expect("the condition");
        assert_eq!(
            (
                condition.status.as_str(),
                condition.reason.as_str(),
                condition.message.as_str()
            ),
            (FALSE, REASON_INVALID_MANIFEST_WORK_NAME, "too long")
        );
    }

    #[test]
    fn works_deleted_in_the_reconcile_are_not_counted() {
        let works = [applied_work("kept"), applied_work("deleted")];
        let outcome = PlacementOutcome::RolledOut {
            name: "p1".into(),
            decision_groups: 1,
            selected_clusters: 1,
            clusters_with_work: 1,
            succeeded: 0,
        };
        let desired = rolled_out(
            &ManifestWorkReplicaSetStatus::default(),
            &[outcome],
            &works,
            &["deleted".to_owned()].into(),
            &ManifestWorkSpec::default(),
            Timestamp::now(),
        );
        assert_eq!(desired.summary.applied, 1);
    }
}
