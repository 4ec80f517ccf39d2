//! `work.open-cluster-management.io/v1`: ManifestWork (hub, cluster namespace: what to apply)
//! and AppliedManifestWork (managed cluster: what was applied, for clean-up).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What to apply on the managed cluster, and how.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "work.open-cluster-management.io",
    version = "v1",
    kind = "ManifestWork",
    doc = "Kubernetes objects the hub wants applied on a managed cluster; lives in the cluster namespace.",
    namespaced,
    status = "ManifestWorkStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(rename = "ManifestWorkSpec")]
pub struct ManifestWorkSpec {
    /// The objects to apply.
    #[serde(default)]
    pub workload: ManifestsTemplate,

    /// What happens to the applied objects when the work is deleted; `Foreground` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<DeleteOption>,

    /// Per-object settings: feedback, update strategy, condition rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifest_configs: Vec<ManifestConfigOption>,

    /// Identity the agent applies as; the agent's own when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<ManifestWorkExecutor>,
}
default_if_absent!(ManifestWorkSpec);

/// The objects of a work.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManifestsTemplate {
    /// Complete Kubernetes objects (apiVersion, kind, metadata.name, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<Manifest>,
}

/// One complete Kubernetes object, kept as raw JSON.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(transparent)]
pub struct Manifest(#[schemars(schema_with = "crate::schema::embedded_resource")] pub Value);

/// Deletion behaviour of a work's objects.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOption {
    /// Delete, orphan, or orphan only the listed objects.
    #[serde(default)]
    #[schemars(extend("x-flotilla-default" = "Foreground"))]
    pub propagation_policy: DeletePropagationPolicyType,

    /// Objects to orphan with `SelectivelyOrphan`.
    #[serde(
        default,
        rename = "selectivelyOrphans",
        skip_serializing_if = "Option::is_none"
    )]
    pub selectively_orphan: Option<SelectivelyOrphan>,

    /// Seconds after the work is `Complete` until the hub deletes it; never when unset.
    #[serde(
        default,
        rename = "ttlSecondsAfterFinished",
        skip_serializing_if = "Option::is_none"
    )]
    pub ttl_seconds_after_finished: Option<i64>,
}

/// What happens to applied objects when their work is deleted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum DeletePropagationPolicyType {
    /// Delete every object.
    #[default]
    Foreground,
    /// Keep every object.
    Orphan,
    /// Keep only the objects matching `orphaningRules`.
    SelectivelyOrphan,
}

/// Objects to orphan.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelectivelyOrphan {
    /// One rule per orphaned object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orphaning_rules: Vec<OrphaningRule>,
}

/// An object of the work to orphan.
pub type OrphaningRule = ResourceIdentifier;

/// Group, resource, namespace and name of one object of a work.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub struct ResourceIdentifier {
    /// API group; `""` for the core group.
    #[serde(default)]
    pub group: String,

    /// Resource (plural) name.
    pub resource: String,

    /// Object name.
    pub name: String,

    /// Object namespace; `""` for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,
}

/// Settings for one object of a work.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestConfigOption {
    /// The object the settings apply to.
    pub resource_identifier: ResourceIdentifier,

    /// Status fields to report back in `statusFeedback`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feedback_rules: Vec<FeedbackRule>,

    /// How the object is updated; `Update` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,

    /// Rules that set manifest conditions, keyed by condition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["condition"]))]
    pub condition_rules: Vec<ConditionRule>,

    /// Whether feedback is polled or watched; `Poll` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-flotilla-default" = "Poll"))]
    pub feedback_scrape_type: Option<FeedbackScrapeType>,
}

/// How status feedback is collected.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum FeedbackScrapeType {
    /// Read every status-sync interval.
    #[default]
    Poll,
    /// Watch the object.
    Watch,
}

/// A rule setting one condition on a manifest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.type != 'CEL' || self.condition != \"\"",
    "message": "Condition is required for CEL rules",
}]))]
pub struct ConditionRule {
    /// Condition type to set; `Complete` stops further updates once true.
    pub condition: String,

