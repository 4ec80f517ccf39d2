//! Condition rules: conditions a work sets on a manifest from its live object, either OCM's
//! well-known rules (`Complete` for Jobs and Pods) or the work's own CEL expressions, evaluated
//! with the `cel` crate. Variables are `object` (the live object) and, in `messageExpression`,
//! `result` (whether the expressions held); `hasConditions(x)` tells whether `x` carries a
//! non-empty `conditions` list, as in OCM's CEL library.
//!
//! Reasons follow OCM: `ConditionRuleEvaluated` (True when every expression holds, else
//! False), `ConditionRuleExpressionError` (False: an expression does not compile, fails, or is
//! not boolean), `ConditionRuleInvalid` (Unknown: a rule OCM does not know).

use std::collections::HashMap;

use cel::{Context, ExecutionError, Program, Value as Cel, objects::Key};
use flotilla_api::work::{
    consts::manifest_work::{
        CONDITION_COMPLETE, REASON_CONDITION_RULE_EVALUATED, REASON_CONDITION_RULE_EXPRESSION_ERROR,
    },
    v1::{ConditionRule, ConditionRuleType},
};
use serde_json::Value;

use crate::conditions::{FALSE, TRUE};

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

fn context<'a>(object: &Cel, result: Option<bool>) -> Context<'a, 'a> {
    let mut context = Context::default();
    context.add_variable_from_value("object", object.clone());
    if let Some(result) = result {
        context.add_variable_from_value("result", result);
    }
    // The name is not one of the standard library's, so the declaration cannot conflict.
    let _ = context.add_function("hasConditions", has_conditions);
    context
}

/// Evaluates `expression` to a value.
fn run(expression: &str, object: &Cel, result: Option<bool>) -> Result<Cel, String> {
    let program = Program::compile(expression)
        .map_err(|e| format!("expression {expression:?} does not compile: {e}"))?;
    program
        .execute(&context(object, result))
        .map_err(|e| format!("expression {expression:?} failed: {}", failure(&e)))
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
    object: &Cel,
) -> RuleCondition {
    let mut holds = true;
    for expression in expressions {
        match run(expression, object, None) {
            Ok(Cel::Bool(true)) => {}
            Ok(Cel::Bool(false)) => {
                holds = false;
                break;
            }
            Ok(other) => {
                return RuleCondition {
                    type_: condition.to_owned(),
                    status: FALSE,
                    reason: REASON_CONDITION_RULE_EXPRESSION_ERROR,
                    message: format!(
                        "expression {expression:?} gave a {}, not a boolean",
                        other.type_of()
                    ),
                };
            }
            Err(message) => {
                return RuleCondition {
                    type_: condition.to_owned(),
                    status: FALSE,
                    reason: REASON_CONDITION_RULE_EXPRESSION_ERROR,
                    message,
                };
            }
        }
    }
    let message = if message_expression.is_empty() {
        None
    } else {
        match run(message_expression, object, Some(holds)) {
            Ok(Cel::String(text)) if !text.is_empty() => Some(text.to_string()),
            Ok(Cel::String(_)) => None,
            Ok(other) => Some(format!(
                "messageExpression gave a {}, not a string",
                other.type_of()
            )),
            Err(message) => Some(message),
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
/// group/version/kind). A well-known rule for a kind without one sets nothing.
pub fn evaluate(
    rules: &[ConditionRule],
    group: &str,
    version: &str,
    kind: &str,
    object: &Value,
) -> Vec<RuleCondition> {
    let cel_object = to_cel(object);
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
                    &cel_object,
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
                    &cel_object,
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
        let conditions = evaluate(
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
            evaluate(&[rule], "apps", "v1", "Deployment", &deployment(2))[0]
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
        let conditions = evaluate(
            std::slice::from_ref(&rule),
            "apps",
            "v1",
            "Deployment",
            &deployment(2),
        );
        assert_eq!(conditions[0].message, "all 2 ready");
        let conditions = evaluate(&[rule], "apps", "v1", "Deployment", &deployment(1));
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
        let conditions = evaluate(&[rule], group, "v1", kind, &object);
        let got = conditions.first().map(|c| (c.status, c.message.as_str()));
        assert_eq!(got, expected);
    }
}
