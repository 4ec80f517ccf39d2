//! Status writes: at most one per reconcile, none when nothing changed.

use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::json;

use crate::error::{Error, Result};

/// Merge-patches `/status` of `object` to `desired` if it differs from `current`.
///
/// A field of `current` that `desired` no longer has is sent as `null`, which is how a merge
/// patch removes it; types can therefore leave absent fields out of their JSON.
///
/// The patch carries the object's `uid` and `resourceVersion`, so the apiserver refuses it
/// (409) if the object changed since it was read. Several controllers write parts of one
/// status (an add-on's has four writers), so a refusal is usually someone else's write to other
/// fields: the object is read again and this write's change (only the fields it changes) is
/// replayed onto the fresh status ([`rebase`]) and sent again, a few times at most; then the
/// 409 is returned and the next reconcile works from fresh data. Someone else's update to
/// other fields is never overwritten. Returns whether a write happened.
pub async fn patch_if_changed<K, S>(
    api: &Api<K>,
    object: &K,
    current: Option<&S>,
    desired: &S,
) -> Result<bool>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
    S: Serialize + PartialEq,
{
    if current == Some(desired) {
        return Ok(false);
    }
    let (base, ours) = (encode::<K, _>(current)?, encode::<K, _>(Some(desired))?);
    let start = Start {
        resource_version: object.meta().resource_version.clone(),
        status: base.clone(),
    };
    Ok(write_rebased(api, object, &base, &ours, start).await?.is_some())
}

/// Where a status write starts: the resourceVersion it is guarded by and the status it
/// changes.
struct Start {
    resource_version: Option<String>,
    status: serde_json::Value,
}

/// `value` as JSON (`null` for None).
fn encode<K: Resource<DynamicType = ()>, S: Serialize>(value: Option<&S>) -> Result<serde_json::Value> {
    value.map_or(Ok(serde_json::Value::Null), |v| {
        serde_json::to_value(v).map_err(|source| Error::Encode {
            what: format!("{} status", K::kind(&())),
            source,
        })
    })
}

/// The change from `base` to `ours` written onto the status at `start`, rebased onto a fresh
/// read after each 409 (see [`patch_if_changed`]). Returns the object written, or None when
/// the status already was the result.
async fn write_rebased<K>(
    api: &Api<K>,
    object: &K,
    base: &serde_json::Value,
    ours: &serde_json::Value,
    start: Start,
) -> Result<Option<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let name = object.name_any();
    let kind = K::kind(&()).into_owned();
    let patch_error = |source| Error::PatchStatus {
        kind: kind.clone(),
        name: name.clone(),
        source,
    };
    let conflict_error = || patch_error(kube::Error::Api(Box::new(conflict(&kind, &name))));
    let (mut resource_version, mut theirs) = (start.resource_version, start.status);
    for attempt in 1..=REBASE_ATTEMPTS {
        let mut status = rebase(base, ours, &theirs);
        if status == theirs {
            // Already so, by someone else's write.
            return Ok(None);
        }
        null_removed_fields(&theirs, &mut status);
        let patch = json!({
            "metadata": { "uid": object.meta().uid, "resourceVersion": resource_version },
            "status": status,
        });
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => return Ok(Some(written)),
            Err(kube::Error::Api(e)) if e.code == 409 && attempt < REBASE_ATTEMPTS => {}
            Err(source) => return Err(patch_error(source)),
        }
        let fresh = api.get_status(&name).await.map_err(patch_error)?;
        if fresh.meta().uid != object.meta().uid {
            // Deleted and made again: this write was about another object.
            return Ok(None);
        }
        (resource_version, theirs) = (fresh.meta().resource_version.clone(), status_of(&fresh)?);
    }
    Err(conflict_error())
}

/// The status of `object` as JSON.
fn status_of<K: Resource<DynamicType = ()> + Serialize>(object: &K) -> Result<serde_json::Value> {
    serde_json::to_value(object)
        .map(|mut o| o["status"].take())
        .map_err(|source| Error::Encode {
            what: format!("{} status", K::kind(&())),
            source,
        })
}

/// Writes of one status tried before a conflict is given back to the caller.
const REBASE_ATTEMPTS: usize = 4;

/// The 409 returned when every attempt met a newer write, as the apiserver words it.
fn conflict(kind: &str, name: &str) -> kube::core::Status {
    kube::core::Status::failure(
        &format!("Operation cannot be fulfilled on {kind} {name:?}: the object has been modified"),
        "Conflict",
    )
    .with_code(409)
}

