//! Conditions of each manifest and of the whole work, with OCM's types, reasons and
//! `observedGeneration`, plus `Progressing` and `Degraded`, which OCM's agent leaves to
//! condition rules but which a ManifestWorkReplicaSet rollout reads (`Progressing` False at
//! the current generation = done; `Progressing` and `Degraded` True = failed). Rule
//! conditions of the same type override the agent's own.

use std::collections::BTreeMap;

use flotilla_api::work::{consts::manifest_work::*, v1::ManifestCondition};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Condition, jiff::Timestamp};

use super::rules::RuleCondition;
use crate::conditions::{FALSE, NewCondition, TRUE, UNKNOWN, set};

/// Prefix of the reasons of conditions set by condition rules.
pub const RULE_REASON_PREFIX: &str = "ConditionRule";

/// A condition to write, owning its type and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkCondition {
    /// Condition type.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// OCM's reason.
    pub reason: &'static str,
    /// What a person should know.
    pub message: String,
    /// The work generation it was computed from.
    pub observed_generation: i64,
}

impl WorkCondition {
    fn new(
        type_: &str,
        status: &'static str,
        reason: &'static str,
        message: String,
        generation: i64,
    ) -> Self {
        Self {
            type_: type_.to_owned(),
            status,
            reason,
            message,
            observed_generation: generation,
        }
    }

    /// As a [`NewCondition`] for [`crate::conditions::set`].
    pub fn as_new(&self) -> NewCondition<'_> {
        NewCondition {
            type_: &self.type_,
            status: self.status,
            reason: self.reason,
            message: self.message.clone(),
            observed_generation: Some(self.observed_generation),
        }
    }
}

/// How applying one manifest went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// Applied (or left alone as its strategy says).
    Applied,
    /// Failed with `message`.
    Failed(String),
    /// The server-side-apply ignore fields are invalid.
    IgnoreFieldError(String),
}

/// The manifest's `Applied` condition.
pub fn manifest_applied(outcome: &ApplyOutcome, generation: i64) -> WorkCondition {
    match outcome {
        ApplyOutcome::Applied => WorkCondition::new(
            CONDITION_APPLIED,
            TRUE,
            REASON_APPLIED_MANIFEST_COMPLETE,
            "the manifest is applied".into(),
            generation,
        ),
        ApplyOutcome::Failed(message) => WorkCondition::new(
            CONDITION_APPLIED,
            FALSE,
            REASON_APPLIED_MANIFEST_FAILED,
            format!("failed to apply the manifest: {message}"),
            generation,
        ),
        ApplyOutcome::IgnoreFieldError(message) => WorkCondition::new(
            CONDITION_APPLIED,
            FALSE,
            REASON_APPLIED_MANIFEST_SSA_IGNORE_FIELD_ERROR,
            format!("invalid ignoreFields: {message}"),
            generation,
        ),
    }
}

/// What reading the live object of a manifest found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Availability {
    /// The manifest lacks group/version/kind/resource/name.
    IncompleteMeta,
    /// The object does not exist.
    NotFound,
    /// Reading failed with this message.
    FetchFailed(String),
    /// The object exists.
    Found,
}

/// The manifest's `Available` condition.
pub fn manifest_available(availability: &Availability, generation: i64) -> WorkCondition {
    let (status, reason, message) = match availability {
        Availability::IncompleteMeta => (
            UNKNOWN,
            REASON_INCOMPLETE_RESOURCE_META,
            "the manifest lacks apiVersion, kind or name, or its kind is not served".to_owned(),
        ),
        Availability::NotFound => (
            FALSE,
            REASON_RESOURCE_NOT_AVAILABLE,
            "the object does not exist".to_owned(),
        ),
        Availability::FetchFailed(message) => (
            UNKNOWN,
            REASON_FETCHING_RESOURCE_FAILED,
            format!("failed to read the object: {message}"),
        ),
        Availability::Found => (TRUE, REASON_RESOURCE_AVAILABLE, "the object exists".to_owned()),
    };
    WorkCondition::new(CONDITION_AVAILABLE, status, reason, message, generation)
}

