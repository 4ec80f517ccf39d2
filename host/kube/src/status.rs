//! Status writes: at most one per reconcile, none when nothing changed.

use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams, PostParams},
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
/// (409) if the object changed since it was read; the next reconcile then works from fresh
/// data instead of overwriting someone else's update. Returns whether a write happened.
pub async fn patch_if_changed<K, S>(
    api: &Api<K>,
    object: &K,
    current: Option<&S>,
    desired: &S,
) -> Result<bool>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize + PartialEq,
{
    Ok(patch_written_if_changed(api, object, current, desired)
        .await?
        .is_some())
}

/// [`patch_if_changed`], returning the object as written (None: nothing to write), for a
/// writer that must know the resourceVersion its write made.
pub async fn patch_written_if_changed<K, S>(
    api: &Api<K>,
    object: &K,
    current: Option<&S>,
    desired: &S,
) -> Result<Option<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize + PartialEq,
{
    if current == Some(desired) {
        return Ok(None);
    }
    let name = object.name_any();
    let kind = K::kind(&()).into_owned();
    let encode = |value: &S| {
        serde_json::to_value(value).map_err(|source| Error::Encode {
            what: format!("{kind} status"),
            source,
        })
    };
    let mut status = encode(desired)?;
    if let Some(current) = current {
        null_removed_fields(&encode(current)?, &mut status);
    }
    let patch = json!({
        "metadata": { "uid": object.meta().uid, "resourceVersion": object.meta().resource_version },
        "status": status,
    });
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(Some)
        .map_err(|source| Error::PatchStatus { kind, name, source })
}

/// Writes `desired` as the status of `object` if it differs from `current`, as a whole-status
/// update (PUT) of the object as read; `with_status` puts the status into a copy of it. Its uid
/// and resourceVersion make the apiserver refuse the write (409) if the object changed since it
/// was read, and fields `desired` lacks are gone with it (no `null` needed). A PUT costs the
/// apiserver less CPU than the equivalent merge patch, which it has to apply to the stored
/// object first (`bench-work` measures both); a writer that owns the whole status, as the work
/// agent does, uses this. Returns whether a write happened.
pub async fn replace_if_changed<K, S>(
    api: &Api<K>,
    object: &K,
    current: Option<&S>,
    desired: S,
    with_status: impl FnOnce(&mut K, S),
) -> Result<bool>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
    S: PartialEq,
{
    Ok(
        replace_written_if_changed(api, object, current, desired, with_status)
            .await?
            .is_some(),
    )
}

/// [`replace_if_changed`], returning the object as written (None: nothing to write), for a
/// writer that must know the resourceVersion its write made.
pub async fn replace_written_if_changed<K, S>(
    api: &Api<K>,
    object: &K,
    current: Option<&S>,
    desired: S,
    with_status: impl FnOnce(&mut K, S),
) -> Result<Option<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
    S: PartialEq,
{
    if current == Some(&desired) {
        return Ok(None);
    }
    let name = object.name_any();
    let mut written = object.clone();
    with_status(&mut written, desired);
    api.replace_status(&name, &PostParams::default(), &written)
        .await
        .map(Some)
        .map_err(|source| Error::PatchStatus {
            kind: K::kind(&()).into_owned(),
            name,
            source,
        })
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
}
