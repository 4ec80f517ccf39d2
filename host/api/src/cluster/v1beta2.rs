//! `cluster.open-cluster-management.io/v1beta2`: ManagedClusterSet (a group of clusters) and
//! ManagedClusterSetBinding (a set made usable by placements in one namespace).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cluster::v1::ManagedNamespaceConfig;

/// Which clusters belong to the set. The apiserver defaults a missing spec to the exclusive
/// label selector.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.open-cluster-management.io",
    version = "v1beta2",
    kind = "ManagedClusterSet",
    doc = "A group of managed clusters that workloads can be placed on.",
    status = "ManagedClusterSetStatus",
    shortname = "mclset",
    shortname = "mclsets",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"Empty","type":"string","jsonPath":".status.conditions[?(@.type==\"ClusterSetEmpty\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(rename = "ManagedClusterSetSpec")]
pub struct ManagedClusterSetSpec {
    /// How member clusters are selected.
    #[serde(default)]
    #[schemars(extend("x-flotilla-default" = {"selectorType": "ExclusiveClusterSetLabel"}))]
    pub cluster_selector: ManagedClusterSelector,

    /// Namespaces the set manages on each member cluster, keyed by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub managed_namespaces: Vec<ManagedNamespaceConfig>,
}
default_if_absent!(ManagedClusterSetSpec);

/// Selector of a set's member clusters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSelector {
    /// Exclusive clusterset label or a label selector.
    #[schemars(extend("x-flotilla-default" = "ExclusiveClusterSetLabel"))]
    pub selector_type: SelectorType,

    /// Label selector, for type `LabelSelector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
}

/// How a set selects its clusters.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum SelectorType {
    /// Clusters labelled `cluster.open-cluster-management.io/clusterset=<set name>`.
    #[default]
    ExclusiveClusterSetLabel,
    /// Clusters matching `labelSelector`.
    LabelSelector,
}

/// Observed state of a ManagedClusterSet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManagedClusterSetStatus {
    /// Conditions (always written; `null` when unset).
    #[serde(default)]
    pub conditions: Option<Vec<Condition>>,
}

/// The set to bind; the binding must be named like it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.open-cluster-management.io",
    version = "v1beta2",
    kind = "ManagedClusterSetBinding",
    doc = "Makes a ManagedClusterSet usable by placements in the binding's namespace.",
    namespaced,
    status = "ManagedClusterSetBindingStatus",
    shortname = "mclsetbinding",
    shortname = "mclsetbindings",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(rename = "ManagedClusterSetBindingSpec")]
pub struct ManagedClusterSetBindingSpec {
    /// Name of the bound ManagedClusterSet; equals the binding's name and never changes.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub cluster_set: String,
}
default_if_absent!(ManagedClusterSetBindingSpec);

/// Observed state of a ManagedClusterSetBinding.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManagedClusterSetBindingStatus {
    /// Conditions (always written; `null` when unset).
    #[serde(default)]
    pub conditions: Option<Vec<Condition>>,
}