    /// Well-known rules or CEL expressions.
    #[serde(rename = "type")]
    pub type_: ConditionRuleType,

    /// CEL expressions, ANDed (always written; `null` when unset).
    #[serde(default)]
    pub cel_expressions: Option<Vec<String>>,

    /// Message of the condition.
    #[serde(default)]
    pub message: String,

    /// CEL expression producing the message (variables `object`, `result`); overrides `message`
    /// when non-empty.
    #[serde(default)]
    pub message_expression: String,
}

/// Kind of condition rule.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum ConditionRuleType {
    /// Built-in rules for well-known kinds (Job, Pod).
    #[default]
    WellKnownConditions,
    /// `celExpressions`.
    #[serde(rename = "CEL")]
    Cel,
}

/// Identity the work agent applies a work's objects as.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManifestWorkExecutor {
    /// The subject.
    #[serde(default)]
    pub subject: ManifestWorkExecutorSubject,
}

/// Subject of an executor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkExecutorSubject {
    /// Subject type.
    #[serde(rename = "type")]
    pub type_: ManifestWorkExecutorSubjectType,

    /// The service account, for type `ServiceAccount`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ManifestWorkSubjectServiceAccount>,
}

/// Subject types of an executor.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum ManifestWorkExecutorSubjectType {
    /// A service account on the managed cluster.
    #[default]
    ServiceAccount,
}

/// A service account on the managed cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManifestWorkSubjectServiceAccount {
    /// Namespace of the service account.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)$")
    )]
    pub namespace: String,

    /// Name of the service account.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)$")
    )]
    pub name: String,
}

/// How an object is updated.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    /// Update strategy type.
    #[serde(rename = "type")]
    #[schemars(extend("x-flotilla-default" = "Update"))]
    pub type_: UpdateStrategyType,

    /// Server-side apply settings, for type `ServerSideApply`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_side_apply: Option<ServerSideApplyConfig>,
}

/// Update strategy types.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum UpdateStrategyType {
    /// Get, compare and update.
    #[default]
    Update,
    /// Create if absent, never update.
    CreateOnly,
    /// Server-side apply; a conflict fails `Applied`.
    ServerSideApply,
    /// Never write; only read for feedback.
    ReadOnly,
}

/// Server-side apply settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerSideApplyConfig {
    /// Force ownership of conflicting fields (always written).
    #[serde(default)]
    pub force: bool,

    /// Field manager; must start with `work-agent`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(regex(pattern = "^work-agent"), extend("x-flotilla-default" = "work-agent"))]
    pub field_manager: String,

    /// Fields not to apply, keyed by condition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["condition"]))]
    pub ignore_fields: Vec<IgnoreField>,
}

/// Fields to leave alone when applying, and when.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IgnoreField {
    /// When to ignore the fields.
    #[schemars(extend("x-flotilla-default" = "OnSpokePresent"))]
    pub condition: IgnoreFieldsCondition,

    /// JSONPaths of ignored fields.
    #[serde(default, rename = "jsonPaths", skip_serializing_if = "Vec::is_empty")]
    pub json_paths: Vec<String>,

    /// JSON pointers of ignored fields.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub json_pointers: Vec<String>,

    /// jq path expressions of ignored fields.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jq_path_expressions: Vec<String>,
}

/// When ignored fields are ignored.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum IgnoreFieldsCondition {
    /// Whenever the object exists on the managed cluster.
    #[default]
    OnSpokePresent,
    /// When another actor changed them on the managed cluster.
    OnSpokeChange,
}

/// Which status fields to report back.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct FeedbackRule {
    /// Well-known fields or explicit JSONPaths.
    #[serde(rename = "type")]
    pub type_: FeedBackType,

    /// Paths for type `JSONPaths`, keyed by name.
    #[serde(default, rename = "jsonPaths", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub json_paths: Vec<JsonPath>,
}

