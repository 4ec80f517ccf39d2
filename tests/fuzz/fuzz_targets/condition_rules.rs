//! Fuzzes a ManifestWork's condition rules (`flotilla_core::work::agent::rules::evaluate`): CEL
//! expressions from the hub, evaluated by the work agent over a live object of the managed
//! cluster. Input lines: the message expression, two expressions, then the object's JSON (a
//! fixed Job when it is not JSON).
//!
//! Properties: no panic; soundness of the budget: every evaluation returns within its deadline
//! plus a margin, so no rule can hold the agent; the same conditions twice; one condition per
//! rule, of the rule's type; an expression error is `False`; expressions are ANDed in order:
//! both together hold exactly when each holds alone, and when the first does not hold the
//! second is never read. Evaluations that ran past their deadline are left out of the
//! comparisons: where a deadline falls is a matter of timing.

#![no_main]

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use flotilla_api::work::{
    consts::manifest_work::{
        CONDITION_COMPLETE, REASON_CONDITION_RULE_EVALUATED, REASON_CONDITION_RULE_EXPRESSION_ERROR,
    },
    v1::{ConditionRule, ConditionRuleType},
};
use flotilla_core::{
    cel_budget::{Meter, Overrun},
    conditions::{FALSE, TRUE},
    work::agent::rules::{self, RuleCondition},
};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

/// The deadline each evaluation gets, and how far past it one may return (the clock is read
/// every 256 steps, and the sanitizers slow each step down).
const DEADLINE: Duration = Duration::from_millis(100);
const MARGIN: Duration = Duration::from_secs(2);

/// Evaluates `rules` with a fresh meter, checking it returns in time; `None` when the
/// evaluation ran past its deadline.
fn timed(rules: &[ConditionRule], group: &str, kind: &str, object: &Value) -> Option<Vec<RuleCondition>> {
    let meter = Arc::new(Meter::new(DEADLINE));
    let started = Instant::now();
    let conditions = rules::evaluate(rules, group, "v1", kind, object, &meter);
    let took = started.elapsed();
    assert!(
        took <= DEADLINE + MARGIN,
        "{rules:?} ran {took:?} ({conditions:?}), past its deadline of {DEADLINE:?}"
    );
    (meter.overrun() != Some(Overrun::Deadline)).then_some(conditions)
}

fn fallback_object() -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "once", "labels": {"app": "once"}},
        "spec": {"completions": 1},
        "status": {
            "succeeded": 1, "active": 0,
            "conditions": [{"type": "Complete", "status": "True"}]
        }
    })
}

fn evaluate(expressions: &[&str], message_expression: &str, object: &Value) -> Option<RuleCondition> {
    let rule = ConditionRule {
        condition: "Ready".into(),
        type_: ConditionRuleType::Cel,
        cel_expressions: Some(expressions.iter().map(|e| (*e).to_owned()).collect()),
        message: String::new(),
        message_expression: message_expression.into(),
    };
    let mut conditions = timed(&[rule], "batch", "Job", object)?;
    assert_eq!(conditions.len(), 1, "one rule, one condition");
    let condition = conditions.remove(0);
    assert_eq!(condition.type_, "Ready");
    match condition.reason {
        REASON_CONDITION_RULE_EVALUATED => assert!([TRUE, FALSE].contains(&condition.status)),
        REASON_CONDITION_RULE_EXPRESSION_ERROR => assert_eq!(condition.status, FALSE),
        other => panic!("reason {other}"),
    }
    Some(condition)
}

fn holds(condition: &RuleCondition) -> Option<bool> {
    (condition.reason == REASON_CONDITION_RULE_EVALUATED).then_some(condition.status == TRUE)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.splitn(4, '\n');
    let message_expression = lines.next().unwrap_or_default();
    let first = lines.next().unwrap_or_default();
    let second = lines.next().unwrap_or_default();
    let object = serde_json::from_str(lines.next().unwrap_or_default()).unwrap_or_else(|_| fallback_object());

    let both = evaluate(&[first, second], message_expression, &object);
    let again = evaluate(&[first, second], message_expression, &object);
    if let (Some(both), Some(again)) = (&both, &again) {
        assert_eq!(both, again, "two answers differ");
    }

    let alone = |e: &str| evaluate(&[e], "", &object).map(|c| holds(&c));
    let together = evaluate(&[first, second], "", &object).map(|c| holds(&c));
    match (alone(first), alone(second), together) {
        (Some(Some(false)), _, Some(together)) => assert_eq!(
            together,
            Some(false),
            "{first:?} fails, so {first:?} && {second:?} fails"
        ),
        (Some(Some(true)), Some(second_alone), Some(together)) => {
            assert_eq!(together, second_alone, "{first:?} holds, so the second decides")
        }
        (Some(None), _, Some(together)) => {
            assert_eq!(together, None, "{first:?} is an error, so the rule is")
        }
        _ => {} // one of them ran past its deadline
    }

    // The well-known Complete rule reads any object without panicking, the same way twice.
    let well_known = ConditionRule {
        condition: CONDITION_COMPLETE.into(),
        type_: ConditionRuleType::WellKnownConditions,
        message_expression: message_expression.into(),
        ..ConditionRule::default()
    };
    for (group, kind) in [("batch", "Job"), ("", "Pod")] {
        let once = timed(std::slice::from_ref(&well_known), group, kind, &object);
        let again = timed(std::slice::from_ref(&well_known), group, kind, &object);
        if let (Some(once), Some(again)) = (once, again) {
            assert_eq!(once.len(), 1);
            assert_eq!(once, again);
        }
    }
});
