//! Condition reasons the plugin host writes on `AddOnPlugin` status, one module per condition.
//!
//! The reasons the API crate already names (`flotilla_api::plugins::consts`) are re-exported so
//! every reason a person can read in `kubectl describe addonplugin` is found here; the extra ones
//! name faults the host tells apart while fetching and validating (a registry that is down is a
//! different fix from a layer deleted from it). All are CamelCase and stable: alerts and runbooks
//! match on them.
//!
//! | condition | reasons |
//! |---|---|
//! | `Fetched` | `Fetched`, `InvalidSource`, `ConfigMapNotFound`, `ConfigMapKeyNotFound`, `InvalidEncoding`, `TooLarge`, `InvalidReference`, `PullSecretNotFound`, `InvalidPullSecret`, `RegistryUnreachable`, `FetchTimedOut`, `RegistryUnauthorized`, `ManifestNotFound`, `NotAWasmArtifact`, `ManifestTooLarge`, `ConfigTooLarge`, `LayerTooLarge`, `LayerMissing`, `LayerDigestMismatch`, `OCIPullFailed`, `InvalidDigest`, `DigestMismatch`, `KubeAPIError`, `SecretOutsideNamespace`, `CredentialsOverPlainHttp` |
//! | `Validated` | `Validated`, `FetchFailed`, `NotAComponent`, `NotWasm`, `MissingHooks`, `UnsupportedWitVersion`, `ForbiddenImport`, `WorldMismatch`, `CompileFailed`, `DescribeFailed`, `InvalidOptions`, `InvalidLimits`, `TooLarge`, `SignatureMissing`, `SignatureInvalid`, `HostError` |
//! | `Ready` | `Ready`, `NotFetched`, `NotValidated`, `AddOnNameConflict` |
//! | `Degraded` | `AsExpected`, `RevisionRejected`, `PluginFaulting`, and for runtime faults of the serving revision `<Hook><Kind>` (`ManifestsTimeout`, `ApproveCsrTrap`, `ProbeHealthStackOverflow`, `HubPermissionsMemory`, `ManifestsOutputTooLarge`, `ManifestsLogFlood`, ...; see [`flotilla_core::plugin_faults::fault_reason`]) |

/// Reasons of `Fetched`.
pub mod fetched {
    pub use flotilla_api::plugins::consts::fetched::*;

    /// False: `spec.source` sets neither or both of `configMap` and `oci`.
    pub const INVALID_SOURCE: &str = "InvalidSource";
    /// False: the OCI reference does not parse.
    pub const INVALID_REFERENCE: &str = "InvalidReference";
    /// False: the pull secret exists but is not a usable docker config for the registry.
    pub const INVALID_PULL_SECRET: &str = "InvalidPullSecret";
    /// False: the registry could not be reached (connection refused, DNS, timeout, or a TLS
    /// certificate no CA the hub trusts vouches for).
    pub const REGISTRY_UNREACHABLE: &str = "RegistryUnreachable";
    /// False: the whole fetch took longer than the controller's fetch deadline (a registry
    /// that holds the connection without answering, or answers a byte at a time).
    pub const FETCH_TIMED_OUT: &str = "FetchTimedOut";
    /// False: the registry refused the credentials (or demanded some and none were given).
    pub const REGISTRY_UNAUTHORIZED: &str = "RegistryUnauthorized";
    /// False: the registry has no manifest under the reference.
    pub const MANIFEST_NOT_FOUND: &str = "ManifestNotFound";
    /// False: the artifact is not the CNCF Wasm layout (config media type
    /// `application/vnd.wasm.config.v0+json`, exactly one `application/wasm` layer).
    pub const NOT_A_WASM_ARTIFACT: &str = "NotAWasmArtifact";
    /// False: the layer is larger than the host accepts (by the manifest, the response, or the
    /// bytes actually streamed).
    pub const LAYER_TOO_LARGE: &str = "LayerTooLarge";
    /// False: the manifest is larger than the host reads (a Wasm artifact's is under 1 KiB).
    pub const MANIFEST_TOO_LARGE: &str = "ManifestTooLarge";
    /// False: the artifact's config blob is larger than the host reads.
    pub const CONFIG_TOO_LARGE: &str = "ConfigTooLarge";
    /// False: the manifest names a layer blob the registry does not have.
    pub const LAYER_MISSING: &str = "LayerMissing";
    /// False: the layer's bytes do not hash to the digest the manifest names (tampered blob).
    pub const LAYER_DIGEST_MISMATCH: &str = "LayerDigestMismatch";
    /// False: `spec.digest` is not `sha256:<64 hex digits>`.
    pub const INVALID_DIGEST: &str = "InvalidDigest";
    /// False: reading the ConfigMap or Secret from the hub's API server failed.
    pub const KUBE_API_ERROR: &str = "KubeAPIError";
    /// False: a Secret reference of the spec (`pullSecretRef`, a signer's `caSecretRef`) names
    /// a namespace other than the plugins' one; nothing was read.
    pub const SECRET_OUTSIDE_NAMESPACE: &str = "SecretOutsideNamespace";
    /// False: `insecure` (plain HTTP) and a `pullSecretRef` are both set; nothing was requested.
    pub const CREDENTIALS_OVER_PLAIN_HTTP: &str = "CredentialsOverPlainHttp";
}