/// Feedback rule types.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum FeedBackType {
    /// The well-known fields of the object's kind.
    #[default]
    WellKnownStatus,
    /// The fields named in `jsonPaths`.
    JSONPaths,
}

/// One status field to report.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct JsonPath {
    /// Name of the value in the feedback.
    pub name: String,

    /// Resource version to read; the preferred one when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,

    /// Kubernetes JSONPath over the object (e.g. `.status.readyReplicas`).
    pub path: String,
}

/// Observed state of a ManifestWork.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkStatus {
    /// Conditions of the whole work.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// Per-object status (always written).
    #[serde(default)]
    pub resource_status: ManifestResourceStatus,
}

/// Status of each object of a work.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManifestResourceStatus {
    /// One entry per manifest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<ManifestCondition>,
}

/// Status of one object of a work.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestCondition {
    /// Which manifest this is.
    pub resource_meta: ManifestResourceMeta,

    /// Reported status values (always written).
    #[serde(default, rename = "statusFeedback")]
    pub status_feedbacks: StatusFeedbackResult,

    /// Conditions of the object.
    pub conditions: Vec<Condition>,
}

/// Identity of a manifest: its position in the spec plus its group, version, kind, resource,
/// namespace and name. Every field is always written.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub struct ManifestResourceMeta {
    /// Index of the manifest in `spec.workload.manifests`.
    pub ordinal: i32,
    /// API group.
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
    /// Resource (plural) name.
    #[serde(default)]
    pub resource: String,
    /// Object name.
    #[serde(default)]
    pub name: String,
    /// Object namespace.
    #[serde(default)]
    pub namespace: String,
}

/// Reported status values of an object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct StatusFeedbackResult {
    /// The values, keyed by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub values: Vec<FeedbackValue>,
}

/// One reported value.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackValue {
    /// Name from the feedback rule.
    pub name: String,

    /// The value.
    #[serde(rename = "fieldValue")]
    pub value: FieldValue,
}

/// A typed status value; exactly the member matching `type` is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldValue {
    /// Value type.
    #[serde(rename = "type")]
    pub type_: ValueType,

    /// Integer value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integer: Option<i64>,

    /// String value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,

    /// Boolean value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boolean: Option<bool>,

    /// A list or object as a JSON string of at most 1024 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub json_raw: Option<String>,
}

/// Types of a reported value.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum ValueType {
    /// `integer` is set.
    #[default]
    Integer,
    /// `string` is set.
    String,
    /// `boolean` is set.
    Boolean,
    /// `jsonRaw` is set.
    JsonRaw,
}

/// Which work an AppliedManifestWork records.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "work.open-cluster-management.io",
    version = "v1",
    kind = "AppliedManifestWork",
    doc = "The managed cluster's record of a ManifestWork's applied objects; named <hubHash>-<work>.",
    status = "AppliedManifestWorkStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(rename = "AppliedManifestWorkSpec")]
pub struct AppliedManifestWorkSpec {
    /// Lower-hex SHA-256 of the hub's apiserver URL.
    pub hub_hash: String,

    /// ID of the work agent handling it (always written).
    #[serde(default, rename = "agentID")]
    pub agent_id: String,

    /// Name of the ManifestWork on the hub.
    pub manifest_work_name: String,
}
default_if_absent!(AppliedManifestWorkSpec);

/// Observed state of an AppliedManifestWork.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedManifestWorkStatus {
    /// Objects applied and not yet removed, sorted by group, version, resource, namespace, name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied_resources: Vec<AppliedManifestResourceMeta>,

    /// When eviction started (work gone from the hub, or another hub); cleared if it returns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_start_time: Option<Time>,
}

/// An applied object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub struct AppliedManifestResourceMeta {
    /// API group; `""` for the core group.
    #[serde(default)]
    pub group: String,

    /// Resource (plural) name.
    pub resource: String,

    /// Object name.
    pub name: String,

    /// Object namespace; `""` for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,

    /// API version.
    pub version: String,

    /// UID of the object, set once its deletion was requested.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}
