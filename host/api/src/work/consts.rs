//! Labels, annotations, finalizers, condition types and reasons of the work group, with OCM's
//! exact strings.

/// Finalizer on a ManifestWork (and on a cluster namespace while works remain): the work agent
/// removes it once the AppliedManifestWork and the applied objects are gone.
pub const MANIFEST_WORK_FINALIZER: &str = "cluster.open-cluster-management.io/manifest-work-cleanup";
/// Finalizer on an AppliedManifestWork: removed once its applied objects are gone.
pub const APPLIED_MANIFEST_WORK_FINALIZER: &str =
    "cluster.open-cluster-management.io/applied-manifest-work-cleanup";
/// Finalizer on a ManifestWorkReplicaSet.
pub const MANIFEST_WORK_REPLICA_SET_FINALIZER: &str = "work.open-cluster-management.io/manifest-work-cleanup";

/// Annotation on a ManifestWork: JSON map of `"<resource>[.<group>]/<ns>/<name>"` to the
/// config spec hash the work was rendered from.
pub const CONFIG_SPEC_HASH_ANNOTATION: &str = "open-cluster-management.io/config-spec-hash";
/// Annotation on applied objects with the hash of their manifest.
pub const OBJECT_HASH_ANNOTATION: &str = "open-cluster-management.io/object-hash";

/// Label on a generated ManifestWork: `<namespace>.<name>` of its ManifestWorkReplicaSet.
pub const MANIFEST_WORK_REPLICA_SET_LABEL: &str = "work.open-cluster-management.io/manifestworkreplicaset";
/// Label on a generated ManifestWork: the placement that selected its cluster.
pub const PLACEMENT_NAME_LABEL: &str = "work.open-cluster-management.io/placementname";

/// Default (and required prefix of any) server-side-apply field manager of the work agent.
pub const DEFAULT_FIELD_MANAGER: &str = "work-agent";
/// Largest total size of a work's manifests, in bytes (500 KiB).
pub const MAX_MANIFESTS_SIZE: usize = 500 * 1024;
/// Largest `jsonRaw` feedback value, in bytes.
pub const MAX_JSON_RAW_LENGTH: usize = 1024;

/// Condition types and reasons of a ManifestWork and of each manifest in its status.
pub mod manifest_work {
    /// The workload (or manifest) is applied.
    pub const CONDITION_APPLIED: &str = "Applied";
    /// The workload (or manifest) exists on the managed cluster.
    pub const CONDITION_AVAILABLE: &str = "Available";
    /// The workload is being applied; `False` at the current generation means done.
    pub const CONDITION_PROGRESSING: &str = "Progressing";
    /// The workload does not reach its desired state.
    pub const CONDITION_DEGRADED: &str = "Degraded";
    /// The workload has completed; the agent no longer touches the work.
    pub const CONDITION_COMPLETE: &str = "Complete";
    /// The work is being deleted.
    pub const CONDITION_DELETING: &str = "Deleting";
    /// Status feedback of a manifest was synced.
    pub const CONDITION_STATUS_FEEDBACK_SYNCED: &str = "StatusFeedbackSynced";

    /// Work `Applied` True.
    pub const REASON_APPLIED_MANIFEST_WORK_COMPLETE: &str = "AppliedManifestWorkComplete";
    /// Work `Applied` False.
    pub const REASON_APPLIED_MANIFEST_WORK_FAILED: &str = "AppliedManifestWorkFailed";
    /// Work `Available` True.
    pub const REASON_RESOURCES_AVAILABLE: &str = "ResourcesAvailable";
    /// Work `Available` False.
    pub const REASON_RESOURCES_NOT_AVAILABLE: &str = "ResourcesNotAvailable";
    /// Work `Available` Unknown.
    pub const REASON_RESOURCES_STATUS_UNKNOWN: &str = "ResourcesStatusUnknown";
    /// Aggregate of a rule condition over the manifests.
    pub const REASON_CONDITION_RULES_AGGREGATED: &str = "ConditionRulesAggregated";
    /// `Deleting` True.
    pub const REASON_WORK_DELETING: &str = "WorkDeleting";
    /// Work `Complete`: every completable manifest completed.
    pub const REASON_MANIFESTS_COMPLETE: &str = "ManifestsComplete";
    /// `Progressing` True.
    pub const REASON_APPLYING: &str = "Applying";
    /// `Progressing` False: applied and available.
    pub const REASON_COMPLETED: &str = "Completed";
    /// `Progressing` False: apply failed.
    pub const REASON_FAILED: &str = "Failed";

