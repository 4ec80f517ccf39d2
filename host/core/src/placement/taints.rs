//! Step 3: taints and tolerations.
//!
//! ```text
//!  taint effect     not tolerated ⇒                       note
//!  PreferNoSelect   never filters
//!  NoSelectIfNew    filtered unless already decided
//!  NoSelect         filtered, also out of existing decisions
//! ```
//!
//! A toleration matches a taint when its effect is empty or equal, its key is empty or equal, and
//! (operator `Equal` or empty) the values are equal, or the operator is `Exists`. With
//! `tolerationSeconds` the toleration holds until `timeAdded + tolerationSeconds`; the verdict
//! carries that instant so the controller schedules again exactly then.

use flotilla_api::cluster::{
    v1::{Taint, TaintEffect},
    v1beta1::{TOLERATION_OP_EQUAL, TOLERATION_OP_EXISTS, Toleration},
};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Whether a cluster's taints are tolerated, and until when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The cluster may be selected.
    pub tolerated: bool,
    /// When the earliest time-limited toleration that this verdict relies on expires.
    pub expires: Option<Timestamp>,
}

/// Checks tolerations as OCM does: an empty key needs `Exists`, and `Exists` takes no value.
pub fn validate(tolerations: &[Toleration]) -> Result<(), String> {
    for t in tolerations {
        if t.key.is_empty() && t.operator != TOLERATION_OP_EXISTS {
            return Err(format!(
                "toleration with an empty key must use operator {TOLERATION_OP_EXISTS}, not {:?}",
                t.operator
            ));
        }
        if t.operator == TOLERATION_OP_EXISTS && !t.value.is_empty() {
            return Err(format!(
                "toleration of key {:?} with operator {TOLERATION_OP_EXISTS} must not have a value (has {:?})",
                t.key, t.value
            ));
        }
    }
    Ok(())
}

/// Whether every taint is tolerated; `in_decision` says whether the cluster is already decided.
pub fn tolerated(taints: &[Taint], tolerations: &[Toleration], in_decision: bool, now: Timestamp) -> Verdict {
    let mut expires = None;
    for taint in taints {
        match taint_tolerated(taint, tolerations, in_decision, now) {
            None => {
                return Verdict {
                    tolerated: false,
                    expires: None,
                };
            }
            Some(until) => {
                expires = match (expires, until) {
                    (Some(a), Some(b)) => Some(std::cmp::min(a, b)),
                    (a, None) => a,
                    (None, b) => b,
                }
            }
        }
    }
    Verdict {
        tolerated: true,
        expires,
    }
}

/// `None` when not tolerated; `Some(expiry)` when tolerated (until `expiry` if limited).
fn taint_tolerated(
    taint: &Taint,
    tolerations: &[Toleration],
    in_decision: bool,
    now: Timestamp,
) -> Option<Option<Timestamp>> {
    if taint.effect == TaintEffect::PreferNoSelect {
        return Some(None);
    }
    if taint.effect == TaintEffect::NoSelectIfNew && in_decision {
        return Some(None);
    }
    tolerations.iter().find_map(|t| toleration_holds(taint, t, now))
}

