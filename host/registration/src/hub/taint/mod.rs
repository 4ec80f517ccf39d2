//! The taint controller (OCM's taint controller): keeps the `unreachable` and `unavailable`
//! taints of every ManagedCluster in step with its `ManagedClusterConditionAvailable`, so
//! placements stop selecting clusters the hub cannot see or that report themselves down.
//!
//! ```text
//!  ManagedCluster ─▶ reconcile ─▶ desired taints (flotilla_core::registration::hub::taints)
//!                              ─▶ JSON patch of spec.taints guarded by resourceVersion
//! ```
//!
//! The taints are a function of the object alone, so every change arrives as an event; the
//! resync only repairs missed ones.

mod reconcile;

use flotilla_api::cluster::{consts::managed_cluster::CONDITION_AVAILABLE, v1::ManagedCluster};
use flotilla_core::conditions;
use flotilla_kube::feed::hash_of;

pub(super) use reconcile::reconcile;

/// What of a cluster the taint controller reads.
pub(super) fn inputs(cluster: &ManagedCluster) -> Option<u64> {
    let conditions = cluster.status.as_ref().and_then(|s| s.conditions.as_deref());
    hash_of(&(
        cluster.metadata.deletion_timestamp.is_some(),
        &cluster.spec.taints,
        conditions::find(conditions.unwrap_or_default(), CONDITION_AVAILABLE),
    ))
}
