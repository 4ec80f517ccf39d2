//! ManifestWork, both halves of OCM's pull model:
//!
//! ```text
//!  hub (cluster namespace <cluster>)              managed cluster
//!  ┌──────────────────────────────┐  watch (hub  ┌──────────────────────────────────────┐
//!  │ ManifestWork  ───────────────┼─ credential)▶│ work agent ──apply (kind order)──▶ objects
//!  │   status ◀── conditions, ────┼──────────────│   AppliedManifestWork <hubHash>-<work>│
//!  │             feedback         │              │   (applied resources, finalizer)      │
//!  └──────────────────────────────┘              └──────────────────────────────────────┘
//! ```
//!
//! [`agent`] is the work agent `flotilla klusterlet` runs; [`hub`] the hub's work controllers
//! (ManifestWorkReplicaSet); [`admission`] the hub's validation of ManifestWorks, enforced by
//! the apiserver itself (the size limit CEL cannot measure is `flotilla-webhook`'s).

#![deny(missing_docs)]

pub mod admission;
pub mod agent;
pub mod hub;
