//! `addon.open-cluster-management.io/v1alpha1` (storage version): ClusterManagementAddOn,
//! ManagedClusterAddOn, AddOnDeploymentConfig, AddOnTemplate.
//!
//! clusteradm and addon-framework up to v1.2 speak this version. Types whose JSON is the same in
//! v1beta1 are defined here and re-used there.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
use k8s_openapi::api::rbac::v1::RoleRef;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cluster::v1alpha1::RolloutStrategy;
use crate::omit;
use crate::work::v1::ManifestWorkSpec;

/// An add-on known to the hub: metadata, supported configs and install strategy.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "addon.open-cluster-management.io",
    version = "v1alpha1",
    kind = "ClusterManagementAddOn",
    doc = "An add-on registered with the hub; ManagedClusterAddOns of the same name install it per cluster.",
    status = "ClusterManagementAddOnStatus",
    shortname = "cma",
    shortname = "cmas",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"DISPLAY NAME","type":"string","jsonPath":".spec.addOnMeta.displayName"}"#,
    printcolumn = r#"{"name":"CRD NAME","type":"string","jsonPath":".spec.addOnConfiguration.crdName"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOnSpec {
    /// Display name and description.
    #[serde(default)]
    pub add_on_meta: AddOnMeta,

    /// Deprecated configuration coordinates.
    #[serde(default)]
    pub add_on_configuration: ConfigCoordinates,

    /// Config types the add-on supports, with optional defaults; keyed by group and resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["group", "resource"]))]
    pub supported_configs: Vec<ConfigMeta>,

    /// Where the hub installs the add-on by itself.
    #[serde(default)]
    #[schemars(extend("x-flotilla-default" = {"type": "Manual"}))]
    pub install_strategy: InstallStrategy,
}

/// Display metadata of an add-on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddOnMeta {
    /// Name shown to people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,

    /// Longer description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// Deprecated: where the add-on's configuration CRD and CR are.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigCoordinates {
    /// Name of the configuration CRD.
    #[serde(default, rename = "crdName", skip_serializing_if = "String::is_empty")]
    pub crd_name: String,

    /// Name of the configuration CR.
    #[serde(default, rename = "crName", skip_serializing_if = "String::is_empty")]
    pub cr_name: String,

    /// Observed generation of the configuration CR.
    #[serde(default, skip_serializing_if = "omit::is_zero_i64")]
    pub last_observed_generation: i64,
}

/// A supported config type and its default config.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMeta {
    /// Group and resource of the config type.
    #[serde(flatten)]
    pub group_resource: ConfigGroupResource,

    /// Default config for every cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_config: Option<ConfigReferent>,
}

/// Group and resource of a config type.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
pub struct ConfigGroupResource {
    /// API group; `""` for the core group (always written).
    #[serde(default)]
    #[schemars(extend("x-flotilla-default" = ""))]
    pub group: String,

    /// Resource (plural) name.
    #[schemars(length(min = 1))]
    pub resource: String,
}

/// Namespace and name of a config.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
pub struct ConfigReferent {
    /// Namespace; empty for cluster-scoped configs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,

    /// Name.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// A config with the hash of its spec.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSpecHash {
    /// Namespace and name of the config.
    #[serde(flatten)]
    pub referent: ConfigReferent,

    /// Lower-hex SHA-256 of the config's spec (always written).
    #[serde(default)]
    pub spec_hash: String,
}

/// A config of an add-on: type and instance.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub struct AddOnConfig {
    /// Group and resource.
    #[serde(flatten)]
    pub group_resource: ConfigGroupResource,

    /// Namespace and name.
    #[serde(flatten)]
    pub referent: ConfigReferent,
}

/// Where the hub installs an add-on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct InstallStrategy {
    /// `Manual` (users create ManagedClusterAddOns) or `Placements`.
    #[serde(default, rename = "type")]
    #[schemars(extend("x-flotilla-default" = "Manual"))]
    pub type_: InstallStrategyType,

    /// Placements whose clusters get the add-on; later ones override earlier ones; keyed by
    /// namespace and name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["namespace", "name"]))]
    pub placements: Vec<PlacementStrategy>,
}

/// Install strategy types.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum InstallStrategyType {
    /// No automatic install.
    #[default]
    Manual,
    /// Install on the clusters the placements select.
    Placements,
}

/// A Placement by namespace and name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
pub struct PlacementRef {
    /// Namespace of the placement.
    #[schemars(length(min = 1))]
    pub namespace: String,

    /// Name of the placement.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// A placement to install on, its configs and its config rollout.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStrategy {
    /// The placement.
    #[serde(flatten)]
    pub placement: PlacementRef,

    /// Configs for the add-ons on these clusters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<AddOnConfig>,

    /// How config changes roll out (always written).
    #[serde(default)]
    #[schemars(extend("x-flotilla-default" = {"type": "All"}))]
    pub rollout_strategy: RolloutStrategy,
}

