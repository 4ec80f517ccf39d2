//! CEL expressions of `celSelector`, through the `cel` crate (never a hand-rolled evaluator).
//!
//! An expression sees the variable `managedCluster` (the ManagedCluster as JSON) and the member
//! function `managedCluster.scores("<AddOnPlacementScore name>")`, a list of `{name, value}`
//! maps, as in OCM's CEL library; the CEL standard library with the strings and lists
//! extensions is available. Expressions are compiled once per Placement generation.
//!
//! Limits. OCM evaluates with Kubernetes' runtime cost budget; the `cel` crate has no cost
//! tracking, so Flotilla bounds cost twice:
//!
//! - before running anything: the source is at most [`MAX_EXPRESSION_LENGTH`] bytes, and an
//!   estimate of the work (one unit per AST node, each comprehension counted as
//!   [`ASSUMED_LIST_SIZE`] iterations of its body unless it ranges over a list literal or
//!   `lists.range(<literal>)`) must stay within [`COST_LIMIT`]; over it, the expression is a
//!   misconfiguration the user sees in `PlacementMisconfigured`.
//! - while running: comprehensions are CEL's only loops, and the estimate cannot know how long
//!   a list built at run time is (`lists.range(n)` with a computed `n`, agent-written claims).
//!   So each compiled program is rewritten to report every iteration, every element a
//!   `map`/`filter` produces (by its size) and every list `lists.range` builds to a [`Meter`]
//!   (functions whose `@` names CEL source cannot call). One expression on one cluster may spend [`COST_LIMIT`]: past it that cluster
//!   does not match (as an evaluation error in OCM) and the decision event says why. A whole
//!   placement's evaluation may take [`EVALUATION_DEADLINE`]: past it the placement is
//!   misconfigured until its spec changes, so a hostile expression costs the scheduler that
//!   much once per generation, never more.
//!
//! ```text
//!  source ─compile─▶ estimate ≤ COST_LIMIT ─▶ rewrite: loop_cond := @within() && loop_cond
//!                                                      map/filter items := @step(item)
//!                                                      filter guard := @step_bool(guard)
//!                                                      lists.range(n) := @step(lists.range(n))
//!                                             ─▶ run with a Meter: per call ≤ COST_LIMIT,
//!                                                per placement ≤ EVALUATION_DEADLINE
//! ```

use std::collections::BTreeMap;
use std::sync::{
    Arc, LazyLock,
    atomic::{AtomicBool, AtomicU64, Ordering},
};
use std::time::{Duration, Instant};

use cel::{
    Context, Env, ExecutionError, Program, Value,
    common::{
        ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, operators},
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
/// Longest evaluation of one placement's expressions over all its clusters.
pub const EVALUATION_DEADLINE: Duration = Duration::from_secs(5);

/// Names of the metering functions; `@` keeps CEL source from calling them.
const WITHIN: &str = "@flotilla_within";
const STEP: &str = "@flotilla_step";
const STEP_BOOL: &str = "@flotilla_step_bool";

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

/// A compiled expression: the program as written and its metered form, which is what runs.
#[derive(Debug)]
pub struct CelProgram {
    source: String,
    program: Program,
    metered: IdedExpr,
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
    let mut metered = program.expression().clone();
    meter(&mut metered);
    Ok(CelProgram {
        source: source.to_owned(),
        program,
        metered,
    })
}

/// Rewrites `expr` so that every comprehension reports its iterations to the meter (see the
/// module docs).
fn meter(expr: &mut IdedExpr) {
    match &mut expr.expr {
        Expr::Call(call) => {
            call.args.iter_mut().for_each(meter);
            if let Some(target) = &mut call.target {
                meter(target);
            }
        }
        Expr::Select(select) => meter(&mut select.operand),
        Expr::List(list) => list.elements.iter_mut().for_each(meter),
        Expr::Map(map) => map.entries.iter_mut().for_each(|e| meter_entry(&mut e.expr)),
        Expr::Struct(s) => s.entries.iter_mut().for_each(|e| meter_entry(&mut e.expr)),
        Expr::Comprehension(c) => {
            for part in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                meter(part);
            }
            meter_loop(c);
        }
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
    }
    // A call can build a value much larger than its arguments with no comprehension at all:
    // `lists.range(n)` a million elements, `'aaaa'.replace('a', 'aaaa')` chained fifteen times
    // 4 GiB. Each such call's result is charged by its size, so the chain stops at the cost
    // limit, long before the allocation that would take the hub down.
    if matches!(&expr.expr, Expr::Call(call) if can_grow(call)) {
        wrap(STEP, expr);
    }
}

