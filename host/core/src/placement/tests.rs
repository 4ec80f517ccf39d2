//! Whole-pipeline tests of [`schedule`](super::schedule): conditions for every kind of bad
//! input, requeue times, and property tests over generated inputs.

use std::collections::{BTreeMap, BTreeSet};

use flotilla_api::cluster::{
    consts::placement::{
        REASON_ALL_DECISIONS_SCHEDULED, REASON_MISCONFIGURED, REASON_NO_MANAGED_CLUSTER_MATCHED,
        REASON_NO_MANAGED_CLUSTER_SET_BINDINGS, REASON_NOT_ALL_DECISIONS_SCHEDULED, REASON_SUCCEEDCONFIGURED,
    },
    v1::{ManagedCluster, TaintEffect},
    v1beta1::{Placement, SpreadConstraintsTerm, TopologyKeyType, UnsatisfiableMaxSkewAction},
    v1beta2::{ManagedClusterSet, ManagedClusterSetBinding},
};
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use rstest::rstest;
use serde_json::json;

use super::{Inputs, Schedule, ScoreTable, compile, name_of, schedule, spread, testing::*};

fn placement(spec: serde_json::Value) -> Placement {
    serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": spec,
    }))
    .unwrap()
}

struct World {
    clusters: Vec<ManagedCluster>,
    sets: Vec<ManagedClusterSet>,
    bindings: Vec<ManagedClusterSetBinding>,
    scores: ScoreTable,
    existing: BTreeSet<String>,
    others: BTreeMap<String, i64>,
    now: Timestamp,
}

impl World {
    fn new(clusters: Vec<ManagedCluster>) -> Self {
        Self {
            clusters,
            sets: vec![label_set("global")],
            bindings: vec![binding("global")],
            scores: ScoreTable::new(),
            existing: BTreeSet::new(),
            others: BTreeMap::new(),
            now: Timestamp::from_second(1_000).unwrap(),
        }
    }

    fn run(&self, p: &Placement) -> Schedule {
        let clusters: Vec<&ManagedCluster> = self.clusters.iter().collect();
        let sets: Vec<&ManagedClusterSet> = self.sets.iter().collect();
        let bindings: Vec<&ManagedClusterSetBinding> = self.bindings.iter().collect();
        let inputs = Inputs {
            placement: p,
            clusters: &clusters,
            cluster_sets: &sets,
            bindings: &bindings,
            scores: &self.scores,
            existing: &self.existing,
            other_decisions: &self.others,
            now: self.now,
        };
        schedule(&inputs, &compile(&p.spec))
    }
}

fn three() -> Vec<ManagedCluster> {
    vec![
        cluster("c1").label("env", "prod").resources("2", "2Gi").build(),
        cluster("c2").label("env", "prod").resources("8", "2Gi").build(),
        cluster("c3").label("env", "dev").resources("4", "2Gi").build(),
    ]
}

#[test]
fn an_empty_placement_selects_every_cluster_of_the_bound_sets() {
    let s = World::new(three()).run(&placement(json!({})));
    assert_eq!(s.selected, vec!["c1", "c2", "c3"]);
    assert_eq!(s.satisfied.reason, REASON_ALL_DECISIONS_SCHEDULED);
    assert_eq!(s.misconfigured.reason, REASON_SUCCEEDCONFIGURED);
    assert_eq!(s.groups.len(), 1);
}

#[test]
fn the_best_scored_clusters_are_selected_up_to_number_of_clusters() {
    let p = placement(
        json!({"numberOfClusters": 1, "prioritizerPolicy": {"configurations": [
        {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "ResourceAllocatableCPU"}, "weight": 2}]}}),
    );
    let s = World::new(three()).run(&p);
    assert_eq!(s.selected, vec!["c2"]);
    // c2: Balance 100 + Steady 0 + 2·100; c3: 100 + 2·(−33); c1: 100 + 2·(−100).
    assert_eq!(
        s.scores,
        BTreeMap::from([("c1".into(), -100), ("c2".into(), 300), ("c3".into(), 34)])
    );
}

#[test]
fn fewer_clusters_than_wanted_is_not_all_decisions_scheduled() {
    let s = World::new(three()).run(&placement(json!({"numberOfClusters": 5})));
    assert_eq!(s.satisfied.reason, REASON_NOT_ALL_DECISIONS_SCHEDULED);
    assert_eq!(s.satisfied.message, "2 cluster decisions unscheduled");
    assert_eq!(s.unscheduled, 2);
}

