//! The one way finalizers are written. The patch replaces the whole list but carries the
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

/// Sets the object's finalizers to `desired`; no write when they are already that. Returns
/// the object as written.
pub async fn replace<K>(api: &Api<K>, object: &K, desired: Vec<String>) -> Result<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    if object.meta().finalizers.as_deref().unwrap_or_default() == desired.as_slice() {
        return Ok(object.clone());
    }
    let name = object.name_any();
    let patch = json!({
        "metadata": { "resourceVersion": object.meta().resource_version, "finalizers": desired },
    });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::Finalizer {
            kind: K::kind(&()).into_owned(),
            name,
            source,
        })
}

/// Adds `finalizer` to `object` if missing. Returns the object as written, `None` when it
/// already carried it (nothing written).
pub async fn add<K>(api: &Api<K>, object: &K, finalizer: &str) -> Result<Option<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    if has(object, finalizer) {
        return Ok(None);
    }
    let mut desired = object.meta().finalizers.clone().unwrap_or_default();
    desired.push(finalizer.to_owned());
    replace(api, object, desired).await.map(Some)
}

/// Removes every one of `finalizers` from `object`, in one write. Returns the object as
/// written, `None` when it carried none of them (nothing written).
pub async fn remove<K>(api: &Api<K>, object: &K, finalizers: &[&str]) -> Result<Option<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    if !finalizers.iter().any(|f| has(object, f)) {
        return Ok(None);
    }
    let desired: Vec<String> = object
        .meta()
        .finalizers
        .iter()
        .flatten()
        .filter(|f| !finalizers.contains(&f.as_str()))
        .cloned()
        .collect();
    replace(api, object, desired).await.map(Some)
}
