//! `plugins.flotilla.dev/v1alpha1`: AddOnPlugin, registering the WebAssembly component that
//! implements an add-on's hub-side logic.
//!
//! The plugin host fetches the bytes from `spec.source`, checks them against `spec.digest`,
//! compiles and validates them, calls `describe()`, and reports each step as a condition
//! ([`crate::plugins::consts`]). A new revision replaces the serving one only once validated.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::addon::v1alpha1::ConfigGroupResource;
use crate::addon::v1beta1::RegistrationType;
use crate::omit;

/// Default wall-clock limit of one plugin call, in milliseconds.
pub const DEFAULT_TIMEOUT_MILLIS: i32 = 5_000;
/// Default memory limit of one plugin instance, in MiB.
pub const DEFAULT_MEMORY_MIB: i32 = 64;
/// Default cap on the bytes one call may return.
pub const DEFAULT_MAX_OUTPUT_BYTES: i64 = 1024 * 1024;

/// Which add-on the plugin drives, where its bytes come from, and its limits.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "plugins.flotilla.dev",
    version = "v1alpha1",
    kind = "AddOnPlugin",
    doc = "An add-on's hub-side logic as a sandboxed WebAssembly component.",
    status = "AddOnPluginStatus",
    category = "flotilla",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"AddOn","type":"string","description":"ClusterManagementAddOn driven (defaults to the plugin's name)","jsonPath":".spec.addOnName"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Digest","type":"string","priority":1,"jsonPath":".status.digest"}"#,
    printcolumn = r#"{"name":"WIT","type":"string","priority":1,"jsonPath":".status.witVersion"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AddOnPluginSpec {
    /// Name of the ClusterManagementAddOn the plugin drives; the plugin's name when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(
        length(max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub add_on_name: String,

    /// Where the component's bytes are.
    pub source: PluginSource,

    /// Pinned digest of the component's bytes; other bytes are refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^sha256:[a-f0-9]{64}$"))]
    pub digest: Option<String>,

    /// A signature the OCI artifact must carry; unsigned or wrongly signed artifacts are refused
    /// with `Validated` False. Needs an OCI source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<PluginVerification>,

    /// Resource limits of each call.
    #[serde(default)]
    #[schemars(extend("x-flotilla-default" = {}))]
    pub limits: PluginLimits,

    /// Custom signers the host signs add-on CSRs for, after the plugin approves them; keyed by
    /// signer name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["signerName"]))]
    pub signers: Vec<PluginSigner>,
}

impl AddOnPlugin {
    /// Name of the ClusterManagementAddOn this plugin drives: `spec.addOnName`, else the
    /// plugin's own name.
    pub fn addon_name(&self) -> String {
        if self.spec.add_on_name.is_empty() {
            self.name_any()
        } else {
            self.spec.add_on_name.clone()
        }
    }
}

/// Source of a plugin's bytes: exactly one member is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.configMap) != has(self.oci)",
    "message": "exactly one of configMap or oci must be set",
}]))]
pub struct PluginSource {
    /// A key of a ConfigMap's `binaryData` (or `data`), optionally gzip-compressed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapSource>,

    /// An OCI artifact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<OciSource>,
}

/// How a plugin's OCI artifact must be signed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginVerification {
    /// PEM `PUBLIC KEY` of an ECDSA P-256 key pair (cosign's `cosign.pub`). The artifact's
    /// manifest must carry a cosign signature by its private key, stored at the tag
    /// `sha256-<manifest hex>.sig` of the same repository (`flotilla plugin push --sign` writes
    /// one). Verified offline: no transparency log, no certificate authority.
    #[schemars(length(min = 1, max = 8192))]
    pub public_key: String,
}

/// A key of a ConfigMap.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub struct ConfigMapSource {
    /// Namespace of the ConfigMap (any: a ConfigMap source holds the plugin's own code, not
    /// a credential; only Secret references are confined to the plugin Secrets namespace).
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,

    /// Name of the ConfigMap.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,

    /// Key holding the component.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// An OCI artifact holding a component.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OciSource {
    /// Artifact reference: `registry/repository:tag` or `registry/repository@sha256:...`.
    #[schemars(length(min = 1, max = 1024))]
    pub reference: String,

    /// `kubernetes.io/dockerconfigjson` secret with registry credentials. It must be in the
    /// hub's plugin Secrets namespace (`flotilla hub --plugin-secrets-namespace`, default
    /// `open-cluster-management-hub`); one elsewhere is refused with `Fetched` False
    /// `SecretOutsideNamespace` and never read. Not allowed with `insecure`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret_ref: Option<SecretReference>,

    /// Reach the registry over plain HTTP (tests only). Never with `pullSecretRef`: the hub
    /// does not send registry credentials over plain HTTP (`Fetched` False
    /// `CredentialsOverPlainHttp`).
    #[serde(default, skip_serializing_if = "omit::is_false")]
    pub insecure: bool,
}

