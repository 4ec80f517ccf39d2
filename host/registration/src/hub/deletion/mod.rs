//! The deletion controller (OCM's GC controller with the ResourceCleanup feature): an accepted
//! cluster carries the finalizer `cluster.open-cluster-management.io/resource-cleanup`; when it
//! is deleted, the hub empties its namespace of add-ons and works, in order, before removing
//! the cluster's RBAC and letting it go. The namespace itself is kept, as in OCM.
//!
//! ```text
//!  ManagedCluster ─▶ reconcile ─▶ alive & accepted: add resource-cleanup
//!                              ─▶ deleting: MCAs ─▶ ManifestWorks (by cleanup-priority)
//!                                           ─▶ RBAC ─▶ finalizers off ─▶ gone
//! ```

mod reconcile;

use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_core::registration::hub::cleanup::FORCE_CLEANUP_ANNOTATION;
use flotilla_kube::feed::hash_of;

pub(super) use reconcile::reconcile;

/// What of a cluster the deletion controller reads: of its annotations, only the forced
/// clean-up.
pub(super) fn inputs(cluster: &ManagedCluster) -> Option<u64> {
    let metadata = &cluster.metadata;
    hash_of(&(
        &metadata.deletion_timestamp,
        &metadata.finalizers,
        metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(FORCE_CLEANUP_ANNOTATION)),
        cluster.spec.hub_accepts_client,
        cluster.status.as_ref().map(|s| &s.conditions),
    ))
}
