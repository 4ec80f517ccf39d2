//! `authentication.open-cluster-management.io/v1beta1` (stored): ManagedServiceAccount, a
//! ServiceAccount on one managed cluster whose token the managed-serviceaccount agent keeps in a
//! Secret of the same name in the cluster namespace on the hub (see [`super::consts`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::consts;

/// Desired state of a ManagedServiceAccount.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "authentication.open-cluster-management.io",
    version = "v1beta1",
    kind = "ManagedServiceAccount",
    doc = "A ServiceAccount on the managed cluster of this namespace, its token mirrored into a Secret of the same name here.",
    namespaced,
    status = "ManagedServiceAccountStatus",
    derive = "PartialEq",
    derive = "Default"
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

/// Token lifetime of a ManagedServiceAccount. Both fields are always written, as Go writes them.
///
/// `Default` and absent fields are Go's zero values (`false`, `"0s"`), not the CRD defaults the
/// apiserver fills in for a missing field (`true`, `"8640h0m0s"`): an object built from
/// `Default` and sent as is asks for zero-length tokens. Use [`Self::crd_default`] to build one.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedServiceAccountRotation {
    /// Whether the token is rotated before it expires. Deprecated: OCM's agent always rotates.
    #[serde(default)]
    #[schemars(extend("x-flotilla-default" = true))]
    pub enabled: bool,

    /// Lifetime requested for each token, a Go duration (`"8640h0m0s"`); the managed cluster may
    /// grant less.
    #[serde(default = "zero_duration")]
    #[schemars(extend("x-flotilla-default" = "8640h0m0s"))]
    pub validity: String,
}

impl ManagedServiceAccountRotation {
    /// The rotation the apiserver defaults a missing `enabled` and `validity` to.
    pub fn crd_default() -> Self {
        Self {
            enabled: consts::DEFAULT_ROTATION_ENABLED,
            validity: consts::DEFAULT_ROTATION_VALIDITY.to_owned(),
        }
    }
}

impl Default for ManagedServiceAccountRotation {
    fn default() -> Self {
        Self {
            enabled: false,
            validity: zero_duration(),
        }
    }
}

/// Go's encoding of a zero `metav1.Duration`.
fn zero_duration() -> String {
    "0s".to_owned()
}

/// Observed state of a ManagedServiceAccount, written by the agent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedServiceAccountStatus {
    /// `SecretCreated` and `TokenReported` (OCM's schema does not key this list by type).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// When the current token expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_timestamp: Option<Time>,

    /// The hub Secret holding the token and the managed cluster's CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret_ref: Option<SecretRef>,
}

/// The token Secret of a ManagedServiceAccount.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// Name of the Secret, in the ManagedServiceAccount's namespace (OCM: the same name).
    pub name: String,

    /// When the token in the Secret was last replaced.
    pub last_refresh_timestamp: Time,
}
