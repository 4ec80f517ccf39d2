//! `cluster.open-cluster-management.io/v1`: ManagedCluster, the hub's record of one managed
//! cluster. The registration agent creates it; the hub admin accepts it with
//! `spec.hubAcceptsClient`; the agent reports health, capacity, version and claims in `status`.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::omit;

/// Desired state of a ManagedCluster.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.open-cluster-management.io",
    version = "v1",
    kind = "ManagedCluster",
    doc = "A managed cluster as the hub sees it; cluster-scoped, named after the cluster.",
    status = "ManagedClusterStatus",
    shortname = "mcl",
    shortname = "mcls",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"Hub Accepted","type":"boolean","jsonPath":".spec.hubAcceptsClient"}"#,
    printcolumn = r#"{"name":"Managed Cluster URLs","type":"string","jsonPath":".spec.managedClusterClientConfigs[*].url"}"#,
    printcolumn = r#"{"name":"Joined","type":"string","jsonPath":".status.conditions[?(@.type==\"ManagedClusterJoined\")].status"}"#,
    printcolumn = r#"{"name":"Available","type":"string","jsonPath":".status.conditions[?(@.type==\"ManagedClusterConditionAvailable\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(rename = "ManagedClusterSpec")]
pub struct ManagedClusterSpec {
    /// Addresses of the cluster's kube-apiserver; empty when the hub cannot reach it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_cluster_client_configs: Vec<ClientConfig>,

    /// Whether the hub admin accepts the cluster. Turning it on needs `update` on
    /// `managedclusters/accept`; the hub then creates the cluster namespace and its RBAC.
    #[serde(default)]
    pub hub_accepts_client: bool,

    /// Seconds between the agent's lease renewals; 0 means 60.
    #[serde(default, skip_serializing_if = "omit::is_zero_i32")]
    #[schemars(extend("x-flotilla-default" = 60))]
    pub lease_duration_seconds: i32,

    /// Taints that keep placements without a matching toleration away from the cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
}
default_if_absent!(ManagedClusterSpec);

/// One address of the managed cluster's kube-apiserver.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientConfig {
    /// URL of the apiserver endpoint (https).
    pub url: String,

    /// CA bundle to verify the endpoint; system roots when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::bytes")]
    pub ca_bundle: Option<ByteString>,
}

/// A taint on a managed cluster, repelling placements that do not tolerate it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// Taint key: an optional DNS-subdomain prefix and `/`, then a qualified name.
    #[schemars(
        length(max = 316),
        regex(
            pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        )
    )]
    pub key: String,

    /// Taint value matched by `Equal` tolerations.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 1024))]
    pub value: String,

    /// What the taint does to placements that do not tolerate it.
    pub effect: TaintEffect,

    /// When the taint was added; stamped by the hub, `null` until then. Tolerations with
    /// `tolerationSeconds` count from here.
    #[serde(default)]
    #[schemars(extend("x-flotilla-nullable" = true))]
    pub time_added: Option<Time>,
}

/// Effect of a cluster taint on placements.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum TaintEffect {
    /// Not selected unless tolerated; removed from existing decisions.
    #[default]
    NoSelect,
    /// The scheduler avoids the cluster but may still select it.
    PreferNoSelect,
    /// Not newly selected unless tolerated; existing decisions stay.
    NoSelectIfNew,
}

/// Observed state of a ManagedCluster, written by the registration agent and the hub.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterStatus {
    /// Conditions, keyed by type (always written; `null` when unset).
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<Condition>>,

    /// Total capacity of the cluster's nodes by resource name (`cpu`, `memory`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,

    /// Allocatable resources of schedulable nodes by resource name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, Quantity>,

    /// Kubernetes version of the cluster.
    #[serde(default)]
    pub version: ManagedClusterVersion,

    /// Claims reported from the cluster's ClusterClaims: reserved ones first, then up to 20 more.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_claims: Vec<ManagedClusterClaim>,

    /// Namespaces that the cluster's sets manage on it, with their conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["clusterSet", "name"]))]
    pub managed_namespaces: Vec<ClusterSetManagedNamespaceConfig>,
}

/// Version information of a managed cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManagedClusterVersion {
    /// Kubernetes version, e.g. `v1.33.1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kubernetes: String,
}

/// A ClusterClaim as reported in the ManagedCluster status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManagedClusterClaim {
    /// Claim name (a well-known name such as `id.k8s.io`, or a custom one).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 253))]
    pub name: String,

    /// Claim value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 1024))]
    pub value: String,
}

/// A namespace a cluster set manages on its clusters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManagedNamespaceConfig {
    /// Namespace name (DNS label).
    #[schemars(length(max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub name: String,
}

/// A managed namespace in a ManagedCluster status: which set manages it and how it is doing.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSetManagedNamespaceConfig {
    /// Namespace name (DNS label).
    #[schemars(length(max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub name: String,

    /// The cluster set that manages the namespace.
    pub cluster_set: String,

    /// Conditions of the namespace on the cluster, keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
