//! CEL expressions of `celSelector`, through the `cel` crate (never a hand-rolled evaluator).
//!
//! An expression sees the variable `managedCluster` (the ManagedCluster as JSON) and the member
//! function `managedCluster.scores("<AddOnPlacementScore name>")`, a list of `{name, value}`
//! maps, as in OCM's CEL library; the CEL standard library with the strings and lists
//! extensions is available. Expressions are compiled once per Placement generation.
//!
//! Limits. OCM evaluates with Kubernetes' runtime cost budget; the `cel` crate has no cost
//! tracking, so Flotilla bounds cost before running anything: the source is at most
//! [`MAX_EXPRESSION_LENGTH`] bytes, and an estimate of the work (one unit per AST node, each
//! comprehension counted as [`ASSUMED_LIST_SIZE`] iterations of its body unless it ranges over a
//! list literal) must stay within [`COST_LIMIT`]. Since comprehensions are CEL's only loops, a
//! program that passes runs in time bounded by that estimate for clusters with at most
//! [`ASSUMED_LIST_SIZE`] labels or claims. An expression over the limit is a misconfiguration the
//! user sees in `PlacementMisconfigured`, rather than a controller stuck evaluating it.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use cel::{
    Context, Env, ExecutionError, Program, Value,
    common::{
        ast::{EntryExpr, Expr},
        value::Val,
    },
    extractors::This,
};
use flotilla_api::cluster::v1::ManagedCluster;

use crate::placement::{ScoreTable, name_of};

/// Longest accepted expression source, in bytes.
pub const MAX_EXPRESSION_LENGTH: usize = 10 * 1024;
/// Most estimated work of one expression (Kubernetes' per-call CEL cost limit).
pub const COST_LIMIT: u64 = 1_000_000;
/// Iterations assumed for a comprehension over a list or map that is not a literal.
pub const ASSUMED_LIST_SIZE: u64 = 256;

/// Why an expression is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    /// The expression does not parse.
    #[error("compilation failed: {0}")]
    Compile(String),
    /// The source is too long.
    #[error("compilation failed: expression is {0} bytes, more than the limit of {MAX_EXPRESSION_LENGTH}")]
    TooLong(usize),
    /// The estimated cost is over the limit.
    #[error("compilation failed: estimated cost {0} exceeds the limit of {COST_LIMIT}")]
    TooCostly(u64),
}

/// A compiled expression.
#[derive(Debug)]
pub struct CelProgram {
    source: String,
    program: Program,
}

impl CelProgram {
    /// The source the program was compiled from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the program calls `scores(...)`.
    pub fn uses_scores(&self) -> bool {
        self.program.references().has_function("scores")
    }
}

static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    // Both extensions declare new functions only; a failure would leave them out, not break CEL.
    let _ = env.add_extension(cel::extensions::strings);
    let _ = env.add_extension(cel::extensions::lists);
    Arc::new(env)
});

/// Compiles `source`, refusing expressions that are too long or too costly.
pub fn compile(source: &str) -> Result<CelProgram, CelError> {
    if source.len() > MAX_EXPRESSION_LENGTH {
        return Err(CelError::TooLong(source.len()));
    }
    let program = ENV
        .compile(source)
        .map_err(|e| CelError::Compile(e.to_string()))?;
    let cost = estimate(&program.expression().expr);
    if cost > COST_LIMIT {
        return Err(CelError::TooCostly(cost));
    }
    Ok(CelProgram {
        source: source.to_owned(),
        program,
    })
}

/// The estimated cost of an expression (see the module documentation), saturating.
pub fn estimate(expr: &Expr) -> u64 {
    match expr {
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => 1,
        Expr::Call(call) => call
            .args
            .iter()
            .map(|a| estimate(&a.expr))
            .chain(call.target.iter().map(|t| estimate(&t.expr)))
            .fold(1, u64::saturating_add),
        Expr::Select(select) => estimate(&select.operand.expr).saturating_add(1),
        Expr::List(list) => list
            .elements
            .iter()
            .map(|e| estimate(&e.expr))
            .fold(1, u64::saturating_add),
        Expr::Map(map) => map
            .entries
            .iter()
            .map(|e| entry_cost(&e.expr))
            .fold(1, u64::saturating_add),
        Expr::Struct(s) => s
            .entries
            .iter()
            .map(|e| entry_cost(&e.expr))
            .fold(1, u64::saturating_add),
        Expr::Comprehension(c) => {
            let iterations = match &c.iter_range.expr {
                Expr::List(list) => list.elements.len() as u64,
                _ => ASSUMED_LIST_SIZE,
            };
            let body = estimate(&c.loop_cond.expr).saturating_add(estimate(&c.loop_step.expr));
            estimate(&c.iter_range.expr)
                .saturating_add(estimate(&c.accu_init.expr))
                .saturating_add(estimate(&c.result.expr))
                .saturating_add(iterations.saturating_mul(body))
        }
    }
}

