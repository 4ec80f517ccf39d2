//! Errors of local control planes, registries and the tools they are built from, named by the
//! operation that failed.

/// What went wrong while preparing or running a local control plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Generating or signing key material failed.
    #[error("pki: {0}")]
    Pki(String),
    /// Finding or building the control-plane binary failed.
    #[error("control-plane binary: {0}")]
    Binary(String),
    /// Writing or reading the control plane's files failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A component process could not be started or exited early.
    #[error("start {component}: {message}")]
    Start {
        /// `etcd`, `kube-apiserver` or `kube-controller-manager`.
        component: &'static str,
        /// Why, with the tail of its log.
        message: String,
    },
    /// The control plane did not become ready in time.
    #[error("wait for {what}: {message}")]
    NotReady {
        /// What was awaited.
        what: String,
        /// Why it failed.
        message: String,
    },
    /// Building a kubeconfig or client failed.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    /// A Kubernetes API call failed.
    #[error("{what}: {source}")]
    Kube {
        /// What was being done.
        what: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Something a node needs is missing on this machine (root, a Debian package).
    #[error("node prerequisites: {0}")]
    Prerequisite(String),
    /// Preparing or running a node (bridge, containerd, kubelet) failed.
    #[error("node: {0}")]
    Node(String),
    /// Adding or removing a Service route (iptables) failed.
    #[error("service route: {0}")]
    Route(String),
    /// Building or pushing a container image failed.
    #[error("image: {0}")]
    Image(String),
    /// The state of a background control plane could not be used.
    #[error("state: {0}")]
    State(String),
}

/// Result with this crate's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

pub(crate) fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Kube { what, source }
}
