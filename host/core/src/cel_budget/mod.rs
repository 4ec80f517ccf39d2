//! CEL under a budget: the environment OCM gives user-written CEL (Placement `celSelector`,
//! ManifestWork `conditionRules`), compiled and run through the `cel` crate so that no
//! expression can hold the process that evaluates it.
//!
//! OCM evaluates with Kubernetes' runtime cost budget; the `cel` crate has no cost tracking,
//! so Flotilla bounds cost twice:
//!
//! - before running anything ([`compile`]): the source is at most [`MAX_EXPRESSION_LENGTH`]
//!   bytes, and an estimate of the work ([`estimate`]: one unit per AST node, each
//!   comprehension counted as [`ASSUMED_LIST_SIZE`] iterations of its body unless it ranges
//!   over a list literal or `lists.range(<literal>)`) must stay within [`COST_LIMIT`].
//! - while running: comprehensions are CEL's only loops, and the estimate cannot know how long
//!   a list built at run time or read from a live object is. So each compiled program is
//!   rewritten to report every iteration, every element a `map`/`filter` produces (by its
//!   size) and every value a call that can grow one returns (by its size) to a [`Meter`]
//!   (functions whose `@` names CEL source cannot call). One expression may spend
//!   [`COST_LIMIT`]; all the expressions one meter counts share its deadline, which each user
//!   chooses (see `placement::cel` and `work::agent::rules`).
//!
//! ```text
//!  source ─compile─▶ estimate ≤ COST_LIMIT ─▶ rewrite: loop_cond := @within() && loop_cond
//!                                                      map/filter items := @step(item)
//!                                                      filter guard := @step_bool(guard)
//!                                                      growing call f(x) := @step(f(x))
//!                                             ─▶ run with a Meter: per expression ≤ COST_LIMIT,
//!                                                per meter ≤ its deadline
//! ```

use std::sync::{
    Arc, LazyLock,
    atomic::{AtomicBool, AtomicU64, Ordering},
};
use std::time::{Duration, Instant};

use cel::{
    Context, Env, ExecutionError, Program, Value,
    common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, operators},
};

mod kubernetes;

/// Longest accepted expression source, in bytes.
pub const MAX_EXPRESSION_LENGTH: usize = 10 * 1024;
/// Most work of one expression, estimated or metered (Kubernetes' per-call CEL cost limit).
pub const COST_LIMIT: u64 = 1_000_000;
/// Iterations assumed for a comprehension over a list or map that is not a literal.
pub const ASSUMED_LIST_SIZE: u64 = 256;

/// Names of the metering functions; `@` keeps CEL source from calling them.
const WITHIN: &str = "@flotilla_within";
const STEP: &str = "@flotilla_step";
const STEP_BOOL: &str = "@flotilla_step_bool";
const RESERVE: &str = "@flotilla_reserve";

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

/// Why a run gave no value.
#[derive(Debug, PartialEq)]
pub enum RunError {
    /// The expression failed (a missing field, a type mismatch, a function's error).
    Failed(ExecutionError),
    /// The expression ran over its budget; whatever it returned is discarded.
    Overrun(Overrun),
}

impl CelProgram {
    /// The source the program was compiled from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the program calls the function `name`.
    pub fn calls(&self, name: &str) -> bool {
        self.program.references().has_function(name)
    }

    /// Runs the metered program in `context` (made by [`context`] with the same `meter`),
    /// counting its cost afresh against [`COST_LIMIT`].
    pub fn run(&self, context: &Context<'_, '_>, meter: &Meter) -> Result<Value, RunError> {
        meter.start();
        let result = Value::resolve(&self.metered, context);
        if let Some(overrun) = meter.overrun() {
            return Err(RunError::Overrun(overrun));
        }
        result.map_err(RunError::Failed)
    }
}

/// The CEL standard library, the strings and lists extensions and Kubernetes' semver and
/// quantity functions (declared per context, see [`context`]): OCM's base environment.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    // Both extensions declare new functions only; a failure would leave them out, not break CEL.
    let _ = env.add_extension(cel::extensions::strings);
    let _ = env.add_extension(cel::extensions::lists);
    Arc::new(env)
});

/// A context of the shared environment in which programs charge `meter`; callers add their
/// variables and functions.
pub fn context(meter: &Arc<Meter>) -> Result<Context<'static, 'static>, cel::DeclarationError> {
    let mut context = Context::with_env(Arc::clone(&ENV));
    kubernetes::declare(&mut context)?;
    declare_meter(&mut context, meter)?;
    Ok(context)
}

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
    // `lists.range(n)` is charged its `n + 1` units before it builds the list, so a range past
    // the budget is never allocated (charged after, as other calls are, one range of a million
    // would be built whole before the meter could stop it).
    if let Expr::Call(call) = &mut expr.expr
        && is_range(call)
        && let [count] = call.args.as_mut_slice()
    {
        wrap(RESERVE, count);
        return;
    }
    // A call can build a value much larger than its arguments with no comprehension at all:
    // `lists.range(n)` a million elements, `'aaaa'.replace('a', 'aaaa')` chained fifteen times
    // 4 GiB. Each such call's result is charged by its size, so the chain stops at the cost
    // limit, long before the allocation that would take the process down.
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