/// A Secret by namespace and name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub struct SecretReference {
    /// Namespace of the secret: the hub's plugin Secrets namespace
    /// (`flotilla hub --plugin-secrets-namespace`).
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,

    /// Name of the secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Limits of every call into the plugin; the defaults are safe for typical add-ons.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginLimits {
    /// Wall-clock limit of one call, in milliseconds.
    #[serde(default = "default_timeout_millis")]
    #[schemars(range(min = 10, max = 60_000), extend("x-flotilla-default" = 5_000))]
    pub timeout_millis: i32,

    /// Memory limit of one instance, in MiB.
    #[serde(default = "default_memory_mib", rename = "memoryMiB")]
    #[schemars(range(min = 1, max = 1024), extend("x-flotilla-default" = 64))]
    pub memory_mib: i32,

    /// Most bytes one call may return.
    #[serde(default = "default_max_output_bytes")]
    #[schemars(range(min = 1024, max = 16_777_216), extend("x-flotilla-default" = 1_048_576))]
    pub max_output_bytes: i64,
}

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            timeout_millis: DEFAULT_TIMEOUT_MILLIS,
            memory_mib: DEFAULT_MEMORY_MIB,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
        }
    }
}

fn default_timeout_millis() -> i32 {
    DEFAULT_TIMEOUT_MILLIS
}

fn default_memory_mib() -> i32 {
    DEFAULT_MEMORY_MIB
}

fn default_max_output_bytes() -> i64 {
    DEFAULT_MAX_OUTPUT_BYTES
}

/// A custom signer the host signs for with a CA from a secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginSigner {
    /// Signer name, `<domain>/<path>`.
    #[schemars(
        length(min = 5, max = 571),
        regex(pattern = r"^([a-z0-9][a-z0-9-]*[a-z0-9]\.)+[a-z]+\/[a-z0-9-\.]+$")
    )]
    pub signer_name: String,

    /// `kubernetes.io/tls` secret holding the signing CA's certificate and key. It must be in
    /// the hub's plugin Secrets namespace (`flotilla hub --plugin-secrets-namespace`, default
    /// `open-cluster-management-hub`); one elsewhere is refused with `Fetched` False
    /// `SecretOutsideNamespace`, never read, and nothing is signed with it.
    pub ca_secret_ref: SecretReference,
}

/// Observed state of an AddOnPlugin.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddOnPluginStatus {
    /// Generation of the spec the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Digest of the serving revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,

    /// WIT package version the serving revision targets, e.g. `flotilla:addon@0.1.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wit_version: Option<String>,

    /// What the serving revision's `describe()` returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub describe: Option<PluginDescription>,

    /// Runtime faults of the serving revision: counts over a recent window, the last fault, and
    /// the quarantine in force. Absent while the serving revision has no recent faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults: Option<PluginFaults>,

    /// `Fetched`, `Validated`, `Ready`, `Degraded`; keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// Runtime faults of the serving revision (timeouts, memory, traps, stack overflows, oversized
/// output, log floods), as the plugin host counted them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginFaults {
    /// How far back `counts` reach, in seconds.
    pub window_seconds: i64,

    /// Faults in the window, by hook and kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counts: Vec<PluginFaultCount>,

    /// The most recent fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<PluginLastFault>,

    /// Failed calls in a row, up to the last status write.
    #[serde(default)]
    pub consecutive: i64,

    /// While quarantined: calls answer their hook's fail-safe result at once until this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quarantined_until: Option<Time>,
}

/// Faults of one hook and kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PluginFaultCount {
    /// The hook: `manifests`, `approve-csr`, `hub-permissions`, `probe-health`.
    pub hook: String,
    /// The fault kind: `timeout`, `memory`, `trap`, `stack_overflow`, `output_too_large`,
    /// `invalid_output`, `instantiate`, `log_flood`.
    pub kind: String,
    /// Faults in the window.
    pub count: i64,
}

/// The most recent fault.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PluginLastFault {
    /// The hook.
    pub hook: String,
    /// The fault kind.
    pub kind: String,
    /// What happened.
    pub message: String,
    /// When.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
}

/// Summary of a plugin's `describe()`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginDescription {
    /// How the add-on's agents register with the hub.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registrations: Vec<PluginRegistration>,

    /// How the add-on's health is determined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_mode: Option<PluginHealthMode>,

    /// Config types the add-on reads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supported_config_types: Vec<ConfigGroupResource>,

    /// Namespace of the agent unless configured otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub default_install_namespace: String,
}

/// One registration of the add-on's agent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginRegistration {
    /// Kube client or custom signer.
    #[serde(rename = "type")]
    pub type_: RegistrationType,

    /// Signer name, for custom signers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signer_name: String,
}

/// Health modes a plugin can declare.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum PluginHealthMode {
    /// The agent renews a lease.
    #[default]
    Lease,
    /// The deploy work's `Available` condition, with optional probe fields.
    Work,
    /// Availability of the add-on's Deployments.
    DeploymentAvailability,
    /// Availability of the add-on's workloads (Deployments and DaemonSets).
    WorkloadAvailability,
    /// The plugin's `probe-health` decides from probe fields.
    Customized,
    /// No health check; the add-on sets `Available` itself.
    #[serde(rename = "None")]
    NoCheck,
}
