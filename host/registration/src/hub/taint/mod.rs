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

pub(super) use reconcile::reconcile;
