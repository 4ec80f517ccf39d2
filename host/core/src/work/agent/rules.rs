//! Condition rules: conditions a work sets on a manifest from its live object, either OCM's
//! well-known rules (`Complete` for Jobs and Pods) or the work's own CEL expressions, evaluated
//! with the `cel` crate in OCM's base environment (the one Placement shares: the strings and
//! lists extensions, Kubernetes' semver and quantity functions). Variables are `object` (the
//! live object) and, in `messageExpression`, `result` (whether the expressions held);
//! `hasConditions(x)` tells whether `x` carries a non-empty `conditions` list, as in OCM's CEL
//! library.
//!
//! Expressions come from the hub and run on the managed cluster's agent, so they run under
//! [`crate::cel_budget`]'s budget: each expression is refused at compile time when too long or
//! estimated too costly, and stopped past [`COST_LIMIT`] or past the deadline of its work's
//! sync ([`RULES_DEADLINE`]).
//!
//! Reasons follow OCM: `ConditionRuleEvaluated` (True when every expression holds, else
//! False), `ConditionRuleExpressionError` (False: an expression, or the message expression,
//! runs over its budget; an expression does not compile, fails, or is not boolean),
//! `ConditionRuleInvalid` (Unknown: a rule OCM does not know), `ConditionRuleInternalError`
//! (Unknown: the evaluation environment could not be built).

use std::{collections::HashMap, sync::Arc, time::Duration};

use cel::{Context, ExecutionError, Value as Cel, objects::Key};
use flotilla_api::work::{
    consts::manifest_work::{
        CONDITION_COMPLETE, REASON_CONDITION_RULE_EVALUATED, REASON_CONDITION_RULE_EXPRESSION_ERROR,
        REASON_CONDITION_RULE_INTERNAL_ERROR,
    },
    v1::{ConditionRule, ConditionRuleType},
};
use serde_json::Value;

use crate::{
    cel_budget::{self, COST_LIMIT, CelError, MAX_EXPRESSION_LENGTH, Meter, RunError},
    conditions::{FALSE, TRUE, UNKNOWN},
};

/// How long the condition rules of one sync of one work may run, all its manifests together:
/// the agent evaluates them on every status sync (every 10 s by default while a rule needs
/// polling), on the worker that syncs the work. One second is thousands of times what real
/// rules take (microseconds over one object), yet bounds a hostile work to a tenth of a core at
/// the default interval, however many manifests carry its rules. Past it, every rule left in
/// that sync fails as over its budget: the work's author wrote them all.
pub const RULES_DEADLINE: Duration = Duration::from_secs(1);

/// A condition a rule produced, without times and generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleCondition {
    /// The condition type (the rule's `condition`).
    pub type_: String,
    /// `True` or `False`.
    pub status: &'static str,
    /// One of the `ConditionRule*` reasons.
    pub reason: &'static str,
    /// What held or failed.
    pub message: String,
}

const JOB_COMPLETE: &str = "hasConditions(object.status) ? object.status.conditions.filter(c, c.type == 'Complete' || c.type == 'Failed').exists(c, c.status == 'True') : false";
const JOB_MESSAGE: &str = "result ? 'Job is finished' : 'Job is not finished'";
const POD_COMPLETE: &str = "object.status.phase in ['Succeeded', 'Failed']";
const POD_MESSAGE: &str = "'Pod is in phase ' + object.status.phase";

/// The well-known rule for `condition` on group/version/kind: expressions and message
/// expression.
pub fn well_known_rule(
    group: &str,
    version: &str,
    kind: &str,
    condition: &str,
) -> Option<(&'static str, &'static str)> {
    match (group, version, kind, condition) {
        ("batch", "v1", "Job", CONDITION_COMPLETE) => Some((JOB_COMPLETE, JOB_MESSAGE)),
        ("", "v1", "Pod", CONDITION_COMPLETE) => Some((POD_COMPLETE, POD_MESSAGE)),
        _ => None,
    }
}

