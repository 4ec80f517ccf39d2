//! The `Update` strategy's comparison and merge: what the object on the managed cluster must
//! become so that it carries the manifest, and whether it already does.
//!
//! The manifest's fields win; labels and annotations are merged into the live ones (others'
//! keys kept), owner references merged by uid, finalizers and everything the server fills in
//! (resourceVersion, uid, status, defaulted fields) kept. "Already does" means every field of
//! the manifest holds the same value in the live object (fields the server defaulted or others
//! added are not drift), so an unchanged object is never written, and a hand edit of a field
//! the manifest sets is.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::{Map, Value};

use super::ownership::merge_owner_references;

/// Top-level keys that are not content.
const NOT_CONTENT: &[&str] = &["apiVersion", "kind", "metadata", "status"];

/// Whether `value` is a zero value the server omits when it stores an object (Go's
/// `omitempty`: null, false, 0, "", an empty list or map).
fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// Whether every field of `desired` holds the same value in `live` (maps compared key by key,
/// lists element by element with equal length, scalars by equality; a zero value matches an
/// absent field, since the server drops those).
pub fn is_subset(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => d.iter().all(|(k, v)| match l.get(k) {
            Some(lv) => is_subset(v, lv),
            None => is_zero(v),
        }),
        (Value::Array(d), Value::Array(l)) => {
            d.len() == l.len() && d.iter().zip(l).all(|(a, b)| is_subset(a, b))
        }
        // Integers and floats the server normalised (1 vs 1.0) count as equal.
        (Value::Number(a), Value::Number(b)) => a == b || a.as_f64() == b.as_f64(),
        _ => desired == live,
    }
}

fn string_map(value: Option<&Value>) -> Map<String, Value> {
    value.and_then(Value::as_object).cloned().unwrap_or_default()
}

/// The object to write for `desired` over `live` with owner reference `owner` (or its removal
/// marker), or `None` when `live` already carries all of it.
pub fn merge_for_update(desired: &Value, live: &Value, owner: &OwnerReference) -> Option<Value> {
    let mut merged = live.clone();
    let mut changed = false;
    let empty = Map::new();
    let desired_map = desired.as_object().unwrap_or(&empty);
    let desired_meta = desired.get("metadata").cloned().unwrap_or(Value::Null);

    let Some(merged_map) = merged.as_object_mut() else {
        return Some(desired.clone());
    };
    for (key, value) in desired_map {
        if NOT_CONTENT.contains(&key.as_str()) {
            continue;
        }
        if !merged_map.get(key).is_some_and(|live| is_subset(value, live)) {
            merged_map.insert(key.clone(), value.clone());
            changed = true;
        }
    }

    let meta = merged_map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        return Some(desired.clone());
    };
    for field in ["labels", "annotations"] {
        let wanted = string_map(desired_meta.get(field));
        if wanted.is_empty() {
            continue;
        }
        let mut current = string_map(meta.get(field));
        for (k, v) in wanted {
            if current.get(&k) != Some(&v) {
                current.insert(k, v);
                changed = true;
            }
        }
        meta.insert(field.to_owned(), Value::Object(current));
    }
    let owners: Vec<OwnerReference> = meta
        .get("ownerReferences")
        .and_then(|o| serde_json::from_value(o.clone()).ok())
        .unwrap_or_default();
    if let Some(new_owners) = merge_owner_references(&owners, owner) {
        meta.insert(
            "ownerReferences".to_owned(),
            serde_json::to_value(new_owners).unwrap_or(Value::Null),
        );
        changed = true;
    }
    changed.then_some(merged)
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::*;
    use crate::work::agent::ownership::{owner_reference, required_owner};

    fn live() -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "cm", "namespace": "ns", "resourceVersion": "7", "uid": "u",
                "labels": {"theirs": "x", "app": "a"},
                "finalizers": ["keep/me"],
                "ownerReferences": [{"apiVersion": "work.open-cluster-management.io/v1", "kind": "AppliedManifestWork", "name": "amw", "uid": "me"}],
            },
            "data": {"a": "1", "b": "2"},
            "spec": {"replicas": 2, "template": {"x": 1}, "defaulted": true},
        })
    }

    fn me() -> OwnerReference {
        owner_reference("amw", "me")
    }

    #[rstest]
    #[case::same_content(json!({"data": {"a": "1"}, "metadata": {"labels": {"app": "a"}}}), false)]
    #[case::defaulted_field_not_in_manifest(json!({"spec": {"replicas": 2}}), false)]
    #[case::changed_value(json!({"data": {"a": "changed"}}), true)]
    #[case::new_label(json!({"metadata": {"labels": {"new": "y"}}}), true)]
    #[case::list_length(json!({"spec": {"template": {"x": 1, "list": [1]}}}), true)]
    #[case::omitted_zero_value(json!({"spec": {"paused": false, "minReadySeconds": 0}}), false)]
    fn only_what_the_manifest_says_counts_as_drift(#[case] desired: Value, #[case] write: bool) {
        assert_eq!(merge_for_update(&desired, &live(), &me()).is_some(), write);
    }

    #[test]
    fn a_write_keeps_others_labels_finalizers_and_resource_version() {
        let desired = json!({"data": {"a": "9"}, "metadata": {"labels": {"app": "b"}}});
        let merged = merge_for_update(&desired, &live(), &me()).unwrap();
        assert_eq!(merged["data"], json!({"a": "9"}));
        assert_eq!(merged["metadata"]["labels"], json!({"theirs": "x", "app": "b"}));
        assert_eq!(merged["metadata"]["finalizers"], json!(["keep/me"]));
        assert_eq!(merged["metadata"]["resourceVersion"], json!("7"));
    }

    #[test]
    fn the_removal_marker_drops_this_works_owner_reference() {
        let desired = json!({"data": {"a": "1"}});
        let merged = merge_for_update(&desired, &live(), &required_owner(&me(), false)).unwrap();
        assert_eq!(merged["metadata"]["ownerReferences"], json!([]));
    }
}
