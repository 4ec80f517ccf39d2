//! `addon.open-cluster-management.io/v1beta1` (served, not stored): the same four kinds as
//! v1alpha1 with the deprecated fields removed, `defaultConfigs` instead of `supportedConfigs`,
//! and typed `registrations`. addon-framework v1.3 and the ocm hub speak this version.
//!
//! Types whose JSON is identical in both versions are re-exported from [`super::v1alpha1`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::v1alpha1::{
    AddOnConfig, AddOnMeta, ConfigGroupResource, ConfigReferent, ConfigSpecHash,
    ContainerResourceRequirements, CurrentClusterBindingConfig, CustomSignerRegistrationConfig,
    CustomizedVariable, DefaultConfigReference, HealthCheck, HealthCheckMode, HubPermissionConfig,
    HubPermissionsBindingType, ImageMirror, InstallConfigReference, InstallStrategy, InstallStrategyType,
    KubeClientDriver, KubeClientRegistrationConfig, NodePlacement, ObjectReference, PlacementRef,
    PlacementStrategy, ProxyConfig, RegistrationSpec, RegistrationType as TemplateRegistrationType,
    SigningCARef, SingleNamespaceBindingConfig,
};
use crate::work::v1::ManifestWorkSpec;

/// An add-on known to the hub: metadata, default configs and install strategy.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "addon.open-cluster-management.io",
    version = "v1beta1",
    kind = "ClusterManagementAddOn",
    doc = "An add-on registered with the hub; ManagedClusterAddOns of the same name install it per cluster.",
    status = "ClusterManagementAddOnStatus",
    shortname = "cma",
    shortname = "cmas",
    derive = "PartialEq",
    derive = "Default",
    storage = false,
    printcolumn = r#"{"name":"DISPLAY NAME","type":"string","jsonPath":".spec.addOnMeta.displayName"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOnSpec {
    /// Display name and description.
    #[serde(default)]
    pub add_on_meta: AddOnMeta,

    /// Default configs, at most one per group and resource (name `__reserved_no_default__` marks
    /// a supported type without a default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["group", "resource"]))]
    pub default_configs: Vec<AddOnConfig>,

    /// Where the hub installs the add-on by itself.
    #[serde(default)]
    #[schemars(extend("x-flotilla-default" = {"type": "Manual"}))]
    pub install_strategy: InstallStrategy,
}

/// Observed state of a ClusterManagementAddOn (v1beta1).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOnStatus {
    /// Desired default configs with their hashes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_config_references: Vec<DefaultConfigReference>,

    /// Rollout progress per install placement.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub install_progressions: Vec<InstallProgression>,
}

/// Rollout progress of one install placement (v1beta1: conditions keyed by type).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallProgression {
    /// The placement.
    #[serde(flatten)]
    pub placement: PlacementRef,

    /// Configs of the placement with desired, last-known-good and last-applied hashes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_references: Vec<InstallConfigReference>,

    /// Conditions (`Progressing`), keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// The add-on on one cluster: config overrides (the install namespace moved to the
/// `addon.open-cluster-management.io/v1alpha1-install-namespace` annotation).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "addon.open-cluster-management.io",
    version = "v1beta1",
    kind = "ManagedClusterAddOn",
    doc = "An add-on installed on one managed cluster; lives in the cluster namespace, named after the add-on.",
    namespaced,
    status = "ManagedClusterAddOnStatus",
    shortname = "mca",
    shortname = "mcas",
    derive = "PartialEq",
    derive = "Default",
    storage = false,
    printcolumn = r#"{"name":"Available","type":"string","jsonPath":".status.conditions[?(@.type==\"Available\")].status"}"#,
    printcolumn = r#"{"name":"Degraded","type":"string","jsonPath":".status.conditions[?(@.type==\"Degraded\")].status"}"#,
    printcolumn = r#"{"name":"Progressing","type":"string","jsonPath":".status.conditions[?(@.type==\"Progressing\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOnSpec {
    /// Configs overriding the ClusterManagementAddOn's, per group and resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<AddOnConfig>,
}

/// Observed state of a ManagedClusterAddOn (v1beta1).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOnStatus {
    /// Conditions, keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// Objects related to the add-on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_objects: Vec<ObjectReference>,

    /// Copy of the ClusterManagementAddOn's metadata (always written).
    #[serde(default)]
    pub add_on_meta: AddOnMeta,

    /// Config types that may be overridden on this cluster, keyed by group and resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["group", "resource"]))]
    pub supported_configs: Vec<ConfigGroupResource>,

    /// Configs in use with their hashes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_references: Vec<ConfigReference>,

    /// Namespace on the managed cluster for the agent's secrets and lease.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,

    /// How the agent registers with the hub; one CSR per entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registrations: Vec<RegistrationConfig>,

    /// How the add-on's health is checked (always written).
    #[serde(default)]
    pub health_check: HealthCheck,
}

