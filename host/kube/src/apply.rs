//! Server-side apply under Flotilla's field manager: the desired object is the whole intent,
//! and fields another manager owns are taken over (`force`), as a controller that owns the
//! object should.

use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
};
use serde::{Serialize, de::DeserializeOwned};

use crate::{
    FIELD_MANAGER,
    error::{Error, Result},
};

/// Applies `desired` (which must carry apiVersion, kind and name) and returns the result.
pub async fn apply<K>(api: &Api<K>, desired: &K) -> Result<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let name = desired.name_any();
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &params, &Patch::Apply(desired))
        .await
        .map_err(|source| Error::Apply {
            kind: K::kind(&()).into_owned(),
            name,
            source,
        })
}
