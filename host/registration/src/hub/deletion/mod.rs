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

pub(super) use reconcile::reconcile;