/// A config in use by a ManagedClusterAddOn (v1beta1).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReference {
    /// Group and resource.
    #[serde(flatten)]
    pub group_resource: ConfigGroupResource,

    /// Observed generation of the config (always written).
    #[serde(default)]
    pub last_observed_generation: i64,

    /// Desired config (always written; `null` when unset).
    #[serde(default)]
    pub desired_config: Option<ConfigSpecHash>,

    /// Config the deployed agent uses (always written; `null` when unset).
    #[serde(default)]
    pub last_applied_config: Option<ConfigSpecHash>,
}

/// How an add-on agent registers with the hub (v1beta1: typed).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationConfig {
    /// Kube client or custom signer.
    #[serde(rename = "type")]
    pub type_: RegistrationType,

    /// Settings of type `kubeClient`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_client: Option<KubeClientConfig>,

    /// Settings of type `customSigner`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_signer: Option<CustomSignerConfig>,
}

/// Registration types (v1beta1 spelling).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RegistrationType {
    /// Access to the hub's kube-apiserver (signer `kubernetes.io/kube-apiserver-client`).
    #[default]
    KubeClient,
    /// A certificate from a custom signer.
    CustomSigner,
}

/// A kube client registration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct KubeClientConfig {
    /// Subject of the agent's identity (always written).
    #[serde(default)]
    pub subject: KubeClientSubject,

    /// Authentication driver the agent uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<KubeClientDriver>,
}

/// Subject of a kube client registration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub struct KubeClientSubject {
    /// User (always written).
    #[serde(default)]
    pub user: String,

    /// Groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// A custom signer registration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomSignerConfig {
    /// Signer name, `<domain>/<path>`.
    #[schemars(
        length(min = 5, max = 571),
        regex(pattern = r"^([a-z0-9][a-z0-9-]*[a-z0-9]\.)+[a-z]+\/[a-z0-9-\.]+$")
    )]
    pub signer_name: String,

    /// Certificate subject (always written).
    #[serde(default)]
    pub subject: Subject,
}

/// Certificate subject of a custom signer registration (v1beta1 spelling: `organizationUnits`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// User (CN) (always written).
    #[serde(default)]
    pub user: String,

    /// Groups (O).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,

    /// Organizational units (OU).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub organization_units: Vec<String>,
}

/// Settings an add-on's agents are deployed with (same fields as v1alpha1).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "addon.open-cluster-management.io",
    version = "v1beta1",
    kind = "AddOnDeploymentConfig",
    doc = "Deployment settings for an add-on's agents: variables, node placement, mirrors, proxy, resources.",
    namespaced,
    storage = false,
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct AddOnDeploymentConfigSpec {
    /// Name/value variables for rendering the agent, keyed by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub customized_variables: Vec<CustomizedVariable>,

    /// Node selector and tolerations for the agent's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_placement: Option<NodePlacement>,

    /// Image mirrors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registries: Vec<ImageMirror>,

    /// Proxy settings for the agent (always written).
    #[serde(default)]
    pub proxy_config: ProxyConfig,

    /// Namespace of the agent; `""` means the template's namespace for template add-ons.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(
        length(max = 63),
        regex(pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$"),
        extend("x-flotilla-default" = "open-cluster-management-agent-addon")
    )]
    pub agent_install_namespace: String,

    /// Resources of the agent's containers, keyed by container ID; the last match wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["containerID"]))]
    pub resource_requirements: Vec<ContainerResourceRequirements>,
}

/// How to deploy and register an add-on's agent, for template add-ons (same fields as v1alpha1).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "addon.open-cluster-management.io",
    version = "v1beta1",
    kind = "AddOnTemplate",
    doc = "An add-on agent described as data: the manifests to deploy and how the agent registers.",
    storage = false,
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"ADDON NAME","type":"string","jsonPath":".spec.addonName"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AddOnTemplateSpec {
    /// The add-on the template belongs to.
    pub addon_name: String,

    /// The agent's manifests, with template variables.
    pub agent_spec: ManifestWorkSpec,

    /// Registrations of the agent (always written; `null` when unset).
    #[serde(default)]
    pub registration: Option<Vec<RegistrationSpec>>,
}
