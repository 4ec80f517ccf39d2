//! Table-driven cases for each strategy and property tests for the engine's promises: never more
//! in flight than allowed, mandatory groups first, timeouts only from `progressDeadline`, and the
//! same answer for any order of the input.

use super::*;
use proptest::prelude::*;
use rstest::rstest;
use serde_json::{Value, json};

const NOW: i64 = 1_800_000_000;

fn at(offset_secs: i64) -> Timestamp {
    Timestamp::from_second(NOW + offset_secs).expect("valid test time")
}

fn strategy(value: Value) -> RolloutStrategy {
    serde_json::from_value(value).expect("valid strategy")
}

fn groups(spec: &[(&str, i32, &[&str])]) -> ClusterGroups {
    ClusterGroups::new(
        spec.iter()
            .map(|(name, index, clusters)| (GroupKey::new(*name, *index), clusters.to_vec())),
    )
}

fn five() -> ClusterGroups {
    groups(&[("", 0, &["c1", "c2", "c3", "c4", "c5"])])
}

fn canary_and_rest() -> ClusterGroups {
    groups(&[("canary", 0, &["c4"]), ("", 1, &["c1", "c2", "c3"])])
}

fn two_groups() -> ClusterGroups {
    groups(&[("", 0, &["a1", "a2"]), ("", 1, &["b1", "b2"])])
}

/// `(cluster, state, seconds ago)`.
fn states(spec: &[(&str, ClusterState, i64)]) -> Vec<ClusterStatus> {
    spec.iter()
        .map(|(c, s, ago)| ClusterStatus::new(*c, *s, Some(at(-ago))))
        .collect()
}

fn names(list: &[ClusterStatus]) -> Vec<&str> {
    list.iter().map(|s| s.cluster.as_str()).collect()
}

use ClusterState::{Failed, Progressing, Skip, Succeeded, TimeOut, ToApply};

#[rstest]
#[case::all_starts_every_cluster(json!({"type": "All"}), five(), vec![], &["c1", "c2", "c3", "c4", "c5"], &[], false)]
#[case::all_leaves_succeeded_clusters_alone(
    json!({"type": "All"}), five(), states(&[("c1", Succeeded, 5), ("c2", Succeeded, 5)]), &["c3", "c4", "c5"], &[], false)]
#[case::all_times_out_a_cluster_progressing_past_the_deadline(
    json!({"type": "All", "all": {"progressDeadline": "90s"}}), five(),
    states(&[("c1", Progressing, 100), ("c2", Progressing, 10)]), &["c2", "c3", "c4", "c5"], &["c1"], false)]
#[case::no_deadline_means_progressing_forever(
    json!({"type": "All", "all": {"progressDeadline": "None"}}), five(),
    states(&[("c1", Progressing, 1_000_000)]), &["c1", "c2", "c3", "c4", "c5"], &[], false)]
#[case::progressive_starts_max_concurrency_clusters_in_name_order(
    json!({"type": "Progressive", "progressive": {"maxConcurrency": 2}}), five(), vec![], &["c1", "c2"], &[], false)]
#[case::progressive_counts_clusters_in_flight(
    json!({"type": "Progressive", "progressive": {"maxConcurrency": 2}}), five(),
    states(&[("c1", Succeeded, 5), ("c2", Progressing, 5)]), &["c2", "c3"], &[], false)]
#[case::progressive_percentages_round_up(
    json!({"type": "Progressive", "progressive": {"maxConcurrency": "30%"}}), five(), vec![], &["c1", "c2"], &[], false)]
#[case::progressive_without_settings_starts_everything(
    json!({"type": "Progressive"}), five(), vec![], &["c1", "c2", "c3", "c4", "c5"], &[], false)]
#[case::progressive_stops_once_failures_exceed_max_failures(
    json!({"type": "Progressive", "progressive": {"maxConcurrency": 2}}), five(),
    states(&[("c1", Failed, 5)]), &["c1"], &[], true)]
#[case::progressive_tolerates_max_failures(
    json!({"type": "Progressive", "progressive": {"maxConcurrency": 2, "maxFailures": 1}}), five(),
    states(&[("c1", Failed, 5)]), &["c1", "c2"], &[], false)]
