//! Plain Rust mirrors of the contract's records (`flotilla:addon/types@0.1.0`).
//!
//! These are what an [`crate::Addon`] sees and returns. They compile on every target, so an
//! add-on can be unit-tested with plain `cargo test` on the host; on `wasm32` the SDK converts
//! them to and from the generated bindings (`bindings.rs`). Builders (`Cluster::new(..).label(..)`)
//! make test inputs short.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// A Kubernetes object as JSON, with `apiVersion`, `kind` and `metadata.name`.
pub type Manifest = serde_json::Value;

/// The managed cluster an add-on is rendered for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cluster {
    /// `ManagedCluster` name; also the cluster namespace on the hub.
    pub name: String,
    /// `ManagedCluster` labels.
    pub labels: BTreeMap<String, String>,
    /// `ManagedCluster` annotations.
    pub annotations: BTreeMap<String, String>,
    /// Cluster claims.
    pub claims: BTreeMap<String, String>,
    /// Kubernetes version, empty if unknown.
    pub kubernetes_version: String,
}

impl Cluster {
    /// A cluster called `name` with nothing else set.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// Adds a label.
    #[must_use]
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Adds an annotation.
    #[must_use]
    pub fn annotation(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.annotations.insert(key.into(), value.into());
        self
    }

    /// Adds a cluster claim.
    #[must_use]
    pub fn claim(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.claims.insert(key.into(), value.into());
        self
    }

    /// Sets the Kubernetes version.
    #[must_use]
    pub fn kubernetes_version(mut self, version: impl Into<String>) -> Self {
        self.kubernetes_version = version.into();
        self
    }
}

/// The `ManagedClusterAddOn` being rendered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddOn {
    /// Add-on name.
    pub name: String,
    /// Namespace the agent is installed into on the managed cluster (already resolved).
    pub install_namespace: String,
    /// `ManagedClusterAddOn` annotations.
    pub annotations: BTreeMap<String, String>,
}

impl AddOn {
    /// An add-on `name` installed into `install_namespace`.
    pub fn new(name: impl Into<String>, install_namespace: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            install_namespace: install_namespace.into(),
            annotations: BTreeMap::new(),
        }
    }

    /// Adds an annotation.
    #[must_use]
    pub fn annotation(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.annotations.insert(key.into(), value.into());
        self
    }
}

/// A configuration object resolved for this add-on on this cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedConfig {
    /// API group of the config kind.
    pub group: String,
    /// Plural resource of the config kind.
    pub resource: String,
    /// Namespace; empty for cluster-scoped kinds.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The object's `spec` as JSON text.
    pub spec_json: String,
    /// OCM spec hash.
    pub spec_hash: String,
}

impl ResolvedConfig {
    /// Parses `spec_json` into `T`; a malformed spec is [`AddonError::InvalidConfig`].
    pub fn spec<T: serde::de::DeserializeOwned>(&self) -> Result<T, AddonError> {
        serde_json::from_str(&self.spec_json).map_err(|e| {
            AddonError::InvalidConfig(format!(
                "{}/{} {}/{}: {e}",
                self.group, self.resource, self.namespace, self.name
            ))
        })
    }
}

/// Who a registration's certificate names. Strings may use `{cluster-name}` and `{addon-name}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    /// Common name (the Kubernetes user).
    pub user: String,
    /// Organizations (the Kubernetes groups).
    pub groups: Vec<String>,
    /// Organizational units.
    pub organization_units: Vec<String>,
}

/// One credential the agent requests on each cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Registration {
    /// A hub kube-apiserver client certificate (`kubernetes.io/kube-apiserver-client`).
    KubeClient {
        /// `None` for the OCM default subject.
        subject: Option<Subject>,
    },
    /// A certificate from the add-on's own signer.
    CustomSigner {
        /// `<domain>/<path>`; never a `kubernetes.io/` signer.
        signer_name: String,
        /// `None` for the OCM default subject.
        subject: Option<Subject>,
    },
}

/// Identifies one object in the add-on's ManifestWork.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceIdentifier {
    /// API group, empty for core.
    pub group: String,
    /// Plural resource.
    pub resource: String,
    /// Name.
    pub name: String,
    /// Namespace, empty for cluster-scoped.
    pub namespace: String,
}