/// Whether `call` may return a value larger than its arguments: every function but CEL's
/// operators (`_==_`, `!_`, `@in`, …), and `+`, except where a map or filter appends to its
/// accumulator (`@result + [item]`, charged item by item already).
fn can_grow(call: &CallExpr) -> bool {
    let operator = call.func_name.starts_with(['_', '@', '!', '-']);
    let appends =
        matches!(call.args.first().map(|a| &a.expr), Some(Expr::Ident(name)) if name.starts_with('@'));
    is_range(call) || !operator || (call.func_name == operators::ADD && !appends)
}

fn meter_entry(entry: &mut EntryExpr) {
    match entry {
        EntryExpr::StructField(f) => meter(&mut f.value),
        EntryExpr::MapEntry(e) => {
            meter(&mut e.key);
            meter(&mut e.value);
        }
    }
}

fn call(function: &str, args: Vec<IdedExpr>) -> IdedExpr {
    IdedExpr {
        id: 0,
        expr: Expr::Call(CallExpr {
            func_name: function.to_owned(),
            target: None,
            args,
        }),
    }
}

fn wrap(function: &str, expr: &mut IdedExpr) {
    let inner = std::mem::take(expr);
    *expr = call(function, vec![inner]);
}

/// Meters one comprehension's iterations, keeping the shape the interpreter builds `map` and
/// `filter` results in place for (a literal loop condition, `@result + [item]` steps).
fn meter_loop(c: &mut ComprehensionExpr) {
    if !matches!(c.loop_cond.expr, Expr::Literal(_)) {
        // all(), exists(): stop at the first iteration past the budget.
        let condition = std::mem::take(&mut c.loop_cond);
        c.loop_cond = call(operators::LOGICAL_AND, vec![call(WITHIN, Vec::new()), condition]);
        return;
    }
    if matches!(&c.loop_cond.expr, Expr::Literal(LiteralValue::Boolean(b)) if !*b.inner()) {
        return; // never iterates (cel.bind)
    }
    let accu = c.accu_var.clone();
    let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(name) if *name == accu);
    let appended = |step: &mut IdedExpr| -> bool {
        let Expr::Call(add) = &mut step.expr else {
            return false;
        };
        if add.func_name != operators::ADD
            || add.target.is_some()
            || add.args.len() != 2
            || !is_accu(&add.args[0])
        {
            return false;
        }
        let Expr::List(items) = &mut add.args[1].expr else {
            return false;
        };
        items.elements.iter_mut().for_each(|e| wrap(STEP, e));
        true
    };
    let metered = match &mut c.loop_step.expr {
        Expr::Call(conditional)
            if conditional.func_name == operators::CONDITIONAL
                && conditional.args.len() == 3
                && is_accu(&conditional.args[2]) =>
        {
            let (guard, rest) = conditional.args.split_at_mut(1);
            if appended(&mut rest[0]) {
                wrap(STEP_BOOL, &mut guard[0]);
                true
            } else {
                false
            }
        }
        _ => appended(&mut c.loop_step),
    };
    if !metered {
        wrap(STEP, &mut c.loop_step);
    }
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
                range => literal_range(range).unwrap_or(ASSUMED_LIST_SIZE),
            };
            let body = estimate(&c.loop_cond.expr).saturating_add(estimate(&c.loop_step.expr));
            estimate(&c.iter_range.expr)
                .saturating_add(estimate(&c.accu_init.expr))
                .saturating_add(estimate(&c.result.expr))
                .saturating_add(iterations.saturating_mul(body))
        }
    }
}

/// Whether `call` is `lists.range(…)`.
fn is_range(call: &CallExpr) -> bool {
    match &call.target {
        Some(target) => {
            call.func_name == "range" && matches!(&target.expr, Expr::Ident(lists) if lists == "lists")
        }
        None => call.func_name == "lists.range",
    }
}

