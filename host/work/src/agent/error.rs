//! Errors of the work agent, named by the operation that failed. All are retried: the
//! controllers' error policy requeues with backoff, and the credential loop starts over.

/// A failed step of the work agent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the hub kubeconfig secret failed.
    #[error("read the hub kubeconfig secret {namespace}/{name}: {source}")]
    ReadHubSecret {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The hub kubeconfig secret is unusable.
    #[error("hub kubeconfig secret {namespace}/{name}: {message}")]
    InvalidHubSecret {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// Building the hub client failed.
    #[error("build the hub client: {0}")]
    HubClient(String),
    /// A call to the hub or the managed cluster failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Finalizer or status plumbing failed.
    #[error(transparent)]
    Plumbing(#[from] flotilla_kube::Error),
    /// Objects are still being deleted; checked again shortly.
    #[error("waiting for {0}")]
    Waiting(String),
}

impl Error {
    /// A [`Error::Kube`] for `action`.
    pub fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube { action, source }
    }
}

/// Result with the agent's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
