//! Errors of the hub work controllers, named by the operation that failed. Every variant is
//! retryable: the error policy requeues the object (see `flotilla_kube::backoff`) and the next
//! reconcile starts from fresh data.

/// A failed step of a hub work reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading one object failed.
    #[error("read {kind} {name}: {source}")]
    Read {
        /// The object's kind.
        kind: &'static str,
        /// `namespace/name`.
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
    /// Creating a ManifestWork failed.
    #[error("create ManifestWork for {owner} in {cluster}: {source}")]
    CreateWork {
        /// The replica set, `namespace/name`.
        owner: String,
        /// The cluster namespace.
        cluster: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Updating a ManifestWork to the template failed.
    #[error("update ManifestWork {cluster}/{name}: {source}")]
    UpdateWork {
        /// The cluster namespace.
        cluster: String,
        /// The work's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Deleting a ManifestWork failed.
    #[error("delete ManifestWork {cluster}/{name}: {source}")]
    DeleteWork {
        /// The cluster namespace.
        cluster: String,
        /// The work's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Building the patch of a ManifestWork failed.
    #[error("encode the patch of ManifestWork {name}: {source}")]
    EncodePatch {
        /// The work's name.
        name: String,
        /// The encoding error.
        #[source]
        source: serde_json::Error,
    },
    /// Shared plumbing (finalizer or status write) failed.
    #[error(transparent)]
    Kube(#[from] flotilla_kube::Error),
}

/// Result of a hub work step.
pub type Result<T, E = Error> = std::result::Result<T, E>;
