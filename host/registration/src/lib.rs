//! Cluster registration, both halves of OCM's pull model:
//!
//! ```text
//!  managed cluster                                   hub
//!  ┌──────────────────────────┐   bootstrap identity   ┌──────────────────────────────┐
//!  │ agent (klusterlet)        │ ── ManagedCluster ───▶ │ hub controllers               │
//!  │  bootstrap-hub-kubeconfig │ ── CSR (cluster label)▶│  accept: ns, RBAC, lease      │
//!  │  hub-kubeconfig-secret ◀──┼── signed certificate ──│  csr: renewal auto-approval   │
//!  │  lease, status, claims ───┼──▶ own namespace only  │  lease: Available/taints      │
//!  └──────────────────────────┘                         │  clustersets, deletion        │
//!                                                       └──────────────────────────────┘
//! ```
//!
//! [`hub`] holds the hub's controllers, [`agent`] the registration agent that runs in
//! `flotilla klusterlet`; [`names`] the OCM names both sides must agree on.

#![deny(missing_docs)]

pub mod admission;
pub mod agent;
pub mod hub;
pub mod names;