/// JSON to CEL, with every integer an `int` (CEL's `uint` would not compare equal to the
/// literals rules are written with, which are `int`s, as Kubernetes' unstructured objects
/// give them). Hand-written because `cel::to_value` maps positive integers to `uint`.
pub fn to_cel(value: &Value) -> Cel {
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cel::Int(i),
            None => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Cel::from(s.as_str()),
        Value::Array(items) => Cel::from(items.iter().map(to_cel).collect::<Vec<_>>()),
        Value::Object(map) => Cel::from(
            map.iter()
                .map(|(k, v)| (Key::from(k.as_str()), to_cel(v)))
                .collect::<HashMap<_, _>>(),
        ),
    }
}

fn has_conditions(value: Cel) -> bool {
    match value {
        Cel::Map(map) => matches!(
            map.map.get(&Key::from("conditions")),
            Some(Cel::List(list)) if !list.is_empty()
        ),
        _ => false,
    }
}

/// Why an expression gave no value: the condition's message, and whether it ran over its
/// budget (which fails the rule even in `messageExpression`).
#[derive(Debug)]
struct Failure {
    message: String,
    over_budget: bool,
}

impl Failure {
    fn error(message: String) -> Self {
        Self {
            message,
            over_budget: false,
        }
    }

    fn over_budget(message: String) -> Self {
        Self {
            message,
            over_budget: true,
        }
    }
}

/// Compiles `expression` and runs it in `context`, charging `meter`.
fn run(expression: &str, context: &Context<'_, '_>, meter: &Meter) -> Result<Cel, Failure> {
    let program = cel_budget::compile(expression).map_err(|e| match e {
        CelError::Compile(e) => Failure::error(format!("expression {expression:?} does not compile: {e}")),
        // Not quoted: it would make the message as long as the expression.
        CelError::TooLong(length) => Failure::over_budget(format!(
            "an expression of {length} bytes ran over its budget: the limit is {MAX_EXPRESSION_LENGTH} bytes"
        )),
        CelError::TooCostly(cost) => Failure::over_budget(format!(
            "expression {expression:?} ran over its budget: its estimated cost {cost} exceeds the limit of \
             {COST_LIMIT}"
        )),
    })?;
    program.run(context, meter).map_err(|e| match e {
        RunError::Failed(e) => Failure::error(format!("expression {expression:?} failed: {}", failure(&e))),
        // One message whichever limit stopped it: on a busy agent the same expression may hit
        // either from one sync to the next, and the condition must not change with it.
        RunError::Overrun(_) => Failure::over_budget(format!(
            "expression {expression:?} ran over its budget: a cost of {COST_LIMIT}, or the \
             work's condition rules' {RULES_DEADLINE:?} per sync"
        )),
    })
}

/// Why an expression failed, with the values involved named by their type (see
/// [`cel_condition`]); errors that carry no value read as the `cel` crate writes them.
fn failure(error: &ExecutionError) -> String {
    use ExecutionError as E;
    match error {
        E::UnsupportedTargetType { target } => format!("invalid argument type: {}", target.type_of()),
        E::NotSupportedAsMethod { method, target } => {
            format!("method '{method}' not supported on type '{}'", target.type_of())
        }
        E::UnsupportedKeyType(key) => format!("unable to use a {} as a key", key.type_of()),
        E::ValuesNotComparable(a, b) => format!("a {} can not be compared to a {}", a.type_of(), b.type_of()),
        E::UnsupportedBinaryOperator(operator, a, b) => format!(
            "unsupported binary operator '{operator}' on a {} and a {}",
            a.type_of(),
            b.type_of()
        ),
        E::UnsupportedIndex(index, target) => {
            format!("cannot use a {} to index a {}", index.type_of(), target.type_of())
        }
        E::DivisionByZero(value) => format!("division by zero of a {}", value.type_of()),
        E::RemainderByZero(value) => format!("remainder by zero of a {}", value.type_of()),
        E::Overflow(operator, a, b) => format!(
            "overflow from binary operator '{operator}' on a {} and a {}",
            a.type_of(),
            b.type_of()
        ),
        E::DuplicateKey(key) => format!("repeated key of type {}", key.type_of()),
        other => other.to_string(),
    }
}

