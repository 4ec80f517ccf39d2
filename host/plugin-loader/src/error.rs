/// Why the bytes of a plugin could not be fetched from its source (`Fetched` False).
///
/// Every variant is retried with backoff by the controller: sources get fixed (a ConfigMap
/// created, a registry brought back, a secret corrected) without the `AddOnPlugin` changing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// `spec.source` sets neither or both of `configMap` and `oci`.
    #[error("spec.source must set exactly one of configMap or oci")]
    InvalidSource,

    /// `spec.digest` does not parse.
    #[error("spec.digest: {0}")]
    InvalidDigest(#[from] crate::ParseDigestError),

    /// The ConfigMap does not exist.
    #[error("ConfigMap {namespace}/{name} not found")]
    ConfigMapNotFound {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },

    /// The ConfigMap has no such key in `binaryData` or `data`.
    #[error("ConfigMap {namespace}/{name} has no key {key:?} in binaryData or data")]
    ConfigMapKeyNotFound {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The missing key.
        key: String,
    },

    /// The data is neither a (gzip-compressed) binary nor base64 text, or gzip is corrupt.
    #[error("cannot decode {what}: {reason}")]
    InvalidEncoding {
        /// What was being decoded.
        what: String,
        /// Why it failed.
        reason: String,
    },

    /// More bytes than the host accepts (after decompression).
    #[error("{what} is larger than the limit of {limit} bytes")]
    TooLarge {
        /// What was too large.
        what: String,
        /// The cap.
        limit: usize,
    },

    /// Reading a ConfigMap or Secret failed.
    #[error("cannot read {what}: {source}")]
    Kube {
        /// What was being read.
        what: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },

    /// The OCI reference does not parse.
    #[error("invalid OCI reference {reference:?}: {reason}")]
    InvalidReference {
        /// The reference.
        reference: String,
        /// Why.
        reason: String,
    },

    /// The pull secret does not exist.
    #[error("pull secret {namespace}/{name} not found")]
    PullSecretNotFound {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },

    /// The pull secret is not a docker config with credentials for the registry.
    #[error("pull secret {namespace}/{name}: {reason}")]
    InvalidPullSecret {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The registry could not be reached.
    #[error("registry {registry} unreachable: {message}")]
    RegistryUnreachable {
        /// `host[:port]`.
        registry: String,
        /// The transport error.
        message: String,
    },

    /// The registry refused the credentials.
    #[error("registry {registry} refused the credentials: {message}")]
    RegistryUnauthorized {
        /// `host[:port]`.
        registry: String,
        /// What it said.
        message: String,
    },

    /// No manifest under the reference.
    #[error("no manifest for {reference}: {message}")]
    ManifestNotFound {
        /// The reference.
        reference: String,
        /// What the registry said.
        message: String,
    },

    /// The artifact is not the CNCF Wasm OCI layout.
    #[error("{reference} is not a Wasm component artifact: {reason}")]
    NotAWasmArtifact {
        /// The reference.
        reference: String,
        /// What is wrong with the manifest.
        reason: String,
    },

    /// `spec.verification` asks for a signature and the artifact has none (or the source cannot
    /// carry one).
    #[error("{reference} is not signed: {message}")]
    SignatureMissing {
        /// The reference (or source) checked.
        reference: String,
        /// What was looked for.
        message: String,
    },

    /// The artifact's signatures do not verify with the public key of `spec.verification`.
    #[error("signature of {reference} does not verify: {reason}")]
    SignatureInvalid {
        /// The reference checked.
        reference: String,
        /// Why each signature failed.
        reason: String,
    },

    /// The manifest is larger than the host reads (by `Content-Length` or by the bytes streamed).
    #[error("manifest of {reference} is too large: {actual}, limit {limit} bytes")]
    ManifestTooLarge {
        /// The reference.
        reference: String,
        /// What was seen: the response's length, or `more than <n>` bytes streamed.
        actual: String,
        /// The cap.
        limit: usize,
    },

    /// The artifact's config blob is larger than the host reads.
    #[error("config {digest} of {reference} is too large: {actual}, limit {limit} bytes")]
    ConfigTooLarge {
        /// The reference.
        reference: String,
        /// The config digest.
        digest: String,
        /// What was seen: the manifest's size, the response's length, or the bytes streamed.
        actual: String,
        /// The cap.
        limit: usize,
    },

    /// The layer is larger than the host accepts.
    #[error("layer {digest} is too large: {actual}, limit {limit} bytes")]
    LayerTooLarge {
        /// The layer digest.
        digest: String,
        /// What was seen: the manifest's size, the response's length, or `more than <n>` bytes
        /// streamed.
        actual: String,
        /// The cap.
        limit: usize,
    },

    /// The registry does not have the layer blob the manifest names.
    #[error("layer {digest} of {reference} is missing from the registry: {message}")]
    LayerMissing {
        /// The reference.
        reference: String,
        /// The layer digest.
        digest: String,
        /// What the registry said.
        message: String,
    },

    /// The layer's bytes do not hash to the manifest's digest.
    #[error("layer bytes do not match the manifest: expected {expected}, got {actual}")]
    LayerDigestMismatch {
        /// The digest the manifest names.
        expected: String,
        /// The digest of the bytes received.
        actual: String,
    },

    /// The bytes do not hash to `spec.digest`.
    #[error("digest mismatch: spec.digest is {expected}, the bytes are {actual}")]
    DigestMismatch {
        /// `spec.digest`.
        expected: crate::Digest,
        /// The digest of the bytes received.
        actual: crate::Digest,
    },

    /// The whole fetch took longer than the controller's fetch deadline (a registry that
    /// accepts and never answers, or answers a byte at a time).
    #[error("fetching from {origin} did not finish within {after:?}")]
    TimedOut {
        /// The registry and reference, or the ConfigMap.
        origin: String,
        /// The deadline.
        after: std::time::Duration,
    },

    /// Any other registry failure.
    #[error("pulling {reference} failed: {message}")]
    Registry {
        /// The reference.
        reference: String,
        /// The error.
        message: String,
    },

    /// The spec names a Secret outside the plugins' namespace, or would send pull credentials
    /// over plain HTTP ([`flotilla_core::plugin_sources`]); nothing was read or requested.
    #[error(transparent)]
    Refused(#[from] flotilla_core::plugin_sources::SourceRefusal),
}

impl FetchError {
    /// Whether the bytes were refused for their signature (`Validated` False) rather than not
    /// fetched (`Fetched` False).
    pub fn is_verification(&self) -> bool {
        matches!(
            self,
            FetchError::SignatureMissing { .. } | FetchError::SignatureInvalid { .. }
        )
    }

    /// The `Fetched` condition reason (see [`crate::reasons::fetched`]).
    pub fn reason(&self) -> &'static str {
        use crate::reasons::fetched as r;
        match self {
            FetchError::InvalidSource => r::INVALID_SOURCE,
            FetchError::InvalidDigest(_) => r::INVALID_DIGEST,
            FetchError::ConfigMapNotFound { .. } => r::CONFIG_MAP_NOT_FOUND,
            FetchError::ConfigMapKeyNotFound { .. } => r::CONFIG_MAP_KEY_NOT_FOUND,
            FetchError::InvalidEncoding { .. } => r::INVALID_ENCODING,
            FetchError::TooLarge { .. } => r::TOO_LARGE,
            FetchError::Kube { .. } => r::KUBE_API_ERROR,
            FetchError::InvalidReference { .. } => r::INVALID_REFERENCE,
            FetchError::PullSecretNotFound { .. } => r::PULL_SECRET_NOT_FOUND,
            FetchError::InvalidPullSecret { .. } => r::INVALID_PULL_SECRET,
            FetchError::RegistryUnreachable { .. } => r::REGISTRY_UNREACHABLE,
            FetchError::RegistryUnauthorized { .. } => r::REGISTRY_UNAUTHORIZED,
            FetchError::ManifestNotFound { .. } => r::MANIFEST_NOT_FOUND,
            FetchError::NotAWasmArtifact { .. } => r::NOT_A_WASM_ARTIFACT,
            FetchError::LayerTooLarge { .. } => r::LAYER_TOO_LARGE,
            FetchError::ManifestTooLarge { .. } => r::MANIFEST_TOO_LARGE,
            FetchError::SignatureMissing { .. } => crate::reasons::validated::SIGNATURE_MISSING,
            FetchError::SignatureInvalid { .. } => crate::reasons::validated::SIGNATURE_INVALID,
            FetchError::ConfigTooLarge { .. } => r::CONFIG_TOO_LARGE,
            FetchError::LayerMissing { .. } => r::LAYER_MISSING,
            FetchError::LayerDigestMismatch { .. } => r::LAYER_DIGEST_MISMATCH,
            FetchError::DigestMismatch { .. } => r::DIGEST_MISMATCH,
            FetchError::Registry { .. } => r::OCI_PULL_FAILED,
            FetchError::TimedOut { .. } => r::FETCH_TIMED_OUT,
            FetchError::Refused(refusal) => refusal.reason(),
        }
    }
}
