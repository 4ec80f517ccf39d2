//! Pure rules of the hub side of registration, one module per decision the hub controllers
//! make. Each takes plain values (objects already read, the current time) and returns what
//! to write, so every rule is tested without a cluster:
//!
//! ```text
//!  acceptance  hubAcceptsClient + HubAcceptedManagedCluster ⇒ accept / revoke / nothing
//!  csr         renewal CSR ⇒ eligible for the access review, or why not
//!  lease       renewTime + 5 × leaseDurationSeconds ⇒ fresh until …, or expired
//!  taints      ManagedClusterConditionAvailable ⇒ unreachable / unavailable taints
//!  clusterset  set selector + cluster labels ⇒ members, ClusterSetEmpty, Bound
//!  cleanup     cleanup-priority annotations ⇒ the next batch to delete, Deleting
//! ```

pub mod acceptance;
pub mod cached;
pub mod cleanup;
pub mod clusterset;
pub mod csr;
pub mod lease;
pub mod taints;
