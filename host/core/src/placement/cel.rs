//! CEL expressions of `celSelector`, through the `cel` crate (never a hand-rolled evaluator).
//!
//! An expression sees the variable `managedCluster` (the ManagedCluster as JSON) and the member
//! function `managedCluster.scores("<AddOnPlacementScore name>")`, a list of `{name, value}`
//! maps, as in OCM's CEL library; the CEL standard library with the strings and lists
//! extensions is available. Expressions are compiled once per Placement generation.
//!
//! Limits: expressions are compiled and run under [`crate::cel_budget`]'s budget. An
//! expression too long or too costly to compile is a misconfiguration the user sees in
//! `PlacementMisconfigured`. One expression on one cluster may spend [`COST_LIMIT`]: past it
//! that cluster does not match (as an evaluation error in OCM) and the decision event says
//! why. A whole placement's evaluation may take [`EVALUATION_DEADLINE`]: past it the placement
//! is misconfigured until its spec changes, so a hostile expression costs the scheduler that
//! much once per generation, never more.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cel::{ExecutionError, Value, common::value::Val, extractors::This};
use flotilla_api::cluster::v1::ManagedCluster;

pub use crate::cel_budget::{
    COST_LIMIT, CelError, CelProgram, MAX_EXPRESSION_LENGTH, Meter, Overrun, compile,
};
use crate::{
    cel_budget::{self, RunError},
    placement::{ScoreTable, name_of},
};

/// Longest evaluation of one placement's expressions over all its clusters.
pub const EVALUATION_DEADLINE: Duration = Duration::from_secs(5);

impl CelProgram {
    /// Whether the program calls `scores(...)`.
    pub fn uses_scores(&self) -> bool {
        self.calls("scores")
    }
}

/// AddOnPlacementScores visible to `scores(...)`: (cluster, resource) → [(score name, value)].
pub type ScoreLists = BTreeMap<(String, String), Vec<(String, i64)>>;

/// The score lists of `clusters` from `table`, for the `scores(...)` function.
pub fn score_lists(table: &ScoreTable, clusters: &[&ManagedCluster]) -> ScoreLists {
    let mut out = ScoreLists::new();
    for cluster in clusters {
        let name = name_of(&cluster.metadata);
        for ((ns, resource), status) in table.range((name.to_owned(), String::new())..) {
            if ns != name {
                break;
            }
            out.insert(
                (ns.clone(), resource.clone()),
                status
                    .scores
                    .iter()
                    .map(|s| (s.name.clone(), i64::from(s.value)))
                    .collect(),
            );
        }
    }
    out
}

/// The JSON form of a cluster that `managedCluster` holds.
pub fn cluster_value(cluster: &ManagedCluster) -> Option<Value> {
    let json = serde_json::to_value(cluster).ok()?;
    cel::to_value(json).ok()
}

/// Whether every program yields `true` for the cluster (`managedCluster` = `cluster`); an error
/// or a non-boolean result is `false`, as in OCM. Every step is charged to `meter`; an
/// expression that runs over it ends there with the [`Overrun`].
pub fn all_true(
    programs: &[CelProgram],
    cluster: &Value,
    scores: &Arc<ScoreLists>,
    meter: &Arc<Meter>,
) -> Result<bool, Overrun> {
    if programs.is_empty() {
        return Ok(true);
    }
    let Ok(mut context) = cel_budget::context(meter) else {
        return Ok(false);
    };
    let Ok(variable) = Box::<dyn Val>::try_from(cluster.clone()) else {
        return Ok(false);
    };
    context.add_variable_as_val("managedCluster", variable);
    let lists = Arc::clone(scores);
    let declared = context.add_function(
        "scores",
        move |This(target): This<Value>, resource: Arc<String>| -> Result<Value, ExecutionError> {
            let name = cluster_name(&target)
                .ok_or_else(|| ExecutionError::function_error("scores", "failed to get cluster name"))?;
            let list = lists.get(&(name, resource.to_string())).ok_or_else(|| {
                ExecutionError::function_error("scores", format!("failed to get score: {resource} not found"))
            })?;
            let items: Vec<serde_json::Value> = list
                .iter()
                .map(|(n, v)| serde_json::json!({"name": n, "value": v}))
                .collect();
            cel::to_value(items).map_err(|e| ExecutionError::function_error("scores", e.to_string()))
        },
    );
    if declared.is_err() {
        return Ok(false);
    }
    for program in programs {
        match program.run(&context, meter) {
            Ok(Value::Bool(true)) => {}
            Err(RunError::Overrun(overrun)) => return Err(overrun),
            Ok(_) | Err(RunError::Failed(_)) => return Ok(false),
        }
    }
    Ok(true)
}