/// A three-way merge of JSON values: the change from `base` to `ours` replayed onto `theirs`.
/// Objects merge field by field (an absent field is `null`); lists whose items are objects with
/// a unique `type` (conditions) or a unique `group` and `resource` (config references) merge
/// item by item, as the apiserver's list-map keys would; any other list is one value. Where
/// both sides changed the same value, ours wins: each status field has one writer, and the
/// other change is the apiserver's default for it (`healthCheck.mode: Lease`) or the writer's
/// own earlier write, which a stale read did not show.
///
/// Hand-written because the JSON merge-patch crates replace lists whole, and strategic merge
/// (which merges lists by key) has no Rust implementation.
pub fn rebase(
    base: &serde_json::Value,
    ours: &serde_json::Value,
    theirs: &serde_json::Value,
) -> serde_json::Value {
    use serde_json::Value;
    if ours == base || ours == theirs {
        return theirs.clone();
    }
    if theirs == base {
        return ours.clone();
    }
    let object_or_null = |v: &Value| matches!(v, Value::Object(_) | Value::Null);
    if [base, ours, theirs].iter().all(|v| object_or_null(v)) && [ours, theirs].iter().any(|v| v.is_object())
    {
        let field = |v: &'_ Value, key: &str| -> Value { v.get(key).cloned().unwrap_or(Value::Null) };
        let mut keys: Vec<&String> = Vec::new();
        for v in [theirs, ours, base] {
            if let Value::Object(map) = v {
                keys.extend(map.keys().filter(|k| !keys.contains(k)).collect::<Vec<_>>());
            }
        }
        let mut merged = serde_json::Map::new();
        for key in keys {
            let value = rebase(&field(base, key), &field(ours, key), &field(theirs, key));
            if !value.is_null() {
                merged.insert(key.clone(), value);
            }
        }
        return Value::Object(merged);
    }
    // An absent list (null) is an empty one: a status without conditions gets its first.
    let list = |v: &Value| match v {
        Value::Array(items) => Some(items.clone()),
        Value::Null => Some(Vec::new()),
        _ => None,
    };
    let (Some(b), Some(o), Some(t)) = (list(base), list(ours), list(theirs)) else {
        return ours.clone();
    };
    let (b, o, t) = (&b, &o, &t);
    let Some(key) = list_key([b, o, t]) else {
        return ours.clone();
    };
    let find = |list: &'_ [Value], k: &Value| list.iter().find(|item| key(item) == *k).cloned();
    let mut merged = Vec::new();
    for item in t {
        let k = key(item);
        let (bi, oi) = (
            find(b, &k).unwrap_or(Value::Null),
            find(o, &k).unwrap_or(Value::Null),
        );
        let value = rebase(&bi, &oi, item);
        if !value.is_null() {
            merged.push(value);
        }
    }
    for item in o {
        let k = key(item);
        if find(t, &k).is_some() {
            continue;
        }
        let bi = find(b, &k).unwrap_or(Value::Null);
        let value = rebase(&bi, item, &Value::Null);
        if !value.is_null() {
            merged.push(value);
        }
    }
    Value::Array(merged)
}

/// The key of the list items in all of `lists`, if every item is an object it identifies
/// uniquely: `type`, else `group` and `resource`.
fn list_key(lists: [&Vec<serde_json::Value>; 3]) -> Option<fn(&serde_json::Value) -> serde_json::Value> {
    use serde_json::{Value, json};
    fn by_type(v: &Value) -> Value {
        v.get("type").cloned().unwrap_or(Value::Null)
    }
    fn by_group_resource(v: &Value) -> Value {
        json!([v.get("group"), v.get("resource")])
    }
    let unique = |key: fn(&Value) -> Value, required: &[&str]| {
        lists.iter().all(|list| {
            let keys: Vec<Value> = list.iter().map(key).collect();
            list.iter()
                .all(|item| required.iter().all(|r| item.get(r).is_some_and(Value::is_string)))
                && keys.iter().enumerate().all(|(i, k)| !keys[..i].contains(k))
        })
    };
    if unique(by_type, &["type"]) {
        Some(by_type)
    } else if unique(by_group_resource, &["resource"]) {
        Some(by_group_resource)
    } else {
        None
    }
}

