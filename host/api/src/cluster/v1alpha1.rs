//! `cluster.open-cluster-management.io/v1alpha1`: ClusterClaim (managed side),
//! AddOnPlacementScore (hub, cluster namespace), and the rollout strategy shared by
//! ManifestWorkReplicaSet and add-on install strategies.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::omit;

/// Desired state of a ClusterClaim.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.open-cluster-management.io",
    version = "v1alpha1",
    kind = "ClusterClaim",
    doc = "A fact a managed cluster claims about itself; reported into its ManagedCluster status.",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(remote = "Self")]
#[schemars(rename = "ClusterClaimSpec")]
pub struct ClusterClaimSpec {
    /// The claimed value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 1024))]
    pub value: String,
}
default_if_absent!(ClusterClaimSpec);

/// AddOnPlacementScore has no spec: everything is in `status`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.open-cluster-management.io",
    version = "v1alpha1",
    kind = "AddOnPlacementScore",
    doc = "Scores of one managed cluster, written by an add-on into the cluster namespace for placements.",
    namespaced,
    no_spec,
    status = "AddOnPlacementScoreStatus",
    derive = "PartialEq",
    derive = "Default"
)]
pub struct AddOnPlacementScoreFields {}

/// Scores of one managed cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddOnPlacementScoreStatus {
    /// Conditions, keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// Named scores, keyed by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub scores: Vec<AddOnPlacementScoreItem>,

    /// After this time placements ignore the scores; `null` means they never expire.
    #[serde(default)]
    pub valid_until: Option<Time>,
}

/// One named score.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AddOnPlacementScoreItem {
    /// Score name, referenced by `scoreCoordinate.addOn.scoreName`.
    pub name: String,

    /// Score value in -100..=100.
    #[schemars(range(min = -100, max = 100))]
    pub value: i32,
}

/// How a workload is rolled out to the clusters a placement selects.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStrategy {
    /// Rollout type; `All` when unset.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-flotilla-default" = "All"))]
    pub type_: Option<RolloutType>,

    /// Settings of type `All`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<RolloutAll>,

    /// Settings of type `Progressive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressive: Option<RolloutProgressive>,

    /// Settings of type `ProgressivePerGroup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressive_per_group: Option<RolloutProgressivePerGroup>,
}

/// Rollout types.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum RolloutType {
    /// Every selected cluster at once.
    #[default]
    All,
    /// Cluster by cluster, up to `maxConcurrency` in flight.
    Progressive,
    /// Decision group by decision group.
    ProgressivePerGroup,
}

/// Timing and failure settings common to every rollout type.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutConfig {
    /// Soak time a succeeded cluster stays in flight (Go duration; progressive types only).
    #[serde(default = "zero_duration")]
    #[schemars(extend("x-flotilla-default" = "0"))]
    pub min_success_time: String,

    /// How long to wait for success before a cluster times out: a duration or `None`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(regex(pattern = r"^(([0-9])+[h|m|s])|None$"), extend("x-flotilla-default" = "None"))]
    pub progress_deadline: String,

    /// Failures (count or percentage) tolerated before the rollout stops; progressive types only.
    #[serde(default = "zero_int_or_string")]
    #[schemars(extend("pattern" = r"^((100|[0-9]{1,2})%|[0-9]+)$", "x-flotilla-default" = 0))]
    pub max_failures: IntOrString,
}

impl Default for RolloutConfig {
    fn default() -> Self {
        Self {
            min_success_time: zero_duration(),
            progress_deadline: String::new(),
            max_failures: zero_int_or_string(),
        }
    }
}

/// Go's encoding of a zero `metav1.Duration`.
fn zero_duration() -> String {
    "0s".to_owned()
}

/// Go's encoding of a zero `intstr.IntOrString`.
fn zero_int_or_string() -> IntOrString {
    IntOrString::Int(0)
}

/// A decision group that must be rolled out first, by name or index.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MandatoryDecisionGroup {
    /// Value of the `decision-group-name` label; takes precedence over the index.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group_name: String,

    /// Value of the `decision-group-index` label.
    #[serde(default, skip_serializing_if = "omit::is_zero_i32")]
    pub group_index: i32,
}

/// Decision groups rolled out first, with no failure tolerated.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MandatoryDecisionGroups {
    /// The mandatory groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mandatory_decision_groups: Vec<MandatoryDecisionGroup>,
}

/// Settings of rollout type `All`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RolloutAll {
    /// Timing and failure settings.
    #[serde(flatten)]
    pub config: RolloutConfig,
}

/// Settings of rollout type `ProgressivePerGroup`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RolloutProgressivePerGroup {
    /// Timing and failure settings.
    #[serde(flatten)]
    pub config: RolloutConfig,

    /// Groups rolled out first.
    #[serde(flatten)]
    pub mandatory: MandatoryDecisionGroups,
}

/// Settings of rollout type `Progressive`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutProgressive {
    /// Timing and failure settings.
    #[serde(flatten)]
    pub config: RolloutConfig,

    /// Groups rolled out first.
    #[serde(flatten)]
    pub mandatory: MandatoryDecisionGroups,

    /// Most clusters (count or percentage) in flight; defaults to the placement's
    /// `clustersPerDecisionGroup`.
    #[serde(default = "zero_int_or_string")]
    #[schemars(extend("pattern" = r"^((100|[0-9]{1,2})%|[0-9]+)$"))]
    pub max_concurrency: IntOrString,
}

impl Default for RolloutProgressive {
    fn default() -> Self {
        Self {
            config: RolloutConfig::default(),
            mandatory: MandatoryDecisionGroups::default(),
            max_concurrency: zero_int_or_string(),
        }
    }
}
