//! The part of `authentication.open-cluster-management.io/v1beta1` ManagedServiceAccount this
//! agent reads and writes, and OCM's names for it (`pkg/common/constants.go`,
//! `apis/authentication/v1beta1` of open-cluster-management-io/managed-serviceaccount).
//!
//! The agent uses public crates only, so the kind is declared here rather than taken from the
//! hub's API crate; the integration test creates objects with the hub's own type, which checks
//! that both read the same JSON.

use std::borrow::Cow;

use k8s_openapi::{
    NamespaceResourceScope,
    apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time},
};
use kube::Resource;
use serde::{Deserialize, Serialize};

/// The API group.
pub const GROUP: &str = "authentication.open-cluster-management.io";
/// The version the agent reads and writes (the stored one).
pub const VERSION: &str = "v1beta1";
/// `apiVersion` of the objects.
pub const API_VERSION: &str = "authentication.open-cluster-management.io/v1beta1";
/// The kind.
pub const KIND: &str = "ManagedServiceAccount";
/// Its resource (plural) name.
pub const PLURAL: &str = "managedserviceaccounts";

/// Label `"true"` on the ServiceAccounts (managed cluster) and token Secrets (hub) the agent
/// owns; the agent never deletes, nor issues tokens for, a ServiceAccount without it.
pub const IS_MANAGED_LABEL: &str = "authentication.open-cluster-management.io/is-managed-serviceaccount";
/// The value of [`IS_MANAGED_LABEL`].
pub const IS_MANAGED_VALUE: &str = "true";
/// Label selector of the objects the agent owns.
pub const IS_MANAGED_SELECTOR: &str =
    "authentication.open-cluster-management.io/is-managed-serviceaccount=true";

/// Key of the token in the hub Secret (`corev1.ServiceAccountTokenKey`).
pub const TOKEN_KEY: &str = "token";
/// Key of the managed cluster's CA bundle in the hub Secret (`corev1.ServiceAccountRootCAKey`).
pub const CA_KEY: &str = "ca.crt";
/// Type of the hub Secret.
pub const SECRET_TYPE: &str = "Opaque";

/// CRD default of `spec.rotation.validity`, used if a stored object lacks it.
pub const DEFAULT_VALIDITY: &str = "8640h0m0s";

/// Condition types and reasons of ManagedServiceAccount.
pub mod condition {
    /// The token Secret exists on the hub.
    pub const SECRET_CREATED: &str = "SecretCreated";
    /// The agent reported a valid token into the Secret.
    pub const TOKEN_REPORTED: &str = "TokenReported";
    /// `SecretCreated` True.
    pub const REASON_SECRET_CREATED: &str = "SecretCreated";
    /// `TokenReported` True.
    pub const REASON_TOKEN_REPORTED: &str = "TokenReported";
    /// `TokenReported` False; the message is the error.
    pub const REASON_TOKEN_REPORT_FAILED: &str = "TokenReportFailed";
}

/// A ServiceAccount on this managed cluster, wanted by the hub, its token mirrored into Secret
/// `<name>` of the same namespace there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedServiceAccount {
    /// Always [`API_VERSION`] when written (the apiserver needs it in a status update).
    #[serde(default = "api_version")]
    pub api_version: String,
    /// Always [`KIND`] when written.
    #[serde(default = "kind")]
    pub kind: String,
    /// Name, namespace (the cluster's), uid and resource version.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the hub asks for.
    #[serde(default)]
    pub spec: Spec,
    /// What the agent reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
}

fn api_version() -> String {
    API_VERSION.to_owned()
}

fn kind() -> String {
    KIND.to_owned()
}

/// `spec`: only `rotation.validity` matters to the agent (`ttlSecondsAfterCreation` is the
/// manager's; `rotation.enabled` is deprecated, tokens are always rotated).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    /// How long tokens live.
    #[serde(default)]
    pub rotation: Rotation,
}

/// `spec.rotation`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rotation {
    /// Lifetime asked for each token, a Go duration (`"8640h0m0s"`).
    #[serde(default = "default_validity")]
    pub validity: String,
}

impl Default for Rotation {
    fn default() -> Self {
        Self {
            validity: default_validity(),
        }
    }
}

fn default_validity() -> String {
    DEFAULT_VALIDITY.to_owned()
}

/// `status`, written by the agent alone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// `SecretCreated` and `TokenReported`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// When the token in the Secret expires, as the managed cluster said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_timestamp: Option<Time>,
    /// The Secret and when its token was last replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret_ref: Option<SecretRef>,
}

/// `status.tokenSecretRef`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// The Secret's name: the ManagedServiceAccount's.
    pub name: String,
    /// When the token in the Secret was last replaced.
    pub last_refresh_timestamp: Time,
}

impl Resource for ManagedServiceAccount {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        KIND.into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        GROUP.into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        VERSION.into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        PLURAL.into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_as_the_apiserver_serves_it_reads_and_writes_back_the_same_status() {
        let served = serde_json::json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": "robot", "namespace": "cluster1", "uid": "u1", "resourceVersion": "7"},
            "spec": {"rotation": {"enabled": true, "validity": "720h0m0s"}},
            "status": {
                "conditions": [{
                    "type": "TokenReported", "status": "True", "reason": "TokenReported",
                    "message": "", "lastTransitionTime": "2026-05-01T10:00:00Z"
                }],
                "expirationTimestamp": "2026-05-31T10:00:00Z",
                "tokenSecretRef": {"name": "robot", "lastRefreshTimestamp": "2026-05-01T10:00:00Z"}
            }
        });
        let msa: ManagedServiceAccount = serde_json::from_value(served.clone()).expect("reads");
        assert_eq!(msa.spec.rotation.validity, "720h0m0s");
        let written = serde_json::to_value(&msa).expect("writes");
        assert_eq!(written["status"], served["status"]);
        assert_eq!(written["apiVersion"], API_VERSION);
        assert_eq!(written["kind"], KIND);
    }

    #[test]
    fn a_missing_validity_is_the_crd_default() {
        let msa: ManagedServiceAccount = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "robot"}, "spec": {"rotation": {}}}),
        )
        .expect("reads");
        assert_eq!(msa.spec.rotation.validity, DEFAULT_VALIDITY);
        assert!(msa.status.is_none());
    }
}
