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