#[rstest]
#[case::unknown_prioritizer(json!({"prioritizerPolicy": {"configurations": [{"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Cheapest"}, "weight": 1}]}}), ":incorrect builtin prioritizer: Cheapest")]
#[case::exists_toleration_with_value(json!({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}), "TaintToleration:")]
#[case::invalid_cel(json!({"predicates": [{"requiredClusterSelector": {"celSelector": {"celExpressions": ["managedCluster.("]}}}]}), "Predicate:compilation failed")]
#[case::too_costly_cel(json!({"predicates": [{"requiredClusterSelector": {"celSelector": {"celExpressions": [
    "managedCluster.status.clusterClaims.all(a, managedCluster.status.clusterClaims.all(b, managedCluster.status.clusterClaims.all(c, a.name != c.name)))"]}}}]}),
    "Predicate:compilation failed: estimated cost")]
#[case::weight_out_of_range(json!({"prioritizerPolicy": {"configurations": [{"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Steady"}, "weight": 42}]}}), ":weight 42 is out of range")]
#[case::percentage_over_hundred(json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": "150%"}}}), ":clustersPerDecisionGroup 150%")]
fn bad_input_is_reported_as_misconfigured(#[case] spec: serde_json::Value, #[case] message_start: &str) {
    let s = World::new(three()).run(&placement(spec));
    assert_eq!(s.misconfigured.reason, REASON_MISCONFIGURED);
    assert!(
        s.misconfigured.message.starts_with(message_start),
        "{:?} does not start with {message_start:?}",
        s.misconfigured.message
    );
    // Nothing is decided from a misconfigured placement.
    assert!(s.groups.iter().all(|g| g.clusters.is_empty()));
}

#[test]
fn a_misconfigured_filter_selects_nothing_and_reports_no_cluster_matched() {
    let p = placement(json!({"tolerations": [{"key": "", "operator": "Equal"}]}));
    let s = World::new(three()).run(&p);
    assert!(s.selected.is_empty());
    assert_eq!(s.satisfied.reason, REASON_NO_MANAGED_CLUSTER_MATCHED);
}

#[test]
fn a_binding_to_a_missing_set_counts_as_no_binding() {
    let mut world = World::new(three());
    world.bindings = vec![binding("missing")];
    let s = world.run(&placement(json!({})));
    assert_eq!(s.satisfied.reason, REASON_NO_MANAGED_CLUSTER_SET_BINDINGS);
    assert_eq!(s.groups, vec![super::Group::default()]);
}

#[test]
fn a_tolerated_taint_requeues_at_its_expiry_and_the_cluster_leaves_afterwards() {
    let mut world = World::new(vec![
        cluster("c1")
            .taint(
                "cluster.open-cluster-management.io/unreachable",
                TaintEffect::NoSelect,
                900,
            )
            .build(),
        cluster("c2").build(),
    ]);
    world.existing = BTreeSet::from(["c1".to_owned()]);
    let p = placement(json!({"tolerations": [
        {"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists", "tolerationSeconds": 300}]}));
    let s = world.run(&p);
    assert_eq!(s.selected, vec!["c1", "c2"]);
    assert_eq!(s.requeue_at, Some(Timestamp::from_second(1_200).unwrap()));
    world.now = Timestamp::from_second(1_200).unwrap();
    let s = world.run(&p);
    assert_eq!(s.selected, vec!["c2"]);
    assert_eq!(s.requeue_at, None);
}

