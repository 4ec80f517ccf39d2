//! Labels, annotations, finalizers, condition types and reasons of the add-on group, with OCM's
//! exact strings.

/// Namespace add-on agents are installed into by default.
pub const DEFAULT_INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
/// v1beta1 `defaultConfigs[].name` standing for a v1alpha1 supported config without a default.
pub const RESERVED_NO_DEFAULT_CONFIG_NAME: &str = "__reserved_no_default__";
/// Signer of kube-apiserver client certificates (registration type `kubeClient`).
pub const KUBE_APISERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";

/// Label naming the add-on of hub objects (CSRs, works, role bindings).
pub const ADDON_NAME_LABEL: &str = "open-cluster-management.io/addon-name";
/// Label naming the ManagedClusterAddOn namespace of hosted-mode works.
pub const ADDON_NAMESPACE_LABEL: &str = "open-cluster-management.io/addon-namespace";
/// Label naming the AddOnTemplate of objects rendered from it.
pub const ADDON_TEMPLATE_NAME_LABEL: &str = "open-cluster-management.io/addon-template-name";

/// Annotation on a ClusterManagementAddOn saying who manages the add-on's lifecycle.
pub const LIFECYCLE_ANNOTATION: &str = "addon.open-cluster-management.io/lifecycle";
/// [`LIFECYCLE_ANNOTATION`] value: the hub's generic add-on manager.
pub const LIFECYCLE_ADDON_MANAGER: &str = "addon-manager";
/// [`LIFECYCLE_ANNOTATION`] value: the add-on manages itself.
pub const LIFECYCLE_SELF: &str = "self";
/// Annotation on a ManagedClusterAddOn disabling automatic installation.
pub const DISABLE_AUTOMATIC_INSTALLATION_ANNOTATION: &str =
    "addon.open-cluster-management.io/disable-automatic-installation";
/// Annotation on a ManagedClusterAddOn naming the hosting cluster (hosted mode).
pub const HOSTING_CLUSTER_NAME_ANNOTATION: &str = "addon.open-cluster-management.io/hosting-cluster-name";
/// Annotation on a v1beta1 ManagedClusterAddOn keeping v1alpha1's `spec.installNamespace`.
pub const V1ALPHA1_INSTALL_NAMESPACE_ANNOTATION: &str =
    "addon.open-cluster-management.io/v1alpha1-install-namespace";
/// Annotation on a hook manifest (Job or Pod) run before the add-on is deleted.
pub const ADDON_PRE_DELETE_ANNOTATION: &str = "addon.open-cluster-management.io/addon-pre-delete";
/// Old form of [`ADDON_PRE_DELETE_ANNOTATION`].
pub const ADDON_PRE_DELETE_ANNOTATION_OLD: &str = "open-cluster-management.io/addon-pre-delete";
/// Annotation on a manifest that is orphaned when the add-on is removed.
pub const DELETION_ORPHAN_ANNOTATION: &str = "addon.open-cluster-management.io/deletion-orphan";
/// Annotation on a manifest saying where it goes in hosted mode.
pub const HOSTED_MANIFEST_LOCATION_ANNOTATION: &str =
    "addon.open-cluster-management.io/hosted-manifest-location";
/// [`HOSTED_MANIFEST_LOCATION_ANNOTATION`] value: the managed cluster (default).
pub const HOSTED_MANIFEST_LOCATION_MANAGED: &str = "managed";
/// [`HOSTED_MANIFEST_LOCATION_ANNOTATION`] value: the hosting cluster.
pub const HOSTED_MANIFEST_LOCATION_HOSTING: &str = "hosting";
/// [`HOSTED_MANIFEST_LOCATION_ANNOTATION`] value: nowhere in hosted mode.
pub const HOSTED_MANIFEST_LOCATION_NONE: &str = "none";

