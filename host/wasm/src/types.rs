//! The records of the contract (`flotilla:addon/types@0.1.0`), as generated from the WIT.
//!
//! These are the host's vocabulary for hook inputs and outputs. When a newer contract version
//! is released, older guests' records will be converted into the newest version's types here,
//! and so are records into the API types they stand for, so each mapping is written once.

use flotilla_api::addon::v1alpha1::ConfigGroupResource;

pub use crate::bindings::flotilla::addon::host::LogLevel;
pub use crate::bindings::flotilla::addon::types::{
    Addon, AddonOptions, Cluster, ConfigRef, ConfigType, Csr, CsrDecision, CustomSignerRegistration,
    FeedbackField, FeedbackRule, FeedbackValue, HealthMode, HealthResult, HealthStatus, JsonPath, KeyValue,
    KubeClientRegistration, Manifest, PluginError, ProbeField, Registration, ResolvedConfig,
    ResourceIdentifier, Subject,
};

/// A supported config type as an add-on's status (`supportedConfigs`) and an AddOnPlugin's
/// (`supportedConfigTypes`) list it: group and resource only; the default config goes to the
/// ClusterManagementAddOn's `supportedConfigs` instead.
impl From<&ConfigType> for ConfigGroupResource {
    fn from(config: &ConfigType) -> Self {
        Self {
            group: config.group.clone(),
            resource: config.resource.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_type_keeps_its_group_and_resource_and_drops_its_default() {
        let config = ConfigType {
            group: "addon.open-cluster-management.io".into(),
            resource: "addondeploymentconfigs".into(),
            default_config: Some(ConfigRef {
                namespace: "open-cluster-management".into(),
                name: "defaults".into(),
            }),
        };
        assert_eq!(
            ConfigGroupResource::from(&config),
            ConfigGroupResource {
                group: "addon.open-cluster-management.io".into(),
                resource: "addondeploymentconfigs".into(),
            }
        );
    }
}