/// Observed state of a ClusterManagementAddOn (v1alpha1).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOnStatus {
    /// Desired default configs with their hashes (OCM spells the key with a lower-case `c`).
    #[serde(
        default,
        rename = "defaultconfigReferences",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub default_config_references: Vec<DefaultConfigReference>,

    /// Rollout progress per install placement.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub install_progressions: Vec<InstallProgression>,
}

/// A default config and its desired hash.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DefaultConfigReference {
    /// Group and resource.
    #[serde(flatten)]
    pub group_resource: ConfigGroupResource,

    /// Desired config (always written; `null` when unset).
    #[serde(default)]
    pub desired_config: Option<ConfigSpecHash>,
}

/// Rollout progress of one install placement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallProgression {
    /// The placement.
    #[serde(flatten)]
    pub placement: PlacementRef,

    /// Configs of the placement with desired, last-known-good and last-applied hashes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_references: Vec<InstallConfigReference>,

    /// Conditions (`Progressing`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A config of an install placement and its rollout state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallConfigReference {
    /// Group and resource.
    #[serde(flatten)]
    pub group_resource: ConfigGroupResource,

    /// Desired config (always written; `null` when unset).
    #[serde(default)]
    pub desired_config: Option<ConfigSpecHash>,

    /// Last config that rolled out successfully (always written; `null` when unset).
    #[serde(default)]
    pub last_known_good_config: Option<ConfigSpecHash>,

    /// Config applied on every cluster of the placement (always written; `null` when unset).
    #[serde(default)]
    pub last_applied_config: Option<ConfigSpecHash>,
}

/// The add-on on one cluster: install namespace and config overrides.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "addon.open-cluster-management.io",
    version = "v1alpha1",
    kind = "ManagedClusterAddOn",
    doc = "An add-on installed on one managed cluster; lives in the cluster namespace, named after the add-on.",
    namespaced,
    status = "ManagedClusterAddOnStatus",
    shortname = "mca",
    shortname = "mcas",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"Available","type":"string","jsonPath":".status.conditions[?(@.type==\"Available\")].status"}"#,
    printcolumn = r#"{"name":"Degraded","type":"string","jsonPath":".status.conditions[?(@.type==\"Degraded\")].status"}"#,
    printcolumn = r#"{"name":"Progressing","type":"string","jsonPath":".status.conditions[?(@.type==\"Progressing\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOnSpec {
    /// Deprecated: namespace of the agent on the managed cluster.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(
        length(max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
        extend("x-flotilla-default" = "open-cluster-management-agent-addon")
    )]
    pub install_namespace: String,

    /// Configs overriding the ClusterManagementAddOn's, per group and resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<AddOnConfig>,
}

/// Observed state of a ManagedClusterAddOn (v1alpha1).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOnStatus {
    /// Conditions (`Available`, `Degraded`, `Progressing`, `Configured`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// Objects related to the add-on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_objects: Vec<ObjectReference>,

    /// Copy of the ClusterManagementAddOn's metadata (always written).
    #[serde(default)]
    pub add_on_meta: AddOnMeta,

    /// Deprecated configuration coordinates (always written).
    #[serde(default)]
    pub add_on_configuration: ConfigCoordinates,

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

    /// Driver the agent uses for kube-apiserver client registration (`csr` or `token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_client_driver: Option<KubeClientDriver>,
}

/// How an add-on agent authenticates to the hub's kube-apiserver (`csr` or `token`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum KubeClientDriver {
    /// A client certificate from a CSR.
    #[default]
    Csr,
    /// A service account token.
    Token,
}

/// An object related to an add-on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub struct ObjectReference {
    /// API group.
    pub group: String,

    /// Resource (plural) name.
    pub resource: String,

    /// Namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,

    /// Name.
    pub name: String,
}

/// A config in use by a ManagedClusterAddOn (v1alpha1).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReference {
    /// Group and resource.
    #[serde(flatten)]
    pub group_resource: ConfigGroupResource,

    /// Deprecated copy of the desired config's namespace and name.
    #[serde(flatten)]
    pub referent: ConfigReferent,

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

/// How an add-on agent registers with the hub (v1alpha1: by signer name).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationConfig {
    /// Signer of the agent's CSR; `kubernetes.io/kube-apiserver-client` for hub API access.
    #[schemars(length(min = 5, max = 571))]
    pub signer_name: String,

    /// Subject of the agent's certificate; the default subject when empty (always written).
    #[serde(default)]
    pub subject: Subject,
}

/// Certificate subject of an add-on agent (v1alpha1 spelling: `organizationUnit`).
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
    #[serde(default, rename = "organizationUnit", skip_serializing_if = "Vec::is_empty")]
    pub organization_units: Vec<String>,
}

/// How an add-on's health is checked.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct HealthCheck {
    /// Check mode; `Lease` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-flotilla-default" = "Lease"))]
    pub mode: Option<HealthCheckMode>,
}