/// The work of one evaluation: the cost of the expression running now (against
/// [`COST_LIMIT`]) and the deadline of all the expressions it counts.
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
    /// One expression spent more than [`COST_LIMIT`].
    Cost,
    /// The meter's deadline passed.
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

    /// How the last expression ran over, if it did; once the deadline has passed, always
    /// [`Overrun::Deadline`].
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
    let reserve = Arc::clone(meter);
    context.add_function(RESERVE, move |count: i64| -> Result<i64, ExecutionError> {
        let cost = u64::try_from(count).unwrap_or(0).saturating_add(1);
        if reserve.charge(cost) {
            Ok(count)
        } else {
            Err(over_budget(RESERVE))
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

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    /// Runs `expr` in the bare environment with a fresh meter allowing `deadline`.
    fn metered(expr: &str, deadline: Duration) -> Result<Value, RunError> {
        let meter = Arc::new(Meter::new(deadline));
        let context = context(&meter).unwrap();
        compile(expr).unwrap().run(&context, &meter)
    }

    #[rstest]
    #[case::syntax("[1, 2")]
    #[case::too_long(&format!("'{}' == ''", "a".repeat(MAX_EXPRESSION_LENGTH)))]
    #[case::nested_literal_ranges("lists.range(1000000).all(i, lists.range(1000000).all(j, true))")]
    fn bad_expressions_are_refused_at_compile_time(#[case] expr: &str) {
        assert!(compile(expr).is_err());
    }

    #[test]
    fn an_expression_over_its_cost_limit_stops() {
        // The range's 600 000 elements, then as many iterations.
        let expr = "lists.range(size('ab') * 300000).all(i, true)";
        assert!(compile(expr).is_ok(), "the estimate lets it through");
        assert_eq!(
            metered(expr, Duration::from_secs(60)),
            Err(RunError::Overrun(Overrun::Cost))
        );
    }

    #[test]
    fn each_expression_a_meter_counts_gets_the_whole_cost_limit() {
        let meter = Arc::new(Meter::new(Duration::from_secs(60)));
        let context = context(&meter).unwrap();
        // 600 000 units each (elements, then iterations): together over the limit, alone
        // within it.
        let program = compile("lists.range(size('ab') * 150000).all(i, true)").unwrap();
        for _ in 0..2 {
            assert_eq!(program.run(&context, &meter), Ok(Value::Bool(true)));
        }
    }

    #[test]
    fn a_range_is_charged_before_it_is_built() {
        let program = compile("lists.range(size('ab') * 3) == [0, 1, 2, 3, 4, 5]").unwrap();
        let Expr::Call(equals) = &program.metered.expr else {
            panic!("the comparison stays a call");
        };
        let Expr::Call(range) = &equals.args[0].expr else {
            panic!(
                "the range is not wrapped after the fact: {:?}",
                equals.args[0].expr
            );
        };
        assert!(is_range(range));
        assert!(
            matches!(&range.args[0].expr, Expr::Call(count) if count.func_name == RESERVE),
            "its count is charged first: {:?}",
            range.args[0].expr
        );
        assert_eq!(
            metered(program.source(), Duration::from_secs(60)),
            Ok(Value::Bool(true))
        );
        // A million and one units: refused by the charge, before a list is made.
        assert_eq!(
            metered(
                "lists.range(size('ab') * 500000).size() > 0",
                Duration::from_secs(60)
            ),
            Err(RunError::Overrun(Overrun::Cost))
        );
    }

    #[test]
    fn past_its_deadline_a_meter_stops_every_expression() {
        let meter = Arc::new(Meter::new(Duration::ZERO));
        let context = context(&meter).unwrap();
        assert_eq!(
            compile("true").unwrap().run(&context, &meter),
            Err(RunError::Overrun(Overrun::Deadline))
        );
    }

    #[test]
    fn the_environment_has_the_extensions_and_kubernetes_functions() {
        assert_eq!(
            metered(
                "'a-b'.split('-').size() == 2 && lists.range(3) == [0, 1, 2] && \
                 quantity('1Gi').isGreaterThan(quantity('1G')) && semver('1.2.3').minor() == 2",
                Duration::from_secs(60)
            ),
            Ok(Value::Bool(true))
        );
    }
}
