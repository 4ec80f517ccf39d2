//! Names, labels, Secret keys, condition types and reasons of the managed-serviceaccount add-on,
//! with OCM's exact strings.
//!
//! What OCM's agent does with a ManagedServiceAccount `<n>` in cluster namespace `<c>` of the hub:
//!
//! - it creates ServiceAccount `<n>` in its own namespace on the managed cluster, labelled
//!   [`IS_MANAGED_SERVICE_ACCOUNT_LABEL`]` = "true"`, and deletes it (only if so labelled) once
//!   the ManagedServiceAccount is gone;
//! - it requests a token for it with `expirationSeconds` = `spec.rotation.validity`, and writes
//!   an `Opaque` Secret `<n>` in `<c>` on the hub with keys [`TOKEN_SECRET_TOKEN_KEY`] and
//!   [`TOKEN_SECRET_CA_KEY`] (the managed cluster's CA), the same label, and an owner reference
//!   (`authentication.open-cluster-management.io/v1beta1`, not controller) to the
//!   ManagedServiceAccount;
//! - it sets `status.tokenSecretRef` (`name` = `<n>`, `lastRefreshTimestamp`),
//!   `status.expirationTimestamp` (the token's, which a distribution may shorten) and the
//!   conditions in [`condition`];
//! - it requests a new token once less than a fifth of the token's lifetime is left, counted
//!   from `lastRefreshTimestamp` to `expirationTimestamp` (or the token no longer authenticates,
//!   or its subject is not the ServiceAccount), whatever `spec.rotation.enabled` says.

/// Name of the add-on (ClusterManagementAddOn, ManagedClusterAddOns, the agent's Lease).
pub const ADDON_NAME: &str = "managed-serviceaccount";
/// Agent name in the add-on's default registration subject.
pub const AGENT_NAME: &str = "addon-agent";
/// Hub group of every cluster's managed-serviceaccount agent.
pub const HUB_ADDON_USER_GROUP: &str = "system:open-cluster-management:addon:managed-serviceaccount";

/// Label `"true"` on the ServiceAccounts (managed cluster) and token Secrets (hub) the agent
/// owns; the agent ignores and never deletes objects without it.
pub const IS_MANAGED_SERVICE_ACCOUNT_LABEL: &str =
    "authentication.open-cluster-management.io/is-managed-serviceaccount";
/// Value of [`IS_MANAGED_SERVICE_ACCOUNT_LABEL`].
pub const IS_MANAGED_SERVICE_ACCOUNT_VALUE: &str = "true";
/// Label naming a ManagedServiceAccount's namespace; defined by OCM, not set by its agent.
pub const MANAGED_SERVICE_ACCOUNT_NAMESPACE_LABEL: &str =
    "authentication.open-cluster-management.io/managed-serviceaccount-namespace";
/// Label naming a ManagedServiceAccount; defined by OCM, not set by its agent.
pub const MANAGED_SERVICE_ACCOUNT_NAME_LABEL: &str =
    "authentication.open-cluster-management.io/managed-serviceaccount-name";

/// Key of the token Secret holding the ServiceAccount token (`corev1.ServiceAccountTokenKey`).
pub const TOKEN_SECRET_TOKEN_KEY: &str = "token";
/// Key of the token Secret holding the managed cluster's CA bundle
/// (`corev1.ServiceAccountRootCAKey`).
pub const TOKEN_SECRET_CA_KEY: &str = "ca.crt";
/// Type of the token Secret.
pub const TOKEN_SECRET_TYPE: &str = "Opaque";

/// CRD default of `spec.rotation.validity` (360 days).
pub const DEFAULT_ROTATION_VALIDITY: &str = "8640h0m0s";
/// CRD default of `spec.rotation.enabled`; deprecated in v1beta1, where tokens are always rotated.
pub const DEFAULT_ROTATION_ENABLED: bool = true;

/// Install namespace that the project's Helm chart (hub deploy mode `Deployment`) and samples give
/// the add-on's ManagedClusterAddOn. The ServiceAccounts live in whatever namespace the agent runs
/// in; installed by the chart's placement, that is the add-on framework's default
/// (`open-cluster-management-agent-addon`).
pub const CHART_INSTALL_NAMESPACE: &str = "open-cluster-management-managed-serviceaccount";

/// Feature gate of the add-on's manager and agent (off by default) under which
/// `spec.ttlSecondsAfterCreation` deletes the ManagedServiceAccount; without it the field is
/// ignored.
pub const FEATURE_EPHEMERAL_IDENTITY: &str = "EphemeralIdentity";
/// Feature gate of the add-on's manager (off by default) syncing token Secrets to ClusterProfile
/// namespaces.
pub const FEATURE_CLUSTER_PROFILE: &str = "ClusterProfile";

/// `ProjectionType` values OCM's API defines; no field of ManagedServiceAccount uses them.
pub mod projection {
    /// No projection.
    pub const NONE: &str = "None";
    /// Projection into a Secret.
    pub const SECRET: &str = "Secret";
}

/// Condition types and reasons of ManagedServiceAccount.
pub mod condition {
    /// The token Secret exists on the hub.
    pub const SECRET_CREATED: &str = "SecretCreated";
    /// The agent reported a valid token into the Secret.
    pub const TOKEN_REPORTED: &str = "TokenReported";

    /// `SecretCreated` True.
    pub const REASON_SECRET_CREATED: &str = "SecretCreated";
    /// `TokenReported` True.
    pub const REASON_TOKEN_REPORTED: &str = "TokenReported";
    /// `TokenReported` False; the message is the error.
    pub const REASON_TOKEN_REPORT_FAILED: &str = "TokenReportFailed";
}