/// The manifest's `StatusFeedbackSynced` condition: no rules, synced, or the errors met.
pub fn feedback_synced(has_rules: bool, errors: &[String], generation: i64) -> WorkCondition {
    let (status, reason, message) = if !has_rules {
        (
            TRUE,
            REASON_NO_STATUS_FEEDBACK_SYNCED,
            "no feedback rules".to_owned(),
        )
    } else if errors.is_empty() {
        (
            TRUE,
            REASON_STATUS_FEEDBACK_SYNCED,
            "status feedback is synced".to_owned(),
        )
    } else {
        (
            FALSE,
            REASON_STATUS_FEEDBACK_SYNC_FAILED,
            format!("status feedback failed: {}", errors.join("; ")),
        )
    };
    WorkCondition::new(
        CONDITION_STATUS_FEEDBACK_SYNCED,
        status,
        reason,
        message,
        generation,
    )
}

/// A rule's condition at `generation`.
pub fn from_rule(rule: &RuleCondition, generation: i64) -> WorkCondition {
    WorkCondition::new(
        &rule.type_,
        rule.status,
        rule.reason,
        rule.message.clone(),
        generation,
    )
}

/// `conditions` set from `desired`: each desired condition added or updated (its transition
/// time kept while its status holds), every other type dropped. Returns the new list.
pub fn merge(current: &[Condition], desired: &[WorkCondition], now: Timestamp) -> Vec<Condition> {
    let mut merged: Vec<Condition> = Vec::with_capacity(desired.len());
    for condition in desired {
        if let Some(old) = current.iter().find(|c| c.type_ == condition.type_) {
            merged.push(old.clone());
        }
        set(&mut merged, condition.as_new(), now);
    }
    merged
}

#[derive(Default)]
struct Tally {
    true_: usize,
    false_: usize,
    unknown: usize,
    message: String,
}

fn tally(tallies: &mut BTreeMap<String, Tally>, condition: &Condition) {
    let entry = tallies.entry(condition.type_.clone()).or_default();
    match condition.status.as_str() {
        TRUE => entry.true_ += 1,
        FALSE => entry.false_ += 1,
        _ => entry.unknown += 1,
    }
    if !condition.message.is_empty() {
        entry.message.clone_from(&condition.message);
    }
}