/// Evaluates `expressions` (ANDed) and the message of a CEL rule. A value of the wrong type is
/// named by its type, not printed: a printed map lists its keys in a different order each time
/// (the status would change at every resync), and a value may be as large as the object.
fn cel_condition(
    condition: &str,
    expressions: &[&str],
    message: &str,
    message_expression: &str,
    context: &Context<'_, '_>,
    meter: &Meter,
) -> RuleCondition {
    let expression_error = |message: String| RuleCondition {
        type_: condition.to_owned(),
        status: FALSE,
        reason: REASON_CONDITION_RULE_EXPRESSION_ERROR,
        message,
    };
    let mut holds = true;
    for expression in expressions {
        match run(expression, context, meter) {
            Ok(Cel::Bool(true)) => {}
            Ok(Cel::Bool(false)) => {
                holds = false;
                break;
            }
            Ok(other) => {
                return expression_error(format!(
                    "expression {expression:?} gave a {}, not a boolean",
                    other.type_of()
                ));
            }
            Err(failure) => return expression_error(failure.message),
        }
    }
    let message = if message_expression.is_empty() {
        None
    } else {
        let mut scope = context.new_inner_scope();
        scope.add_variable_from_value("result", holds);
        match run(message_expression, &scope, meter) {
            Ok(Cel::String(text)) if !text.is_empty() => Some(text.to_string()),
            Ok(Cel::String(_)) => None,
            Ok(other) => Some(format!(
                "messageExpression gave a {}, not a string",
                other.type_of()
            )),
            Err(failure) if failure.over_budget => return expression_error(failure.message),
            Err(failure) => Some(failure.message),
        }
    }
    .or_else(|| (!message.is_empty()).then(|| message.to_owned()))
    .unwrap_or_else(|| {
        if holds {
            format!("the {condition} rule holds")
        } else {
            format!("the {condition} rule does not hold")
        }
    });
    RuleCondition {
        type_: condition.to_owned(),
        status: if holds { TRUE } else { FALSE },
        reason: REASON_CONDITION_RULE_EVALUATED,
        message,
    }
}

