//! Labels, annotations, finalizers, taints, condition types and reasons of the cluster group,
//! with OCM's exact strings.

/// Label on a cluster namespace, CSRs and leases naming the managed cluster they belong to.
pub const CLUSTER_NAME_LABEL: &str = "open-cluster-management.io/cluster-name";
/// Label putting a ManagedCluster into a ManagedClusterSet (exclusive selector).
pub const CLUSTER_SET_LABEL: &str = "cluster.open-cluster-management.io/clusterset";
/// Label that keeps a ClusterClaim on the managed cluster (not reported to the hub).
pub const SPOKE_ONLY_LABEL: &str = "open-cluster-management.io/spoke-only";
/// Prefix of the per-add-on feature labels on a ManagedCluster: `<prefix><addon>`.
pub const ADDON_FEATURE_LABEL_PREFIX: &str = "feature.open-cluster-management.io/addon-";
/// Value of an add-on feature label when the add-on is available.
pub const ADDON_FEATURE_AVAILABLE: &str = "available";
/// Value of an add-on feature label when the add-on is unhealthy.
pub const ADDON_FEATURE_UNHEALTHY: &str = "unhealthy";
/// Value of an add-on feature label when the add-on's health is unknown.
pub const ADDON_FEATURE_UNREACHABLE: &str = "unreachable";

/// Annotation on a ManagedCluster holding image mirrors as JSON `{"registries":[{"source","mirror"}]}`.
pub const IMAGE_REGISTRIES_ANNOTATION: &str = "open-cluster-management.io/image-registries";
/// Annotation (0..100) ordering the clean-up of resources in a deleted cluster's namespace;
/// lower goes first, missing or invalid counts as 0.
pub const CLEANUP_PRIORITY_ANNOTATION: &str = "open-cluster-management.io/cleanup-priority";
/// Internal annotation recording when a cluster was auto-accepted.
pub const AUTOMATICALLY_ACCEPTED_ON_ANNOTATION: &str = "open-cluster-management.io/automatically-accepted-on";
/// Annotation on the `default`/`global` ManagedClusterSets; `"false"` stops the hub reverting
/// their selectors.
pub const CLUSTER_SET_AUTOUPDATE_ANNOTATION: &str = "cluster.open-cluster-management.io/autoupdate";
/// Annotation `"true"` on a Placement that stops the scheduler from scheduling it.
pub const PLACEMENT_DISABLE_ANNOTATION: &str =
    "cluster.open-cluster-management.io/experimental-scheduling-disable";

/// Finalizer the hub puts on a ManagedCluster (and its namespace) to clean up RBAC.
pub const API_RESOURCE_CLEANUP_FINALIZER: &str = "cluster.open-cluster-management.io/api-resource-cleanup";
/// Finalizer that deletes add-ons and works in the cluster namespace before the cluster goes.
pub const RESOURCE_CLEANUP_FINALIZER: &str = "cluster.open-cluster-management.io/resource-cleanup";

/// Taint the hub sets while a cluster's `ManagedClusterConditionAvailable` is `False`.
pub const TAINT_UNAVAILABLE: &str = "cluster.open-cluster-management.io/unavailable";
/// Taint the hub sets while a cluster's `ManagedClusterConditionAvailable` is missing or `Unknown`.
pub const TAINT_UNREACHABLE: &str = "cluster.open-cluster-management.io/unreachable";

/// Name of the cluster set the hub creates with the exclusive label selector.
pub const DEFAULT_CLUSTER_SET: &str = "default";
/// Name of the cluster set the hub creates selecting every cluster.
pub const GLOBAL_CLUSTER_SET: &str = "global";

/// ClusterClaim names the registration agent reports first, in this order.
pub const RESERVED_CLUSTER_CLAIM_NAMES: [&str; 4] = [
    "id.k8s.io",
    "kubeversion.open-cluster-management.io",
    "platform.open-cluster-management.io",
    "product.open-cluster-management.io",
];
/// Most custom (non-reserved) claims a ManagedCluster status carries.
pub const MAX_CUSTOM_CLUSTER_CLAIMS: usize = 20;

/// Label on a PlacementDecision naming its Placement.
pub const PLACEMENT_LABEL: &str = "cluster.open-cluster-management.io/placement";
/// Label on a PlacementDecision naming its decision group (`""` for the rest group).
pub const DECISION_GROUP_NAME_LABEL: &str = "cluster.open-cluster-management.io/decision-group-name";
/// Label on a PlacementDecision with its decision group index (from `"0"`).
pub const DECISION_GROUP_INDEX_LABEL: &str = "cluster.open-cluster-management.io/decision-group-index";
/// Most decisions one PlacementDecision holds.
pub const MAX_DECISIONS_PER_PLACEMENT_DECISION: usize = 100;

/// Condition types and reasons of ManagedCluster.
pub mod managed_cluster {
    /// The hub admin accepted the cluster (`spec.hubAcceptsClient`).
    pub const CONDITION_HUB_ACCEPTED: &str = "HubAcceptedManagedCluster";
    /// Defined by OCM but never set.
    pub const CONDITION_HUB_DENIED: &str = "HubDeniedManagedCluster";
    /// The agent has joined the hub.
    pub const CONDITION_JOINED: &str = "ManagedClusterJoined";
    /// The cluster's kube-apiserver is healthy and its lease is fresh.
    pub const CONDITION_AVAILABLE: &str = "ManagedClusterConditionAvailable";
    /// The hub's and the agent's clocks agree.
    pub const CONDITION_CLOCK_SYNCED: &str = "ManagedClusterConditionClockSynced";
    /// The cluster is being deleted.
    pub const CONDITION_DELETING: &str = "Deleting";
    /// Set by the agent on client certificate rotation.
    pub const CONDITION_CLUSTER_CERTIFICATE_ROTATED: &str = "ClusterCertificateRotated";

