//! Label selectors (`metav1.LabelSelector`) evaluated against a set of labels, with the same
//! semantics as `metav1.LabelSelectorAsSelector`: every `matchLabels` entry and every
//! `matchExpressions` requirement must hold; an empty selector matches everything.
//! Cluster-claim selectors reuse the requirements over claim name → value.

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

#[cfg(test)]
mod tests {
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
