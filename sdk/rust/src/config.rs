//! Reading `AddOnDeploymentConfig` (`addon.open-cluster-management.io`, `addondeploymentconfigs`)
//! from resolved configs, and applying it the way addon-framework does.
//!
//! The serde structs are local (the guest does not depend on kube); fields follow ocm-reference
//! §1: `customizedVariables[] {name, value}`, `nodePlacement {nodeSelector, tolerations}`,
//! `registries[] {mirror, source}`, `proxyConfig {httpProxy, httpsProxy, caBundle, noProxy}`,
//! `agentInstallNamespace`, `resourceRequirements[] {containerID, resources}` (last match wins).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, PodSpec, ResourceRequirements, Toleration};
use serde::{Deserialize, Serialize};

use crate::types::{AddonError, ConfigType, ResolvedConfig};

/// API group of OCM add-on configs.
pub const ADDON_GROUP: &str = "addon.open-cluster-management.io";
/// Plural resource of `AddOnDeploymentConfig`.
pub const ADDON_DEPLOYMENT_CONFIGS: &str = "addondeploymentconfigs";

/// The supported-config entry for `AddOnDeploymentConfig`, for [`crate::AddonOptions`].
pub fn addon_deployment_config_type() -> ConfigType {
    ConfigType {
        group: ADDON_GROUP.to_owned(),
        resource: ADDON_DEPLOYMENT_CONFIGS.to_owned(),
        default_config: None,
    }
}

/// `AddOnDeploymentConfig.spec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddOnDeploymentConfigSpec {
    /// Name/value pairs for templates.
    #[serde(default)]
    pub customized_variables: Vec<CustomizedVariable>,
    /// Node selector and tolerations for the agent's pods.
    #[serde(default)]
    pub node_placement: Option<NodePlacement>,
    /// Image registry mirrors.
    #[serde(default)]
    pub registries: Vec<ImageMirror>,
    /// Proxy settings for the agent.
    #[serde(default)]
    pub proxy_config: Option<ProxyConfig>,
    /// Install namespace override (the host already applied it to `AddOn::install_namespace`).
    #[serde(default)]
    pub agent_install_namespace: Option<String>,
    /// Resource requirements by container.
    #[serde(default)]
    pub resource_requirements: Vec<ContainerResourceRequirements>,
}

/// A customized variable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomizedVariable {
    /// `^[a-zA-Z_][_a-zA-Z0-9]*$`.
    pub name: String,
    /// At most 1024 characters.
    #[serde(default)]
    pub value: String,
}

/// Where the agent's pods may run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePlacement {
    /// Node selector.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations.
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
}

/// An image registry mirror: images starting with `source` are pulled from `mirror` instead.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageMirror {
    /// Replacement prefix.
    pub mirror: String,
    /// Prefix to replace.
    #[serde(default)]
    pub source: String,
}

/// Proxy settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxyConfig {
    /// `HTTP_PROXY`.
    #[serde(default)]
    pub http_proxy: String,
    /// `HTTPS_PROXY`.
    #[serde(default)]
    pub https_proxy: String,
    /// CA bundle of the HTTPS proxy, base64 in JSON.
    #[serde(default)]
    pub ca_bundle: Option<k8s_openapi::ByteString>,
    /// `NO_PROXY`.
    #[serde(default)]
    pub no_proxy: String,
}

/// Resources for containers matching `container_id`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerResourceRequirements {
    /// `<kind|*>:<name|*>:<container|*>`, e.g. `deployments:agent:*`.
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// The requirements.
    pub resources: ResourceRequirements,
}

/// The `AddOnDeploymentConfig` among `configs`, parsed; `Ok(None)` if there is none.
pub fn addon_deployment_config(
    configs: &[ResolvedConfig],
) -> Result<Option<AddOnDeploymentConfigSpec>, AddonError> {
    configs
        .iter()
        .rev()
        .find(|c| c.group == ADDON_GROUP && c.resource == ADDON_DEPLOYMENT_CONFIGS)
        .map(ResolvedConfig::spec)
        .transpose()
}

impl AddOnDeploymentConfigSpec {
    /// The value of customized variable `name`.
    pub fn variable(&self, name: &str) -> Option<&str> {
        self.customized_variables
            .iter()
            .rev()
            .find(|v| v.name == name)
            .map(|v| v.value.as_str())
    }

