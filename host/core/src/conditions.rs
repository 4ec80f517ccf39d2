//! `metav1.Condition` lists, managed the way Kubernetes' `meta.SetStatusCondition` does:
//! conditions are keyed by `type`, and `lastTransitionTime` moves only when `status` changes,
//! so a controller that recomputes the same state produces an identical list and skips the
//! status write.

use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};

/// Condition status `True`.
pub const TRUE: &str = "True";
/// Condition status `False`.
pub const FALSE: &str = "False";
/// Condition status `Unknown`.
pub const UNKNOWN: &str = "Unknown";

/// A condition to set; `lastTransitionTime` is filled in by [`set`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCondition<'a> {
    /// The condition type, e.g. `HubAcceptedManagedCluster`.
    pub type_: &'a str,
    /// `True`, `False` or `Unknown`.
    pub status: &'a str,
    /// A CamelCase reason.
    pub reason: &'a str,
    /// A human-readable message.
    pub message: String,
    /// The generation of the object the condition was computed from.
    pub observed_generation: Option<i64>,
}

/// Sets `new` in `conditions`: adds it, or updates the condition of the same type, keeping its
/// `lastTransitionTime` unless the status changed. Returns whether anything changed.
pub fn set(conditions: &mut Vec<Condition>, new: NewCondition<'_>, now: Timestamp) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(existing) => {
            let mut changed = false;
            if existing.status != new.status {
                existing.status = new.status.to_owned();
                existing.last_transition_time = Time(now);
                changed = true;
            }
            if existing.reason != new.reason {
                existing.reason = new.reason.to_owned();
                changed = true;
            }
            if existing.message != new.message {
                existing.message = new.message;
                changed = true;
            }
            if existing.observed_generation != new.observed_generation {
                existing.observed_generation = new.observed_generation;
                changed = true;
            }
            changed
        }
        None => {
            conditions.push(Condition {
                type_: new.type_.to_owned(),
                status: new.status.to_owned(),
                reason: new.reason.to_owned(),
                message: new.message,
                observed_generation: new.observed_generation,
                last_transition_time: Time(now),
            });
            true
        }
    }
}

/// Removes the condition of type `type_`; returns whether one was there.
pub fn remove(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The condition of type `type_`, if present.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of type `type_` is present with status `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == TRUE)
}

/// The condition of type `type_` in `after` when it is new or its status, reason or observed
/// generation differ from `before`: a change worth telling a person about (an Event), where a
/// new message alone (a count, a detail) is not.
pub fn changed<'a>(before: &[Condition], after: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    let new = find(after, type_)?;
    let old = find(before, type_);
    old.is_none_or(|old| {
        old.status != new.status
            || old.reason != new.reason
            || old.observed_generation != new.observed_generation
    })
    .then_some(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn ready(status: &'static str, reason: &'static str) -> NewCondition<'static> {
        NewCondition {
            type_: "Ready",
            status,
            reason,
            message: "m".into(),
            observed_generation: Some(1),
        }
    }

    #[test]
    fn setting_the_same_condition_twice_changes_nothing_the_second_time() {
        let mut conditions = Vec::new();
        assert!(set(&mut conditions, ready(TRUE, "Good"), at(10)));
        assert!(!set(&mut conditions, ready(TRUE, "Good"), at(20)));
        assert_eq!(conditions[0].last_transition_time, Time(at(10)));
    }

    #[test]
    fn transition_time_moves_only_when_status_changes() {
        let mut conditions = Vec::new();
        set(&mut conditions, ready(TRUE, "Good"), at(10));
        assert!(set(&mut conditions, ready(TRUE, "StillGood"), at(20)));
        assert_eq!(conditions[0].last_transition_time, Time(at(10)));
        assert!(set(&mut conditions, ready(FALSE, "Bad"), at(30)));
        assert_eq!(conditions[0].last_transition_time, Time(at(30)));
        assert_eq!(conditions[0].reason, "Bad");
    }

    #[test]
    fn a_change_is_a_new_status_reason_or_generation_not_a_new_message() {
        let mut before = Vec::new();
        set(&mut before, ready(TRUE, "Good"), at(10));
        let mut after = before.clone();
        assert_eq!(
            changed(&[], &after, "Ready").map(|c| c.reason.as_str()),
            Some("Good")
        );
        assert!(changed(&before, &after, "Ready").is_none());
        set(
            &mut after,
            NewCondition {
                message: "other".into(),
                ..ready(TRUE, "Good")
            },
            at(20),
        );
        assert!(changed(&before, &after, "Ready").is_none());
        set(&mut after, ready(FALSE, "Bad"), at(30));
        assert_eq!(
            changed(&before, &after, "Ready").map(|c| c.reason.as_str()),
            Some("Bad")
        );
        let next_generation = NewCondition {
            observed_generation: Some(2),
            ..ready(TRUE, "Good")
        };
        let mut regenerated = before.clone();
        set(&mut regenerated, next_generation, at(40));
        assert!(changed(&before, &regenerated, "Ready").is_some());
        assert!(changed(&before, &[], "Ready").is_none());
    }

    #[test]
    fn conditions_are_keyed_by_type() {
        let mut conditions = Vec::new();
        set(&mut conditions, ready(TRUE, "Good"), at(10));
        set(
            &mut conditions,
            NewCondition {
                type_: "Degraded",
                ..ready(FALSE, "Fine")
            },
            at(10),
        );
        assert_eq!(conditions.len(), 2);
        assert!(is_true(&conditions, "Ready"));
        assert!(!is_true(&conditions, "Degraded"));
        assert!(remove(&mut conditions, "Ready"));
        assert!(find(&conditions, "Ready").is_none());
    }
}
