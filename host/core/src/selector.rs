//! Label selectors (`metav1.LabelSelector`) evaluated against a set of labels, with the same
//! semantics as `metav1.LabelSelectorAsSelector`: every `matchLabels` entry and every
//! `matchExpressions` requirement must hold; an empty selector matches everything.
//! Cluster-claim selectors reuse the requirements over claim name → value. [`parse`] reads
//! the string form people type (`kubectl -l`, clusteradm's `--label-selectors`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// Why a selector cannot be evaluated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The operator is not one of `In`, `NotIn`, `Exists`, `DoesNotExist`.
    #[error("unknown operator {operator:?} for key {key:?}")]
    UnknownOperator {
        /// The requirement's key.
        key: String,
        /// The operator given.
        operator: String,
    },
    /// `In`/`NotIn` need values; `Exists`/`DoesNotExist` must have none.
    #[error("operator {operator} for key {key:?} {problem}")]
    BadValues {
        /// The requirement's key.
        key: String,
        /// The operator given.
        operator: String,
        /// What is wrong with the values.
        problem: &'static str,
    },
}

/// Whether `labels` satisfy `selector`.
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> Result<bool, SelectorError> {
    if let Some(match_labels) = &selector.match_labels {
        for (key, value) in match_labels {
            if labels.get(key) != Some(value) {
                // Keep validating the expressions so a bad selector is reported regardless.
                validate(selector.match_expressions.as_deref().unwrap_or_default())?;
                return Ok(false);
            }
        }
    }
    requirements_match(selector.match_expressions.as_deref().unwrap_or_default(), labels)
}

/// Whether every requirement holds for `values` (labels, or claims by name).
pub fn requirements_match(
    requirements: &[LabelSelectorRequirement],
    values: &BTreeMap<String, String>,
) -> Result<bool, SelectorError> {
    validate(requirements)?;
    Ok(requirements.iter().all(|r| requirement_holds(r, values)))
}

fn validate(requirements: &[LabelSelectorRequirement]) -> Result<(), SelectorError> {
    for r in requirements {
        let count = r.values.as_ref().map_or(0, Vec::len);
        let problem = match r.operator.as_str() {
            "In" | "NotIn" if count == 0 => Some("needs at least one value"),
            "Exists" | "DoesNotExist" if count > 0 => Some("must not have values"),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => None,
            _ => {
                return Err(SelectorError::UnknownOperator {
                    key: r.key.clone(),
                    operator: r.operator.clone(),
                });
            }
        };
        if let Some(problem) = problem {
            return Err(SelectorError::BadValues {
                key: r.key.clone(),
                operator: r.operator.clone(),
                problem,
            });
        }
    }
    Ok(())
}

fn requirement_holds(r: &LabelSelectorRequirement, values: &BTreeMap<String, String>) -> bool {
    let allowed = r.values.as_deref().unwrap_or_default();
    match (r.operator.as_str(), values.get(&r.key)) {
        ("In", Some(v)) => allowed.contains(v),
        ("In", None) => false,
        ("NotIn", Some(v)) => !allowed.contains(v),
        ("NotIn", None) => true,
        ("Exists", found) => found.is_some(),
        ("DoesNotExist", found) => found.is_none(),
        _ => false,
    }
}

/// Why a selector string cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("label selector {text:?}: {problem}")]
pub struct ParseError {
    /// The term that could not be read.
    pub text: String,
    /// What is wrong with it.
    pub problem: &'static str,
}

/// Reads a selector as `metav1.ParseToLabelSelector` does: comma-separated terms `k=v` (or
/// `k==v`, a `matchLabels` entry), `k!=v` (`NotIn`), `k in (a,b)`, `k notin (a,b)`, `k`
/// (`Exists`) and `!k` (`DoesNotExist`).
pub fn parse(text: &str) -> Result<LabelSelector, ParseError> {
    let mut selector = LabelSelector::default();
    let mut labels = BTreeMap::new();
    let mut expressions = Vec::new();
    for term in split_terms(text) {
        let term = term.trim();
        let error = |problem| ParseError {
            text: term.to_owned(),
            problem,
        };
        if term.is_empty() {
            return Err(error("an empty term"));
        }
        let requirement = |key: &str, operator: &str, values: Option<Vec<String>>| LabelSelectorRequirement {
            key: key.trim().to_owned(),
            operator: operator.to_owned(),
            values,
        };
        if let Some(key) = term.strip_prefix('!') {
            expressions.push(requirement(key, "DoesNotExist", None));
        } else if let Some((key, value)) = term.split_once("!=") {
            expressions.push(requirement(key, "NotIn", Some(vec![value.trim().to_owned()])));
        } else if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
            labels.insert(key.trim().to_owned(), value.trim().to_owned());
        } else if let Some((key, rest)) = term.split_once(' ') {
            let rest = rest.trim();
            let (operator, list) = if let Some(list) = rest.strip_prefix("notin") {
                ("NotIn", list)
            } else if let Some(list) = rest.strip_prefix("in") {
                ("In", list)
            } else {
                return Err(error("expected =, !=, in or notin after the key"));
            };
            let list = list
                .trim()
                .strip_prefix('(')
                .and_then(|l| l.strip_suffix(')'))
                .ok_or_else(|| error("values of in/notin go in parentheses"))?;
            let values: Vec<String> = list.split(',').map(|v| v.trim().to_owned()).collect();
            if values.iter().any(String::is_empty) {
                return Err(error("an empty value in parentheses"));
            }
            expressions.push(requirement(key, operator, Some(values)));
        } else {
            expressions.push(requirement(term, "Exists", None));
        }
    }
    if labels
        .keys()
        .chain(expressions.iter().map(|e| &e.key))
        .any(String::is_empty)
    {
        return Err(ParseError {
            text: text.to_owned(),
            problem: "a term without a key",
        });
    }
    selector.match_labels = (!labels.is_empty()).then_some(labels);
    selector.match_expressions = (!expressions.is_empty()).then_some(expressions);
    Ok(selector)
}

