//! Errors of the placement controller, named by the operation that failed. Every variant is
//! retryable: the shared error policy requeues the placement and the next reconcile starts
//! from fresh caches. (Status writes fail outside a reconcile: their writer retries them.)

/// A failed step of a placement reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Creating a PlacementDecision failed.
    #[error("create PlacementDecision {name}: {source}")]
    CreateDecision {
        /// `namespace/name`.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Patching a PlacementDecision's labels or status failed.
    #[error("patch {what} of PlacementDecision {name}: {source}")]
    PatchDecision {
        /// `labels` or `status`.
        what: &'static str,
        /// `namespace/name`.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Deleting a PlacementDecision no longer needed failed.
    #[error("delete PlacementDecision {name}: {source}")]
    DeleteDecision {
        /// `namespace/name`.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// Result of a placement reconcile step.
pub type Result<T, E = Error> = std::result::Result<T, E>;
