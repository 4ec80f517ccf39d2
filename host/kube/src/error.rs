//! Errors of the plumbing, named by the operation that failed. All are retryable: the caller's
//! error policy requeues with backoff.

/// A failed API operation, with what was being done.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Patching an object's status failed.
    #[error("patch status of {kind} {name}: {source}")]
    PatchStatus {
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Adding or removing a finalizer failed.
    #[error("update finalizers of {kind} {name}: {source}")]
    Finalizer {
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Reading an object failed.
    #[error("read {kind} {name}: {source}")]
    Get {
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Server-side apply failed.
    #[error("apply {kind} {name}: {source}")]
    Apply {
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Waiting for a condition failed or timed out.
    #[error("wait for {what}: {message}")]
    Wait {
        /// What was awaited.
        what: String,
        /// Why it failed.
        message: String,
    },
    /// An object could not be encoded for a patch.
    #[error("encode {what}: {source}")]
    Encode {
        /// What was encoded.
        what: String,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
}

/// Result with this crate's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
