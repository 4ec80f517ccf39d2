//! Status feedback: the values a work reports back from an applied object, read with
//! Kubernetes-style JSONPaths (`.status.readyReplicas`, `{.status.conditions[?(@.type=="Ready")].status}`)
//! through the `jsonpath-rust` crate (RFC 9535), after turning the Kubernetes form into a
//! query rooted at `$`.
//!
//! Typing follows OCM: an integer is `Integer`, a string `String`, a boolean `Boolean`; a
//! missing field gives no value; several matches use the first (lists and maps are `JsonRaw`
//! of at most 1024 bytes only when raw feedback is enabled, OCM's gate `RawFeedbackJsonString`);
//! anything else is an error naming the value.

use flotilla_api::work::{
    consts::MAX_JSON_RAW_LENGTH,
    v1::{FeedBackType, FeedbackRule, FeedbackValue, FieldValue, ValueType},
};
use jsonpath_rust::JsonPath as _;
use serde_json::Value;

/// Name and Kubernetes JSONPath of one well-known value.
pub type WellKnownPath = (&'static str, &'static str);

const DEPLOYMENT: &[WellKnownPath] = &[
    ("ReadyReplicas", ".status.readyReplicas"),
    ("Replicas", ".status.replicas"),
    ("AvailableReplicas", ".status.availableReplicas"),
];
const DAEMON_SET: &[WellKnownPath] = &[
    ("NumberReady", ".status.numberReady"),
    ("DesiredNumberScheduled", ".status.desiredNumberScheduled"),
    ("NumberAvailable", ".status.numberAvailable"),
];
const JOB: &[WellKnownPath] = &[
    (
        "JobComplete",
        r#".status.conditions[?(@.type=="Complete")].status"#,
    ),
    ("JobSucceeded", ".status.succeeded"),
];
const POD: &[WellKnownPath] = &[
    ("PodReady", r#".status.conditions[?(@.type=="Ready")].status"#),
    ("PodPhase", ".status.phase"),
];

/// The WellKnownStatus paths of group/version/kind, if it has any (Deployment, DaemonSet, Job,
/// Pod).
pub fn well_known_paths(group: &str, version: &str, kind: &str) -> Option<&'static [WellKnownPath]> {
    match (group, version, kind) {
        ("apps", "v1", "Deployment") => Some(DEPLOYMENT),
        ("apps", "v1", "DaemonSet") => Some(DAEMON_SET),
        ("batch", "v1", "Job") => Some(JOB),
        ("", "v1", "Pod") => Some(POD),
        _ => None,
    }
}

/// Why a value could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FeedbackError {
    /// A WellKnownStatus rule on a kind without well-known values.
    #[error("no well-known status values for {kind} ({group_version}); use a JSONPaths rule")]
    NoWellKnownStatus {
        /// The object's kind.
        kind: String,
        /// Its `apiVersion`.
        group_version: String,
    },
    /// The path does not parse.
    #[error("feedback {name}: invalid JSONPath {path:?}: {message}")]
    InvalidPath {
        /// The value's name.
        name: String,
        /// The path.
        path: String,
        /// The parser's message.
        message: String,
    },
    /// A JSONPaths entry names a version other than the object's.
    #[error("feedback {name}: version {wanted} does not match the object's version {actual}")]
    VersionMismatch {
        /// The value's name.
        name: String,
        /// The version the rule names.
        wanted: String,
        /// The object's version.
        actual: String,
    },
    /// The value is of a type feedback cannot carry.
    #[error("feedback {name}: a {found} cannot be reported (integer, string or boolean only)")]
    UnsupportedType {
        /// The value's name.
        name: String,
        /// What was found.
        found: &'static str,
    },
    /// A raw JSON value is too long.
    #[error("feedback {name}: the JSON value is {length} bytes, more than {MAX_JSON_RAW_LENGTH}")]
    TooLong {
        /// The value's name.
        name: String,
        /// Its length.
        length: usize,
    },
}