#[case::a_timeout_counts_as_a_failure(
    json!({"type": "Progressive", "progressive": {"maxConcurrency": 3, "progressDeadline": "1m"}}), five(),
    states(&[("c1", Progressing, 120), ("c2", Succeeded, 5)]), &[], &["c1"], true)]
#[case::progressive_starts_mandatory_groups_first(
    json!({"type": "Progressive", "progressive": {"maxConcurrency": 1,
        "mandatoryDecisionGroups": [{"groupName": "canary"}]}}), canary_and_rest(), vec![], &["c4"], &[], false)]
#[case::mandatory_groups_by_index(
    json!({"type": "Progressive", "progressive": {"maxConcurrency": 1,
        "mandatoryDecisionGroups": [{"groupIndex": 1}]}}), canary_and_rest(), vec![], &["c1", "c2", "c3"], &[], false)]
#[case::the_rest_follows_once_mandatory_groups_succeeded(
    json!({"type": "Progressive", "progressive": {"maxConcurrency": 1,
        "mandatoryDecisionGroups": [{"groupName": "canary"}]}}), canary_and_rest(),
    states(&[("c4", Succeeded, 5)]), &["c1"], &[], false)]
#[case::a_failed_mandatory_group_stops_the_rollout(
    json!({"type": "Progressive", "progressive": {"maxConcurrency": 1, "maxFailures": 3,
        "mandatoryDecisionGroups": [{"groupName": "canary"}]}}), canary_and_rest(),
    states(&[("c4", Failed, 5)]), &["c4"], &[], true)]
#[case::per_group_starts_the_first_group(
    json!({"type": "ProgressivePerGroup"}), two_groups(), vec![], &["a1", "a2"], &[], false)]
#[case::per_group_waits_for_the_current_group(
    json!({"type": "ProgressivePerGroup"}), two_groups(),
    states(&[("a1", Succeeded, 5), ("a2", Progressing, 5)]), &["a2"], &[], false)]
#[case::per_group_moves_on_once_a_group_succeeded(
    json!({"type": "ProgressivePerGroup"}), two_groups(),
    states(&[("a1", Succeeded, 5), ("a2", Succeeded, 5)]), &["b1", "b2"], &[], false)]
#[case::per_group_max_failures_is_relative_to_the_group(
    json!({"type": "ProgressivePerGroup", "progressivePerGroup": {"maxFailures": "50%"}}), two_groups(),
    states(&[("a1", Failed, 5), ("a2", Succeeded, 5)]), &["a1", "b1", "b2"], &[], false)]
#[case::per_group_stops_when_a_group_fails(
    json!({"type": "ProgressivePerGroup"}), two_groups(),
    states(&[("a1", Failed, 5), ("a2", Succeeded, 5)]), &["a1"], &[], true)]
#[case::a_succeeded_cluster_soaks_for_min_success_time(
    json!({"type": "Progressive", "progressive": {"maxConcurrency": 1, "minSuccessTime": "5m"}}), five(),
    states(&[("c1", Succeeded, 60)]), &["c1"], &[], false)]
#[case::skipped_clusters_are_neither_started_nor_in_flight(
    json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}}), five(),
    states(&[("c1", Skip, 5)]), &["c2"], &[], false)]
#[case::timed_out_clusters_stay_timed_out(
    json!({"type": "All"}), five(), states(&[("c1", TimeOut, 5)]), &["c2", "c3", "c4", "c5"], &[], false)]
// OCM's order, kept: a mandatory cluster that already timed out breaches the mandatory groups'
// zero tolerance, but with none of them in flight or newly timed out the rest starts; an
// existing ToApply cluster of a mandatory group goes with it and takes one of its slots.
#[case::a_timed_out_mandatory_cluster_lets_the_rest_start(
    json!({"type": "Progressive", "progressive": {"maxFailures": "34%", "mandatoryDecisionGroups": [
        {"groupName": "canary"}, {"groupIndex": 2}]}}),
    groups(&[("canary", 0, &["c1"]), ("", 1, &["c0", "c2", "c4"]), ("", 2, &["c3", "c5"])]),
    states(&[("c1", TimeOut, 5), ("c5", ToApply, 5)]), &["c0", "c2", "c5"], &[], false)]