fn toleration_holds(taint: &Taint, toleration: &Toleration, now: Timestamp) -> Option<Option<Timestamp>> {
    if toleration.effect.is_some_and(|e| e != taint.effect) {
        return None;
    }
    if !toleration.key.is_empty() && toleration.key != taint.key {
        return None;
    }
    let matched = match toleration.operator.as_str() {
        "" | TOLERATION_OP_EQUAL => toleration.value == taint.value,
        TOLERATION_OP_EXISTS => true,
        _ => false,
    };
    if !matched {
        return None;
    }
    let Some(seconds) = toleration.toleration_seconds else {
        return Some(None);
    };
    // A taint without `timeAdded` counts as added at the beginning of time (Go's zero time), so
    // a limited toleration of it has expired.
    let until = taint
        .time_added
        .as_ref()
        .and_then(|added| added.0.checked_add(SignedDuration::from_secs(seconds)).ok())?;
    (now < until).then_some(Some(until))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use rstest::rstest;

    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + seconds).unwrap()
    }

    fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint {
            key: key.into(),
            value: value.into(),
            effect,
            time_added: Some(Time(at(0))),
        }
    }

    fn toleration(
        key: &str,
        operator: &str,
        value: &str,
        effect: Option<TaintEffect>,
        seconds: Option<i64>,
    ) -> Toleration {
        Toleration {
            key: key.into(),
            operator: operator.into(),
            value: value.into(),
            effect,
            toleration_seconds: seconds,
        }
    }

    use TaintEffect::{NoSelect, NoSelectIfNew, PreferNoSelect};

    #[rstest]
    #[case::no_select_untolerated(NoSelect, false, vec![], false)]
    #[case::no_select_untolerated_even_if_decided(NoSelect, true, vec![], false)]
    #[case::prefer_no_select_never_filters(PreferNoSelect, false, vec![], true)]
    #[case::no_select_if_new_keeps_decided(NoSelectIfNew, true, vec![], true)]
    #[case::no_select_if_new_filters_new(NoSelectIfNew, false, vec![], false)]
    #[case::equal_same_value(NoSelect, false, vec![toleration("k", "Equal", "v", None, None)], true)]
    #[case::empty_operator_is_equal(NoSelect, false, vec![toleration("k", "", "v", None, None)], true)]
    #[case::equal_other_value(NoSelect, false, vec![toleration("k", "Equal", "w", None, None)], false)]
    #[case::exists_any_value(NoSelect, false, vec![toleration("k", "Exists", "", None, None)], true)]
    #[case::empty_key_exists_matches_all(NoSelect, false, vec![toleration("", "Exists", "", None, None)], true)]
    #[case::other_key(NoSelect, false, vec![toleration("other", "Exists", "", None, None)], false)]
    #[case::same_effect(NoSelect, false, vec![toleration("k", "Exists", "", Some(NoSelect), None)], true)]
    #[case::other_effect(NoSelect, false, vec![toleration("k", "Exists", "", Some(NoSelectIfNew), None)], false)]
    #[case::unexpired_seconds(NoSelect, false, vec![toleration("k", "Exists", "", None, Some(300))], true)]
    #[case::expired_seconds(NoSelect, false, vec![toleration("k", "Exists", "", None, Some(50))], false)]
    #[case::expired_then_unlimited(NoSelect, false, vec![
        toleration("k", "Exists", "", None, Some(50)), toleration("k", "Equal", "v", None, None)], true)]
    fn taints_filter_unless_tolerated(
        #[case] effect: TaintEffect,
        #[case] in_decision: bool,
        #[case] tolerations: Vec<Toleration>,
        #[case] expected: bool,
    ) {
        let verdict = tolerated(&[taint("k", "v", effect)], &tolerations, in_decision, at(100));
        assert_eq!(verdict.tolerated, expected);
    }

    #[test]
    fn a_limited_toleration_reports_its_expiry() {
        let tolerations = [toleration("k", "Exists", "", None, Some(300))];
        let verdict = tolerated(&[taint("k", "v", NoSelect)], &tolerations, true, at(100));
        assert_eq!(verdict.expires, Some(at(300)));
        // At the expiry instant the cluster is no longer tolerated.
        assert!(!tolerated(&[taint("k", "v", NoSelect)], &tolerations, true, at(300)).tolerated);
    }

    #[test]
    fn the_earliest_expiry_of_several_taints_wins() {
        let taints = [taint("a", "", NoSelect), taint("b", "", NoSelect)];
        let tolerations = [
            toleration("a", "Exists", "", None, Some(500)),
            toleration("b", "Exists", "", None, Some(200)),
        ];
        assert_eq!(
            tolerated(&taints, &tolerations, false, at(0)).expires,
            Some(at(200))
        );
    }

    #[test]
    fn a_taint_without_time_added_is_not_tolerated_for_a_limited_time() {
        let mut t = taint("k", "", NoSelect);
        t.time_added = None;
        let tolerations = [toleration("k", "Exists", "", None, Some(300))];
        assert!(!tolerated(&[t], &tolerations, false, at(0)).tolerated);
    }

    #[rstest]
    #[case::exists_with_value(toleration("k", "Exists", "v", None, None))]
    #[case::empty_key_with_equal(toleration("", "Equal", "", None, None))]
    #[case::empty_key_with_empty_operator(toleration("", "", "", None, None))]
    fn malformed_tolerations_are_refused(#[case] bad: Toleration) {
        assert!(validate(&[bad]).is_err());
    }
}