fn entry_cost(entry: &EntryExpr) -> u64 {
    match entry {
        EntryExpr::StructField(f) => estimate(&f.value.expr),
        EntryExpr::MapEntry(e) => estimate(&e.key.expr).saturating_add(estimate(&e.value.expr)),
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
/// or a non-boolean result is `false`, as in OCM.
pub fn all_true(programs: &[CelProgram], cluster: &Value, scores: &Arc<ScoreLists>) -> bool {
    if programs.is_empty() {
        return true;
    }
    let mut context = Context::with_env(Arc::clone(&ENV));
    let Ok(variable) = Box::<dyn Val>::try_from(cluster.clone()) else {
        return false;
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
    if declared.is_err() || kubernetes::declare(&mut context).is_err() {
        return false;
    }
    programs
        .iter()
        .all(|p| matches!(p.program.execute(&context), Ok(Value::Bool(true))))
}

/// Kubernetes' CEL semver and quantity libraries, which OCM's environment includes and the
/// `cel` crate does not: `semver()`, `isSemver()`, `quantity()`, `isQuantity()`, and on their
/// values `isGreaterThan()`, `isLessThan()`, `compareTo()`; `major()`, `minor()`, `patch()` on
/// versions; `asInteger()`, `asApproximateFloat()`, `isInteger()`, `sign()` on quantities.
/// Versions are parsed by the `semver` crate, quantities by Flotilla's quantity parser (the
/// one the registration agent reports capacity with).
mod kubernetes {
    use std::{cmp::Ordering, sync::Arc};

    use cel::{Context, ExecutionError, Value, extractors::This, objects::Opaque};

    use crate::registration::agent::resources;

    /// A parsed version, as an opaque CEL value.
    #[derive(Debug, PartialEq, Eq)]
    struct Semver(::semver::Version);

    impl Opaque for Semver {
        fn runtime_type_name(&self) -> &str {
            "kubernetes.Semver"
        }
    }

    /// A quantity in nano-units, as an opaque CEL value.
    #[derive(Debug, PartialEq, Eq)]
    struct Quantity(i128);

    impl Opaque for Quantity {
        fn runtime_type_name(&self) -> &str {
            "kubernetes.Quantity"
        }
    }

    const NANO: i128 = 1_000_000_000;

    fn error(function: &str, message: impl ToString) -> ExecutionError {
        ExecutionError::function_error(function, message)
    }

    fn semver(value: &Value) -> Option<&::semver::Version> {
        match value {
            Value::Opaque(o) => o.downcast_ref::<Semver>().map(|s| &s.0),
            _ => None,
        }
    }

    fn quantity(value: &Value) -> Option<i128> {
        match value {
            Value::Opaque(o) => o.downcast_ref::<Quantity>().map(|q| q.0),
            _ => None,
        }
    }

    fn compare(function: &str, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
        if let (Some(a), Some(b)) = (semver(a), semver(b)) {
            return Ok(a.cmp(b));
        }
        if let (Some(a), Some(b)) = (quantity(a), quantity(b)) {
            return Ok(a.cmp(&b));
        }
        Err(error(function, "needs two semvers or two quantities"))
    }

    fn parse_quantity(text: &str) -> Result<Value, ExecutionError> {
        resources::parse(text)
            .map(|(nanos, _)| Value::Opaque(Arc::new(Quantity(nanos))))
            .map_err(|e| error("quantity", e))
    }

    fn the_quantity(function: &str, value: &Value) -> Result<i128, ExecutionError> {
        quantity(value).ok_or_else(|| error(function, "not a quantity"))
    }

    fn the_semver<'a>(function: &str, value: &'a Value) -> Result<&'a ::semver::Version, ExecutionError> {
        semver(value).ok_or_else(|| error(function, "not a semver"))
    }

    /// Adds the functions to `context`.
    pub(super) fn declare(context: &mut Context<'_, '_>) -> Result<(), cel::DeclarationError> {
        context.add_function("semver", |text: Arc<String>| {
            ::semver::Version::parse(&text)
                .map(|v| Value::Opaque(Arc::new(Semver(v))))
                .map_err(|e| error("semver", e))
        })?;
        context.add_function("isSemver", |text: Arc<String>| {
            ::semver::Version::parse(&text).is_ok()
        })?;
        context.add_function("quantity", |text: Arc<String>| parse_quantity(&text))?;
        context.add_function("isQuantity", |text: Arc<String>| resources::parse(&text).is_ok())?;
        context.add_function("isGreaterThan", |This(a): This<Value>, b: Value| {
            compare("isGreaterThan", &a, &b).map(|o| o == Ordering::Greater)
        })?;
        context.add_function("isLessThan", |This(a): This<Value>, b: Value| {
            compare("isLessThan", &a, &b).map(|o| o == Ordering::Less)
        })?;
        context.add_function("compareTo", |This(a): This<Value>, b: Value| {
            compare("compareTo", &a, &b).map(|o| o as i64)
        })?;
        context.add_function("major", |This(a): This<Value>| {
            i64::try_from(the_semver("major", &a)?.major).map_err(|e| error("major", e))
        })?;
        context.add_function("minor", |This(a): This<Value>| {
            i64::try_from(the_semver("minor", &a)?.minor).map_err(|e| error("minor", e))
        })?;
        context.add_function("patch", |This(a): This<Value>| {
            i64::try_from(the_semver("patch", &a)?.patch).map_err(|e| error("patch", e))
        })?;
        context.add_function("isInteger", |This(a): This<Value>| {
            the_quantity("isInteger", &a).map(|n| n % NANO == 0)
        })?;
        context.add_function("asInteger", |This(a): This<Value>| {
            let n = the_quantity("asInteger", &a)?;
            if n % NANO != 0 {
                return Err(error("asInteger", "quantity is not an integer"));
            }
            i64::try_from(n / NANO).map_err(|e| error("asInteger", e))
        })?;
        context.add_function("asApproximateFloat", |This(a): This<Value>| {
            the_quantity("asApproximateFloat", &a).map(|n| n as f64 / NANO as f64)
        })?;
        context.add_function("sign", |This(a): This<Value>| {
            the_quantity("sign", &a).map(|n| n.signum() as i64)
        })?;
        Ok(())
    }
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
        all_true(&[program], &cluster_value(&c).unwrap(), &Arc::new(scores))
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

    #[test]
    fn a_single_comprehension_is_within_the_cost_limit() {
        assert!(compile("managedCluster.status.clusterClaims.exists(c, c.name == 'x')").is_ok());
    }
}
