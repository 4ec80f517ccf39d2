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
    if current == Some(desired) {
        return Ok(false);
    }
    let name = object.name_any();
    let kind = K::kind(&()).into_owned();
    let status = serde_json::to_value(desired).map_err(|source| Error::Encode {
        what: format!("{kind} status"),
        source,
    })?;
    let patch = json!({
        "metadata": { "uid": object.meta().uid, "resourceVersion": object.meta().resource_version },
        "status": status,
    });
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::PatchStatus { kind, name, source })?;
    Ok(true)
}