/// A JSONPath status feedback rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JsonPath {
    /// Name the value is reported under.
    pub name: String,
    /// JSONPath into `status`, starting with `.`.
    pub path: String,
}

/// How status feedback is collected for a probed object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FeedbackRule {
    /// The kind's well-known status fields.
    WellKnownStatus,
    /// Explicit JSONPaths.
    JsonPaths(Vec<JsonPath>),
}

/// An object whose status is reported back for health probing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeField {
    /// The object.
    pub resource: ResourceIdentifier,
    /// How its status is read.
    pub rules: Vec<FeedbackRule>,
}

/// How the add-on's `Available` condition is decided.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum HealthMode {
    /// The agent renews Lease `<addon>` in its install namespace (OCM's default).
    #[default]
    Lease,
    /// Available once the ManifestWork is applied and available.
    Work,
    /// Every Deployment has `readyReplicas >= 1` (or zero replicas).
    DeploymentAvailability,
    /// Every Deployment and DaemonSet is available.
    WorkloadAvailability,
    /// The probe fields' feedback is passed to [`crate::Addon::probe_health`].
    Customized(Vec<ProbeField>),
    /// Nothing is probed; the add-on sets its own condition.
    None,
}

/// Names a config object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigRef {
    /// Namespace, empty for cluster-scoped.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// A configuration kind the add-on reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigType {
    /// API group.
    pub group: String,
    /// Plural resource.
    pub resource: String,
    /// Default config.
    pub default_config: Option<ConfigRef>,
}

/// What `describe` returns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddonOptions {
    /// Credentials the agent requests.
    pub registrations: Vec<Registration>,
    /// How health is decided.
    pub health: HealthMode,
    /// Config kinds the add-on reads.
    pub supported_configs: Vec<ConfigType>,
    /// Install namespace when nothing overrides it; `None` for `open-cluster-management-agent-addon`.
    pub default_install_namespace: Option<String>,
}

/// A CSR from an add-on agent, parsed by the host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Csr {
    /// Object name.
    pub name: String,
    /// `spec.signerName`.
    pub signer_name: String,
    /// `spec.username` of the creator.
    pub username: String,
    /// `spec.groups` of the creator.
    pub groups: Vec<String>,
    /// Subject common name.
    pub common_name: String,
    /// Subject organizations.
    pub organizations: Vec<String>,
    /// Subject organizational units.
    pub organizational_units: Vec<String>,
    /// DNS SANs.
    pub dns_names: Vec<String>,
    /// `spec.usages`.
    pub usages: Vec<String>,
    /// PEM request.
    pub request_pem: String,
}

/// The verdict on a CSR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CsrDecision {
    /// Approve.
    Approve,
    /// Do not approve, with a reason.
    Deny(String),
}

/// A status feedback value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FeedbackValue {
    /// An integer.
    Integer(i64),
    /// A string.
    Text(String),
    /// A boolean.
    Boolean(bool),
    /// Raw JSON.
    Json(String),
}

/// One reported status value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedbackField {
    /// The object it was read from.
    pub resource: ResourceIdentifier,
    /// The value's name.
    pub name: String,
    /// The value.
    pub value: FeedbackValue,
}

/// Health verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HealthStatus {
    /// Working.
    Available,
    /// Installed but not working.
    Unavailable,
    /// Cannot tell.
    Unknown,
}

/// What `probe-health` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthResult {
    /// The verdict.
    pub status: HealthStatus,
    /// A message a person can act on.
    pub message: String,
}

impl HealthResult {
    /// `status` with `message`.
    pub fn new(status: HealthStatus, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

/// Why a hook could not produce its result (the contract's `plugin-error`). The host keeps the
/// last good objects and shows the message in a condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AddonError {
    /// A resolved config is malformed or unusable.
    InvalidConfig(String),
    /// A needed config was not resolved.
    MissingConfig(String),
    /// The add-on cannot run on this cluster.
    UnsupportedCluster(String),
    /// Anything else.
    Internal(String),
}

impl fmt::Display for AddonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AddonError::InvalidConfig(m) => write!(f, "invalid config: {m}"),
            AddonError::MissingConfig(m) => write!(f, "missing config: {m}"),
            AddonError::UnsupportedCluster(m) => write!(f, "unsupported cluster: {m}"),
            AddonError::Internal(m) => write!(f, "internal: {m}"),
        }
    }
}

impl std::error::Error for AddonError {}