/// The conditions `rules` set on a manifest whose live object is `object` (of
/// group/version/kind). A well-known rule for a kind without one sets nothing. Every
/// expression is charged to `meter`: one per sync of a work, for all its manifests, allowing
/// [`RULES_DEADLINE`].
pub fn evaluate(
    rules: &[ConditionRule],
    group: &str,
    version: &str,
    kind: &str,
    object: &Value,
    meter: &Arc<Meter>,
) -> Vec<RuleCondition> {
    if rules.is_empty() {
        return Vec::new();
    }
    let Ok(mut context) = cel_budget::context(meter) else {
        return rules
            .iter()
            .map(|rule| RuleCondition {
                type_: rule.condition.clone(),
                status: UNKNOWN,
                reason: REASON_CONDITION_RULE_INTERNAL_ERROR,
                message: "the CEL environment could not be built".into(),
            })
            .collect();
    };
    context.add_variable_from_value("object", to_cel(object));
    // The name is not one of the environment's, so the declaration cannot conflict.
    let _ = context.add_function("hasConditions", has_conditions);
    rules
        .iter()
        .filter_map(|rule| match rule.type_ {
            ConditionRuleType::WellKnownConditions => {
                let (expression, message_expression) =
                    well_known_rule(group, version, kind, &rule.condition)?;
                let message_expression = if rule.message_expression.is_empty() {
                    message_expression
                } else {
                    &rule.message_expression
                };
                Some(cel_condition(
                    &rule.condition,
                    &[expression],
                    &rule.message,
                    message_expression,
                    &context,
                    meter,
                ))
            }
            ConditionRuleType::Cel => {
                let expressions: Vec<&str> = rule
                    .cel_expressions
                    .iter()
                    .flatten()
                    .map(String::as_str)
                    .collect();
                Some(cel_condition(
                    &rule.condition,
                    &expressions,
                    &rule.message,
                    &rule.message_expression,
                    &context,
                    meter,
                ))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::*;

    /// The conditions of `rules`, as one sync of a work evaluates them.
    fn evaluated(
        rules: &[ConditionRule],
        group: &str,
        version: &str,
        kind: &str,
        object: &Value,
    ) -> Vec<RuleCondition> {
        evaluate(
            rules,
            group,
            version,
            kind,
            object,
            &Arc::new(Meter::new(RULES_DEADLINE)),
        )
    }

    fn cel_rule(condition: &str, expressions: &[&str], message_expression: &str) -> ConditionRule {
        ConditionRule {
            condition: condition.into(),
            type_: ConditionRuleType::Cel,
            cel_expressions: Some(expressions.iter().map(|e| (*e).to_owned()).collect()),
            message: String::new(),
            message_expression: message_expression.into(),
        }
    }

    fn deployment(ready: i64) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"replicas": 2},
            "status": {"readyReplicas": ready, "conditions": [{"type": "Available", "status": "True"}]},
        })
    }

    #[rstest]
    #[case::holds(&["object.status.readyReplicas == object.spec.replicas"], 2, TRUE, REASON_CONDITION_RULE_EVALUATED)]
    #[case::does_not_hold(&["object.status.readyReplicas == object.spec.replicas"], 1, FALSE, REASON_CONDITION_RULE_EVALUATED)]
    #[case::anded(&["object.spec.replicas == 2", "object.status.readyReplicas > 5"], 2, FALSE, REASON_CONDITION_RULE_EVALUATED)]
    #[case::has_conditions(&["hasConditions(object.status)"], 2, TRUE, REASON_CONDITION_RULE_EVALUATED)]
    #[case::no_conditions(&["hasConditions(object.spec)"], 2, FALSE, REASON_CONDITION_RULE_EVALUATED)]
    #[case::does_not_compile(&["object.spec.replicas =="], 2, FALSE, REASON_CONDITION_RULE_EXPRESSION_ERROR)]
    #[case::missing_field(&["object.status.nothing == 1"], 2, FALSE, REASON_CONDITION_RULE_EXPRESSION_ERROR)]
    #[case::not_boolean(&["object.spec.replicas"], 2, FALSE, REASON_CONDITION_RULE_EXPRESSION_ERROR)]
    fn cel_rules_set_their_condition(
        #[case] expressions: &[&str],
        #[case] ready: i64,
        #[case] status: &str,
        #[case] reason: &str,
    ) {
        let conditions = evaluated(
            &[cel_rule("Ready", expressions, "")],
            "apps",
            "v1",
            "Deployment",
            &deployment(ready),
        );
        assert_eq!(conditions.len(), 1);
        assert_eq!(
            (conditions[0].status, conditions[0].reason),
            (status, reason),
            "{:?}",
            conditions[0]
        );
    }

    /// Issue 25 (found by the `condition_rules` fuzz target): messages printed maps, whose keys
    /// come in a different order each time, so the condition never settled.
    #[test]
    fn messages_about_a_map_are_the_same_every_time() {
        let message = |expressions: &[&str], message_expression: &str| {
            let rule = cel_rule("Ready", expressions, message_expression);
            evaluated(&[rule], "apps", "v1", "Deployment", &deployment(2))[0]
                .message
                .clone()
        };
        assert_eq!(
            message(&["object.spec.replicas == 2"], "object.metadata"),
            "messageExpression gave a map, not a string"
        );
        assert_eq!(
            message(&["object.status"], ""),
            "expression \"object.status\" gave a map, not a boolean"
        );
        let failed = message(&["object.status + object.spec < 1"], "");
        assert!(!failed.contains("readyReplicas"), "{failed}");
        for _ in 0..16 {
            assert_eq!(message(&["object.status + object.spec < 1"], ""), failed);
        }
    }

    #[test]
    fn the_message_expression_sees_the_result() {
        let rule = cel_rule(
            "Ready",
            &["object.status.readyReplicas == 2"],
            "result ? 'all ' + string(object.status.readyReplicas) + ' ready' : 'waiting'",
        );
        let conditions = evaluated(
            std::slice::from_ref(&rule),
            "apps",
            "v1",
            "Deployment",
            &deployment(2),
        );
        assert_eq!(conditions[0].message, "all 2 ready");
        let conditions = evaluated(&[rule], "apps", "v1", "Deployment", &deployment(1));
        assert_eq!(conditions[0].message, "waiting");
    }

    #[rstest]
    #[case::job_complete(
        "batch", "Job",
        json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}),
        Some((TRUE, "Job is finished"))
    )]
    #[case::job_running("batch", "Job", json!({"status": {"active": 1}}), Some((FALSE, "Job is not finished")))]
    #[case::pod_succeeded("", "Pod", json!({"status": {"phase": "Succeeded"}}), Some((TRUE, "Pod is in phase Succeeded")))]
    #[case::pod_running("", "Pod", json!({"status": {"phase": "Running"}}), Some((FALSE, "Pod is in phase Running")))]
    #[case::other_kind("apps", "Deployment", json!({"status": {}}), None)]
    fn well_known_complete_rules_cover_jobs_and_pods(
        #[case] group: &str,
        #[case] kind: &str,
        #[case] object: Value,
        #[case] expected: Option<(&str, &str)>,
    ) {
        let rule = ConditionRule {
            condition: CONDITION_COMPLETE.into(),
            type_: ConditionRuleType::WellKnownConditions,
            ..ConditionRule::default()
        };
        let conditions = evaluated(&[rule], group, "v1", kind, &object);
        let got = conditions.first().map(|c| (c.status, c.message.as_str()));
        assert_eq!(got, expected);
    }
}