/// `text` split at the commas outside parentheses.
fn split_terms(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (at, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_typed_selector_reads_as_kubectl_reads_it() {
        let parsed =
            parse("env=prod, tier==web,zone!=a,region in (eu, us),gpu,!legacy,os notin (win)").unwrap();
        let labels = parsed.match_labels.unwrap();
        assert_eq!(labels.get("env").map(String::as_str), Some("prod"));
        assert_eq!(labels.get("tier").map(String::as_str), Some("web"));
        let expressions: Vec<(String, String, Option<Vec<String>>)> = parsed
            .match_expressions
            .unwrap()
            .into_iter()
            .map(|e| (e.key, e.operator, e.values))
            .collect();
        let v = |values: &[&str]| Some(values.iter().map(|s| (*s).to_owned()).collect());
        assert_eq!(
            expressions,
            [
                ("zone".into(), "NotIn".into(), v(&["a"])),
                ("region".into(), "In".into(), v(&["eu", "us"])),
                ("gpu".into(), "Exists".into(), None),
                ("legacy".into(), "DoesNotExist".into(), None),
                ("os".into(), "NotIn".into(), v(&["win"])),
            ]
        );
    }

    #[test]
    fn a_selector_that_cannot_be_read_says_which_term() {
        assert_eq!(parse("env=prod,,x").unwrap_err().problem, "an empty term");
        assert_eq!(parse("region in eu").unwrap_err().text, "region in eu");
        assert!(parse("=prod").is_err());
        assert!(parse("region in (eu,)").is_err());
    }

    use rstest::rstest;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn requirement(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    #[test]
    fn an_empty_selector_matches_everything() {
        assert!(matches(&LabelSelector::default(), &labels(&[])).unwrap());
        assert!(matches(&LabelSelector::default(), &labels(&[("a", "b")])).unwrap());
    }

    #[rstest]
    #[case::in_match("In", &["prod", "dev"], true)]
    #[case::in_miss("In", &["dev"], false)]
    #[case::not_in_match("NotIn", &["dev"], true)]
    #[case::not_in_miss("NotIn", &["prod"], false)]
    #[case::exists("Exists", &[], true)]
    #[case::does_not_exist("DoesNotExist", &[], false)]
    fn expressions_follow_kubernetes_semantics(
        #[case] operator: &str,
        #[case] values: &[&str],
        #[case] expected: bool,
    ) {
        let selector = LabelSelector {
            match_expressions: Some(vec![requirement("env", operator, values)]),
            ..Default::default()
        };
        assert_eq!(matches(&selector, &labels(&[("env", "prod")])).unwrap(), expected);
    }

    #[test]
    fn match_labels_and_expressions_must_all_hold() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("team", "a")]).into_iter().collect()),
            match_expressions: Some(vec![requirement("env", "In", &["prod"])]),
        };
        assert!(matches(&selector, &labels(&[("team", "a"), ("env", "prod")])).unwrap());
        assert!(!matches(&selector, &labels(&[("team", "b"), ("env", "prod")])).unwrap());
        assert!(!matches(&selector, &labels(&[("team", "a"), ("env", "dev")])).unwrap());
    }

    #[rstest]
    #[case::unknown_operator(requirement("k", "Near", &["v"]))]
    #[case::in_without_values(requirement("k", "In", &[]))]
    #[case::exists_with_values(requirement("k", "Exists", &["v"]))]
    fn malformed_requirements_are_errors_not_mismatches(#[case] bad: LabelSelectorRequirement) {
        assert!(requirements_match(&[bad], &labels(&[("k", "v")])).is_err());
    }
}
