//! Fuzzes status feedback (`flotilla_core::work::agent::feedback`): Kubernetes JSONPaths a
//! ManifestWork names, evaluated by the work agent over the live object of a managed cluster.
//! The first line of the input is the path, the rest the object's JSON (a fixed Deployment when
//! the rest is not JSON, so that mutated paths still meet an object).
//!
//! Properties: no panic; the same answer twice; `to_query` is idempotent and a path reads the
//! same as its query; a value read carries exactly the field its type names, raw JSON only when
//! asked for and never longer than the limit, and a scalar reads the same with raw JSON enabled
//! unless several values matched; `values` over a one-path rule reports what `value_at` does.

#![no_main]

use flotilla_api::work::{
    consts::MAX_JSON_RAW_LENGTH,
    v1::{FeedBackType, FeedbackRule, FeedbackValue, FieldValue, JsonPath, ValueType},
};
use flotilla_core::work::agent::feedback;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fn fallback_object() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 3},
        "status": {
            "readyReplicas": 2, "replicas": 3, "ratio": 0.5, "paused": false,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Progressing", "status": "False"}
            ]
        }
    })
}

fn well_typed(value: &FieldValue, raw_json: bool) -> bool {
    let FieldValue {
        type_,
        integer,
        string,
        boolean,
        json_raw,
    } = value;
    match type_ {
        ValueType::Integer => {
            integer.is_some() && string.is_none() && boolean.is_none() && json_raw.is_none()
        }
        ValueType::String => integer.is_none() && string.is_some() && boolean.is_none() && json_raw.is_none(),
        ValueType::Boolean => {
            integer.is_none() && string.is_none() && boolean.is_some() && json_raw.is_none()
        }
        ValueType::JsonRaw => {
            raw_json
                && integer.is_none()
                && string.is_none()
                && boolean.is_none()
                && json_raw.as_ref().is_some_and(|raw| {
                    raw.len() <= MAX_JSON_RAW_LENGTH && serde_json::from_str::<Value>(raw).is_ok()
                })
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (path, rest) = text.split_once('\n').unwrap_or((text, ""));
    let object = serde_json::from_str(rest).unwrap_or_else(|_| fallback_object());

    let query = feedback::to_query(path);
    assert_eq!(
        feedback::to_query(&query),
        query,
        "to_query({path:?}) is not idempotent"
    );

    let mut read = Vec::new();
    for raw_json in [false, true] {
        let value = feedback::value_at("v", path, &object, raw_json);
        assert_eq!(
            value,
            feedback::value_at("v", path, &object, raw_json),
            "{path:?}: two answers differ"
        );
        let through_query = feedback::value_at("v", &query, &object, raw_json);
        assert_eq!(
            value.as_ref().ok(),
            through_query.as_ref().ok(),
            "{path:?} and its query {query:?} read differently"
        );
        if let Ok(Some(FeedbackValue { name, value: field })) = &value {
            assert_eq!(name, "v");
            assert!(well_typed(field, raw_json), "{path:?}: {field:?}");
        }

        let rule = FeedbackRule {
            type_: FeedBackType::JSONPaths,
            json_paths: vec![JsonPath {
                name: "v".into(),
                version: String::new(),
                path: path.to_owned(),
            }],
        };
        let (values, errors) = feedback::values(&[rule], "apps", "v1", "Deployment", &object, raw_json);
        match &value {
            Ok(found) => {
                assert_eq!(values, found.iter().cloned().collect::<Vec<_>>());
                assert!(errors.is_empty(), "{errors:?}");
            }
            Err(e) => {
                assert!(values.is_empty());
                assert_eq!(errors, [e.clone()]);
            }
        }
        read.push(value);
    }

    // Raw JSON changes how several matches, lists and maps are reported, nothing else.
    if let [Ok(Some(plain)), Ok(Some(raw))] = read.as_slice()
        && raw.value.type_ != ValueType::JsonRaw
    {
        assert_eq!(plain, raw, "{path:?}: a scalar reads differently with raw JSON");
    }
});
