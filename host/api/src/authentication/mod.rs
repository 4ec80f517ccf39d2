//! `authentication.open-cluster-management.io`: ManagedServiceAccount, the kind of OCM's
//! managed-serviceaccount add-on.
//!
//! ```text
//! hub, cluster namespace                       managed cluster
//! ManagedServiceAccount <n> ────agent────▶ ServiceAccount <n> in the agent's namespace
//!   │ status.tokenSecretRef.name              (label is-managed-serviceaccount: "true")
//!   ▼                                           │ TokenRequest, spec.rotation.validity
//! Secret <n> {token, ca.crt} ◀────token─────────┘
//!   (ownerReference: the ManagedServiceAccount)
//! ```
//!
//! v1beta1 is the storage version; v1alpha1 is served beside it (deprecated). Both versions
//! have the same schema, so OCM's CRD declares no conversion and the apiserver's `None`
//! strategy (only `apiVersion` changes) is exact; Flotilla installs it the same way.

pub mod consts;
pub mod v1alpha1;
pub mod v1beta1;

/// The API group.
pub const GROUP: &str = "authentication.open-cluster-management.io";