#[case::an_existing_to_apply_cluster_is_in_flight(
    json!({"type": "Progressive", "progressive": {"maxConcurrency": 2}}), five(),
    states(&[("c4", ToApply, 5)]), &["c1", "c4"], &[], false)]
fn plans_match_each_strategy(
    #[case] strategy_json: Value,
    #[case] groups: ClusterGroups,
    #[case] existing: Vec<ClusterStatus>,
    #[case] to_rollout: &[&str],
    #[case] timed_out: &[&str],
    #[case] breach: bool,
) {
    let plan = plan(&strategy(strategy_json), &groups, &existing, at(0)).expect("valid strategy");
    assert_eq!(names(&plan.to_rollout), to_rollout, "to roll out");
    assert_eq!(names(&plan.timed_out), timed_out, "timed out");
    assert_eq!(plan.max_failure_breach, breach, "max failure breach");
}

#[test]
fn clusters_that_left_the_placement_are_removed() {
    let existing = states(&[("c1", Succeeded, 5), ("gone", Progressing, 5)]);
    let plan = plan(&strategy(json!({"type": "All"})), &five(), &existing, at(0)).expect("valid");
    assert_eq!(names(&plan.removed), ["gone"]);
    assert!(!names(&plan.to_rollout).contains(&"gone"));
}

#[test]
fn new_clusters_carry_their_decision_group() {
    let plan = plan(
        &strategy(json!({"type": "ProgressivePerGroup"})),
        &canary_and_rest(),
        &[],
        at(0),
    )
    .expect("valid");
    assert_eq!(plan.to_rollout[0].group, GroupKey::new("canary", 0));
}

#[rstest]
#[case::deadline_ahead(json!({"type": "All", "all": {"progressDeadline": "90s"}}), Progressing, 30, Some(60))]
#[case::soak_ahead(json!({"type": "Progressive", "progressive": {"minSuccessTime": "5m"}}), Succeeded, 60, Some(240))]
#[case::nothing_to_wait_for(json!({"type": "All"}), Progressing, 30, None)]
fn recheck_after_is_the_nearest_deadline_or_soak_end(
    #[case] strategy_json: Value,
    #[case] state: ClusterState,
    #[case] ago: i64,
    #[case] expected_secs: Option<i64>,
) {
    let existing = states(&[("c1", state, ago)]);
    let plan = plan(&strategy(strategy_json), &five(), &existing, at(0)).expect("valid");
    assert_eq!(plan.recheck_after, expected_secs.map(SignedDuration::from_secs));
}

#[rstest]
#[case::unreadable_deadline(json!({"type": "All", "all": {"progressDeadline": "soon"}}), "progressDeadline")]
#[case::size_without_percent(json!({"type": "Progressive", "progressive": {"maxFailures": "5"}}), "maxFailures")]
#[case::unreadable_concurrency(json!({"type": "Progressive", "progressive": {"maxConcurrency": "lots"}}), "maxConcurrency")]
#[case::unset_type(json!({}), "rollout strategy type")]
#[case::unreadable_soak(json!({"type": "ProgressivePerGroup", "progressivePerGroup": {"minSuccessTime": "long"}}), "minSuccessTime")]
fn unreadable_settings_are_errors_naming_the_field(#[case] strategy_json: Value, #[case] field: &str) {
    let err = plan(&strategy(strategy_json), &five(), &[], at(0)).expect_err("invalid");
    assert!(err.to_string().starts_with(field), "{err}");
}

#[rstest]
#[case::unset_takes_the_group_size(json!({"type": "Progressive"}), json!("25%"))]
#[case::zero_takes_the_group_size(json!({"type": "Progressive", "progressive": {"maxConcurrency": 0}}), json!("25%"))]
#[case::set_is_kept(json!({"type": "Progressive", "progressive": {"maxConcurrency": 3}}), json!(3))]
fn add_ons_default_max_concurrency_to_the_decision_group_size(#[case] given: Value, #[case] expected: Value) {
    let group_size = IntOrString::String("25%".into());
    let strategy = with_group_size_as_max_concurrency(&strategy(given), &group_size);
    let progressive = strategy.progressive.expect("progressive settings");
    assert_eq!(
        serde_json::to_value(progressive.max_concurrency).expect("encodes"),
        expected
    );
}