/// `n` of `lists.range(n)` with a literal `n`.
fn literal_range(expr: &Expr) -> Option<u64> {
    let Expr::Call(call) = expr else { return None };
    let named_range = is_range(call);
    match call.args.as_slice() {
        [
            IdedExpr {
                expr: Expr::Literal(LiteralValue::Int(n)),
                ..
            },
        ] if named_range => u64::try_from(*n.inner()).ok(),
        _ => None,
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

/// The work of one placement's evaluation: steps of the expression running now (against
/// [`COST_LIMIT`]) and the deadline of all of them.
#[derive(Debug)]
pub struct Meter {
    deadline: Instant,
    steps: AtomicU64,
    total: AtomicU64,
    over_cost: AtomicBool,
    past_deadline: AtomicBool,
}

/// How an evaluation ran over its budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overrun {
    /// One expression on one cluster spent more than [`COST_LIMIT`].
    Cost,
    /// The placement's evaluation took longer than its deadline.
    Deadline,
}

impl Meter {
    /// A meter whose deadline is `allowed` from now.
    pub fn new(allowed: Duration) -> Self {
        Self {
            deadline: Instant::now() + allowed,
            steps: AtomicU64::new(0),
            total: AtomicU64::new(0),
            over_cost: AtomicBool::new(false),
            past_deadline: AtomicBool::new(false),
        }
    }

    /// Counts `cost` units; false once over a limit.
    fn charge(&self, cost: u64) -> bool {
        let steps = self.steps.fetch_add(cost, Ordering::Relaxed).saturating_add(cost);
        if steps > COST_LIMIT {
            self.over_cost.store(true, Ordering::Relaxed);
        }
        // Reading the clock at every step would cost more than the step.
        let total = self.total.fetch_add(1, Ordering::Relaxed);
        if total.is_multiple_of(256) && Instant::now() > self.deadline {
            self.past_deadline.store(true, Ordering::Relaxed);
        }
        !self.over()
    }

    fn over(&self) -> bool {
        self.over_cost.load(Ordering::Relaxed) || self.past_deadline.load(Ordering::Relaxed)
    }

    /// Starts one expression's count.
    fn start(&self) {
        self.steps.store(0, Ordering::Relaxed);
        self.over_cost.store(false, Ordering::Relaxed);
    }

    /// How the last expression ran over, if it did.
    pub fn overrun(&self) -> Option<Overrun> {
        if self.past_deadline.load(Ordering::Relaxed) || Instant::now() > self.deadline {
            Some(Overrun::Deadline)
        } else if self.over_cost.load(Ordering::Relaxed) {
            Some(Overrun::Cost)
        } else {
            None
        }
    }
}

/// The units an element a comprehension produces costs: one, plus its length.
fn size_of(value: &Value) -> u64 {
    let length = match value {
        Value::List(list) => list.len(),
        Value::Map(map) => map.map.len(),
        Value::String(text) => text.len(),
        Value::Bytes(bytes) => bytes.len(),
        _ => 0,
    };
    1 + length as u64
}

fn over_budget(function: &str) -> ExecutionError {
    ExecutionError::function_error(function, "the expression ran over its evaluation budget")
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
    let mut context = Context::with_env(Arc::clone(&ENV));
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
    if declared.is_err()
        || kubernetes::declare(&mut context).is_err()
        || declare_meter(&mut context, meter).is_err()
    {
        return Ok(false);
    }
    for program in programs {
        meter.start();
        let result = Value::resolve(&program.metered, &context);
        if let Some(overrun) = meter.overrun() {
            return Err(overrun);
        }
        if !matches!(result, Ok(Value::Bool(true))) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The functions the metered programs call.
fn declare_meter(context: &mut Context<'_, '_>, meter: &Arc<Meter>) -> Result<(), cel::DeclarationError> {
    let within = Arc::clone(meter);
    context.add_function(WITHIN, move || within.charge(1))?;
    let step = Arc::clone(meter);
    context.add_function(STEP, move |item: Value| -> Result<Value, ExecutionError> {
        if step.charge(size_of(&item)) {
            Ok(item)
        } else {
            Err(over_budget(STEP))
        }
    })?;
    let guard = Arc::clone(meter);
    context.add_function(STEP_BOOL, move |keep: bool| -> Result<bool, ExecutionError> {
        if guard.charge(1) {
            Ok(keep)
        } else {
            Err(over_budget(STEP_BOOL))
        }
    })?;
    Ok(())
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