/// The work's conditions computed from its manifests' conditions at `generation`: `Applied`
/// (when any manifest has one), `Available`, one aggregate per rule condition type, and the
/// agent's `Progressing` and `Degraded` unless rules set those types.
pub fn work_conditions(generation: i64, manifests: &[ManifestCondition]) -> Vec<WorkCondition> {
    let total = manifests.len();
    let mut applied = Tally::default();
    let mut failures: Vec<String> = Vec::new();
    let mut available = Tally::default();
    let mut rules: BTreeMap<String, Tally> = BTreeMap::new();
    for manifest in manifests {
        for condition in &manifest.conditions {
            if condition.type_ == CONDITION_APPLIED {
                match condition.status.as_str() {
                    TRUE => applied.true_ += 1,
                    FALSE => applied.false_ += 1,
                    _ => applied.unknown += 1,
                }
                if condition.status == FALSE {
                    let meta = &manifest.resource_meta;
                    failures.push(format!(
                        "manifest {} ({} {}): {}",
                        meta.ordinal, meta.kind, meta.name, condition.message
                    ));
                }
            } else if condition.type_ == CONDITION_AVAILABLE {
                match condition.status.as_str() {
                    TRUE => available.true_ += 1,
                    FALSE => available.false_ += 1,
                    _ => available.unknown += 1,
                }
            } else if condition.reason.starts_with(RULE_REASON_PREFIX) {
                tally(&mut rules, condition);
            }
        }
    }

    let mut out = Vec::new();
    let any_applied = applied.true_ + applied.false_ + applied.unknown > 0;
    let all_applied = any_applied && applied.false_ == 0;
    if any_applied {
        out.push(if all_applied {
            WorkCondition::new(
                CONDITION_APPLIED,
                TRUE,
                REASON_APPLIED_MANIFEST_WORK_COMPLETE,
                format!("all {total} manifests are applied"),
                generation,
            )
        } else {
            WorkCondition::new(
                CONDITION_APPLIED,
                FALSE,
                REASON_APPLIED_MANIFEST_WORK_FAILED,
                format!(
                    "{} of {total} manifests failed to apply; {}",
                    applied.false_,
                    failures.join("; ")
                ),
                generation,
            )
        });
    }

    let available_condition = if available.false_ > 0 {
        WorkCondition::new(
            CONDITION_AVAILABLE,
            FALSE,
            REASON_RESOURCES_NOT_AVAILABLE,
            format!("{} of {total} resources are not available", available.false_),
            generation,
        )
    } else if available.unknown > 0 {
        WorkCondition::new(
            CONDITION_AVAILABLE,
            UNKNOWN,
            REASON_RESOURCES_STATUS_UNKNOWN,
            format!(
                "{} of {total} resources have an unknown status",
                available.unknown
            ),
            generation,
        )
    } else if available.true_ == 0 {
        WorkCondition::new(
            CONDITION_AVAILABLE,
            UNKNOWN,
            REASON_RESOURCES_STATUS_UNKNOWN,
            "no resource is known to be available".into(),
            generation,
        )
    } else {
        WorkCondition::new(
            CONDITION_AVAILABLE,
            TRUE,
            REASON_RESOURCES_AVAILABLE,
            "all resources are available".into(),
            generation,
        )
    };
    let all_available = available_condition.status == TRUE;
    out.push(available_condition);

    for (type_, tally) in &rules {
        let status = if type_ == CONDITION_PROGRESSING {
            if tally.true_ > 0 {
                TRUE
            } else if tally.unknown > 0 {
                UNKNOWN
            } else {
                FALSE
            }
        } else if tally.false_ > 0 {
            FALSE
        } else if tally.unknown > 0 || tally.true_ == 0 {
            UNKNOWN
        } else {
            TRUE
        };
        let count = tally.true_ + tally.false_ + tally.unknown;
        let message = if count == 1 && !tally.message.is_empty() {
            tally.message.clone()
        } else {
            format!("aggregated from {count} manifest conditions")
        };
        out.push(WorkCondition::new(
            type_,
            status,
            REASON_CONDITION_RULES_AGGREGATED,
            message,
            generation,
        ));
    }

    let failed = any_applied && !all_applied;
    if !rules.contains_key(CONDITION_PROGRESSING) {
        out.push(if failed {
            WorkCondition::new(
                CONDITION_PROGRESSING,
                TRUE,
                REASON_FAILED,
                "applying failed; retrying".into(),
                generation,
            )
        } else if all_applied && all_available {
            WorkCondition::new(
                CONDITION_PROGRESSING,
                FALSE,
                REASON_COMPLETED,
                "applied and available".into(),
                generation,
            )
        } else {
            WorkCondition::new(
                CONDITION_PROGRESSING,
                TRUE,
                REASON_APPLYING,
                "waiting for the manifests to be applied and available".into(),
                generation,
            )
        });
    }
    if !rules.contains_key(CONDITION_DEGRADED) {
        out.push(if failed {
            WorkCondition::new(
                CONDITION_DEGRADED,
                TRUE,
                REASON_FAILED,
                format!("{} of {total} manifests failed to apply", applied.false_),
                generation,
            )
        } else {
            WorkCondition::new(
                CONDITION_DEGRADED,
                FALSE,
                if all_applied && all_available {
                    REASON_COMPLETED
                } else {
                    REASON_APPLYING
                },
                "no manifest failed".into(),
                generation,
            )
        });
    }
    out
}

/// The `Deleting` condition of a work whose deletion the agent is carrying out.
pub fn deleting(generation: i64, remaining: usize) -> WorkCondition {
    WorkCondition::new(
        CONDITION_DELETING,
        TRUE,
        REASON_WORK_DELETING,
        format!("removing the applied objects ({remaining} left)"),
        generation,
    )
}

#[cfg(test)]
mod tests {
    use flotilla_api::work::v1::ManifestResourceMeta;
    use rstest::rstest;

    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn manifest(conditions: &[WorkCondition]) -> ManifestCondition {
        ManifestCondition {
            resource_meta: ManifestResourceMeta {
                kind: "ConfigMap".into(),
                name: "cm".into(),
                ..Default::default()
            },
            conditions: merge(&[], conditions, at(1)),
            ..Default::default()
        }
    }

    fn ok(generation: i64) -> ManifestCondition {
        manifest(&[
            manifest_applied(&ApplyOutcome::Applied, generation),
            manifest_available(&Availability::Found, generation),
        ])
    }