#[test]
fn only_progressive_strategies_take_the_group_size() {
    let all = strategy(json!({"type": "ProgressivePerGroup"}));
    assert_eq!(
        with_group_size_as_max_concurrency(&all, &IntOrString::Int(2)),
        all
    );
}

// ---- properties ----

const STATES: [ClusterState; 6] = [ToApply, Progressing, Succeeded, Failed, TimeOut, Skip];

/// A placement: 1–4 groups with contiguous indices; clusters `c00..` spread over them.
fn arb_groups() -> impl Strategy<Value = ClusterGroups> {
    (1usize..=4, 1usize..=12)
        .prop_flat_map(|(n_groups, n_clusters)| {
            (
                Just(n_groups),
                proptest::collection::vec(0..n_groups, n_clusters),
                any::<bool>(),
            )
        })
        .prop_map(|(n_groups, assignment, named)| {
            let mut pairs: Vec<(GroupKey, Vec<String>)> = (0..n_groups)
                .map(|g| {
                    let name = if named { format!("g{g}") } else { String::new() };
                    (
                        GroupKey::new(name, i32::try_from(g).unwrap_or_default()),
                        Vec::new(),
                    )
                })
                .collect();
            for (i, g) in assignment.into_iter().enumerate() {
                pairs[g].1.push(format!("c{i:02}"));
            }
            ClusterGroups::new(pairs)
        })
}

fn arb_size() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0i32..8).prop_map(Value::from),
        (0u32..=100).prop_map(|p| Value::from(format!("{p}%")))
    ]
}

fn arb_deadline() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("None"), Just(""), Just("30s"), Just("2m"), Just("1h")]
}

/// Strategies of the kinds in `kinds` (0 All, 1 Progressive, 2 ProgressivePerGroup), with up
/// to `max_mandatory` mandatory group references.
fn arb_strategy(
    kinds: std::ops::Range<usize>,
    max_mandatory: usize,
) -> impl Strategy<Value = RolloutStrategy> {
    let mandatory = proptest::collection::vec(
        prop_oneof![
            (0i32..4).prop_map(|i| json!({"groupIndex": i})),
            (0i32..4).prop_map(|i| json!({"groupName": format!("g{i}")}))
        ],
        0..=max_mandatory,
    );
    (
        kinds,
        arb_size(),
        arb_size(),
        arb_deadline(),
        prop_oneof![Just("0s"), Just("1m")],
        mandatory,
    )
        .prop_map(|(kind, concurrency, failures, deadline, soak, mandatory)| {
            let config = json!({"maxFailures": failures, "progressDeadline": deadline, "minSuccessTime": soak,
                "maxConcurrency": concurrency, "mandatoryDecisionGroups": mandatory});
            strategy(match kind {
                0 => json!({"type": "All", "all": {"progressDeadline": deadline}}),
                1 => json!({"type": "Progressive", "progressive": config}),
                _ => json!({"type": "ProgressivePerGroup", "progressivePerGroup": config}),
            })
        })
}

/// States for some of the clusters of `groups` plus, sometimes, a cluster that left.
fn arb_existing(groups: &ClusterGroups) -> impl Strategy<Value = Vec<ClusterStatus>> + use<> {
    let mut clusters: Vec<String> = groups.clusters().into_iter().map(str::to_owned).collect();
    clusters.push("left".to_owned());
    let n = clusters.len();
    proptest::collection::vec(proptest::option::of((0usize..STATES.len(), 0i64..7200)), n).prop_map(
        move |picks| {
            clusters
                .iter()
                .zip(picks)
                .filter_map(|(c, pick)| {
                    pick.map(|(s, ago)| ClusterStatus::new(c.clone(), STATES[s], Some(at(-ago))))
                })
                .collect()
        },
    )
}

fn arb_case() -> impl Strategy<Value = (RolloutStrategy, ClusterGroups, Vec<ClusterStatus>)> {
    arb_case_of(0..3, 2)
}

fn arb_case_of(
    kinds: std::ops::Range<usize>,
    max_mandatory: usize,
) -> impl Strategy<Value = (RolloutStrategy, ClusterGroups, Vec<ClusterStatus>)> {
    (arb_strategy(kinds, max_mandatory), arb_groups()).prop_flat_map(|(s, g)| {
        let existing = arb_existing(&g);
        (Just(s), Just(g), existing)
    })
}