/// Finalizer while pre-delete hooks must run.
pub const ADDON_PRE_DELETE_FINALIZER: &str = "addon.open-cluster-management.io/addon-pre-delete";
/// Finalizer while pre-delete hooks must run on the hosting cluster.
pub const HOSTING_ADDON_PRE_DELETE_FINALIZER: &str =
    "addon.open-cluster-management.io/hosting-addon-pre-delete";
/// Finalizer while manifests remain on the hosting cluster.
pub const HOSTING_MANIFESTS_CLEANUP_FINALIZER: &str =
    "addon.open-cluster-management.io/hosting-manifests-cleanup";
/// Old form of [`ADDON_PRE_DELETE_FINALIZER`].
pub const ADDON_PRE_DELETE_FINALIZER_OLD: &str = "cluster.open-cluster-management.io/addon-pre-delete";
/// Old form of [`HOSTING_ADDON_PRE_DELETE_FINALIZER`].
pub const HOSTING_ADDON_PRE_DELETE_FINALIZER_OLD: &str =
    "cluster.open-cluster-management.io/hosting-addon-pre-delete";
/// Old form of [`HOSTING_MANIFESTS_CLEANUP_FINALIZER`].
pub const HOSTING_MANIFESTS_CLEANUP_FINALIZER_OLD: &str =
    "cluster.open-cluster-management.io/hosting-manifests-cleanup";

/// Condition types and reasons of a ManagedClusterAddOn.
pub mod managed_cluster_addon {
    /// The agent is healthy.
    pub const CONDITION_AVAILABLE: &str = "Available";
    /// The agent provides degraded service.
    pub const CONDITION_DEGRADED: &str = "Degraded";
    /// The agent is being configured.
    pub const CONDITION_PROGRESSING: &str = "Progressing";
    /// The desired configs are recorded in `configReferences`.
    pub const CONDITION_CONFIGURED: &str = "Configured";
    /// The add-on's deploy works are applied.
    pub const CONDITION_MANIFEST_APPLIED: &str = "ManifestApplied";
    /// The add-on's hosted deploy works are applied.
    pub const CONDITION_HOSTING_MANIFEST_APPLIED: &str = "HostingManifestApplied";
    /// The pre-delete hooks completed.
    pub const CONDITION_HOOK_MANIFEST_COMPLETED: &str = "HookManifestCompleted";
    /// The hosting cluster is valid (hosted mode).
    pub const CONDITION_HOSTING_CLUSTER_VALIDITY: &str = "HostingClusterValidity";
    /// The agent's hub permissions are set up.
    pub const CONDITION_REGISTRATION_APPLIED: &str = "RegistrationApplied";
    /// Set by the registration agent when it rotates the add-on's certificate.
    pub const CONDITION_CLUSTER_CERTIFICATE_ROTATED: &str = "ClusterCertificateRotated";

    /// `Available` True: lease renewed.
    pub const REASON_LEASE_UPDATED: &str = "ManagedClusterAddOnLeaseUpdated";
    /// `Available` False: lease older than its grace period.
    pub const REASON_LEASE_UPDATE_STOPPED: &str = "ManagedClusterAddOnLeaseUpdateStopped";
    /// `Available` Unknown: no lease.
    pub const REASON_LEASE_NOT_FOUND: &str = "ManagedClusterAddOnLeaseNotFound";
    /// `Available` Unknown: no deploy work.
    pub const REASON_WORK_NOT_FOUND: &str = "WorkNotFound";
    /// `Available` Unknown/False: the deploy work failed to apply.
    pub const REASON_WORK_APPLY_FAILED: &str = "WorkApplyFailed";
    /// `Available` Unknown/False: the deploy work is not applied.
    pub const REASON_WORK_NOT_APPLIED: &str = "WorkNotApplied";
    /// `Available` True: work prober without probe fields, work applied.
    pub const REASON_WORK_APPLIED: &str = "WorkApplied";
    /// `Available` Unknown: no probe result yet.
    pub const REASON_NO_PROBE_RESULT: &str = "NoProbeResult";
    /// `Available` False: the probe says unavailable.
    pub const REASON_PROBE_UNAVAILABLE: &str = "ProbeUnavailable";
    /// `Available` True: the probe says available.
    pub const REASON_PROBE_AVAILABLE: &str = "ProbeAvailable";

