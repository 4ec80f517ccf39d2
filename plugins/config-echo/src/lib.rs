//! A plugin that shows the host's tests what it was given: one ConfigMap whose `configs` entry is
//! the JSON list of the resolved configs (group, resource, namespace, name, spec hash, spec), in
//! the order the host passed them. The hub writes its own view of the same configs to
//! `configReferences`; the tests compare the two.
//!
//! It accepts AddOnDeploymentConfigs, ConfigMaps and `gateways` of the test group
//! `gateway.flotilla.test`: a kind with a `spec`, one without, and a custom kind whose plural
//! apimachinery's guess gets wrong.

use flotilla_addon_sdk::config::addon_deployment_config_type;
use flotilla_addon_sdk::serde_json::{Value, json};
use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, ConfigType, Manifest, Registration, ResolvedConfig,
};

/// The ConfigMap it renders.
pub const ECHO_CONFIG_MAP: &str = "config-echo";
/// API group of the test kind `Gateway`.
pub const GATEWAY_GROUP: &str = "gateway.flotilla.test";

/// The echoing add-on.
pub struct ConfigEcho;

fn config_type(group: &str, resource: &str) -> ConfigType {
    ConfigType {
        group: group.into(),
        resource: resource.into(),
        default_config: None,
    }
}

impl Addon for ConfigEcho {
    fn describe() -> AddonOptions {
        AddonOptions {
            registrations: vec![Registration::KubeClient { subject: None }],
            supported_configs: vec![
                addon_deployment_config_type(),
                config_type("", "configmaps"),
                config_type(GATEWAY_GROUP, "gateways"),
            ],
            ..AddonOptions::default()
        }
    }

    fn manifests(
        _: &Cluster,
        addon: &AddOn,
        configs: &[ResolvedConfig],
    ) -> Result<Vec<Manifest>, AddonError> {
        let seen = configs
            .iter()
            .map(|c| {
                Ok(
                    json!({"group": c.group, "resource": c.resource, "namespace": c.namespace,
                          "name": c.name, "specHash": c.spec_hash, "spec": c.spec::<Value>()?}),
                )
            })
            .collect::<Result<Vec<Value>, AddonError>>()?;
        Ok(vec![json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": ECHO_CONFIG_MAP, "namespace": addon.install_namespace},
            "data": {"configs": Value::Array(seen).to_string()},
        })])
    }
}

flotilla_addon_sdk::export_addon!(ConfigEcho);