/// Adds `null` to `desired` for every object field `current` has and `desired` lacks, at any
/// depth of nested objects (lists are replaced whole by a merge patch, so they are left alone).
fn null_removed_fields(current: &serde_json::Value, desired: &mut serde_json::Value) {
    use serde_json::Value;
    let (Value::Object(current), Value::Object(desired)) = (current, desired) else {
        return;
    };
    for (key, old) in current {
        match desired.get_mut(key) {
            Some(new) => null_removed_fields(old, new),
            None => {
                desired.insert(key.clone(), Value::Null);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn fields_gone_from_the_desired_status_are_sent_as_null() {
        let current = json!({ "faults": { "consecutive": 3, "quarantinedUntil": "t" }, "digest": "a",
                              "conditions": [{ "type": "Ready" }] });
        let mut desired = json!({ "faults": { "consecutive": 0 }, "digest": "a", "conditions": [] });
        super::null_removed_fields(&current, &mut desired);
        assert_eq!(
            desired,
            json!({ "faults": { "consecutive": 0, "quarantinedUntil": null }, "digest": "a", "conditions": [] })
        );
        let mut emptied = json!({ "digest": "a" });
        super::null_removed_fields(&current, &mut emptied);
        assert_eq!(
            emptied,
            json!({ "faults": null, "digest": "a", "conditions": null })
        );
    }

    #[test]
    fn a_change_to_other_fields_and_other_conditions_is_kept_under_ours() {
        let base = json!({ "namespace": "a", "conditions": [
            { "type": "ManifestApplied", "status": "False" }, { "type": "Available", "status": "Unknown" } ] });
        let ours = json!({ "namespace": "a", "conditions": [
            { "type": "ManifestApplied", "status": "True" }, { "type": "Available", "status": "Unknown" } ] });
        let theirs = json!({ "namespace": "b", "registrations": [{ "signerName": "s" }], "conditions": [
            { "type": "ManifestApplied", "status": "False" }, { "type": "Available", "status": "True" },
            { "type": "Configured", "status": "True" } ] });
        assert_eq!(
            super::rebase(&base, &ours, &theirs),
            json!({ "namespace": "b", "registrations": [{ "signerName": "s" }], "conditions": [
                { "type": "ManifestApplied", "status": "True" }, { "type": "Available", "status": "True" },
                { "type": "Configured", "status": "True" } ] })
        );
    }

    #[test]
    fn config_references_merge_by_group_and_resource_field_by_field() {
        let reference = |desired: &str, applied: Option<&str>| {
            json!({ "group": "g", "resource": "r", "desiredConfig": { "specHash": desired },
                    "lastAppliedConfig": applied.map(|a| json!({ "specHash": a })) })
        };
        // We mark hash 1 applied while the rollout released hash 2: both stay.
        let base = json!({ "configReferences": [reference("1", None)] });
        let ours = json!({ "configReferences": [reference("1", Some("1"))] });
        let theirs = json!({ "configReferences": [reference("2", None)] });
        let mut merged = super::rebase(&base, &ours, &theirs);
        if let Some(o) = merged["configReferences"][0].as_object_mut() {
            o.retain(|_, v| !v.is_null());
        }
        assert_eq!(
            merged,
            json!({ "configReferences": [
                { "group": "g", "resource": "r", "desiredConfig": { "specHash": "2" },
                  "lastAppliedConfig": { "specHash": "1" } } ] })
        );
    }

    #[test]
    fn where_both_sides_changed_the_same_value_ours_wins() {
        let base = json!({ "conditions": [{ "type": "Available", "status": "Unknown" }] });
        let ours = json!({ "conditions": [{ "type": "Available", "status": "True" }] });
        let theirs = json!({ "conditions": [{ "type": "Available", "status": "False" }] });
        assert_eq!(super::rebase(&base, &ours, &theirs), ours);
        // The apiserver defaulted a field this write sets.
        let ours = json!({ "healthCheck": { "mode": "Customized" } });
        let theirs = json!({ "healthCheck": { "mode": "Lease" }, "supportedConfigs": [] });
        assert_eq!(
            super::rebase(&serde_json::Value::Null, &ours, &theirs),
            json!({ "healthCheck": { "mode": "Customized" }, "supportedConfigs": [] })
        );
    }

    #[test]
    fn lists_without_a_unique_key_are_one_value() {
        let base = json!({ "relatedObjects": [{ "name": "a" }] });
        let ours = json!({ "relatedObjects": [{ "name": "b" }] });
        let theirs = json!({ "relatedObjects": [{ "name": "c" }], "namespace": "n" });
        assert_eq!(
            super::rebase(&base, &ours, &theirs),
            json!({ "relatedObjects": [{ "name": "b" }], "namespace": "n" })
        );
    }

    #[test]
    fn removals_replay_and_the_same_change_on_both_sides_is_no_conflict() {
        let base = json!({ "conditions": [{ "type": "A" }, { "type": "B" }], "x": 1 });
        let ours = json!({ "conditions": [{ "type": "A" }], "x": 2 });
        let theirs = json!({ "conditions": [{ "type": "A" }, { "type": "B" }, { "type": "C" }], "x": 2 });
        assert_eq!(
            super::rebase(&base, &ours, &theirs),
            json!({ "conditions": [{ "type": "A" }, { "type": "C" }], "x": 2 })
        );
        // A status read before the object had one, and a first condition on both sides.
        assert_eq!(
            super::rebase(
                &serde_json::Value::Null,
                &json!({ "conditions": [{ "type": "A" }] }),
                &json!({ "conditions": [{ "type": "B" }] })
            ),
            json!({ "conditions": [{ "type": "B" }, { "type": "A" }] })
        );
        let fresh = json!({ "conditions": [{ "type": "C" }] });
        assert_eq!(
            super::rebase(&serde_json::Value::Null, &json!({ "x": 1 }), &fresh),
            json!({ "conditions": [{ "type": "C" }], "x": 1 })
        );
    }
}
