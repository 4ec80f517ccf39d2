//! `cluster.core.oam.dev/v1alpha1`: ClusterGateway (cluster-scoped), the wire types of
//! cluster-gateway's aggregated API.
//!
//! Not a CRD, so there is no schema: the types only (de)serialize the way cluster-gateway's Go
//! types do, following the crate's field rules. The `type` fields are strings because the server
//! reports a type (`Dynamic`) that its own validation does not list; the known values are in
//! [`super::consts`].

use std::borrow::Cow;

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::ClusterResourceScope;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use super::consts::{API_VERSION, KIND, PLURAL, VERSION};

/// A managed cluster as cluster-gateway serves it: how to reach its kube-apiserver and whether
/// it is healthy. Requests to the cluster go through the `proxy` subresource
/// ([`super::consts::proxy_path`]).
///
/// Go writes `spec` and `status` always, so both are plain structs here; `apiVersion` and `kind`
/// are written as constants and not checked when read.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ClusterGateway {
    /// Standard object metadata; the name is the cluster's.
    #[serde(default)]
    pub metadata: ObjectMeta,

    /// How to reach the cluster.
    #[serde(default)]
    pub spec: ClusterGatewaySpec,

    /// Health of the cluster.
    #[serde(default)]
    pub status: ClusterGatewayStatus,
}

impl Serialize for ClusterGateway {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = serializer.serialize_struct("ClusterGateway", 5)?;
        object.serialize_field("apiVersion", API_VERSION)?;
        object.serialize_field("kind", KIND)?;
        object.serialize_field("metadata", &self.metadata)?;
        object.serialize_field("spec", &self.spec)?;
        object.serialize_field("status", &self.status)?;
        object.end()
    }
}

impl kube::Resource for ClusterGateway {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        KIND.into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        super::GROUP.into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        VERSION.into()
    }

    fn api_version(_: &()) -> Cow<'_, str> {
        API_VERSION.into()
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

/// Desired state of a ClusterGateway.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterGatewaySpec {
    /// Who provides the cluster (free text; the server requires it to be set).
    #[serde(default)]
    pub provider: String,

    /// Endpoint and credential.
    #[serde(default)]
    pub access: ClusterAccess,
}

/// How to reach a cluster's kube-apiserver.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAccess {
    /// Where the kube-apiserver is (always written, `null` when unset).
    #[serde(default)]
    pub endpoint: Option<ClusterEndpoint>,

    /// How to authenticate; without one the gateway refuses to proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<ClusterAccessCredential>,
}

/// The kube-apiserver endpoint, a union on `type`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterEndpoint {
    /// `Const` or `ClusterProxy` ([`super::consts::endpoint_type`]).
    #[serde(default, rename = "type")]
    pub type_: String,

    /// The fixed endpoint of type `Const`.
    #[serde(default, rename = "const", skip_serializing_if = "Option::is_none")]
    pub const_: Option<ClusterEndpointConst>,
}

/// A fixed kube-apiserver endpoint.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterEndpointConst {
    /// URL of the kube-apiserver (`https://host:port`).
    #[serde(default)]
    pub address: String,

    /// CA bundle verifying the kube-apiserver's serving certificate; required unless `insecure`.
    #[serde(default, skip_serializing_if = "is_empty_bytes")]
    pub ca_bundle: ByteString,

    /// Skip verifying the serving certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,

    /// HTTP proxy to reach the address through (key `proxy-url`, as cluster-gateway spells it).
    #[serde(default, rename = "proxy-url", skip_serializing_if = "Option::is_none")]
    pub proxy_url: Option<String>,
}

/// Credential for the kube-apiserver, a union on `type`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAccessCredential {
    /// `ServiceAccountToken`, `X509Certificate` or `Dynamic` ([`super::consts::credential_type`]).
    #[serde(default, rename = "type")]
    pub type_: String,

    /// Bearer token, not base64-encoded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_account_token: String,

    /// Client certificate and key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x509: Option<X509>,
}