/// Reasons of `Validated`.
pub mod validated {
    pub use flotilla_api::plugins::consts::validated::*;

    /// Unknown: the newest revision was not fetched, so there was nothing to validate.
    pub const FETCH_FAILED: &str = "FetchFailed";
    /// False: the bytes are not WebAssembly at all.
    pub const NOT_WASM: &str = "NotWasm";
    /// False: the component does not export `flotilla:addon/hooks`.
    pub const MISSING_HOOKS: &str = "MissingHooks";
    /// False: the component's imports or exports have the right names but the wrong types.
    pub const WORLD_MISMATCH: &str = "WorldMismatch";
    /// False: `spec.limits` exceed what the host's engine was built for.
    pub const INVALID_LIMITS: &str = "InvalidLimits";
    /// False: the component is larger than the host's component size cap.
    pub const TOO_LARGE: &str = "TooLarge";
    /// False: `spec.verification` asks for a signature and the artifact carries none.
    pub const SIGNATURE_MISSING: &str = "SignatureMissing";
    /// False: the artifact's signatures do not verify with `spec.verification.publicKey`.
    pub const SIGNATURE_INVALID: &str = "SignatureInvalid";
    /// False: the host failed for a reason of its own (not the plugin's); see the message.
    pub const HOST_ERROR: &str = "HostError";

    /// The reason for a load the runtime refused.
    pub fn of(error: &flotilla_wasm::Error) -> &'static str {
        use flotilla_wasm::{Error, ValidationError};
        match error {
            Error::Validate(v) => match v {
                ValidationError::TooLarge { .. } => TOO_LARGE,
                ValidationError::NotWasm => NOT_WASM,
                ValidationError::NotAComponent => NOT_A_COMPONENT,
                ValidationError::MissingHooks { .. } => MISSING_HOOKS,
                ValidationError::UnsupportedWitVersion { .. } => UNSUPPORTED_WIT_VERSION,
                ValidationError::ForbiddenImports { .. } => FORBIDDEN_IMPORT,
                ValidationError::Link { .. } => WORLD_MISMATCH,
                ValidationError::DescribeFailed { .. } => DESCRIBE_FAILED,
                ValidationError::InvalidDescribe { .. } => INVALID_OPTIONS,
            },
            Error::Compile { .. } => COMPILE_FAILED,
            Error::LimitsOutOfRange { .. } => INVALID_LIMITS,
            // A digest mismatch is caught while fetching; reaching the runtime with one is a
            // host error all the same.
            _ => HOST_ERROR,
        }
    }
}

/// Reasons of `Ready`.
pub mod ready {
    pub use flotilla_api::plugins::consts::ready::*;
}

/// Reasons of `Degraded`.
pub mod degraded {
    pub use flotilla_api::plugins::consts::degraded::*;
}

pub use flotilla_api::plugins::consts::condition;
