//! Adding and removing one finalizer. The patch replaces the whole list but carries the
//! object's `resourceVersion`, so a concurrent change fails with 409 Conflict (retried at once
//! by the backoff policy) instead of silently dropping someone else's finalizer.

use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::error::{Error, Result};

/// Whether `object` carries `finalizer`.
pub fn has<K: Resource>(object: &K, finalizer: &str) -> bool {
    object
        .meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

/// Adds `finalizer` to `object` if missing. Returns whether a write happened.
pub async fn add<K>(api: &Api<K>, object: &K, finalizer: &str) -> Result<bool>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    if has(object, finalizer) {
        return Ok(false);
    }
    let current = object.meta().finalizers.clone();
    let mut desired = current.clone().unwrap_or_default();
    desired.push(finalizer.to_owned());
    write(api, object, current, desired).await?;
    Ok(true)
}

/// Removes `finalizer` from `object` if present. Returns whether a write happened.
pub async fn remove<K>(api: &Api<K>, object: &K, finalizer: &str) -> Result<bool>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    if !has(object, finalizer) {
        return Ok(false);
    }
    let current = object.meta().finalizers.clone();
    let desired: Vec<String> = current
        .iter()
        .flatten()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    write(api, object, current, desired).await?;
    Ok(true)
}

async fn write<K>(api: &Api<K>, object: &K, _current: Option<Vec<String>>, desired: Vec<String>) -> Result<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let name = object.name_any();
    let kind = K::kind(&()).into_owned();
    let patch = json!({
        "metadata": { "resourceVersion": object.meta().resource_version, "finalizers": desired },
    });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::Finalizer { kind, name, source })?;
    Ok(())
}
