//! The trait an add-on implements: the five hooks of the contract, three with defaults.

use crate::types::{
    AddOn, AddonError, AddonOptions, Cluster, Csr, CsrDecision, FeedbackField, HealthResult, Manifest,
    ResolvedConfig,
};

/// An add-on's hub-side logic (OCM addon-framework's `AgentAddon`).
///
/// Hooks are associated functions: every call runs in a fresh instance, so there is no state to
/// keep between calls. Export the implementation with [`crate::export_addon!`].
///
/// ```
/// use flotilla_addon_sdk::{AddOn, Addon, AddonError, AddonOptions, Cluster, Manifest, ResolvedConfig};
///
/// struct Empty;
///
/// impl Addon for Empty {
///     fn describe() -> AddonOptions {
///         AddonOptions::default()
///     }
///
///     fn manifests(_: &Cluster, _: &AddOn, _: &[ResolvedConfig]) -> Result<Vec<Manifest>, AddonError> {
///         Ok(Vec::new())
///     }
/// }
///
/// flotilla_addon_sdk::export_addon!(Empty);
/// ```
pub trait Addon {
    /// Registrations, health mode, config types and default install namespace. Must be the same
    /// on every call; the host validates it at load and refuses the plugin if it breaks a rule.
    fn describe() -> AddonOptions;

    /// The objects to apply on `cluster`. Objects carry `apiVersion` and `kind`
    /// ([`crate::manifest::to_manifest`]) and usually live in `addon.install_namespace`.
    fn manifests(
        cluster: &Cluster,
        addon: &AddOn,
        configs: &[ResolvedConfig],
    ) -> Result<Vec<Manifest>, AddonError>;

    /// Whether to approve an agent's CSR. Default: OCM's `DefaultCSRApprover` rules against the
    /// registrations from [`Addon::describe`] ([`crate::csr::default_approve`]).
    fn approve_csr(cluster: &Cluster, addon: &AddOn, csr: &Csr) -> CsrDecision {
        crate::csr::default_approve(&Self::describe(), cluster, addon, csr)
    }

    /// Roles and RoleBindings the agent needs in the cluster namespace on the hub. Default: none.
    fn hub_permissions(cluster: &Cluster, addon: &AddOn) -> Result<Vec<Manifest>, AddonError> {
        let _ = (cluster, addon);
        Ok(Vec::new())
    }

    /// Health from probe feedback (health mode `customized`). Default: lease-mode behaviour,
    /// `unknown` with a message saying the lease decides ([`crate::health::lease_mode`]).
    fn probe_health(cluster: &Cluster, addon: &AddOn, fields: &[FeedbackField]) -> HealthResult {
        let _ = (cluster, addon, fields);
        crate::health::lease_mode()
    }
}