    fn find(conditions: &[WorkCondition], type_: &str) -> Option<(&'static str, &'static str)> {
        conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status, c.reason))
    }

    #[test]
    fn a_work_whose_manifests_apply_and_exist_is_applied_available_and_done() {
        let conditions = work_conditions(3, &[ok(3), ok(3)]);
        assert_eq!(
            find(&conditions, "Applied"),
            Some((TRUE, "AppliedManifestWorkComplete"))
        );
        assert_eq!(find(&conditions, "Available"), Some((TRUE, "ResourcesAvailable")));
        assert_eq!(find(&conditions, "Progressing"), Some((FALSE, "Completed")));
        assert_eq!(find(&conditions, "Degraded"), Some((FALSE, "Completed")));
        assert!(conditions.iter().all(|c| c.observed_generation == 3));
    }

    #[rstest]
    #[case::one_failed(ApplyOutcome::Failed("boom".into()), Availability::NotFound,
        (FALSE, "AppliedManifestWorkFailed"), (FALSE, "ResourcesNotAvailable"), (TRUE, "Failed"), (TRUE, "Failed"))]
    #[case::unknown(ApplyOutcome::Applied, Availability::FetchFailed("timeout".into()),
        (TRUE, "AppliedManifestWorkComplete"), (UNKNOWN, "ResourcesStatusUnknown"), (TRUE, "Applying"), (FALSE, "Applying"))]
    #[case::incomplete(ApplyOutcome::Failed("unknown kind".into()), Availability::IncompleteMeta,
        (FALSE, "AppliedManifestWorkFailed"), (UNKNOWN, "ResourcesStatusUnknown"), (TRUE, "Failed"), (TRUE, "Failed"))]
    fn one_bad_manifest_decides_the_work(
        #[case] outcome: ApplyOutcome,
        #[case] availability: Availability,
        #[case] applied: (&str, &str),
        #[case] available: (&str, &str),
        #[case] progressing: (&str, &str),
        #[case] degraded: (&str, &str),
    ) {
        let bad = manifest(&[
            manifest_applied(&outcome, 1),
            manifest_available(&availability, 1),
        ]);
        let conditions = work_conditions(1, &[ok(1), bad]);
        assert_eq!(find(&conditions, "Applied"), Some(applied));
        assert_eq!(find(&conditions, "Available"), Some(available));
        assert_eq!(find(&conditions, "Progressing"), Some(progressing));
        assert_eq!(find(&conditions, "Degraded"), Some(degraded));
    }

    #[test]
    fn a_work_without_manifests_has_unknown_availability_and_no_applied() {
        let conditions = work_conditions(1, &[]);
        assert_eq!(find(&conditions, "Applied"), None);
        assert_eq!(
            find(&conditions, "Available"),
            Some((UNKNOWN, "ResourcesStatusUnknown"))
        );
    }

    fn rule(type_: &str, status: &'static str) -> WorkCondition {
        from_rule(
            &RuleCondition {
                type_: type_.into(),
                status,
                reason: "ConditionRuleEvaluated",
                message: "m".into(),
            },
            1,
        )
    }

    #[rstest]
    #[case::false_wins("Ready", &[TRUE, FALSE], FALSE)]
    #[case::all_true("Ready", &[TRUE, TRUE], TRUE)]
    #[case::progressing_any_true("Progressing", &[FALSE, TRUE], TRUE)]
    #[case::progressing_all_false("Progressing", &[FALSE, FALSE], FALSE)]
    fn rule_conditions_aggregate_like_ocm(
        #[case] type_: &str,
        #[case] statuses: &[&'static str],
        #[case] expected: &str,
    ) {
        let manifests: Vec<_> = statuses
            .iter()
            .map(|s| manifest(&[manifest_applied(&ApplyOutcome::Applied, 1), rule(type_, s)]))
            .collect();
        let conditions = work_conditions(1, &manifests);
        let aggregate = conditions.iter().find(|c| c.type_ == type_).unwrap();
        assert_eq!(
            (aggregate.status, aggregate.reason),
            (expected, "ConditionRulesAggregated")
        );
        assert_eq!(
            conditions.iter().filter(|c| c.type_ == type_).count(),
            1,
            "rules override the agent's own"
        );
    }

    #[test]
    fn merging_keeps_transition_times_and_drops_types_no_longer_produced() {
        let first = merge(&[], &[rule("Ready", TRUE), rule("Old", TRUE)], at(10));
        let second = merge(&first, &[rule("Ready", TRUE)], at(20));
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].last_transition_time.0, at(10));
        let third = merge(&second, &[rule("Ready", FALSE)], at(30));
        assert_eq!(third[0].last_transition_time.0, at(30));
    }

    #[test]
    fn feedback_synced_tells_no_rules_from_synced_from_failed() {
        assert_eq!(feedback_synced(false, &[], 1).reason, "NoStatusFeedbackSynced");
        assert_eq!(feedback_synced(true, &[], 1).reason, "StatusFeedbackSynced");
        let failed = feedback_synced(true, &["bad path".into()], 1);
        assert_eq!(
            (failed.status, failed.reason),
            (FALSE, "StatusFeedbackSyncFailed")
        );
        assert!(failed.message.contains("bad path"));
    }
}
