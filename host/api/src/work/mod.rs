//! `work.open-cluster-management.io`: workloads for managed clusters.
//!
//! ```text
//! hub:      ManifestWorkReplicaSet (v1alpha1) ──placements──▶ ManifestWork (v1) per cluster namespace
//! managed:  work agent applies the manifests ──records──▶ AppliedManifestWork (v1, <hubHash>-<work>)
//! ```

pub mod consts;
pub mod v1;
pub mod v1alpha1;

/// The API group.
pub const GROUP: &str = "work.open-cluster-management.io";