fn cluster_name(cluster: &Value) -> Option<String> {
    let Value::Map(map) = cluster else { return None };
    let Value::Map(metadata) = map.get(&cel::objects::KeyRef::String("metadata"))? else {
        return None;
    };
    match metadata.get(&cel::objects::KeyRef::String("name"))? {
        Value::String(name) => Some(name.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::placement::testing::cluster;

    fn run(expr: &str, scores: ScoreLists) -> bool {
        let c = cluster("c1")
            .label("env", "prod")
            .claim("platform.open-cluster-management.io", "AWS")
            .build();
        let program = compile(expr).unwrap();
        let meter = Arc::new(Meter::new(EVALUATION_DEADLINE));
        all_true(&[program], &cluster_value(&c).unwrap(), &Arc::new(scores), &meter).unwrap()
    }

    #[rstest]
    #[case::label("managedCluster.metadata.labels['env'] == 'prod'", true)]
    #[case::label_miss("managedCluster.metadata.labels['env'] == 'dev'", false)]
    #[case::claim_exists(
        "managedCluster.status.clusterClaims.exists(c, c.name == 'platform.open-cluster-management.io' && c.value == 'AWS')",
        true
    )]
    #[case::strings_extension("managedCluster.metadata.name.upperAscii() == 'C1'", true)]
    #[case::missing_key_is_false("managedCluster.metadata.labels['absent'] == 'x'", false)]
    #[case::non_boolean_is_false("managedCluster.metadata.name", false)]
    #[case::semver_greater("semver('1.31.0').isGreaterThan(semver('1.30.2'))", true)]
    #[case::semver_less("semver('1.29.0').isGreaterThan(semver('1.30.2'))", false)]
    #[case::semver_parts(
        "semver('1.30.2').minor() == 30 && isSemver('1.2.3') && !isSemver('v1')",
        true
    )]
    #[case::semver_of_garbage_is_false("semver('not').major() == 1", false)]
    #[case::quantity_compare(
        "quantity('3500m').isGreaterThan(quantity('3')) && quantity('1Gi').isLessThan(quantity('2G'))",
        true
    )]
    #[case::quantity_integer("quantity('2k').asInteger() == 2000 && !quantity('1500m').isInteger()", true)]
    #[case::mixed_kinds_are_false("quantity('1').isGreaterThan(semver('1.0.0'))", false)]
    fn expressions_see_the_managed_cluster(#[case] expr: &str, #[case] expected: bool) {
        assert_eq!(run(expr, ScoreLists::new()), expected);
    }

    #[test]
    fn scores_returns_the_add_on_scores_of_the_cluster() {
        let mut lists = ScoreLists::new();
        lists.insert(("c1".into(), "usage".into()), vec![("cpuAvailable".into(), 40)]);
        let expr = "managedCluster.scores('usage').filter(s, s.name == 'cpuAvailable').all(e, e.value > 30)";
        assert!(run(expr, lists.clone()));
        let strict = "managedCluster.scores('usage').exists(s, s.name == 'cpuAvailable' && s.value > 50)";
        assert!(!run(strict, lists));
    }

    #[test]
    fn scores_of_a_missing_resource_make_the_expression_false() {
        assert!(!run(
            "managedCluster.scores('nothing').size() == 0",
            ScoreLists::new()
        ));
    }

    #[rstest]
    #[case::syntax("managedCluster.metadata.labels[")]
    #[case::too_long(&format!("'{}' == ''", "a".repeat(MAX_EXPRESSION_LENGTH)))]
    #[case::too_costly(
        "managedCluster.status.clusterClaims.all(a, managedCluster.status.clusterClaims.all(b, managedCluster.status.clusterClaims.all(c, a.name != b.name || c.value != '')))"
    )]
    fn bad_expressions_are_refused_at_compile_time(#[case] expr: &str) {
        assert!(compile(expr).is_err());
    }

    /// Runs `expr` on cluster `c1` with a fresh meter allowing `deadline`.
    fn metered(expr: &str, deadline: Duration) -> Result<bool, Overrun> {
        let c = cluster("c1").build();
        let meter = Arc::new(Meter::new(deadline));
        all_true(
            &[compile(expr).unwrap()],
            &cluster_value(&c).unwrap(),
            &Arc::new(ScoreLists::new()),
            &meter,
        )
    }

    #[test]
    fn nested_ranges_of_literal_size_are_refused_at_compile_time() {
        let refused = compile("lists.range(1000000).all(i, lists.range(1000000).all(j, true))").unwrap_err();
        assert!(
            matches!(refused, CelError::TooCostly(cost) if cost > 1_000_000_000_000),
            "{refused:?}"
        );
    }

    /// `size(name)` is 2 for `c1`: ranges the estimate cannot size, of 200 000 and 1 000 000.
    #[rstest]
    #[case::nested_all(
        "lists.range(size(managedCluster.metadata.name) * 100000).all(i, \
         lists.range(size(managedCluster.metadata.name) * 100000).all(j, true))"
    )]
    #[case::nested_exists(
        "lists.range(size(managedCluster.metadata.name) * 100000).exists(i, \
         lists.range(size(managedCluster.metadata.name) * 100000).exists(j, false))"
    )]
    #[case::map_of_big_lists(
        "lists.range(size(managedCluster.metadata.name) * 500000).map(i, \
         lists.range(size(managedCluster.metadata.name) * 500000)).size() > 0"
    )]
    #[case::filter(
        "lists.range(size(managedCluster.metadata.name) * 500000).filter(i, \
         lists.range(size(managedCluster.metadata.name) * 500000).exists(j, j < 0)).size() > 0"
    )]
    fn expressions_the_estimate_cannot_size_stop_at_their_cost_limit(#[case] expr: &str) {
        assert!(compile(expr).is_ok(), "the estimate lets it through");
        assert_eq!(metered(expr, EVALUATION_DEADLINE), Err(Overrun::Cost));
    }

    /// Issue 25 (found with the `placement_cel` fuzz target): ranges built outside any
    /// comprehension were not metered, so a list of them ran for seconds and could hold
    /// gigabytes.
    #[test]
    fn ranges_outside_comprehensions_stop_at_their_cost_limit() {
        let expr = "[lists.range(1000000), lists.range(1000000), lists.range(1000000)] == []";
        assert!(compile(expr).is_ok(), "the estimate lets it through");
        assert_eq!(metered(expr, EVALUATION_DEADLINE), Err(Overrun::Cost));
        assert_eq!(
            metered("lists.range(1000).size() == 1000", EVALUATION_DEADLINE),
            Ok(true)
        );
    }

    #[test]
    fn an_evaluation_past_its_deadline_stops() {
        assert_eq!(
            metered(
                "lists.range(size(managedCluster.metadata.name)).all(i, true)",
                Duration::ZERO
            ),
            Err(Overrun::Deadline)
        );
    }

    #[rstest]
    #[case::map("[1, 2, 3].map(x, x * 2) == [2, 4, 6]")]
    #[case::filter("[1, 2, 3, 4].filter(x, x % 2 == 0) == [2, 4]")]
    #[case::exists_one("[1, 2, 3].exists_one(x, x > 2)")]
    #[case::all("lists.range(100).all(x, x < 100)")]
    #[case::sort_by("[3, 1, 2].sortBy(x, x) == [1, 2, 3]")]
    fn metered_comprehensions_mean_what_they_did(#[case] expr: &str) {
        assert_eq!(metered(expr, EVALUATION_DEADLINE), Ok(true));
    }

    #[rstest]
    #[case::replace_chain(&format!("'aaaa'{}.size() > 0", ".replace('a', 'aaaa')".repeat(15)))]
    #[case::join_of_a_range(
        "lists.range(size(managedCluster.metadata.name) * 400000).map(i, 'x').join('yyyyyyyy').size() > 0"
    )]
    fn values_that_grow_without_a_loop_stop_at_the_cost_limit(#[case] expr: &str) {
        if compile(expr).is_err() {
            return; // refused before it runs is fine too
        }
        assert_eq!(metered(expr, EVALUATION_DEADLINE), Err(Overrun::Cost));
    }

    #[test]
    fn a_single_comprehension_is_within_the_cost_limit() {
        assert!(compile("managedCluster.status.clusterClaims.exists(c, c.name == 'x')").is_ok());
    }
}
