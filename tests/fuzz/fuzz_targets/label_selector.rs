//! Fuzzes label and claim selectors (`flotilla_core::selector::{matches, requirements_match}`)
//! over selectors and label sets built from the input. Keys and values come from a small
//! vocabulary so that selectors and labels meet; operators are the four known ones or any text.
//!
//! Properties, checked against a plain model of `metav1.LabelSelectorAsSelector` written here:
//! a selector with an unknown operator or the wrong number of values is an error whatever the
//! labels; otherwise it matches exactly when every `matchLabels` entry is present and every
//! requirement holds. `matchLabels` `k: v` means the same as the requirement `k In (v)`, and
//! claim selectors (`requirements_match`) agree with label selectors made of the same
//! requirements. Every answer is the same twice.

#![no_main]

use std::collections::BTreeMap;

use flotilla_core::selector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use libfuzzer_sys::{
    arbitrary::{Result, Unstructured},
    fuzz_target,
};

const WORDS: [&str; 5] = ["a", "b", "env", "", "prod"];
const OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];

fn word(u: &mut Unstructured<'_>) -> Result<String> {
    // Mostly the vocabulary, sometimes any text.
    if u.ratio(7, 8)? {
        Ok((*u.choose(&WORDS)?).to_owned())
    } else {
        u.arbitrary()
    }
}

fn map(u: &mut Unstructured<'_>) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for _ in 0..u.int_in_range(0..=4)? {
        out.insert(word(u)?, word(u)?);
    }
    Ok(out)
}

fn requirement(u: &mut Unstructured<'_>) -> Result<LabelSelectorRequirement> {
    let operator = if u.ratio(9, 10)? {
        (*u.choose(&OPERATORS)?).to_owned()
    } else {
        u.arbitrary()?
    };
    let values = if u.arbitrary()? {
        Some(
            (0..u.int_in_range(0..=3)?)
                .map(|_| word(u))
                .collect::<Result<_>>()?,
        )
    } else {
        None
    };
    Ok(LabelSelectorRequirement {
        key: word(u)?,
        operator,
        values,
    })
}

fn requirements(u: &mut Unstructured<'_>) -> Result<Vec<LabelSelectorRequirement>> {
    (0..u.int_in_range(0..=4)?).map(|_| requirement(u)).collect()
}

/// The model: `None` for a malformed selector, else whether it matches.
fn model(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> Option<bool> {
    let expressions = selector.match_expressions.as_deref().unwrap_or_default();
    let mut all_hold = true;
    for r in expressions {
        let values = r.values.as_deref().unwrap_or_default();
        let present = labels.get(&r.key);
        let holds = match r.operator.as_str() {
            "In" if !values.is_empty() => present.is_some_and(|v| values.contains(v)),
            "NotIn" if !values.is_empty() => present.is_none_or(|v| !values.contains(v)),
            "Exists" if values.is_empty() => present.is_some(),
            "DoesNotExist" if values.is_empty() => present.is_none(),
            _ => return None,
        };
        all_hold &= holds;
    }
    let labels_present = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    Some(all_hold && labels_present)
}

fn build(u: &mut Unstructured<'_>) -> Result<(LabelSelector, BTreeMap<String, String>)> {
    let selector = LabelSelector {
        match_labels: if u.arbitrary()? { Some(map(u)?) } else { None },
        match_expressions: if u.arbitrary()? {
            Some(requirements(u)?)
        } else {
            None
        },
    };
    Ok((selector, map(u)?))
}

fuzz_target!(|data: &[u8]| {
    let Ok((selector, labels)) = build(&mut Unstructured::new(data)) else {
        return;
    };
    let answer = selector::matches(&selector, &labels);
    assert_eq!(
        answer,
        selector::matches(&selector, &labels),
        "two answers differ"
    );
    assert_eq!(
        answer.as_ref().ok().copied(),
        model(&selector, &labels),
        "{selector:?} on {labels:?}: {answer:?}"
    );

    // matchLabels k: v is the requirement k In (v).
    let mut as_requirements = selector.match_expressions.clone().unwrap_or_default();
    as_requirements.extend(
        selector
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| LabelSelectorRequirement {
                key: k.clone(),
                operator: "In".into(),
                values: Some(vec![v.clone()]),
            }),
    );
    let claims = selector::requirements_match(&as_requirements, &labels);
    assert_eq!(
        claims.as_ref().ok(),
        answer.as_ref().ok(),
        "{selector:?} on {labels:?}: as requirements {claims:?}, as a selector {answer:?}"
    );
    let only_expressions = LabelSelector {
        match_labels: None,
        match_expressions: Some(as_requirements.clone()),
    };
    assert_eq!(
        selector::matches(&only_expressions, &labels),
        selector::requirements_match(&as_requirements, &labels)
    );
});
