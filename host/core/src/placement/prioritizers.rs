//! Step 4: prioritizers, with OCM's formulas to the integer. Each gives every feasible cluster a
//! score in −100..=100; the total is Σ weight × score.
//!
//! ```text
//!  Balance                   100 without decisions of other placements, else
//!                            2·trunc(100·(0.5 − count/maxCount))   (counts over other placements)
//!  Steady                    100 if in this placement's decisions, else 0
//!  ResourceAllocatableCPU    trunc(((x − min)/(max − min) − 0.5)·200), or 100 when max = min;
//!  ResourceAllocatableMemory clusters lacking allocatable or capacity of the resource score 0
//!  AddOn <resource>/<score>  the score's value in AddOnPlacementScore <resource> of the cluster
//!                            namespace; 0 when missing or past `validUntil`
//! ```
//!
//! Mode `Additive` (or empty) starts from Balance 1 and Steady 1 and lets configurations
//! override; `Exact` uses only the configurations. A weight of 0 disables a prioritizer.

use std::collections::BTreeMap;

use flotilla_api::cluster::{
    v1::ManagedCluster,
    v1beta1::{PRIORITIZER_MODE_ADDITIVE, PRIORITIZER_MODE_EXACT, PrioritizerPolicy, ScoreCoordinateType},
};
use k8s_openapi::jiff::Timestamp;

use crate::{
    placement::{Inputs, Misconfiguration, name_of},
    registration::agent::resources,
};

/// Highest score of one prioritizer.
pub const MAX_SCORE: i64 = 100;
/// Built-in prioritizer `Balance`.
pub const BALANCE: &str = "Balance";
/// Built-in prioritizer `Steady`.
pub const STEADY: &str = "Steady";
/// Built-in prioritizer `ResourceAllocatableCPU`.
pub const ALLOCATABLE_CPU: &str = "ResourceAllocatableCPU";
/// Built-in prioritizer `ResourceAllocatableMemory`.
pub const ALLOCATABLE_MEMORY: &str = "ResourceAllocatableMemory";

/// A prioritizer the placement uses.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Prioritizer {
    /// Spread decisions over clusters.
    Balance,
    /// Keep existing decisions.
    Steady,
    /// Most allocatable of a resource (`cpu` or `memory`).
    Allocatable(&'static str),
    /// A score from AddOnPlacementScores.
    AddOn {
        /// AddOnPlacementScore name.
        resource: String,
        /// Score name inside it.
        score: String,
    },
}

/// The key a configuration overrides: type (BuiltIn before AddOn), built-in name and add-on
/// coordinate.
type Coordinate = (u8, String, Option<(String, String)>);

fn type_key(t: ScoreCoordinateType) -> u8 {
    match t {
        ScoreCoordinateType::BuiltIn => 0,
        ScoreCoordinateType::AddOn => 1,
    }
}

/// The prioritizers with a non-zero weight, in a fixed order.
pub fn weights(policy: &PrioritizerPolicy) -> Result<Vec<(Prioritizer, i32)>, Misconfiguration> {
    let mut merged: BTreeMap<Coordinate, i32> = BTreeMap::new();
    match policy.mode.as_str() {
        PRIORITIZER_MODE_EXACT => {}
        "" | PRIORITIZER_MODE_ADDITIVE => {
            merged.insert((0, BALANCE.into(), None), 1);
            merged.insert((0, STEADY.into(), None), 1);
        }
        other => {
            return Err(Misconfiguration::new(
                "",
                format!("incorrect prioritizer policy mode: {other}"),
            ));
        }
    }
    for config in &policy.configurations {
        // The CRD bounds weights; one stored before that, or written around it, is still refused.
        if !(-10..=10).contains(&config.weight) {
            return Err(Misconfiguration::new(
                "",
                format!("weight {} is out of range -10..10", config.weight),
            ));
        }
        let c = &config.score_coordinate;
        let add_on = c
            .add_on
            .as_ref()
            .map(|a| (a.resource_name.clone(), a.score_name.clone()));
        merged.insert((type_key(c.type_), c.built_in.clone(), add_on), config.weight);
    }
    let mut out = Vec::new();
    for ((type_, built_in, add_on), weight) in merged {
        if weight == 0 {
            continue;
        }
        let prioritizer = match type_ {
            0 => match built_in.as_str() {
                BALANCE => Prioritizer::Balance,
                STEADY => Prioritizer::Steady,
                ALLOCATABLE_CPU => Prioritizer::Allocatable("cpu"),
                ALLOCATABLE_MEMORY => Prioritizer::Allocatable("memory"),
                other => {
                    return Err(Misconfiguration::new(
                        "",
                        format!("incorrect builtin prioritizer: {other}"),
                    ));
                }
            },
            _ => match add_on {
                Some((resource, score)) => Prioritizer::AddOn { resource, score },
                None => return Err(Misconfiguration::new("", "addOn should not be empty")),
            },
        };
        out.push((prioritizer, weight));
    }
    Ok(out)
}