#[test]
fn an_add_on_score_picks_the_top_cluster() {
    use flotilla_api::cluster::v1alpha1::{AddOnPlacementScoreItem, AddOnPlacementScoreStatus};
    let mut world = World::new(three());
    for (c, v) in [("c1", 20), ("c2", 90), ("c3", 50)] {
        world.scores.insert(
            (c.into(), "default".into()),
            AddOnPlacementScoreStatus {
                scores: vec![AddOnPlacementScoreItem {
                    name: "cpuAvailable".into(),
                    value: v,
                }],
                ..Default::default()
            },
        );
    }
    let p = placement(
        json!({"numberOfClusters": 1, "prioritizerPolicy": {"mode": "Exact", "configurations": [
        {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": "default", "scoreName": "cpuAvailable"}}, "weight": 1}]}}),
    );
    assert_eq!(world.run(&p).selected, vec!["c2"]);
}

// ---- property tests ----

#[derive(Clone, Debug)]
struct GenCluster {
    zone: u8,
    taint: Option<u8>,
    cpu: u8,
    decided: bool,
}

fn gen_clusters() -> impl Strategy<Value = Vec<GenCluster>> {
    prop::collection::vec(
        (0u8..3, prop::option::of(0u8..3), 1u8..16, any::<bool>()).prop_map(|(zone, taint, cpu, decided)| {
            GenCluster {
                zone,
                taint,
                cpu,
                decided,
            }
        }),
        0..24,
    )
}

const EFFECTS: [TaintEffect; 3] = [
    TaintEffect::NoSelect,
    TaintEffect::PreferNoSelect,
    TaintEffect::NoSelectIfNew,
];

fn world_of(generated: &[GenCluster]) -> World {
    let clusters = generated
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let mut b = cluster(&format!("c{i:02}"))
                .label("zone", &format!("z{}", g.zone))
                .resources(&g.cpu.to_string(), "1Gi");
            if let Some(t) = g.taint {
                b = b.taint("k", EFFECTS[usize::from(t)], 0);
            }
            b.build()
        })
        .collect();
    let mut world = World::new(clusters);
    world.existing = generated
        .iter()
        .enumerate()
        .filter(|(_, g)| g.decided)
        .map(|(i, _)| format!("c{i:02}"))
        .collect();
    world
}

proptest! {
    #[test]
    fn an_untolerated_no_select_cluster_is_never_selected(generated in gen_clusters(), n in prop::option::of(0i32..30)) {
        let world = world_of(&generated);
        let s = world.run(&placement(json!({"numberOfClusters": n})));
        for name in &s.selected {
            let c = world.clusters.iter().find(|c| name_of(&c.metadata) == name).unwrap();
            prop_assert!(c.spec.taints.iter().all(|t| t.effect != TaintEffect::NoSelect));
        }
    }

    #[test]
    fn never_more_than_number_of_clusters_are_selected(generated in gen_clusters(), n in 0i32..30, cpu_weight in -10i32..=10) {
        let world = world_of(&generated);
        let s = world.run(&placement(json!({"numberOfClusters": n, "prioritizerPolicy": {"configurations": [
            {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "ResourceAllocatableCPU"}, "weight": cpu_weight}]}})));
        prop_assert!(s.selected.len() <= usize::try_from(n).unwrap());
        let groups: usize = s.groups.iter().map(|g| g.clusters.len()).sum();
        prop_assert_eq!(groups, s.selected.len());
    }

    #[test]
    fn steady_keeps_existing_decisions_when_other_scores_tie(generated in gen_clusters(), n in 0i32..30) {
        let mut world = world_of(&generated);
        for c in &mut world.clusters { c.spec.taints.clear(); }
        let s = world.run(&placement(json!({"numberOfClusters": n})));
        let wanted = usize::try_from(n).unwrap();
        if world.existing.len() <= wanted {
            for e in &world.existing { prop_assert!(s.selected.contains(e)); }
        } else {
            prop_assert!(s.selected.iter().all(|c| world.existing.contains(c)));
        }
    }

    #[test]
    fn do_not_schedule_never_exceeds_max_skew(generated in gen_clusters(), n in prop::option::of(0i32..30), max_skew in 1i32..4) {
        let world = world_of(&generated);
        let p = placement(json!({"numberOfClusters": n, "tolerations": [{"operator": "Exists"}],
            "spreadPolicy": {"spreadConstraints": [{"topologyKey": "zone", "topologyKeyType": "Label",
                "maxSkew": max_skew, "whenUnsatisfiable": "DoNotSchedule"}]}}));
        let s = world.run(&p);
        let feasible: Vec<&ManagedCluster> = world.clusters.iter().collect();
        let selected: Vec<&ManagedCluster> = world.clusters.iter().filter(|c| s.selected.iter().any(|n| n == name_of(&c.metadata))).collect();
        let term = SpreadConstraintsTerm { topology_key: "zone".into(), topology_key_type: TopologyKeyType::Label,
            max_skew, when_unsatisfiable: UnsatisfiableMaxSkewAction::DoNotSchedule };
        prop_assert!(spread::skew(&feasible, &selected, &term) <= i64::from(max_skew));
    }

    #[test]
    fn the_same_inputs_in_any_order_give_the_same_decisions(
        (generated, order) in gen_clusters().prop_flat_map(|g| {
            let order: Vec<usize> = (0..g.len()).collect();
            (Just(g), Just(order).prop_shuffle())
        }),
        n in prop::option::of(0i32..30),
        spread in any::<bool>(),
    ) {
        let world = world_of(&generated);
        let mut spec = json!({"numberOfClusters": n, "prioritizerPolicy": {"configurations": [
            {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "ResourceAllocatableCPU"}, "weight": 1}]},
            "decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": "30%"}}});
        if spread {
            spec["spreadPolicy"] = json!({"spreadConstraints": [{"topologyKey": "zone", "topologyKeyType": "Label", "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]});
        }
        let p = placement(spec);
        let first = world.run(&p);
        let mut shuffled = world_of(&generated);
        shuffled.clusters = order.iter().map(|&i| world.clusters[i].clone()).collect();
        shuffled.sets.push(exclusive_set("other"));
        shuffled.sets.reverse();
        let second = shuffled.run(&p);
        prop_assert_eq!(first.selected, second.selected);
        prop_assert_eq!(first.scores, second.scores);
        prop_assert_eq!(first.groups, second.groups);
    }
}
