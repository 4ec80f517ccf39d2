//! `cluster.open-cluster-management.io`: clusters, cluster sets, claims, placement.
//!
//! ```text
//! ManagedCluster (v1) ──label clusterset──▶ ManagedClusterSet (v1beta2)
//!        ▲                                        │ bound into a namespace by
//!        │ status.clusterClaims ◀── ClusterClaim  ▼
//!        │    (v1alpha1, managed side)      ManagedClusterSetBinding (v1beta2)
//!        │                                        │ candidates for
//!   AddOnPlacementScore (v1alpha1, cluster ns)    ▼
//!        └──────────── scores ─────────────▶ Placement (v1beta1) ──▶ PlacementDecision (v1beta1)
//! ```

pub mod consts;
pub mod v1;
pub mod v1alpha1;
pub mod v1beta1;
pub mod v1beta2;

/// The API group.
pub const GROUP: &str = "cluster.open-cluster-management.io";