/// Scores of one pass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scoring {
    /// Total per feasible cluster.
    pub totals: BTreeMap<String, i64>,
    /// Expired AddOnPlacementScores, as `"AddOnPlacementScores <ns>/<name> ... expired"`.
    pub warnings: Vec<String>,
    /// The earliest future `validUntil` of a score in use.
    pub next_expiry: Option<Timestamp>,
}

/// Scores `clusters` with `weights`.
pub fn score(weights: &[(Prioritizer, i32)], clusters: &[&ManagedCluster], inputs: &Inputs<'_>) -> Scoring {
    let mut scoring = Scoring {
        totals: clusters
            .iter()
            .map(|c| (name_of(&c.metadata).to_owned(), 0))
            .collect(),
        ..Default::default()
    };
    for (prioritizer, weight) in weights {
        let scores = match prioritizer {
            Prioritizer::Balance => balance(clusters, inputs.other_decisions),
            Prioritizer::Steady => steady(clusters, inputs.existing),
            Prioritizer::Allocatable(resource) => allocatable(clusters, resource),
            Prioritizer::AddOn { resource, score } => {
                let (scores, expired, next) = add_on(clusters, inputs.scores, resource, score, inputs.now);
                if !expired.is_empty() {
                    scoring
                        .warnings
                        .push(format!("AddOnPlacementScores {} expired", expired.join(" ")));
                }
                scoring.next_expiry = match (scoring.next_expiry, next) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, None) => a,
                    (None, b) => b,
                };
                scores
            }
        };
        // Both maps are sorted by name: one merge pass adds the scores, where a lookup per
        // cluster would cost a string search each (this runs for every cluster of every pass).
        let mut scores = scores.into_iter().peekable();
        for (name, total) in &mut scoring.totals {
            while scores.next_if(|(n, _)| n < name).is_some() {}
            if let Some((_, value)) = scores.next_if(|(n, _)| n == name) {
                *total += value * i64::from(*weight);
            }
        }
    }
    scoring
}

/// Balance: fewer decisions of other placements score higher.
pub fn balance(
    clusters: &[&ManagedCluster],
    other_decisions: &BTreeMap<String, i64>,
) -> BTreeMap<String, i64> {
    let max_count = other_decisions.values().copied().max().unwrap_or(0);
    clusters
        .iter()
        .map(|c| {
            let name = name_of(&c.metadata);
            let score = match other_decisions.get(name) {
                Some(&count) if max_count > 0 => {
                    let usage = count as f64 / max_count as f64;
                    // Go: 2 * int64(float64(100) * (0.5 - usage)); `as` truncates toward zero.
                    2 * ((MAX_SCORE as f64) * (0.5 - usage)) as i64
                }
                _ => MAX_SCORE,
            };
            (name.to_owned(), score)
        })
        .collect()
}

/// Steady: clusters already decided score 100.
pub fn steady(
    clusters: &[&ManagedCluster],
    existing: &std::collections::BTreeSet<String>,
) -> BTreeMap<String, i64> {
    clusters
        .iter()
        .map(|c| {
            let name = name_of(&c.metadata);
            (
                name.to_owned(),
                if existing.contains(name) { MAX_SCORE } else { 0 },
            )
        })
        .collect()
}

/// A quantity as Kubernetes' `AsApproximateFloat64` gives it.
fn approximate(quantity: &str) -> Option<f64> {
    let (nanos, _) = resources::parse(quantity).ok()?;
    if nanos % 1_000_000_000 == 0 {
        Some((nanos / 1_000_000_000) as f64)
    } else {
        Some(nanos as f64 / 1e9)
    }
}

fn allocatable_of(cluster: &ManagedCluster, resource: &str) -> Option<f64> {
    let status = cluster.status.as_ref()?;
    let value = approximate(&status.allocatable.get(resource)?.0)?;
    // OCM skips clusters that report allocatable without capacity.
    status.capacity.get(resource)?;
    Some(value)
}