    /// `HubAcceptedManagedCluster` True.
    pub const REASON_HUB_CLUSTER_ADMIN_ACCEPTED: &str = "HubClusterAdminAccepted";
    /// `HubAcceptedManagedCluster` False after `hubAcceptsClient` went back to false.
    pub const REASON_HUB_CLUSTER_ADMIN_DENIED: &str = "HubClusterAdminDenied";
    /// `HubAcceptedManagedCluster` False on an error.
    pub const REASON_ERROR: &str = "Error";
    /// `ManagedClusterJoined` True.
    pub const REASON_JOINED: &str = "ManagedClusterJoined";
    /// `ManagedClusterConditionAvailable` True.
    pub const REASON_AVAILABLE: &str = "ManagedClusterAvailable";
    /// `ManagedClusterConditionAvailable` False: `/livez` failing.
    pub const REASON_KUBE_APISERVER_UNAVAILABLE: &str = "ManagedClusterKubeAPIServerUnavailable";
    /// `ManagedClusterConditionAvailable` Unknown: the lease expired.
    pub const REASON_LEASE_UPDATE_STOPPED: &str = "ManagedClusterLeaseUpdateStopped";
    /// `ManagedClusterConditionClockSynced` True.
    pub const REASON_CLOCK_SYNCED: &str = "ManagedClusterClockSynced";
    /// `ManagedClusterConditionClockSynced` False.
    pub const REASON_CLOCK_OUT_OF_SYNC: &str = "ManagedClusterClockOutOfSync";
    /// `ClusterCertificateRotated` True.
    pub const REASON_CLIENT_CERTIFICATE_UPDATED: &str = "ClientCertificateUpdated";
    /// `ClusterCertificateRotated` False.
    pub const REASON_CLIENT_CERTIFICATE_UPDATE_FAILED: &str = "ClientCertificateUpdateFailed";
    /// `Deleting` False: resources remain in the cluster namespace.
    pub const REASON_RESOURCE_REMAINING: &str = "ResourceRemaining";
    /// `Deleting` True: nothing is left in the cluster namespace.
    pub const REASON_NO_RESOURCE: &str = "NoResource";
    /// `Deleting` False: clean-up failed.
    pub const REASON_DELETING_ERROR: &str = "DeletingError";
}

/// Condition types and reasons of ManagedClusterSet.
pub mod managed_cluster_set {
    /// The set selects no cluster.
    pub const CONDITION_EMPTY: &str = "ClusterSetEmpty";
    /// `ClusterSetEmpty` True.
    pub const REASON_NO_CLUSTER_MATCHED: &str = "NoClusterMatched";
    /// `ClusterSetEmpty` False, message `"<n> ManagedClusters selected"`.
    pub const REASON_CLUSTERS_SELECTED: &str = "ClustersSelected";
}

/// Condition types and reasons of ManagedClusterSetBinding.
pub mod managed_cluster_set_binding {
    /// The bound set exists.
    pub const CONDITION_BOUND: &str = "Bound";
    /// `Bound` True.
    pub const REASON_CLUSTER_SET_BOUND: &str = "ClusterSetBound";
    /// `Bound` False.
    pub const REASON_CLUSTER_SET_NOT_FOUND: &str = "ClusterSetNotFound";
}

/// Condition types and reasons of Placement.
pub mod placement {
    /// Every wanted decision is scheduled.
    pub const CONDITION_SATISFIED: &str = "PlacementSatisfied";
    /// The placement's configuration is wrong.
    pub const CONDITION_MISCONFIGURED: &str = "PlacementMisconfigured";

    /// `PlacementSatisfied` False: no binding in the placement namespace.
    pub const REASON_NO_MANAGED_CLUSTER_SET_BINDINGS: &str = "NoManagedClusterSetBindings";
    /// `PlacementSatisfied` False: `spec.clusterSets` and the bound sets do not intersect.
    pub const REASON_NO_INTERSECTION: &str = "NoIntersection";
    /// `PlacementSatisfied` False: every candidate set is empty.
    pub const REASON_ALL_MANAGED_CLUSTER_SETS_EMPTY: &str = "AllManagedClusterSetsEmpty";
    /// `PlacementSatisfied` False: fewer clusters than wanted, or a scheduling error.
    pub const REASON_NOT_ALL_DECISIONS_SCHEDULED: &str = "NotAllDecisionsScheduled";
    /// `PlacementSatisfied` False: no cluster matches the predicates.
    pub const REASON_NO_MANAGED_CLUSTER_MATCHED: &str = "NoManagedClusterMatched";
    /// `PlacementSatisfied` True.
    pub const REASON_ALL_DECISIONS_SCHEDULED: &str = "AllDecisionsScheduled";
    /// `PlacementMisconfigured` True, message `"<plugin>:<msg>"`.
    pub const REASON_MISCONFIGURED: &str = "Misconfigured";
    /// `PlacementMisconfigured` False (OCM's spelling).
    pub const REASON_SUCCEEDCONFIGURED: &str = "Succeedconfigured";
}
