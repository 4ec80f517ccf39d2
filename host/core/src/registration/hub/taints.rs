//! The hub's taints on a ManagedCluster, from its `ManagedClusterConditionAvailable`:
//!
//! ```text
//!  Available missing / Unknown ⇒ cluster.open-cluster-management.io/unreachable  NoSelect
//!  Available False             ⇒ cluster.open-cluster-management.io/unavailable  NoSelect
//!  Available True              ⇒ neither
//! ```
//!
//! Other taints are kept as they are. A taint the hub adds gets `timeAdded` = now (whole
//! seconds, as the API stores it); a taint that stays keeps its `timeAdded`, because
//! tolerations with `tolerationSeconds` count from it. A taint someone else added (admission
//! lets only the hub write `timeAdded`) is stamped the same way when the hub first sees it,
//! as OCM's ManagedCluster webhook stamps it on admission.

use flotilla_api::cluster::{
    consts::{TAINT_UNAVAILABLE, TAINT_UNREACHABLE},
    v1::{Taint, TaintEffect},
};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};

use crate::conditions::{FALSE, TRUE};

/// Whether `taint` is the hub's taint `key` (same key, empty value, effect NoSelect), as OCM
/// compares taints (key, value and effect; not `timeAdded`).
fn is_hub_taint(taint: &Taint, key: &str) -> bool {
    taint.key == key && taint.value.is_empty() && taint.effect == TaintEffect::NoSelect
}

/// The taints the cluster should carry, given its current taints and the status of its
/// Available condition (`None` when missing), or `None` when they are already right.
pub fn desired_taints(current: &[Taint], available: Option<&str>, now: Timestamp) -> Option<Vec<Taint>> {
    let (wanted, unwanted): (&[&str], &[&str]) = match available {
        Some(TRUE) => (&[], &[TAINT_UNREACHABLE, TAINT_UNAVAILABLE]),
        Some(FALSE) => (&[TAINT_UNAVAILABLE], &[TAINT_UNREACHABLE]),
        // Missing, Unknown, or anything unexpected: the hub cannot tell the cluster is there.
        _ => (&[TAINT_UNREACHABLE], &[TAINT_UNAVAILABLE]),
    };
    let mut taints: Vec<Taint> = current
        .iter()
        .filter(|t| !unwanted.iter().any(|key| is_hub_taint(t, key)))
        .cloned()
        .collect();
    let stamp = Timestamp::from_second(now.as_second()).unwrap_or(now);
    for taint in &mut taints {
        taint.time_added.get_or_insert(Time(stamp));
    }
    for key in wanted {
        if !taints.iter().any(|t| is_hub_taint(t, key)) {
            taints.push(Taint {
                key: (*key).to_owned(),
                value: String::new(),
                effect: TaintEffect::NoSelect,
                time_added: Some(Time(stamp)),
            });
        }
    }
    (taints != current).then_some(taints)
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn taint(key: &str, added: i64) -> Taint {
        Taint {
            key: key.into(),
            value: String::new(),
            effect: TaintEffect::NoSelect,
            time_added: Some(Time(at(added))),
        }
    }

    fn user_taint() -> Taint {
        Taint {
            key: "example.com/gpu".into(),
            value: "none".into(),
            effect: TaintEffect::PreferNoSelect,
            time_added: Some(Time(at(1))),
        }
    }

    #[rstest]
    #[case::missing(None, TAINT_UNREACHABLE)]
    #[case::unknown(Some("Unknown"), TAINT_UNREACHABLE)]
    #[case::false_(Some("False"), TAINT_UNAVAILABLE)]
    fn an_unhealthy_cluster_gets_one_stamped_taint(#[case] available: Option<&str>, #[case] key: &str) {
        let taints = desired_taints(&[], available, at(50)).unwrap();
        assert_eq!(taints, vec![taint(key, 50)]);
    }

    #[test]
    fn an_available_cluster_loses_both_hub_taints_and_keeps_others() {
        let current = vec![
            user_taint(),
            taint(TAINT_UNREACHABLE, 10),
            taint(TAINT_UNAVAILABLE, 20),
        ];
        assert_eq!(
            desired_taints(&current, Some(TRUE), at(50)),
            Some(vec![user_taint()])
        );
    }

    #[test]
    fn a_taint_that_stays_keeps_its_time_and_nothing_changes() {
        let current = vec![user_taint(), taint(TAINT_UNREACHABLE, 10)];
        assert_eq!(desired_taints(&current, Some("Unknown"), at(50)), None);
        assert_eq!(desired_taints(&[user_taint()], Some(TRUE), at(50)), None);
    }

    #[test]
    fn a_taint_added_without_a_time_is_stamped_and_a_stamped_one_kept() {
        let unstamped = Taint {
            time_added: None,
            ..user_taint()
        };
        let stamped = Taint {
            time_added: Some(Time(at(50))),
            ..user_taint()
        };
        assert_eq!(
            desired_taints(
                &[unstamped, taint(TAINT_UNREACHABLE, 10)],
                Some("Unknown"),
                at(50)
            ),
            Some(vec![stamped.clone(), taint(TAINT_UNREACHABLE, 10)])
        );
        assert_eq!(desired_taints(&[stamped], Some(TRUE), at(90)), None);
    }

    #[test]
    fn unknown_turning_false_swaps_the_taint() {
        let current = vec![taint(TAINT_UNREACHABLE, 10)];
        assert_eq!(
            desired_taints(&current, Some(FALSE), at(50)),
            Some(vec![taint(TAINT_UNAVAILABLE, 50)])
        );
    }

    #[test]
    fn the_stamp_is_whole_seconds() {
        let now = at(50)
            .checked_add(k8s_openapi::jiff::SignedDuration::from_millis(700))
            .unwrap();
        let taints = desired_taints(&[], None, now).unwrap();
        assert_eq!(taints[0].time_added, Some(Time(at(50))));
    }

    #[test]
    fn a_look_alike_taint_with_another_effect_is_not_the_hubs() {
        let look_alike = Taint {
            effect: TaintEffect::PreferNoSelect,
            ..taint(TAINT_UNREACHABLE, 10)
        };
        let taints = desired_taints(std::slice::from_ref(&look_alike), None, at(50)).unwrap();
        assert_eq!(taints, vec![look_alike.clone(), taint(TAINT_UNREACHABLE, 50)]);
        assert_eq!(
            desired_taints(std::slice::from_ref(&look_alike), Some(TRUE), at(50)),
            None
        );
    }
}