/// Health check modes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum HealthCheckMode {
    /// The agent renews a lease in its namespace.
    #[default]
    Lease,
    /// The add-on (or the hub's prober) sets `Available` itself.
    Customized,
}

/// Settings an add-on's agents are deployed with.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "addon.open-cluster-management.io",
    version = "v1alpha1",
    kind = "AddOnDeploymentConfig",
    doc = "Deployment settings for an add-on's agents: variables, node placement, mirrors, proxy, resources.",
    namespaced,
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

/// A name/value variable.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub struct CustomizedVariable {
    /// Variable name.
    #[schemars(length(max = 255), regex(pattern = r"^[a-zA-Z_][_a-zA-Z0-9]*$"))]
    pub name: String,

    /// Variable value (always written).
    #[serde(default)]
    #[schemars(length(max = 1024))]
    pub value: String,
}

/// Node scheduling of the agent's pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePlacement {
    /// Node selector; every node when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,

    /// Tolerations; none when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

/// An image mirror.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub struct ImageMirror {
    /// Mirror registry or image.
    pub mirror: String,

    /// Source registry or image; every image when empty (always written).
    #[serde(default)]
    pub source: String,
}

/// Proxy settings of the agent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxyConfig {
    /// HTTP proxy URL.
    #[serde(default, rename = "httpProxy", skip_serializing_if = "String::is_empty")]
    pub http_proxy: String,

    /// HTTPS proxy URL.
    #[serde(default, rename = "httpsProxy", skip_serializing_if = "String::is_empty")]
    pub https_proxy: String,

    /// CA bundle of the HTTPS proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::bytes")]
    pub ca_bundle: Option<k8s_openapi::ByteString>,

    /// Hosts, CIDRs and IPs not to proxy, comma-separated.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub no_proxy: String,
}

/// Resources of the containers matching an ID.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ContainerResourceRequirements {
    /// `<resource type|*>:<resource name|*>:<container name|*>`.
    #[serde(rename = "containerID")]
    #[schemars(regex(
        pattern = r"^(deployments|daemonsets|statefulsets|replicasets|jobs|cronjobs|pods|\*):.+:.+$"
    ))]
    pub container_id: String,

    /// Requests and limits.
    pub resources: ResourceRequirements,
}

/// How to deploy and register an add-on's agent, for template add-ons.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "addon.open-cluster-management.io",
    version = "v1alpha1",
    kind = "AddOnTemplate",
    doc = "An add-on agent described as data: the manifests to deploy and how the agent registers.",
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

/// One registration of a template add-on's agent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationSpec {
    /// Kube client or custom signer.
    #[serde(rename = "type")]
    pub type_: RegistrationType,

    /// Settings of type `KubeClient`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_client: Option<KubeClientRegistrationConfig>,

    /// Settings of type `CustomSigner`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_signer: Option<CustomSignerRegistrationConfig>,
}

/// Template registration types.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum RegistrationType {
    /// Access to the hub's kube-apiserver.
    #[default]
    KubeClient,
    /// A certificate from a custom signer.
    CustomSigner,
}

/// Hub permissions of a kube client registration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeClientRegistrationConfig {
    /// Role bindings to create on the hub.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hub_permissions: Vec<HubPermissionConfig>,
}

/// A role binding for the agent on the hub.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HubPermissionConfig {
    /// Bind in the cluster namespace or in a given namespace.
    #[serde(rename = "type")]
    pub type_: HubPermissionsBindingType,

    /// Settings of type `CurrentCluster`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_cluster: Option<CurrentClusterBindingConfig>,

    /// Settings of type `SingleNamespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub single_namespace: Option<SingleNamespaceBindingConfig>,
}

/// Where hub permissions are bound.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum HubPermissionsBindingType {
    /// In the managed cluster's namespace.
    #[default]
    CurrentCluster,
    /// In one given namespace.
    SingleNamespace,
}

/// A cluster role bound in each cluster namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CurrentClusterBindingConfig {
    /// Name of the ClusterRole (must exist on the hub).
    pub cluster_role_name: String,
}

/// A role bound in one namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SingleNamespaceBindingConfig {
    /// Namespace of the role binding.
    pub namespace: String,

    /// Role or ClusterRole to bind (must exist on the hub).
    pub role_ref: RoleRef,
}

/// A custom signer registration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomSignerRegistrationConfig {
    /// Signer name, `<domain>/<path>`.
    #[schemars(
        length(min = 5, max = 571),
        regex(pattern = r"^([a-z0-9][a-z0-9-]*[a-z0-9]\.)+[a-z]+\/[a-z0-9-\.]+$")
    )]
    pub signer_name: String,

    /// Certificate subject; the default subject when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,

    /// The `kubernetes.io/tls` secret on the hub holding the signing CA.
    #[serde(rename = "signingCA")]
    pub signing_ca: SigningCARef,
}

/// Reference to a signing CA secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub struct SigningCARef {
    /// Secret name.
    pub name: String,

    /// Secret namespace; the add-on manager's when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}