/// A client certificate and its key, PEM, base64 in JSON; both always written (`null` when unset).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct X509 {
    /// The certificate.
    #[serde(default)]
    pub certificate: Option<ByteString>,

    /// The private key.
    #[serde(default)]
    pub private_key: Option<ByteString>,
}

/// Health of a ClusterGateway, written through the `health` subresource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterGatewayStatus {
    /// Whether the cluster is healthy; with the gateway's `HealthinessCheck` feature gate, proxy
    /// requests to an unhealthy cluster are refused.
    #[serde(default)]
    pub healthy: bool,

    /// Why ([`super::consts::healthy_reason`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub healthy_reason: String,
}

/// Go omits an empty `[]byte`.
fn is_empty_bytes(bytes: &ByteString) -> bool {
    bytes.0.is_empty()
}

#[cfg(test)]
mod tests {
    use kube::Resource;
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    use super::*;
    use crate::gateway::consts::proxy_path;

    /// A ClusterGateway as cluster-gateway's server returns it (Go's encoding).
    fn example() -> Value {
        json!({
            "apiVersion": "cluster.core.oam.dev/v1alpha1",
            "kind": "ClusterGateway",
            "metadata": { "name": "cluster1", "creationTimestamp": "2025-01-02T03:00:00Z" },
            "spec": {
                "provider": "ocm",
                "access": {
                    "endpoint": {
                        "type": "Const",
                        "const": {
                            "address": "https://cluster1.example:6443",
                            "caBundle": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
                            "proxy-url": "http://proxy.example:3128"
                        }
                    },
                    "credential": {
                        "type": "X509Certificate",
                        "x509": { "certificate": "Y2VydA==", "privateKey": "a2V5" }
                    }
                }
            },
            "status": { "healthy": true, "healthyReason": "ConnectionTimeout" }
        })
    }

    #[test]
    fn a_cluster_gateway_round_trips_as_go_writes_it() {
        let gateway: ClusterGateway = serde_json::from_value(example()).unwrap();
        assert_eq!(
            gateway.spec.access.credential.as_ref().unwrap().type_,
            "X509Certificate"
        );
        let x509 = gateway
            .spec
            .access
            .credential
            .as_ref()
            .unwrap()
            .x509
            .as_ref()
            .unwrap();
        assert_eq!(x509.certificate.as_ref().unwrap().0, b"cert");
        assert_eq!(serde_json::to_value(&gateway).unwrap(), example());
    }

    #[test]
    fn go_always_written_fields_are_written_when_empty() {
        let token = json!({
            "apiVersion": "cluster.core.oam.dev/v1alpha1",
            "kind": "ClusterGateway",
            "metadata": { "name": "cluster2" },
            "spec": {
                "provider": "",
                "access": {
                    "endpoint": { "type": "ClusterProxy" },
                    "credential": { "type": "ServiceAccountToken", "serviceAccountToken": "eyJhbGciOi" }
                }
            },
            "status": { "healthy": false }
        });
        let gateway: ClusterGateway = serde_json::from_value(token.clone()).unwrap();
        assert_eq!(serde_json::to_value(&gateway).unwrap(), token);

        let empty = ClusterGateway::default();
        assert_eq!(
            serde_json::to_value(&empty).unwrap(),
            json!({
                "apiVersion": "cluster.core.oam.dev/v1alpha1",
                "kind": "ClusterGateway",
                "metadata": {},
                "spec": { "provider": "", "access": { "endpoint": null } },
                "status": { "healthy": false }
            })
        );
        assert_eq!(
            serde_json::to_value(X509::default()).unwrap(),
            json!({ "certificate": null, "privateKey": null })
        );
    }

    #[test]
    fn the_resource_is_cluster_scoped_at_cluster_gateways_path() {
        assert_eq!(
            ClusterGateway::url_path(&(), None),
            "/apis/cluster.core.oam.dev/v1alpha1/clustergateways"
        );
        assert_eq!(
            proxy_path("cluster1", "/api/v1/namespaces"),
            "/apis/cluster.core.oam.dev/v1alpha1/clustergateways/cluster1/proxy/api/v1/namespaces"
        );
    }
}