    /// Manifest `Applied` True.
    pub const REASON_APPLIED_MANIFEST_COMPLETE: &str = "AppliedManifestComplete";
    /// Manifest `Applied` False.
    pub const REASON_APPLIED_MANIFEST_FAILED: &str = "AppliedManifestFailed";
    /// Manifest `Applied` False: a server-side-apply ignore field is invalid.
    pub const REASON_APPLIED_MANIFEST_SSA_IGNORE_FIELD_ERROR: &str = "AppliedManifestSSAIgnoreFieldError";
    /// Manifest `Available` True.
    pub const REASON_RESOURCE_AVAILABLE: &str = "ResourceAvailable";
    /// Manifest `Available` False.
    pub const REASON_RESOURCE_NOT_AVAILABLE: &str = "ResourceNotAvailable";
    /// Manifest `Available` Unknown: the object could not be read.
    pub const REASON_FETCHING_RESOURCE_FAILED: &str = "FetchingResourceFailed";
    /// Manifest `Available` Unknown: the manifest lacks group/version/kind/name.
    pub const REASON_INCOMPLETE_RESOURCE_META: &str = "IncompleteResourceMeta";
    /// `StatusFeedbackSynced` True.
    pub const REASON_STATUS_FEEDBACK_SYNCED: &str = "StatusFeedbackSynced";
    /// `StatusFeedbackSynced` True with no rule.
    pub const REASON_NO_STATUS_FEEDBACK_SYNCED: &str = "NoStatusFeedbackSynced";
    /// `StatusFeedbackSynced` False.
    pub const REASON_STATUS_FEEDBACK_SYNC_FAILED: &str = "StatusFeedbackSyncFailed";
    /// A condition rule was evaluated.
    pub const REASON_CONDITION_RULE_EVALUATED: &str = "ConditionRuleEvaluated";
    /// A condition rule is invalid.
    pub const REASON_CONDITION_RULE_INVALID: &str = "ConditionRuleInvalid";
    /// A condition rule's expression failed.
    pub const REASON_CONDITION_RULE_EXPRESSION_ERROR: &str = "ConditionRuleExpressionError";
    /// A condition rule failed for another reason.
    pub const REASON_CONDITION_RULE_INTERNAL_ERROR: &str = "ConditionRuleInternalError";
}

/// Condition types and reasons of a ManifestWorkReplicaSet.
pub mod manifest_work_replica_set {
    /// The placements and their decisions were found.
    pub const CONDITION_PLACEMENT_VERIFIED: &str = "PlacementVerified";
    /// The rollout over the placements is complete.
    pub const CONDITION_PLACEMENT_ROLLED_OUT: &str = "PlacementRolledOut";
    /// A ManifestWork exists for every cluster that should have one.
    pub const CONDITION_MANIFESTWORK_APPLIED: &str = "ManifestworkApplied";

    /// `PlacementVerified` True / `ManifestworkApplied` True.
    pub const REASON_AS_EXPECTED: &str = "AsExpected";
    /// `PlacementVerified` False: no PlacementDecision.
    pub const REASON_PLACEMENT_DECISION_NOT_FOUND: &str = "PlacementDecisionNotFound";
    /// `PlacementVerified` False: decisions are empty.
    pub const REASON_PLACEMENT_DECISION_EMPTY: &str = "PlacementDecisionEmpty";
    /// `PlacementVerified` False / `ManifestworkApplied` False.
    pub const REASON_NOT_AS_EXPECTED: &str = "NotAsExpected";
    /// `ManifestworkApplied` False: in progress.
    pub const REASON_PROCESSING: &str = "Processing";
    /// `ManifestworkApplied` False: a generated work name is invalid.
    pub const REASON_INVALID_MANIFEST_WORK_NAME: &str = "InvalidManifestWorkName";
    /// `PlacementRolledOut` False.
    pub const REASON_PROGRESSING: &str = "Progressing";
    /// `PlacementRolledOut` True.
    pub const REASON_COMPLETE: &str = "Complete";
}
