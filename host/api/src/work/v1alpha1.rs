//! `work.open-cluster-management.io/v1alpha1`: ManifestWorkReplicaSet, one ManifestWork template
//! fanned out to the clusters of one or more placements, following a rollout strategy.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cluster::v1alpha1::RolloutStrategy;
use crate::work::v1::ManifestWorkSpec;

/// The work template and the placements to fan it out to.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "work.open-cluster-management.io",
    version = "v1alpha1",
    kind = "ManifestWorkReplicaSet",
    doc = "A ManifestWork template applied to the clusters selected by placements in its namespace.",
    namespaced,
    status = "ManifestWorkReplicaSetStatus",
    shortname = "mwrs",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"Placement","type":"string","description":"Reason","jsonPath":".status.conditions[?(@.type==\"PlacementVerified\")].reason"}"#,
    printcolumn = r#"{"name":"Found","type":"string","description":"Configured","jsonPath":".status.conditions[?(@.type==\"PlacementVerified\")].status"}"#,
    printcolumn = r#"{"name":"ManifestWorks","type":"string","description":"Reason","jsonPath":".status.conditions[?(@.type==\"ManifestworkApplied\")].reason"}"#,
    printcolumn = r#"{"name":"Applied","type":"string","description":"Applied","jsonPath":".status.conditions[?(@.type==\"ManifestworkApplied\")].status"}"#
)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(rename = "ManifestWorkReplicaSetSpec")]
pub struct ManifestWorkReplicaSetSpec {
    /// Spec of the ManifestWork created in each selected cluster's namespace.
    #[serde(default)]
    pub manifest_work_template: ManifestWorkSpec,

    /// Placements in this namespace whose decisions receive the work (at least one).
    #[schemars(length(min = 1))]
    pub placement_refs: Vec<LocalPlacementReference>,

    /// Whether the replica set waits for its works to be gone before it goes.
    #[schemars(extend("x-flotilla-default" = "Background"))]
    pub cascade_deletion_policy: CascadeDeletionPolicy,
}
default_if_absent!(ManifestWorkReplicaSetSpec);

/// Deletion order of a ManifestWorkReplicaSet and its works.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum CascadeDeletionPolicy {
    /// Deleted without waiting for the works.
    #[default]
    Background,
    /// Deleted only once the works are gone.
    Foreground,
}

/// A Placement in the replica set's namespace and how to roll out to it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalPlacementReference {
    /// Placement name.
    #[schemars(length(min = 1))]
    pub name: String,

    /// Rollout strategy (always written).
    #[serde(default)]
    #[schemars(extend("x-flotilla-default" = {"type": "All", "all": {"progressDeadline": "None"}}))]
    pub rollout_strategy: RolloutStrategy,
}

/// Observed state of a ManifestWorkReplicaSet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkReplicaSetStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// Counts over all placements (always written).
    #[serde(default)]
    pub summary: ManifestWorkReplicaSetSummary,

    /// Counts per placement (always written; `null` when unset).
    #[serde(default, rename = "placementSummary")]
    pub placements_summary: Option<Vec<PlacementSummary>>,
}

/// Counts for one placement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSummary {
    /// Placement name.
    #[serde(default)]
    pub name: String,

    /// Decision groups fully available, as `"<g> (<n> / <total> clusters applied)"`.
    #[serde(default)]
    pub available_decision_groups: String,

    /// Counts of the placement's works.
    #[serde(default)]
    pub summary: ManifestWorkReplicaSetSummary,
}

/// Counts of a replica set's ManifestWorks by state; every count is always written.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkReplicaSetSummary {
    /// Works managed by the replica set.
    #[serde(default)]
    #[schemars(extend("x-flotilla-no-format" = true))]
    pub total: i64,
    /// Clusters that should have a work under the rollout strategy.
    #[serde(default)]
    #[schemars(extend("x-flotilla-no-format" = true))]
    pub desired_total: i64,
    /// Works with `Progressing` True.
    #[serde(default)]
    #[schemars(extend("x-flotilla-no-format" = true))]
    pub progressing: i64,
    /// Works with `Available` True.
    #[serde(default)]
    #[schemars(extend("x-flotilla-no-format" = true))]
    pub available: i64,
    /// Works with `Degraded` True.
    #[serde(default)]
    #[schemars(extend("x-flotilla-no-format" = true))]
    pub degraded: i64,
    /// Works with `Applied` True.
    #[serde(default)]
    #[schemars(extend("x-flotilla-no-format" = true))]
    pub applied: i64,
    /// Works updated to the current template.
    #[serde(default)]
    #[schemars(extend("x-flotilla-no-format" = true))]
    pub updated: i64,
}
