//! `cluster.open-cluster-management.io/v1beta1`: Placement (which clusters) and
//! PlacementDecision (the scheduler's answer, in pages of at most 100 decisions).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition, LabelSelector, LabelSelectorRequirement, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cluster::v1::TaintEffect;
use crate::omit;

/// Which clusters to select, from the cluster sets bound to the placement's namespace. An empty
/// spec selects every cluster of every bound set; the fields are ANDed.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.open-cluster-management.io",
    version = "v1beta1",
    kind = "Placement",
    doc = "A rule selecting managed clusters from the cluster sets bound to its namespace.",
    namespaced,
    status = "PlacementStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"Succeeded","type":"string","jsonPath":".status.conditions[?(@.type==\"PlacementSatisfied\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"PlacementSatisfied\")].reason"}"#,
    printcolumn = r#"{"name":"SelectedClusters","type":"integer","jsonPath":".status.numberOfSelectedClusters"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSpec {
    /// Cluster sets to select from, intersected with the bound ones; all bound sets when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_sets: Vec<String>,

    /// How many clusters to select; all matching clusters when unset.
    // OCM's CRD sets no lower bound; a negative count has no meaning, so Flotilla's CRD refuses
    // it at admission instead of leaving the scheduler to guess.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub number_of_clusters: Option<i32>,

    /// Predicates, ORed; a cluster must match at least one (when any are given).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub predicates: Vec<ClusterPredicate>,

    /// Prioritizers and their weights.
    #[serde(default)]
    pub prioritizer_policy: PrioritizerPolicy,

    /// How decisions spread over topologies (OCM's scheduler ignores it; Flotilla's honours it).
    #[serde(default)]
    pub spread_policy: SpreadPolicy,

    /// Tolerations of cluster taints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,

    /// How decisions are split into decision groups.
    #[serde(default)]
    pub decision_strategy: DecisionStrategy,

    /// Order of the decisions: by cluster name (default) or by score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-flotilla-default" = "ClusterName"))]
    pub sort_by: Option<PlacementSortBy>,

    /// Most frequent rate at which score-only changes are written to decisions (Go duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-flotilla-default" = "1m"))]
    pub score_rate_limit: Option<String>,
}

/// Order of the decisions in PlacementDecisions.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum PlacementSortBy {
    /// Alphabetically by cluster name.
    #[default]
    ClusterName,
    /// By score, highest first, then by name.
    Score,
}

/// A predicate selecting clusters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPredicate {
    /// Clusters must match this selector; a selected cluster that stops matching is removed.
    #[serde(default)]
    pub required_cluster_selector: ClusterSelector,
}

/// Label, claim and CEL selectors, ANDed. An empty selector matches every cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSelector {
    /// Selector on the cluster's labels.
    #[serde(default)]
    pub label_selector: LabelSelector,

    /// Selector on the cluster's `status.clusterClaims`.
    #[serde(default)]
    pub claim_selector: ClusterClaimSelector,

    /// CEL expressions on the ManagedCluster, ANDed.
    #[serde(default)]
    pub cel_selector: ClusterCelSelector,
}

/// CEL expressions over a ManagedCluster (`managedCluster`, plus `scores(...)`), ANDed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCelSelector {
    /// The expressions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cel_expressions: Vec<String>,
}

/// Requirements on cluster claims, ANDed. An empty selector matches every cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterClaimSelector {
    /// Requirements with claim names as keys.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// Prioritizer mode and weights.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrioritizerPolicy {
    /// `Additive` (default: unlisted prioritizers keep their default weights) or `Exact` (only
    /// listed prioritizers count); see [`PRIORITIZER_MODE_ADDITIVE`].
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("x-flotilla-default" = "Additive"))]
    pub mode: String,

    /// Prioritizers with their weights.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configurations: Vec<PrioritizerConfig>,
}

/// Prioritizer mode in which unlisted prioritizers keep their default weights.
pub const PRIORITIZER_MODE_ADDITIVE: &str = "Additive";
/// Prioritizer mode in which only listed prioritizers count.
pub const PRIORITIZER_MODE_EXACT: &str = "Exact";

/// One prioritizer and its weight.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrioritizerConfig {
    /// Which score to use.
    pub score_coordinate: ScoreCoordinate,

    /// Weight in -10..=10; the total score is the sum of weight × score. Zero is not written
    /// (Go's `omitempty`), so the apiserver turns it into the default 1.
    #[serde(default, skip_serializing_if = "omit::is_zero_i32")]
    #[schemars(range(min = -10, max = 10), extend("x-flotilla-default" = 1))]
    pub weight: i32,
}

/// Where a prioritizer's score comes from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScoreCoordinate {
    /// Built-in prioritizer or add-on score.
    #[serde(rename = "type")]
    #[schemars(extend("x-flotilla-default" = "BuiltIn"))]
    pub type_: ScoreCoordinateType,

    /// Built-in prioritizer: `Balance`, `Steady`, `ResourceAllocatableCPU`,
    /// `ResourceAllocatableMemory`, `Spread`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub built_in: String,

    /// Add-on score, for type `AddOn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on: Option<AddOnScore>,
}

/// Source of a prioritizer score.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum ScoreCoordinateType {
    /// A built-in prioritizer named by `builtIn`.
    #[default]
    BuiltIn,
    /// A score from an AddOnPlacementScore named by `addOn`.
    AddOn,
}

/// An AddOnPlacementScore score.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddOnScore {
    /// Name of the AddOnPlacementScore in each cluster namespace.
    pub resource_name: String,

    /// Name of the score inside it.
    pub score_name: String,
}

/// Spread constraints, with Kubernetes pod-topology-spread semantics in Flotilla's scheduler.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpreadPolicy {
    /// Constraints in priority order, at most 8.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub spread_constraints: Vec<SpreadConstraintsTerm>,
}