/// The mandatory groups' clusters of a Progressive or ProgressivePerGroup strategy.
fn mandatory_clusters(strategy: &RolloutStrategy, groups: &ClusterGroups) -> BTreeSet<String> {
    let Ok(settings) = Settings::of(strategy) else {
        return BTreeSet::new();
    };
    groups
        .only(settings.mandatory)
        .clusters()
        .into_iter()
        .map(str::to_owned)
        .collect()
}

proptest! {
    #[test]
    fn the_plan_does_not_depend_on_the_input_order(
        (strategy, groups, existing) in arb_case(),
        seed in any::<u64>(),
    ) {
        let mut shuffled = existing.clone();
        let mut rng = fastrand::Rng::with_seed(seed);
        rng.shuffle(&mut shuffled);
        prop_assert_eq!(plan(&strategy, &groups, &existing, at(0)), plan(&strategy, &groups, &shuffled, at(0)));
    }

    #[test]
    fn progressive_never_has_more_in_flight_than_max_concurrency(
        // Mandatory groups run group by group (whatever is in flight stays there); the limit
        // holds for the clusters after them, shown by the run-to-the-end properties below.
        (strategy, groups, existing) in arb_case_of(1..2, 0),
    ) {
        let Ok(plan) = plan(&strategy, &groups, &existing, at(0)) else { return Ok(()) };
        let settings = Settings::of(&strategy).expect("typed strategy");
        let total = groups.besides(&[]).clusters().len();
        let limit = settings::size(&settings.max_concurrency, total, total, "maxConcurrency").unwrap_or(total);
        prop_assert!(plan.to_rollout.len() <= limit.max(1), "{} in flight, limit {}", plan.to_rollout.len(), limit);
    }

    #[test]
    fn nothing_outside_mandatory_groups_starts_while_they_are_pending(
        (strategy, groups, existing) in arb_case_of(1..3, 2),
    ) {
        let Ok(plan) = plan(&strategy, &groups, &existing, at(0)) else { return Ok(()) };
        let mandatory = mandatory_clusters(&strategy, &groups);
        // A mandatory cluster already timed out lets the rest start, as in OCM (see
        // `a_timed_out_mandatory_cluster_lets_the_rest_start`).
        if existing.iter().any(|s| s.state == TimeOut && mandatory.contains(&s.cluster)) {
            return Ok(());
        }
        let new_mandatory = plan.to_rollout.iter().any(|s| s.state == ToApply && mandatory.contains(&s.cluster));
        if new_mandatory {
            prop_assert!(plan.to_rollout.iter().all(|s| s.state != ToApply || mandatory.contains(&s.cluster)));
        }
    }

    #[test]
    fn timeouts_come_only_from_the_progress_deadline(
        (strategy, groups, existing) in arb_case(),
    ) {
        let Ok(plan) = plan(&strategy, &groups, &existing, at(0)) else { return Ok(()) };
        let deadline = settings::progress_deadline(&Settings::of(&strategy).expect("typed").config.progress_deadline).ok().flatten();
        for s in &plan.timed_out {
            let input = existing.iter().find(|e| e.cluster == s.cluster).expect("timed out clusters had a state");
            prop_assert!(matches!(input.state, Progressing | Failed));
            let deadline = deadline.expect("a timeout needs a deadline");
            prop_assert!(input.last_transition_time.expect("set").checked_add(deadline).expect("fits") <= at(0));
        }
        for s in plan.to_rollout.iter().filter(|s| matches!(s.state, Progressing | Failed)) {
            prop_assert!(s.recheck_time.is_none_or(|t| t > at(0)), "{} is past its deadline", s.cluster);
        }
    }

    /// Drives a whole Progressive rollout: started clusters become Progressing, then in a random
    /// order Succeeded; in flight (started but not Succeeded) never exceeds maxConcurrency, and
    /// every cluster ends Succeeded.
    #[test]
    fn a_progressive_rollout_runs_to_the_end_within_max_concurrency(
        groups in arb_groups(),
        concurrency in 1i32..5,
        seed in any::<u64>(),
    ) {
        let strategy = strategy(json!({"type": "Progressive", "progressive": {"maxConcurrency": concurrency}}));
        let total = groups.clusters().len();
        let limit = usize::try_from(concurrency).unwrap_or(1).min(total);
        let mut states: BTreeMap<String, ClusterState> = BTreeMap::new();
        let mut rng = fastrand::Rng::with_seed(seed);
        for _ in 0..(4 * total + 4) {
            let existing: Vec<_> = states.iter().map(|(c, s)| ClusterStatus::new(c.clone(), *s, Some(at(-1)))).collect();
            let plan = plan(&strategy, &groups, &existing, at(0)).expect("valid");
            for s in plan.to_rollout.iter().filter(|s| s.state == ToApply) {
                states.insert(s.cluster.clone(), Progressing);
            }
            let in_flight: Vec<String> =
                states.iter().filter(|(_, s)| **s == Progressing).map(|(c, _)| c.clone()).collect();
            prop_assert!(in_flight.len() <= limit, "{} in flight, limit {}", in_flight.len(), limit);
            if let Some(done) = (!in_flight.is_empty()).then(|| &in_flight[rng.usize(..in_flight.len())]) {
                states.insert(done.clone(), Succeeded);
            }
        }
        prop_assert_eq!(states.values().filter(|s| **s == Succeeded).count(), total);
    }

    /// Drives a whole rollout with mandatory groups (Progressive) or group by group
    /// (ProgressivePerGroup): no cluster outside the mandatory groups starts before every
    /// mandatory cluster Succeeded, and with ProgressivePerGroup no group starts before every
    /// earlier group Succeeded; every cluster ends Succeeded.
    #[test]
    fn groups_finish_in_order_before_later_ones_start(
        groups in arb_groups(),
        per_group in any::<bool>(),
        mandatory_index in 0i32..4,
        seed in any::<u64>(),
    ) {
        let mandatory = json!([{"groupIndex": mandatory_index}]);
        let strategy = strategy(if per_group {
            json!({"type": "ProgressivePerGroup", "progressivePerGroup": {"mandatoryDecisionGroups": mandatory}})
        } else {
            json!({"type": "Progressive", "progressive": {"maxConcurrency": 1, "mandatoryDecisionGroups": mandatory}})
        });
        let first: BTreeSet<String> = mandatory_clusters(&strategy, &groups);
        let group_of: BTreeMap<String, i32> = groups
            .iter()
            .flat_map(|(k, cs)| cs.iter().map(move |c| (c.clone(), k.index)))
            .collect();
        let total = group_of.len();
        let mut states: BTreeMap<String, ClusterState> = BTreeMap::new();
        let mut rng = fastrand::Rng::with_seed(seed);
        for _ in 0..(4 * total + 4) {
            let existing: Vec<_> = states.iter().map(|(c, s)| ClusterStatus::new(c.clone(), *s, Some(at(-1)))).collect();
            let plan = plan(&strategy, &groups, &existing, at(0)).expect("valid");
            for s in plan.to_rollout.iter().filter(|s| s.state == ToApply) {
                if !first.contains(&s.cluster) {
                    let pending: Vec<&String> = first.iter().filter(|c| states.get(*c) != Some(&Succeeded)).collect();
                    prop_assert!(pending.is_empty(), "{} started before mandatory {:?}", s.cluster, pending);
                    if per_group {
                        let index = group_of[&s.cluster];
                        let earlier: Vec<&String> = group_of
                            .iter()
                            .filter(|(c, i)| **i < index && !first.contains(*c) && states.get(*c) != Some(&Succeeded))
                            .map(|(c, _)| c)
                            .collect();
                        prop_assert!(earlier.is_empty(), "{} started before {:?}", s.cluster, earlier);
                    }
                }
                states.insert(s.cluster.clone(), Progressing);
            }
            let in_flight: Vec<String> =
                states.iter().filter(|(_, s)| **s == Progressing).map(|(c, _)| c.clone()).collect();
            if let Some(done) = (!in_flight.is_empty()).then(|| &in_flight[rng.usize(..in_flight.len())]) {
                states.insert(done.clone(), Succeeded);
            }
        }
        prop_assert_eq!(states.values().filter(|s| **s == Succeeded).count(), total);
    }
}
