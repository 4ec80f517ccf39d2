//! Precise writes to objects that others write too. A ManagedCluster is written by its agent
//! (status), the admin (spec, labels) and several hub controllers, so the hub never replaces
//! a whole object; each helper touches one field and carries a precondition, so a concurrent
//! change makes the write fail (and the reconcile retry from fresh data) instead of losing it:
//!
//! | helper | patch | precondition |
//! |---|---|---|
//! | [`patch_conditions`], [`set_condition`] | merge `/status` `{conditions}` | `resourceVersion` |
//! | [`flotilla_kube::finalizer`] | merge `/metadata/finalizers` | `resourceVersion` |
//! | [`add_label`] | merge `/metadata/labels/<key>` | `resourceVersion` |
//! | [`replace_spec_field`] | JSON patch `add /spec/<field>` | `resourceVersion` |
//!
//! A stale `resourceVersion` is a 409 Conflict, which the error policy retries after 1 s. (A
//! JSON patch `test` would fail with a bare 422 Invalid instead, indistinguishable from a bad
//! request, and back off for 10 s.)

use flotilla_core::conditions::{self, NewCondition};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Condition, jiff::Timestamp};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

use super::error::{Error, Result};

/// The part of a status the hub owns on shared objects: its conditions list.
#[derive(Serialize, PartialEq)]
struct Conditions<'a> {
    conditions: &'a [Condition],
}

/// Sets one condition on `object` (whose conditions are `current`) and writes the list with
/// [`patch_conditions`] only when the condition changed.
pub async fn set_condition<K>(
    api: &Api<K>,
    object: &K,
    current: &[Condition],
    condition: NewCondition<'_>,
) -> Result<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut desired = current.to_vec();
    if conditions::set(&mut desired, condition, Timestamp::now()) {
        patch_conditions(api, object, current, &desired).await?;
    }
    Ok(())
}

/// Merge-patches `status.conditions` to `desired` when it differs from `current`, guarded by
/// the object's `resourceVersion`. Other status fields (the agent's) are not touched.
pub async fn patch_conditions<K>(
    api: &Api<K>,
    object: &K,
    current: &[Condition],
    desired: &[Condition],
) -> Result<bool>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    Ok(flotilla_kube::status::patch_if_changed(
        api,
        object,
        Some(&Conditions { conditions: current }),
        &Conditions { conditions: desired },
    )
    .await?)
}

fn json_patch(operations: Value) -> Result<json_patch::Patch> {
    serde_json::from_value(operations).map_err(|source| Error::Encode {
        what: "JSON patch",
        source,
    })
}

/// Adds `finalizer` to the object if missing ([`flotilla_kube::finalizer::add`]). Returns
/// the object as written.
pub async fn add_finalizer<K>(api: &Api<K>, object: &K, finalizer: &str) -> Result<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let written = flotilla_kube::finalizer::add(api, object, finalizer).await?;
    Ok(written.unwrap_or_else(|| object.clone()))
}

/// Sets label `key` to `value`, guarded by the object's `resourceVersion`. Returns the object
/// as written.
pub async fn add_label<K>(api: &Api<K>, object: &K, key: &str, value: &str) -> Result<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({ "metadata": {
        "resourceVersion": object.meta().resource_version,
        "labels": { key: value },
    }});
    api.patch(&object.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::Patch {
            what: "labels",
            kind: kind::<K>(),
            name: object.name_any(),
            source,
        })
}

/// Sets `/spec/<field>` to `value` as a whole (a JSON patch `add`, which replaces lists and
/// objects entirely, unlike a merge patch), guarded by the object's `resourceVersion`: the
/// patch also sets `metadata.resourceVersion` to the version read, which the apiserver checks
/// like an update's, answering 409 Conflict if the object changed meanwhile. Returns the
/// object as written.
pub async fn replace_spec_field<K, V>(api: &Api<K>, object: &K, field: &'static str, value: &V) -> Result<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    V: Serialize,
{
    let value = serde_json::to_value(value).map_err(|source| Error::Encode { what: field, source })?;
    let patch = json_patch(json!([
        { "op": "replace", "path": "/metadata/resourceVersion", "value": object.meta().resource_version },
        { "op": "add", "path": format!("/spec/{field}"), "value": value },
    ]))?;
    api.patch(
        &object.name_any(),
        &PatchParams::default(),
        &Patch::<()>::Json(patch),
    )
    .await
    .map_err(|source| Error::Patch {
        what: field,
        kind: kind::<K>(),
        name: object.name_any(),
        source,
    })
}

/// Deletes `name`; an object already gone counts as deleted. Returns whether it was there.
pub async fn delete_if_present<K>(api: &Api<K>, name: &str) -> Result<bool>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(source) => Err(Error::Delete {
            kind: kind::<K>(),
            name: name.to_owned(),
            source,
        }),
    }
}

/// Reads `name`, `None` when it does not exist.
pub async fn get_opt<K>(api: &Api<K>, name: &str) -> Result<Option<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.map_err(|source| Error::Read {
        kind: kind::<K>(),
        name: name.to_owned(),
        source,
    })
}

/// The static kind name of `K`, for error messages.
pub fn kind<K: Resource<DynamicType = ()>>() -> &'static str {
    match K::kind(&()) {
        std::borrow::Cow::Borrowed(kind) => kind,
        std::borrow::Cow::Owned(_) => "object",
    }
}