#[cfg(test)]
mod budget_tests {
    use std::time::Instant;

    use rstest::rstest;
    use serde_json::json;

    use super::*;

    fn rule(expressions: &[&str], message_expression: &str) -> ConditionRule {
        ConditionRule {
            condition: "Ready".into(),
            type_: ConditionRuleType::Cel,
            cel_expressions: Some(expressions.iter().map(|e| (*e).to_owned()).collect()),
            message: String::new(),
            message_expression: message_expression.into(),
        }
    }

    /// `metadata.name` is three bytes long, so `size(object.metadata.name) * n` is a size the
    /// compile-time estimate cannot know; `status.items` holds 100 000 numbers.
    fn object() -> Value {
        json!({
            "apiVersion": "example.io/v1", "kind": "Big",
            "metadata": {"name": "big"},
            "spec": {"replicas": 2},
            "status": {"items": (0..100_000).collect::<Vec<i64>>()},
        })
    }

    /// The condition of `rule` on [`object`], checked to come back well within the deadline.
    fn condition_of(rule: ConditionRule, meter: &Arc<Meter>) -> RuleCondition {
        let started = Instant::now();
        let mut conditions = evaluate(&[rule], "example.io", "v1", "Big", &object(), meter);
        let took = started.elapsed();
        assert!(took < RULES_DEADLINE * 5, "took {took:?}");
        assert_eq!(conditions.len(), 1);
        conditions.remove(0)
    }

    fn assert_over_budget(condition: &RuleCondition) {
        assert_eq!(
            (condition.status, condition.reason),
            (FALSE, REASON_CONDITION_RULE_EXPRESSION_ERROR),
            "{condition:?}"
        );
        assert!(condition.message.contains("ran over its budget"), "{condition:?}");
    }

