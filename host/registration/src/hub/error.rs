//! Errors of the hub controllers, named by the operation that failed. Every variant is
//! retryable: the controllers' error policy requeues the object (1 s after a conflict, 10 s
//! otherwise, see `flotilla_kube::backoff`) and the next reconcile starts from fresh data.

/// A failed step of a hub reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading one object failed.
    #[error("read {kind} {name}: {source}")]
    Read {
        /// The object's kind.
        kind: &'static str,
        /// The object's name (`namespace/name` when namespaced).
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Listing objects failed.
    #[error("list {kind} in {scope}: {source}")]
    List {
        /// The listed kind.
        kind: &'static str,
        /// The namespace, or `all namespaces`.
        scope: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Creating an object failed.
    #[error("create {kind} {name}: {source}")]
    Create {
        /// The object's kind.
        kind: &'static str,
        /// The object's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Deleting an object failed.
    #[error("delete {kind} {name}: {source}")]
    Delete {
        /// The object's kind.
        kind: &'static str,
        /// The object's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Patching an object (labels, finalizers, spec fields) failed.
    #[error("patch {what} of {kind} {name}: {source}")]
    Patch {
        /// What was patched, e.g. `finalizers`.
        what: &'static str,
        /// The object's kind.
        kind: &'static str,
        /// The object's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Approving a CertificateSigningRequest failed.
    #[error("approve CertificateSigningRequest {name}: {source}")]
    Approve {
        /// The CSR's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Asking the apiserver whether a requester may renew failed.
    #[error("review access of {user} to renew cluster {cluster}: {source}")]
    AccessReview {
        /// The requester.
        user: String,
        /// The cluster named by the CSR.
        cluster: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A patch could not be encoded.
    #[error("encode {what}: {source}")]
    Encode {
        /// What was encoded.
        what: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// Several steps of one reconcile failed (each is also reported in a condition).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Several(Vec<Error>),
    /// A status write, finalizer update or server-side apply of the shared plumbing failed.
    #[error(transparent)]
    Kube(#[from] flotilla_kube::Error),
}

impl Error {
    /// One error from several: the only one, or all of them together.
    pub fn several(mut errors: Vec<Error>) -> Option<Self> {
        match errors.len() {
            0 => None,
            1 => errors.pop(),
            _ => Some(Self::Several(errors)),
        }
    }

    /// The HTTP status of the apiserver's answer, when it gave one.
    pub fn status_code(&self) -> Option<u16> {
        flotilla_kube::backoff::status_code(self)
    }
}

/// Result with the hub's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
