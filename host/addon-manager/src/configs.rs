//! Reading add-on config objects of any type (AddOnDeploymentConfig or a type a plugin
//! declares) by group/resource, namespace and name, through discovery and the dynamic client:
//! the rollout controller hashes them, the deploy controller hands their specs to the plugin.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use flotilla_api::addon::v1beta1::{ConfigGroupResource, ConfigReferent};
use flotilla_core::addon::configs::{ObservedConfig, config_key};
use flotilla_core::addon::spec_hash::spec_hash;
use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Client};
use serde_json::Value;

use crate::error::{self, Result};

/// The group/resource of AddOnDeploymentConfigs in config references.
pub(crate) const ADC_RESOURCE: &str = "addondeploymentconfigs";

/// Config types found by discovery, so that reading a config costs one request. Only found
/// types are remembered: a type not served yet may be installed later.
static RESOURCES: LazyLock<Mutex<HashMap<(String, String), ApiResource>>> = LazyLock::new(Default::default);

/// The API resource serving config type `gr`, found by discovery (None when not served).
async fn config_resource(client: &Client, gr: &ConfigGroupResource) -> Result<Option<ApiResource>> {
    let key = (gr.group.clone(), gr.resource.clone());
    if let Some(found) = RESOURCES.lock().ok().and_then(|r| r.get(&key).cloned()) {
        return Ok(Some(found));
    }
    let found = discover(client, gr).await?;
    if let (Some(found), Ok(mut known)) = (&found, RESOURCES.lock()) {
        known.insert(key, found.clone());
    }
    Ok(found)
}

/// Asks the API server which resource serves config type `gr`.
async fn discover(client: &Client, gr: &ConfigGroupResource) -> Result<Option<ApiResource>> {
    let group = match kube::discovery::group(client, &gr.group).await {
        Ok(group) => group,
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(None),
        // A group the server does not serve: no config of that type can exist.
        Err(kube::Error::Discovery(_)) => return Ok(None),
        Err(e) => return Err(error::read(format!("API group {:?}", gr.group))(e)),
    };
    Ok(group
        .recommended_resources()
        .into_iter()
        .map(|(resource, _)| resource)
        .find(|r| r.plural == gr.resource))
}

/// A config object as JSON, or None when it (or its type) does not exist.
pub(crate) async fn config_object(
    client: &Client,
    gr: &ConfigGroupResource,
    referent: &ConfigReferent,
) -> Result<Option<Value>> {
    let Some(resource) = config_resource(client, gr).await? else {
        return Ok(None);
    };
    let api: Api<DynamicObject> = if referent.namespace.is_empty() {
        Api::all_with(client.clone(), &resource)
    } else {
        Api::namespaced_with(client.clone(), &referent.namespace, &resource)
    };
    let object = api
        .get_opt(&referent.name)
        .await
        .map_err(error::read(format!("config {}", config_key(gr, referent))))?;
    Ok(object.and_then(|o| serde_json::to_value(o).ok()))
}

/// Config objects as released to add-ons, by config key and spec hash: a thousand add-ons
/// released the same config read it once. An add-on is rendered with the config its
/// `configReferences` name at the spec hash released there, so an object with that hash is
/// exactly what a fresh read would give to render with. Entries are trusted for
/// [`RELEASED_TTL`] only, so a config deleted after its release is noticed soon.
#[derive(Default)]
pub(crate) struct ReleasedConfigs {
    objects: Mutex<HashMap<String, (String, std::time::Instant, Value)>>,
}

/// How long a remembered config object is used without reading it again.
const RELEASED_TTL: std::time::Duration = std::time::Duration::from_secs(5);

impl ReleasedConfigs {
    /// Config `referent` of type `gr` at spec hash `spec_hash`: remembered if read at that hash
    /// within [`RELEASED_TTL`], else read (None when it or its type does not exist).
    pub(crate) async fn get(
        &self,
        client: &Client,
        gr: &ConfigGroupResource,
        referent: &ConfigReferent,
        spec_hash: &str,
    ) -> Result<Option<Value>> {
        let key = config_key(gr, referent);
        let remembered = self.objects.lock().ok().and_then(|objects| {
            objects
                .get(&key)
                .filter(|(hash, at, _)| hash == spec_hash && at.elapsed() < RELEASED_TTL)
                .map(|(_, _, object)| object.clone())
        });
        if remembered.is_some() {
            return Ok(remembered);
        }
        let object = config_object(client, gr, referent).await?;
        if let (Some(object), Ok(mut objects)) = (&object, self.objects.lock()) {
            match observed(object) {
                Some(o) => objects.insert(key, (o.spec_hash, std::time::Instant::now(), object.clone())),
                None => objects.remove(&key),
            };
        }
        Ok(object)
    }
}

/// The spec hash and generation of a config object.
pub(crate) fn observed(object: &Value) -> Option<ObservedConfig> {
    Some(ObservedConfig {
        spec_hash: spec_hash(object).ok()?,
        generation: object
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0),
    })
}