    /// Unmetered, each of these runs for hours or allocates terabytes.
    #[rstest]
    #[case::nested_ranges("lists.range(1000000).all(i, lists.range(1000000).all(j, i != j))")]
    #[case::nested_ranges_of_computed_size(
        "lists.range(size(object.metadata.name) * 300000).all(i, \
         lists.range(size(object.metadata.name) * 300000).all(j, i != j || j >= 0))"
    )]
    #[case::map_building_a_huge_list(
        "lists.range(size(object.metadata.name) * 300000).map(i, \
         lists.range(size(object.metadata.name) * 300000)).size() > 0"
    )]
    #[case::growing_replace_chain(&format!("'aaaa'{}.size() > 0", ".replace('a', 'aaaa')".repeat(15)))]
    #[case::huge_live_list_in_a_nested_comprehension(
        "object.status.items.all(a, object.status.items.exists(b, a + b < 0) || true)"
    )]
    fn hostile_expressions_stop_at_their_budget(#[case] expression: &str) {
        let meter = Arc::new(Meter::new(RULES_DEADLINE));
        assert_over_budget(&condition_of(rule(&[expression], ""), &meter));
    }

    #[test]
    fn a_hostile_message_expression_fails_the_rule() {
        let meter = Arc::new(Meter::new(RULES_DEADLINE));
        let hostile = format!("'aaaa'{}", ".replace('a', 'aaaa')".repeat(15));
        assert_over_budget(&condition_of(
            rule(&["object.spec.replicas == 2"], &hostile),
            &meter,
        ));
    }

    #[test]
    fn an_expression_too_long_is_refused_without_quoting_it() {
        let meter = Arc::new(Meter::new(RULES_DEADLINE));
        let long = format!("'{}' == ''", "a".repeat(MAX_EXPRESSION_LENGTH));
        let condition = condition_of(rule(&[&long], ""), &meter);
        assert_over_budget(&condition);
        assert!(condition.message.len() < 200, "{}", condition.message);
    }

    #[test]
    fn past_the_deadline_of_its_work_sync_every_rule_is_over_budget() {
        let meter = Arc::new(Meter::new(std::time::Duration::ZERO));
        assert_over_budget(&condition_of(rule(&["object.spec.replicas == 2"], ""), &meter));
        let well_known = ConditionRule {
            condition: CONDITION_COMPLETE.into(),
            type_: ConditionRuleType::WellKnownConditions,
            ..ConditionRule::default()
        };
        let job = json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}});
        let conditions = evaluate(&[well_known], "batch", "v1", "Job", &job, &meter);
        assert_over_budget(&conditions[0]);
    }

    #[test]
    fn a_rule_stopped_by_its_cost_or_by_the_deadline_says_the_same() {
        // Which limit stops a hostile rule depends on the agent's load; its condition must not
        // change from one sync to the next with it (each change is a status write).
        let hostile = || {
            rule(
                &["lists.range(size(object.metadata.name) * 300000).map(i, i).size() > 0"],
                "",
            )
        };
        let by_cost = condition_of(hostile(), &Arc::new(Meter::new(RULES_DEADLINE)));
        let by_deadline = condition_of(hostile(), &Arc::new(Meter::new(std::time::Duration::ZERO)));
        assert_over_budget(&by_cost);
        assert_eq!(by_cost, by_deadline);
    }

    #[test]
    fn rules_within_their_budget_after_a_hostile_one_still_evaluate() {
        let meter = Arc::new(Meter::new(RULES_DEADLINE));
        // Over its cost limit at its second element, long before the deadline.
        let hostile = rule(
            &["lists.range(size(object.metadata.name) * 300000).map(i, \
               lists.range(size(object.metadata.name) * 300000)).size() > 0"],
            "",
        );
        let fine = rule(&["object.status.items.size() == 100000"], "");
        let conditions = evaluate(&[hostile, fine], "example.io", "v1", "Big", &object(), &meter);
        assert_over_budget(&conditions[0]);
        assert_eq!(
            (conditions[1].status, conditions[1].reason),
            (TRUE, REASON_CONDITION_RULE_EVALUATED),
            "{:?}",
            conditions[1]
        );
    }

    /// OCM's base environment: the strings and lists extensions and Kubernetes' quantities.
    #[test]
    fn rules_have_the_environment_placement_has() {
        let meter = Arc::new(Meter::new(RULES_DEADLINE));
        let condition = condition_of(
            rule(
                &[
                    "object.metadata.name.upperAscii() == 'BIG'",
                    "lists.range(3).size() == 3",
                    "quantity('1Gi').isGreaterThan(quantity('1G'))",
                ],
                "",
            ),
            &meter,
        );
        assert_eq!(
            (condition.status, condition.reason),
            (TRUE, REASON_CONDITION_RULE_EVALUATED),
            "{condition:?}"
        );
    }
}