/// The RFC 9535 query for a Kubernetes JSONPath: braces removed, rooted at `$`.
pub fn to_query(path: &str) -> String {
    let trimmed = path.trim();
    let inner = trimmed
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(trimmed)
        .trim();
    if inner.starts_with('$') {
        inner.to_owned()
    } else if inner.starts_with('.') || inner.starts_with('[') {
        format!("${inner}")
    } else {
        format!("$.{inner}")
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "non-integer number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

/// The value `name` at `path` in `object`: `Ok(None)` when the path matches nothing (or null).
pub fn value_at(
    name: &str,
    path: &str,
    object: &Value,
    raw_json: bool,
) -> Result<Option<FeedbackValue>, FeedbackError> {
    let query = to_query(path);
    let found = object.query(&query).map_err(|e| FeedbackError::InvalidPath {
        name: name.to_owned(),
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    let value = match found.as_slice() {
        [] => return Ok(None),
        [one] => (*one).clone(),
        [first, ..] if !raw_json => (*first).clone(),
        many => Value::Array(many.iter().map(|v| (*v).clone()).collect()),
    };
    let field = match &value {
        Value::Null => return Ok(None),
        Value::Number(n) if n.as_i64().is_some() => FieldValue {
            type_: ValueType::Integer,
            integer: n.as_i64(),
            ..FieldValue::default()
        },
        Value::String(s) => FieldValue {
            type_: ValueType::String,
            string: Some(s.clone()),
            ..FieldValue::default()
        },
        Value::Bool(b) => FieldValue {
            type_: ValueType::Boolean,
            boolean: Some(*b),
            ..FieldValue::default()
        },
        Value::Array(_) | Value::Object(_) if raw_json => {
            let text = value.to_string();
            if text.len() > MAX_JSON_RAW_LENGTH {
                return Err(FeedbackError::TooLong {
                    name: name.to_owned(),
                    length: text.len(),
                });
            }
            FieldValue {
                type_: ValueType::JsonRaw,
                json_raw: Some(text),
                ..FieldValue::default()
            }
        }
        other => {
            return Err(FeedbackError::UnsupportedType {
                name: name.to_owned(),
                found: type_name(other),
            });
        }
    };
    Ok(Some(FeedbackValue {
        name: name.to_owned(),
        value: field,
    }))
}

/// The values of `rules` over `object` (of `group`/`version`/`kind`), and every error met; a
/// failing value does not stop the others, as in OCM.
pub fn values(
    rules: &[FeedbackRule],
    group: &str,
    version: &str,
    kind: &str,
    object: &Value,
    raw_json: bool,
) -> (Vec<FeedbackValue>, Vec<FeedbackError>) {
    let mut values = Vec::new();
    let mut errors = Vec::new();
    for rule in rules {
        match rule.type_ {
            FeedBackType::WellKnownStatus => match well_known_paths(group, version, kind) {
                None => errors.push(FeedbackError::NoWellKnownStatus {
                    kind: kind.to_owned(),
                    group_version: if group.is_empty() {
                        version.to_owned()
                    } else {
                        format!("{group}/{version}")
                    },
                }),
                Some(paths) => {
                    for (name, path) in paths {
                        match value_at(name, path, object, raw_json) {
                            Ok(Some(v)) => values.push(v),
                            Ok(None) => {}
                            Err(e) => errors.push(e),
                        }
                    }
                }
            },
            FeedBackType::JSONPaths => {
                for path in &rule.json_paths {
                    if !path.version.is_empty() && path.version != version {
                        errors.push(FeedbackError::VersionMismatch {
                            name: path.name.clone(),
                            wanted: path.version.clone(),
                            actual: version.to_owned(),
                        });
                        continue;
                    }
                    match value_at(&path.name, &path.path, object, raw_json) {
                        Ok(Some(v)) => values.push(v),
                        Ok(None) => {}
                        Err(e) => errors.push(e),
                    }
                }
            }
        }
    }
    (values, errors)
}

#[cfg(test)]
mod tests {
    use flotilla_api::work::v1::JsonPath;
    use rstest::rstest;
    use serde_json::json;

    use super::*;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": 2, "paused": false},
            "status": {
                "replicas": 2, "readyReplicas": 1,
                "conditions": [
                    {"type": "Available", "status": "True"},
                    {"type": "Progressing", "status": "False"},
                ],
                "ratio": 0.5,
            },
        })
    }

    #[rstest]
    #[case::plain(".status.replicas", "$.status.replicas")]
    #[case::braces("{.status.replicas}", "$.status.replicas")]
    #[case::rooted("$.status", "$.status")]
    #[case::bare("status.phase", "$.status.phase")]
    fn kubernetes_paths_become_rooted_queries(#[case] path: &str, #[case] query: &str) {
        assert_eq!(to_query(path), query);
    }

    fn integer(v: i64) -> FieldValue {
        FieldValue {
            type_: ValueType::Integer,
            integer: Some(v),
            ..FieldValue::default()
        }
    }
    fn string(v: &str) -> FieldValue {
        FieldValue {
            type_: ValueType::String,
            string: Some(v.into()),
            ..FieldValue::default()
        }
    }
    fn boolean(v: bool) -> FieldValue {
        FieldValue {
            type_: ValueType::Boolean,
            boolean: Some(v),
            ..FieldValue::default()
        }
    }

    #[rstest]
    #[case::integer(".status.readyReplicas", Some(integer(1)))]
    #[case::string(r#".status.conditions[?(@.type=="Available")].status"#, Some(string("True")))]
    #[case::boolean(".spec.paused", Some(boolean(false)))]
    #[case::label("{.metadata.labels.app}", Some(string("web")))]
    #[case::missing(".status.availableReplicas", None)]
    #[case::first_of_many(".status.conditions[*].type", Some(string("Available")))]
    fn values_are_typed(#[case] path: &str, #[case] expected: Option<FieldValue>) {
        let value = value_at("v", path, &deployment(), false).unwrap();
        assert_eq!(value.map(|v| v.value), expected);
    }

    #[rstest]
    #[case::float(".status.ratio", "non-integer number")]
    #[case::map(".status", "map")]
    fn values_of_other_types_are_errors_without_raw_feedback(#[case] path: &str, #[case] found: &str) {
        let error = value_at("v", path, &deployment(), false).unwrap_err();
        assert!(error.to_string().contains(found), "{error}");
    }

    #[test]
    fn raw_feedback_reports_lists_as_json_within_the_limit() {
        let value = value_at("types", ".status.conditions[*].type", &deployment(), true)
            .unwrap()
            .unwrap();
        assert_eq!(value.value.type_, ValueType::JsonRaw);
        assert_eq!(
            value.value.json_raw.as_deref(),
            Some(r#"["Available","Progressing"]"#)
        );
        let big = json!({"status": {"list": vec!["x".repeat(100); 20]}});
        assert!(matches!(
            value_at("big", ".status.list", &big, true),
            Err(FeedbackError::TooLong { .. })
        ));
    }

    #[test]
    fn an_invalid_path_is_an_error_naming_it() {
        let error = value_at("bad", ".status[?(", &deployment(), false).unwrap_err();
        assert!(matches!(error, FeedbackError::InvalidPath { .. }), "{error}");
    }

    #[test]
    fn well_known_status_of_a_deployment_reports_its_replica_counts() {
        let rule = FeedbackRule {
            type_: FeedBackType::WellKnownStatus,
            json_paths: vec![],
        };
        let (values, errors) = values(&[rule], "apps", "v1", "Deployment", &deployment(), false);
        assert!(errors.is_empty());
        let names: Vec<_> = values
            .iter()
            .map(|v| (v.name.as_str(), v.value.integer))
            .collect();
        assert_eq!(names, vec![("ReadyReplicas", Some(1)), ("Replicas", Some(2))]);
    }

    #[test]
    fn well_known_status_of_another_kind_and_a_wrong_version_are_errors_beside_good_values() {
        let rules = [
            FeedbackRule {
                type_: FeedBackType::WellKnownStatus,
                json_paths: vec![],
            },
            FeedbackRule {
                type_: FeedBackType::JSONPaths,
                json_paths: vec![
                    JsonPath {
                        name: "n".into(),
                        version: String::new(),
                        path: ".metadata.name".into(),
                    },
                    JsonPath {
                        name: "old".into(),
                        version: "v1beta1".into(),
                        path: ".metadata.name".into(),
                    },
                ],
            },
        ];
        let cm = json!({"metadata": {"name": "cm"}});
        let (values, errors) = values(&rules, "", "v1", "ConfigMap", &cm, false);
        assert_eq!(values.len(), 1);
        assert_eq!(values[0].value, string("cm"));
        assert!(matches!(errors[0], FeedbackError::NoWellKnownStatus { .. }));
        assert!(matches!(errors[1], FeedbackError::VersionMismatch { .. }));
    }
}