    /// `ManifestApplied` True.
    pub const REASON_ADDON_MANIFEST_APPLIED: &str = "AddonManifestApplied";
    /// `ManifestApplied` False: the work's `Applied` is False.
    pub const REASON_ADDON_MANIFEST_APPLIED_FAILED: &str = "AddonManifestAppliedFailed";
    /// `ManifestApplied` False: rendering or applying the work failed.
    pub const REASON_MANIFEST_WORK_APPLY_FAILED: &str = "ManifestWorkApplyFailed";

    /// `HookManifestCompleted` True.
    pub const REASON_HOOK_MANIFEST_IS_COMPLETED: &str = "HookManifestIsCompleted";
    /// `HookManifestCompleted` False.
    pub const REASON_HOOK_MANIFEST_IS_NOT_COMPLETED: &str = "HookManifestIsNotCompleted";

    /// `HostingClusterValidity` True.
    pub const REASON_HOSTING_CLUSTER_VALID: &str = "HostingClusterValid";
    /// `HostingClusterValidity` False.
    pub const REASON_HOSTING_CLUSTER_INVALID: &str = "HostingClusterInvalid";

    /// `Progressing` True.
    pub const REASON_PROGRESSING: &str = "Progressing";
    /// `Progressing` False: configs applied.
    pub const REASON_COMPLETED: &str = "Completed";
    /// `Progressing` False: applying configs failed.
    pub const REASON_FAILED: &str = "Failed";
    /// `Progressing`: waiting for the canary placement.
    pub const REASON_WAITING_FOR_CANARY: &str = "WaitingForCanary";
    /// `Progressing` False: a config type in the spec is not supported.
    pub const REASON_CONFIGURATION_UNSUPPORTED: &str = "ConfigurationUnsupported";
    /// `Progressing` False: no `ManifestApplied` yet.
    pub const REASON_WAITING_FOR_MANIFEST_APPLIED: &str = "WaitingForManifestApplied";
    /// `Progressing` False: no `HostingManifestApplied` yet.
    pub const REASON_WAITING_FOR_HOSTING_MANIFEST_APPLIED: &str = "WaitingForHostingManifestApplied";

    /// `Configured` True.
    pub const REASON_CONFIGURATIONS_CONFIGURED: &str = "ConfigurationsConfigured";
    /// `Configured` False.
    pub const REASON_CONFIGURATIONS_NOT_CONFIGURED: &str = "ConfigurationsNotConfigured";

    /// `RegistrationApplied` True: no registration to set up.
    pub const REASON_NIL_REGISTRATION: &str = "NilRegistration";
    /// `RegistrationApplied` True.
    pub const REASON_SET_PERMISSION_APPLIED: &str = "SetPermissionApplied";
    /// `RegistrationApplied` False.
    pub const REASON_SET_PERMISSION_FAILED: &str = "SetPermissionFailed";
    /// `RegistrationApplied` False: permission config not ready yet.
    pub const REASON_PERMISSION_CONFIG_PENDING: &str = "PermissionConfigPending";

    /// CSR approval reason of the hub's approver.
    pub const REASON_AUTO_APPROVED_BY_HUB: &str = "AutoApprovedByHubCSRApprovingController";
}

/// Condition types and reasons of a ClusterManagementAddOn's install progressions.
pub mod cluster_management_addon {
    /// The placement's rollout is in progress.
    pub const CONDITION_PROGRESSING: &str = "Progressing";
    /// `Progressing` True.
    pub const REASON_PROGRESSING: &str = "Progressing";
    /// `Progressing` False: every configured add-on is done.
    pub const REASON_COMPLETED: &str = "Completed";
}
