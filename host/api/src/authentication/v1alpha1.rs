//! `authentication.open-cluster-management.io/v1alpha1` (served, deprecated): ManagedServiceAccount
//! with exactly the fields of v1beta1.
//!
//! The JSON of both versions is the same, so the CRD converts with strategy `None` (the
//! apiserver only rewrites `apiVersion`); the types below the root are re-exported from
//! [`super::v1beta1`].

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::v1beta1::{ManagedServiceAccountRotation, ManagedServiceAccountStatus, SecretRef};

/// Desired state of a ManagedServiceAccount.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "authentication.open-cluster-management.io",
    version = "v1alpha1",
    kind = "ManagedServiceAccount",
    doc = "A ServiceAccount on the managed cluster of this namespace, its token mirrored into a Secret of the same name here.",
    namespaced,
    status = "ManagedServiceAccountStatus",
    derive = "PartialEq",
    derive = "Default",
    storage = false,
    deprecated = "authentication.open-cluster-management.io/v1alpha1 ManagedServiceAccount is deprecated; use authentication.open-cluster-management.io/v1beta1 ManagedServiceAccount"
)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(rename = "ManagedServiceAccountSpec")]
pub struct ManagedServiceAccountSpec {
    /// How the token is requested and refreshed.
    pub rotation: ManagedServiceAccountRotation,

    /// Seconds after creation at which the ManagedServiceAccount is deleted, whatever its
    /// status; unset keeps it. Acts only with the add-on's `EphemeralIdentity` feature gate.
    /// Must be above 0.
    // OCM's Go docs describe 0 as "delete at once", but its schema (exclusive minimum 0)
    // rejects it; the schema is what clients meet, so it is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0, "exclusiveMinimum" = true))]
    pub ttl_seconds_after_creation: Option<i32>,
}
default_if_absent!(ManagedServiceAccountSpec);

impl From<super::v1beta1::ManagedServiceAccountSpec> for ManagedServiceAccountSpec {
    fn from(spec: super::v1beta1::ManagedServiceAccountSpec) -> Self {
        Self {
            rotation: spec.rotation,
            ttl_seconds_after_creation: spec.ttl_seconds_after_creation,
        }
    }
}

impl From<ManagedServiceAccountSpec> for super::v1beta1::ManagedServiceAccountSpec {
    fn from(spec: ManagedServiceAccountSpec) -> Self {
        Self {
            rotation: spec.rotation,
            ttl_seconds_after_creation: spec.ttl_seconds_after_creation,
        }
    }
}
