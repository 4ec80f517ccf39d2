//! Names, paths and known values of the cluster-gateway API, with cluster-gateway's exact strings.

/// The served version.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of a ClusterGateway.
pub const API_VERSION: &str = "cluster.core.oam.dev/v1alpha1";
/// The kind.
pub const KIND: &str = "ClusterGateway";
/// The resource (plural); the singular is `clustergateway`. Cluster-scoped.
pub const PLURAL: &str = "clustergateways";
/// Name of the APIService registering the group and version.
pub const API_SERVICE_NAME: &str = "v1alpha1.cluster.core.oam.dev";

/// Subresource that proxies any request (GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS) to the
/// cluster's kube-apiserver: see [`proxy_path`].
pub const PROXY_SUBRESOURCE: &str = "proxy";
/// Subresource to read and write `status` (`healthy`, `healthyReason`).
pub const HEALTH_SUBRESOURCE: &str = "health";
/// Query parameter of the proxy subresource: `impersonate=true` makes the gateway impersonate
/// the caller on the managed cluster.
pub const PROXY_IMPERSONATE_PARAM: &str = "impersonate";
/// Path before the cluster name in proxy requests.
pub const PROXY_PATH_PREFIX: &str = "/apis/cluster.core.oam.dev/v1alpha1/clustergateways/";

/// Path on the hub that proxies `path` (e.g. `/api/v1/namespaces`, starting with `/`) to the
/// kube-apiserver of `cluster`.
pub fn proxy_path(cluster: &str, path: &str) -> String {
    format!("{PROXY_PATH_PREFIX}{cluster}/{PROXY_SUBRESOURCE}{path}")
}

/// Values of `spec.access.endpoint.type`.
pub mod endpoint_type {
    /// A fixed address in `endpoint.const`.
    pub const CONST: &str = "Const";
    /// Through the cluster-proxy (konnectivity) tunnel; no address needed.
    pub const CLUSTER_PROXY: &str = "ClusterProxy";
}

/// Values of `spec.access.credential.type`.
pub mod credential_type {
    /// A ServiceAccount token in `serviceAccountToken` (not base64-encoded).
    pub const SERVICE_ACCOUNT_TOKEN: &str = "ServiceAccountToken";
    /// A client certificate and key in `x509`.
    pub const X509_CERTIFICATE: &str = "X509Certificate";
    /// Issued by an exec plugin on each read; the result fills `serviceAccountToken` or `x509`.
    pub const DYNAMIC: &str = "Dynamic";
}

/// Values of `status.healthyReason` cluster-gateway names; whoever checks health writes them
/// through the `health` subresource.
pub mod healthy_reason {
    /// `ClusterGatewayNotRegistered`.
    pub const CLUSTER_GATEWAY_NOT_REGISTERED: &str = "ClusterGatewayNotRegistered";
    /// `CertificateMismatch`.
    pub const CERTIFICATE_MISMATCH: &str = "CertificateMismatch";
    /// `ConnectionTimeout`.
    pub const CONNECTION_TIMEOUT: &str = "ConnectionTimeout";
    /// Prefix of any other reason: `Unknown:<detail>`.
    pub const UNKNOWN_PREFIX: &str = "Unknown:";
}

/// How cluster-gateway stores a ClusterGateway: as a Secret named after the cluster in its
/// secret namespace. A ClusterGateway is only read (get, list; no watch) and has its health
/// written; it is never created through the API. With OCM integration on, a ManagedCluster of
/// the same name supplies the endpoint and CA instead (its first `managedClusterClientConfigs`
/// entry).
pub mod secret {
    /// Default of the gateway's `--secret-namespace`.
    pub const DEFAULT_NAMESPACE: &str = "vela-system";
    /// Label holding `spec.access.credential.type`; a Secret without it is not a ClusterGateway.
    pub const CREDENTIAL_TYPE_LABEL: &str = "cluster.core.oam.dev/cluster-credential-type";
    /// Label holding `spec.access.endpoint.type`; `Const` when missing.
    pub const ENDPOINT_TYPE_LABEL: &str = "cluster.core.oam.dev/cluster-endpoint-type";
    /// Annotation holding `status.healthy` (`"true"`/`"false"`).
    pub const HEALTHY_ANNOTATION: &str = "status.cluster.core.oam.dev/healthy";
    /// Annotation holding `status.healthyReason`.
    pub const HEALTHY_REASON_ANNOTATION: &str = "status.cluster.core.oam.dev/healthy-reason";
    /// Data key of the endpoint address (type `Const`).
    pub const ENDPOINT_KEY: &str = "endpoint";
    /// Data key of the CA bundle (`ca` is also read); without one the endpoint is insecure.
    pub const CA_KEY: &str = "ca.crt";
    /// Data key of the ServiceAccount token (type `ServiceAccountToken`).
    pub const TOKEN_KEY: &str = "token";
    /// Data key of the client certificate (type `X509Certificate`).
    pub const CERTIFICATE_KEY: &str = "tls.crt";
    /// Data key of the client key (type `X509Certificate`).
    pub const PRIVATE_KEY_KEY: &str = "tls.key";
    /// Data key of an HTTP proxy URL for the endpoint.
    pub const PROXY_URL_KEY: &str = "proxy-url";
}
