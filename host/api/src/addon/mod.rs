//! `addon.open-cluster-management.io`: add-ons and their configuration.
//!
//! ```text
//! ClusterManagementAddOn (cluster) ──installStrategy/placements──▶ ManagedClusterAddOn (cluster ns)
//!        │ defaults                                                  │ configs override
//!        ▼                                                           ▼
//! AddOnDeploymentConfig / AddOnTemplate / any config kind ──specHash──▶ status.configReferences
//! ```
//!
//! v1alpha1 is the storage version; v1beta1 is served beside it (converted by a webhook).

pub mod consts;
pub mod conversion;
pub mod v1alpha1;
pub mod v1beta1;

/// The API group.
pub const GROUP: &str = "addon.open-cluster-management.io";
