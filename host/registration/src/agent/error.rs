//! Errors of the registration agent, named by the operation that failed. All are retried with
//! backoff except the two naming errors ([`Error::is_terminal`]): a name that can never be
//! registered is reported once and the agent stops instead of hammering the hub.
//!
//! Each message is complete on its own (operation, then the server's answer or the transport
//! failure with its causes), because it is what the agent publishes as `last_error`; the
//! typed causes stay reachable through `source()`.

use std::time::SystemTime;

use flotilla_core::registration::agent::{
    identity::IdentityProblem, names::NameError, resources::QuantityError,
};
use flotilla_core::x509::X509Error;

/// A failed step of the agent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cluster or agent name cannot be registered (terminal).
    #[error("{0}")]
    InvalidName(#[source] NameError),
    /// Reading one of the agent's secrets failed (on the managed cluster; on the hosting cluster in
    /// hosted mode).
    #[error("read the agent's secret {namespace}/{name}: {}", api(source))]
    ReadSecret {
        /// The secret's namespace.
        namespace: String,
        /// The secret's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Hosted mode: reading the secret with the managed cluster's kubeconfig failed.
    #[error(
        "read secret {namespace}/{name} (the managed cluster's kubeconfig) on the hosting cluster: {}",
        api(source)
    )]
    ReadExternalManagedKubeconfig {
        /// The agent namespace.
        namespace: String,
        /// The secret's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Hosted mode: the secret with the managed cluster's kubeconfig is missing or unusable.
    #[error("hosted mode: secret {namespace}/{name} on the hosting cluster {problem}")]
    ExternalManagedKubeconfig {
        /// The agent namespace.
        namespace: String,
        /// The secret's name.
        name: String,
        /// What is wrong, and what to do about it.
        problem: String,
    },
    /// The bootstrap secret or its kubeconfig key is missing.
    #[error("bootstrap secret {namespace}/{name} {problem}")]
    MissingBootstrap {
        /// The secret's namespace.
        namespace: String,
        /// The secret's name.
        name: String,
        /// What is missing.
        problem: String,
    },
    /// A kubeconfig could not be parsed or lacks what the agent needs.
    #[error("parse {what}: {message}")]
    ParseKubeconfig {
        /// Which kubeconfig.
        what: String,
        /// What is wrong.
        message: String,
    },
    /// A kubeconfig read from a Secret would run a command or read a file of the agent's host
    /// ([`flotilla_kube::kubeconfig::check_from_secret`]).
    #[error("refuse {what}: {source}")]
    UnsafeKubeconfig {
        /// Which kubeconfig, and the Secret it came from.
        what: String,
        /// The refused field.
        #[source]
        source: flotilla_kube::kubeconfig::UnsafeKubeconfig,
    },
    /// A client for the hub could not be built from a kubeconfig.
    #[error("build hub client from {what}: {message}")]
    BuildHubClient {
        /// Which kubeconfig.
        what: String,
        /// The loader's message.
        message: String,
    },
    /// Reading the ManagedCluster on the hub failed.
    #[error("get ManagedCluster {cluster} on the hub: {}", api(source))]
    GetManagedCluster {
        /// The cluster name.
        cluster: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Creating the ManagedCluster on the hub failed.
    #[error("create ManagedCluster {cluster} on the hub: {}", api(source))]
    CreateManagedCluster {
        /// The cluster name.
        cluster: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Updating the ManagedCluster's client configs on the hub failed.
    #[error(
        "update client configs of ManagedCluster {cluster} on the hub: {}",
        api(source)
    )]
    UpdateManagedCluster {
        /// The cluster name.
        cluster: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Listing the cluster's CSRs on the hub failed.
    #[error("list CSRs of cluster {cluster} on the hub: {}", api(source))]
    ListCsrs {
        /// The cluster name.
        cluster: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The cluster already has too many CSRs on the hub.
    #[error(
        "not creating a CSR: cluster {cluster} already has {count} CSRs on the hub (limit 10); \
         approve, deny or delete them"
    )]
    TooManyCsrs {
        /// The cluster name.
        cluster: String,
        /// How many exist.
        count: usize,
    },
    /// Making a key and certificate request failed.
    #[error("make certificate request: {0}")]
    MakeRequest(#[source] X509Error),
    /// Creating the CSR on the hub failed.
    #[error("create CSR for cluster {cluster} on the hub: {}", api(source))]
    CreateCsr {
        /// The cluster name.
        cluster: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Reading the CSR on the hub failed.
    #[error("get CSR {name} on the hub: {}", api(source))]
    GetCsr {
        /// The CSR name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The CSR disappeared before a certificate was issued.
    #[error("CSR {name} was deleted before a certificate was issued")]
    CsrDeleted {
        /// The CSR name.
        name: String,
    },
    /// The hub denied the CSR.
    #[error("CSR {name} was denied: {reason}: {message}")]
    CsrDenied {
        /// The CSR name.
        name: String,
        /// The condition's reason.
        reason: String,
        /// The condition's message.
        message: String,
    },
    /// The signer failed the CSR.
    #[error("CSR {name} failed: {reason}: {message}")]
    CsrFailed {
        /// The CSR name.
        name: String,
        /// The condition's reason.
        reason: String,
        /// The condition's message.
        message: String,
    },
    /// The issued certificate cannot be used with the agent's key.
    #[error("certificate issued for CSR {name} is unusable: {problem}")]
    IssuedCertificate {
        /// The CSR name.
        name: String,
        /// What is wrong.
        #[source]
        problem: IdentityProblem,
    },
    /// Writing the hub kubeconfig secret failed (on the managed cluster; on the hosting cluster
    /// in hosted mode).
    #[error("write the agent's secret {namespace}/{name}: {}", api(source))]
    WriteSecret {
        /// The secret's namespace.
        namespace: String,
        /// The secret's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Encoding the hub kubeconfig failed.
    #[error("render hub kubeconfig: {0}")]
    RenderKubeconfig(String),
    /// Patching the ManagedCluster status failed.
    #[error("patch status of ManagedCluster {cluster}: {}", plumbing(source))]
    PatchStatus {
        /// The cluster name.
        cluster: String,
        /// The plumbing error (boxed: it is large and rare).
        #[source]
        source: Box<flotilla_kube::Error>,
    },
    /// Reading the managed cluster's version failed.
    #[error("get the managed cluster's version: {}", api(.0))]
    GetVersion(#[source] kube::Error),
    /// Listing nodes on the managed cluster failed.
    #[error("list nodes of the managed cluster: {}", api(.0))]
    ListNodes(#[source] kube::Error),
    /// A node reports a resource quantity that cannot be summed.
    #[error("sum node resources: {0}")]
    SumResources(#[source] QuantityError),
    /// Listing ClusterClaims on the managed cluster failed.
    #[error("list ClusterClaims of the managed cluster: {}", api(.0))]
    ListClaims(#[source] kube::Error),
    /// Reading the cluster lease on the hub failed.
    #[error("get lease {namespace}/{name} on the hub: {}", api(source))]
    GetLease {
        /// The lease's namespace (the cluster name).
        namespace: String,
        /// The lease's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Renewing the cluster lease on the hub failed.
    #[error("renew lease {namespace}/{name} on the hub: {}", api(source))]
    RenewLease {
        /// The lease's namespace (the cluster name).
        namespace: String,
        /// The lease's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The hub client certificate expired before a new one was issued; the agent bootstraps
    /// again.
    #[error(
        "hub client certificate expired at {} before a new one was issued",
        time(not_after)
    )]
    CertificateExpired {
        /// The expired certificate's `notAfter`.
        not_after: SystemTime,
    },
}

impl Error {
    /// Whether retrying cannot help: the configured or stored names can never be
    /// registered. Every other error is retried with backoff.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::InvalidName(_))
    }

    /// Whether this is a status write that lost a race with another writer (409): not a
    /// failure, just a reason to write again from a fresh read.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::PatchStatus { source, .. } if matches!(
            &**source,
            flotilla_kube::Error::PatchStatus { source: kube::Error::Api(status), .. } if status.code == 409
        ))
    }
}

/// A client error as a person reads it: the API server's message with its code and reason,
/// or the transport error with its causes (connection refused, TLS verification, …).
fn api(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} ({} {})", status.message, status.code, status.reason),
        // The client stack's own error (a proxy fault, a connection error) without kube's
        // "ServiceError:" prefix.
        kube::Error::Service(inner) => flotilla_core::report::error_chain(&**inner),
        other => flotilla_core::report::error_chain(other),
    }
}

fn time(time: &SystemTime) -> String {
    k8s_openapi::jiff::Timestamp::try_from(*time).map_or_else(|_| format!("{time:?}"), |t| t.to_string())
}

fn plumbing(error: &flotilla_kube::Error) -> String {
    match error {
        flotilla_kube::Error::PatchStatus { source, .. }
        | flotilla_kube::Error::Finalizer { source, .. }
        | flotilla_kube::Error::Apply { source, .. } => api(source),
        other => other.to_string(),
    }
}

/// Result with the agent's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("the object has been modified", "Conflict")
                .with_code(code)
                .boxed(),
        )
    }

    fn patch_error(code: u16) -> Error {
        Error::PatchStatus {
            cluster: "c1".into(),
            source: Box::new(flotilla_kube::Error::PatchStatus {
                kind: "ManagedCluster".into(),
                name: "c1".into(),
                source: api_error(code),
            }),
        }
    }

    #[test]
    fn only_a_lost_status_race_is_a_conflict() {
        assert!(patch_error(409).is_conflict());
        assert!(!patch_error(403).is_conflict());
        assert!(
            !Error::GetVersion(api_error(409)).is_conflict(),
            "only status writes are redone at once"
        );
    }

    #[test]
    fn only_invalid_names_are_terminal() {
        let name = flotilla_core::registration::agent::names::validate_cluster_name("Bad").unwrap_err();
        assert!(Error::InvalidName(name).is_terminal());
        assert!(!patch_error(500).is_terminal());
        assert!(!Error::CsrDeleted { name: "c1-x".into() }.is_terminal());
    }

    #[test]
    fn messages_name_the_operation_and_the_servers_answer_once() {
        assert_eq!(
            patch_error(409).to_string(),
            "patch status of ManagedCluster c1: the object has been modified (409 Conflict)"
        );
    }
}
