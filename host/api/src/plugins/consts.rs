//! Condition types and reasons of AddOnPlugin.
//!
//! Reasons are meant for a person reading `kubectl describe`: each names what to fix.

/// Condition types of an AddOnPlugin.
pub mod condition {
    /// The plugin's bytes were read from the source and match `spec.digest` when set.
    pub const FETCHED: &str = "Fetched";
    /// The bytes are a component of a supported WIT version whose `describe()` succeeded.
    pub const VALIDATED: &str = "Validated";
    /// A validated revision is serving the add-on.
    pub const READY: &str = "Ready";
    /// The newest revision was rejected or is faulting; the last good revision keeps serving.
    pub const DEGRADED: &str = "Degraded";
}

/// Reasons of `Fetched`.
pub mod fetched {
    /// True: the bytes were read (and matched the pinned digest).
    pub const FETCHED: &str = "Fetched";
    /// False: the ConfigMap does not exist.
    pub const CONFIG_MAP_NOT_FOUND: &str = "ConfigMapNotFound";
    /// False: the ConfigMap has no such key in `binaryData` (or `data`).
    pub const CONFIG_MAP_KEY_NOT_FOUND: &str = "ConfigMapKeyNotFound";
    /// False: the data is not a (gzipped) component.
    pub const INVALID_ENCODING: &str = "InvalidEncoding";
    /// False: the OCI registry refused or failed the pull.
    pub const OCI_PULL_FAILED: &str = "OCIPullFailed";
    /// False: the pull secret does not exist or has no usable credentials.
    pub const PULL_SECRET_NOT_FOUND: &str = "PullSecretNotFound";
    /// False: the bytes do not hash to `spec.digest`.
    pub const DIGEST_MISMATCH: &str = "DigestMismatch";
    /// False: the artifact is larger than the host accepts.
    pub const TOO_LARGE: &str = "TooLarge";
}

/// Reasons of `Validated`.
pub mod validated {
    /// True: component compiled, WIT version supported, `describe()` returned valid options.
    pub const VALIDATED: &str = "Validated";
    /// False: the bytes are not a WebAssembly component.
    pub const NOT_A_COMPONENT: &str = "NotAComponent";
    /// False: the component targets a WIT version outside the supported window.
    pub const UNSUPPORTED_WIT_VERSION: &str = "UnsupportedWitVersion";
    /// False: the component imports something the host does not grant.
    pub const FORBIDDEN_IMPORT: &str = "ForbiddenImport";
    /// False: compilation failed.
    pub const COMPILE_FAILED: &str = "CompileFailed";
    /// False: `describe()` trapped, timed out or ran out of memory.
    pub const DESCRIBE_FAILED: &str = "DescribeFailed";
    /// False: `describe()` returned options the host rejects.
    pub const INVALID_OPTIONS: &str = "InvalidOptions";
}

/// Reasons of `Ready`.
pub mod ready {
    /// True: a revision is serving.
    pub const READY: &str = "Ready";
    /// False: nothing fetched yet.
    pub const NOT_FETCHED: &str = "NotFetched";
    /// False: no revision validated yet.
    pub const NOT_VALIDATED: &str = "NotValidated";
    /// False: another AddOnPlugin already drives this add-on.
    pub const ADDON_NAME_CONFLICT: &str = "AddOnNameConflict";
}

/// Reasons of `Degraded`.
pub mod degraded {
    /// False: the serving revision is the newest one and healthy.
    pub const AS_EXPECTED: &str = "AsExpected";
    /// True: a new revision failed to fetch or validate; the previous one still serves.
    pub const REVISION_REJECTED: &str = "RevisionRejected";
    /// True: calls into the plugin keep trapping or timing out.
    pub const PLUGIN_FAULTING: &str = "PluginFaulting";
}