/// ResourceAllocatableCPU/Memory: the most allocatable scores 100, the least −100.
pub fn allocatable(clusters: &[&ManagedCluster], resource: &str) -> BTreeMap<String, i64> {
    let values: Vec<(String, f64)> = clusters
        .iter()
        .filter_map(|c| allocatable_of(c, resource).map(|v| (name_of(&c.metadata).to_owned(), v)))
        .collect();
    let min = values.iter().map(|(_, v)| *v).fold(f64::INFINITY, f64::min);
    let max = values.iter().map(|(_, v)| *v).fold(f64::NEG_INFINITY, f64::max);
    values
        .into_iter()
        .map(|(name, v)| {
            let score = if max - min != 0.0 {
                let ratio = (v - min) / (max - min);
                ((ratio - 0.5) * 2.0 * 100.0) as i64
            } else {
                MAX_SCORE
            };
            (name, score)
        })
        .collect()
}

type AddOnScores = (BTreeMap<String, i64>, Vec<String>, Option<Timestamp>);

/// AddOn: a score from the cluster's AddOnPlacementScore; expired ones count 0.
pub fn add_on(
    clusters: &[&ManagedCluster],
    table: &super::ScoreTable,
    resource: &str,
    score_name: &str,
    now: Timestamp,
) -> AddOnScores {
    let mut scores = BTreeMap::new();
    let mut expired = Vec::new();
    let mut next = None::<Timestamp>;
    for cluster in clusters {
        let name = name_of(&cluster.metadata);
        let mut value = 0;
        if let Some(status) = table.get(&(name.to_owned(), resource.to_owned())) {
            match status.valid_until.as_ref().map(|t| t.0) {
                Some(until) if now > until => expired.push(format!("{name}/{resource}")),
                until => {
                    if let Some(until) = until {
                        next = Some(next.map_or(until, |n| n.min(until)));
                    }
                    // OCM keeps the last entry of a repeated score name.
                    if let Some(s) = status.scores.iter().rev().find(|s| s.name == score_name) {
                        value = i64::from(s.value);
                    }
                }
            }
        }
        scores.insert(name.to_owned(), value);
    }
    (scores, expired, next)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use rstest::rstest;
    use serde_json::json;

    use super::*;
    use crate::placement::testing::cluster;

    fn policy(value: serde_json::Value) -> PrioritizerPolicy {
        serde_json::from_value(value).unwrap()
    }

    #[rstest]
    #[case::additive_default(json!({}), vec![(Prioritizer::Balance, 1), (Prioritizer::Steady, 1)])]
    #[case::additive_override(
        json!({"mode": "Additive", "configurations": [{"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Steady"}, "weight": 3}]}),
        vec![(Prioritizer::Balance, 1), (Prioritizer::Steady, 3)]
    )]
    #[case::additive_zero_disables(
        json!({"configurations": [{"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Balance"}, "weight": 0}]}),
        vec![(Prioritizer::Steady, 1)]
    )]
    #[case::exact_only_listed(
        json!({"mode": "Exact", "configurations": [{"scoreCoordinate": {"type": "BuiltIn", "builtIn": "ResourceAllocatableMemory"}, "weight": -2}]}),
        vec![(Prioritizer::Allocatable("memory"), -2)]
    )]
    #[case::add_on(
        json!({"mode": "Exact", "configurations": [{"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": "r", "scoreName": "s"}}, "weight": 1}]}),
        vec![(Prioritizer::AddOn { resource: "r".into(), score: "s".into() }, 1)]
    )]
    fn weights_follow_the_mode(#[case] value: serde_json::Value, #[case] expected: Vec<(Prioritizer, i32)>) {
        assert_eq!(weights(&policy(value)).unwrap(), expected);
    }

    #[rstest]
    #[case::unknown_builtin(json!({"configurations": [{"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Nope"}, "weight": 1}]}), "incorrect builtin prioritizer: Nope")]
    #[case::unknown_mode(json!({"mode": "Sometimes"}), "incorrect prioritizer policy mode: Sometimes")]
    #[case::add_on_without_coordinate(json!({"configurations": [{"scoreCoordinate": {"type": "AddOn"}, "weight": 1}]}), "addOn should not be empty")]
    #[case::weight_too_high(json!({"configurations": [{"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Steady"}, "weight": 11}]}), "weight 11 is out of range -10..10")]
    fn bad_policies_are_misconfigurations(#[case] value: serde_json::Value, #[case] message: &str) {
        assert_eq!(weights(&policy(value)).unwrap_err().message, message);
    }

    #[test]
    fn an_unknown_builtin_with_weight_zero_is_ignored_as_in_ocm() {
        let p = policy(
            json!({"mode": "Exact", "configurations": [{"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Nope"}, "weight": 0}]}),
        );
        assert_eq!(weights(&p).unwrap(), vec![]);
    }

    #[test]
    fn balance_scores_by_share_of_the_busiest_cluster() {
        let clusters = [
            cluster("a").build(),
            cluster("b").build(),
            cluster("c").build(),
            cluster("d").build(),
        ];
        let refs: Vec<_> = clusters.iter().collect();
        let counts = BTreeMap::from([
            ("a".to_owned(), 3),
            ("b".to_owned(), 1),
            ("c".to_owned(), 2),
            ("x".to_owned(), 4),
        ]);
        let scores = balance(&refs, &counts);
        // a: 2·trunc(100·(0.5−0.75)) = −50; b: 2·trunc(100·0.25) = 50; c: 0; d: no decisions = 100.
        assert_eq!(
            scores,
            BTreeMap::from([
                ("a".into(), -50),
                ("b".into(), 50),
                ("c".into(), 0),
                ("d".into(), 100)
            ])
        );
    }

    #[test]
    fn balance_truncates_toward_zero_before_doubling() {
        let clusters = [cluster("a").build()];
        let refs: Vec<_> = clusters.iter().collect();
        // usage 1/3: 100·(0.5 − 0.333…) = 16.67 → 16 → 32.
        let counts = BTreeMap::from([("a".to_owned(), 1), ("x".to_owned(), 3)]);
        assert_eq!(balance(&refs, &counts)["a"], 32);
    }

    #[test]
    fn steady_favours_existing_decisions() {
        let clusters = [cluster("a").build(), cluster("b").build()];
        let refs: Vec<_> = clusters.iter().collect();
        let scores = steady(&refs, &BTreeSet::from(["b".to_owned()]));
        assert_eq!(scores, BTreeMap::from([("a".into(), 0), ("b".into(), 100)]));
    }

    #[test]
    fn allocatable_normalises_between_min_and_max() {
        let clusters = [
            cluster("a").resources("2", "4Gi").build(),
            cluster("b").resources("4", "8Gi").build(),
            cluster("c").resources("8", "8Gi").build(),
            cluster("none").build(),
        ];
        let refs: Vec<_> = clusters.iter().collect();
        let cpu = allocatable(&refs, "cpu");
        // b: (4−2)/(8−2) = 1/3 → (1/3 − 0.5)·200 = −33.3 → −33.
        assert_eq!(
            cpu,
            BTreeMap::from([("a".into(), -100), ("b".into(), -33), ("c".into(), 100)])
        );
        let memory = allocatable(&refs[1..], "memory");
        assert_eq!(memory, BTreeMap::from([("b".into(), 100), ("c".into(), 100)]));
    }

    #[test]
    fn add_on_scores_expire_and_report_their_next_expiry() {
        use flotilla_api::cluster::v1alpha1::{AddOnPlacementScoreItem, AddOnPlacementScoreStatus};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let now = Timestamp::from_second(1_000).unwrap();
        let status = |value, until: Option<i64>| AddOnPlacementScoreStatus {
            scores: vec![AddOnPlacementScoreItem {
                name: "cpuAvailable".into(),
                value,
            }],
            valid_until: until.map(|s| Time(Timestamp::from_second(s).unwrap())),
            ..Default::default()
        };
        let table = super::super::ScoreTable::from([
            (("a".into(), "res".into()), status(70, None)),
            (("b".into(), "res".into()), status(90, Some(500))),
            (("c".into(), "res".into()), status(30, Some(2_000))),
        ]);
        let clusters = [
            cluster("a").build(),
            cluster("b").build(),
            cluster("c").build(),
            cluster("d").build(),
        ];
        let refs: Vec<_> = clusters.iter().collect();
        let (scores, expired, next) = add_on(&refs, &table, "res", "cpuAvailable", now);
        assert_eq!(
            scores,
            BTreeMap::from([
                ("a".into(), 70),
                ("b".into(), 0),
                ("c".into(), 30),
                ("d".into(), 0)
            ])
        );
        assert_eq!(expired, vec!["b/res".to_owned()]);
        assert_eq!(next, Some(Timestamp::from_second(2_000).unwrap()));
    }
}