    /// All customized variables (later entries win).
    pub fn variables(&self) -> BTreeMap<String, String> {
        self.customized_variables
            .iter()
            .map(|v| (v.name.clone(), v.value.clone()))
            .collect()
    }

    /// `image` with the registry mirrors applied: the last entry whose `source` prefixes the image
    /// replaces that prefix with its `mirror`.
    pub fn image(&self, image: &str) -> String {
        self.registries
            .iter()
            .rev()
            .find_map(|r| {
                image
                    .strip_prefix(r.source.as_str())
                    .map(|rest| format!("{}{rest}", r.mirror))
            })
            .unwrap_or_else(|| image.to_owned())
    }

    /// Requirements for container `container` of object `kind`/`name` (`kind` as the plural
    /// resource, e.g. `deployments`); the last matching entry wins, `*` matches anything.
    pub fn resources_for(&self, kind: &str, name: &str, container: &str) -> Option<&ResourceRequirements> {
        self.resource_requirements
            .iter()
            .rev()
            .find(|r| {
                let mut parts = r.container_id.splitn(3, ':');
                let mut matches = |want: &str| parts.next().is_some_and(|p| p == "*" || p == want);
                matches(kind) && matches(name) && matches(container)
            })
            .map(|r| &r.resources)
    }

    /// Sets the node selector and tolerations of `pod` from `nodePlacement`, if present.
    pub fn apply_node_placement(&self, pod: &mut PodSpec) {
        if let Some(p) = &self.node_placement {
            if !p.node_selector.is_empty() {
                pod.node_selector = Some(p.node_selector.clone());
            }
            if !p.tolerations.is_empty() {
                pod.tolerations = Some(p.tolerations.clone());
            }
        }
    }

    /// `HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY` for the agent's containers (only those set).
    pub fn proxy_env(&self) -> Vec<EnvVar> {
        let Some(p) = &self.proxy_config else {
            return Vec::new();
        };
        [
            ("HTTP_PROXY", &p.http_proxy),
            ("HTTPS_PROXY", &p.https_proxy),
            ("NO_PROXY", &p.no_proxy),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| EnvVar {
            name: k.to_owned(),
            value: Some(v.clone()),
            ..EnvVar::default()
        })
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::addon_deployment_config as adc;

    #[test]
    fn addon_deployment_config_is_read_and_applied() {
        let configs = [adc(serde_json::json!({
            "customizedVariables": [{"name": "LOG_LEVEL", "value": "4"}],
            "registries": [{"source": "quay.io/ocm", "mirror": "mirror.local/ocm"}],
            "nodePlacement": {"nodeSelector": {"role": "infra"}, "tolerations": [{"key": "k", "operator": "Exists"}]},
            "proxyConfig": {"httpsProxy": "https://proxy:3128", "noProxy": "10.0.0.0/8"},
            "resourceRequirements": [
                {"containerID": "*:*:*", "resources": {"requests": {"cpu": "10m"}}},
                {"containerID": "deployments:agent:*", "resources": {"requests": {"cpu": "50m"}}}
            ]
        }))];
        let spec = addon_deployment_config(&configs).unwrap().unwrap();
        assert_eq!(spec.variable("LOG_LEVEL"), Some("4"));
        assert_eq!(spec.image("quay.io/ocm/agent:v1"), "mirror.local/ocm/agent:v1");
        assert_eq!(spec.image("docker.io/x"), "docker.io/x");
        let cpu = |r: Option<&ResourceRequirements>| {
            r.and_then(|r| r.requests.as_ref())
                .and_then(|q| q.get("cpu"))
                .map(|q| q.0.clone())
        };
        assert_eq!(
            cpu(spec.resources_for("deployments", "agent", "main")),
            Some("50m".into())
        );
        assert_eq!(
            cpu(spec.resources_for("daemonsets", "other", "main")),
            Some("10m".into())
        );
        let mut pod = PodSpec::default();
        spec.apply_node_placement(&mut pod);
        assert_eq!(pod.node_selector.unwrap()["role"], "infra");
        assert_eq!(spec.proxy_env().len(), 2);
    }

    #[test]
    fn a_malformed_config_is_an_invalid_config_error() {
        let configs = [adc(serde_json::json!({"customizedVariables": "not a list"}))];
        assert!(matches!(
            addon_deployment_config(&configs),
            Err(AddonError::InvalidConfig(_))
        ));
        assert_eq!(addon_deployment_config(&[]), Ok(None));
    }
}