/// How decisions spread over one topology.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpreadConstraintsTerm {
    /// Label key or claim name defining the topology.
    #[schemars(
        length(max = 316),
        regex(
            pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
        )
    )]
    pub topology_key: String,

    /// Whether `topologyKey` is a label or a claim.
    pub topology_key_type: TopologyKeyType,

    /// Largest allowed difference between topologies (at least 1).
    #[serde(default = "one")]
    #[schemars(range(min = 1), extend("x-flotilla-default" = 1))]
    pub max_skew: i32,

    /// What to do when `maxSkew` cannot be met.
    #[serde(default)]
    #[schemars(extend("x-flotilla-default" = "ScheduleAnyway"))]
    pub when_unsatisfiable: UnsatisfiableMaxSkewAction,
}

fn one() -> i32 {
    1
}

/// Kind of topology key.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum TopologyKeyType {
    /// A cluster label key.
    #[default]
    Label,
    /// A cluster claim name.
    Claim,
}

/// Action when a spread constraint cannot be met.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum UnsatisfiableMaxSkewAction {
    /// Stop selecting more clusters.
    DoNotSchedule,
    /// Keep selecting.
    #[default]
    ScheduleAnyway,
}

/// A toleration of cluster taints.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    /// Taint key to match; empty matches every key (then the operator must be `Exists`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(
        length(max = 316),
        regex(
            pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        )
    )]
    pub key: String,

    /// `Equal` (default) or `Exists`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("x-flotilla-default" = "Equal"))]
    pub operator: String,

    /// Taint value for `Equal`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 1024))]
    pub value: String,

    /// Taint effect to match; every effect when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,

    /// How long a `NoSelect`/`PreferNoSelect` taint is tolerated, counted from its `timeAdded`;
    /// forever when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// Toleration operator matching any value.
pub const TOLERATION_OP_EXISTS: &str = "Exists";
/// Toleration operator comparing values.
pub const TOLERATION_OP_EQUAL: &str = "Equal";

/// How decisions are grouped.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionStrategy {
    /// Grouping of the selected clusters.
    #[serde(default)]
    pub group_strategy: GroupStrategy,
}

/// Decision groups: predefined ones first, then the rest in chunks.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupStrategy {
    /// Predefined groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decision_groups: Vec<DecisionGroup>,

    /// Largest group: a count or a percentage of the selected clusters.
    #[serde(default = "zero_int_or_string")]
    #[schemars(extend("pattern" = r"^((100|[1-9][0-9]{0,1})%|[1-9][0-9]*)$", "x-flotilla-default" = "100%"))]
    pub clusters_per_decision_group: IntOrString,
}

impl Default for GroupStrategy {
    fn default() -> Self {
        Self {
            decision_groups: Vec::new(),
            clusters_per_decision_group: zero_int_or_string(),
        }
    }
}

/// Go's encoding of a zero `intstr.IntOrString`.
fn zero_int_or_string() -> IntOrString {
    IntOrString::Int(0)
}

/// A predefined decision group.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionGroup {
    /// Group name, written to the `decision-group-name` label.
    #[schemars(regex(pattern = r"^[a-zA-Z0-9][-A-Za-z0-9_.]{0,61}[a-zA-Z0-9]$"))]
    pub group_name: String,

    /// Clusters of the group.
    pub group_cluster_selector: GroupClusterSelector,
}

/// Label and claim selectors of a decision group, ANDed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupClusterSelector {
    /// Selector on cluster labels.
    #[serde(default)]
    pub label_selector: LabelSelector,

    /// Selector on cluster claims.
    #[serde(default)]
    pub claim_selector: ClusterClaimSelector,
}

/// Observed state of a Placement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStatus {
    /// Number of selected clusters (always written).
    #[serde(default)]
    pub number_of_selected_clusters: i32,

    /// The decision groups (always written; `null` when unset).
    #[serde(default)]
    pub decision_groups: Option<Vec<DecisionGroupStatus>>,

    /// Conditions, keyed by type (always written; `null` when unset).
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<Condition>>,

    /// When scores were last written to the decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_score_update_time: Option<Time>,
}

/// One decision group and its PlacementDecisions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionGroupStatus {
    /// Group index, from 0.
    #[serde(default)]
    pub decision_group_index: i32,

    /// Group name; `""` for clusters outside predefined groups.
    #[serde(default)]
    pub decision_group_name: String,

    /// Names of the PlacementDecisions of the group (always written; `null` when unset).
    #[serde(default)]
    pub decisions: Option<Vec<String>>,

    /// Number of clusters in the group.
    #[serde(default, rename = "clusterCount")]
    #[schemars(extend("x-flotilla-default" = 0))]
    pub clusters_count: i32,
}

/// PlacementDecision has no spec: the decisions are in `status`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.open-cluster-management.io",
    version = "v1beta1",
    kind = "PlacementDecision",
    doc = "One page of a Placement's decisions, labelled with the placement and decision group.",
    namespaced,
    no_spec,
    status = "PlacementDecisionStatus",
    derive = "PartialEq",
    derive = "Default"
)]
pub struct PlacementDecisionFields {}

/// Decisions of one PlacementDecision.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PlacementDecisionStatus {
    /// At most 100 decisions.
    pub decisions: Vec<ClusterDecision>,
}

/// One selected cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDecision {
    /// Cluster name, unique across the placement's decisions.
    pub cluster_name: String,

    /// Why the cluster was selected (OCM writes `""`).
    pub reason: String,

    /// The cluster's prioritizer score; not written when 0.
    #[serde(default, skip_serializing_if = "omit::is_zero_i64")]
    pub score: i64,
}
