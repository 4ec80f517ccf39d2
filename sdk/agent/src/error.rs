//! The errors of this crate, one variant per failed operation; the object or path is named in
//! the message and the cause kept as the source. Every one is worth retrying: the apiserver may
//! come back, and the klusterlet may yet write or repair the credential.

use std::path::PathBuf;

/// What failed, and on what.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the Lease failed.
    #[error("read Lease {name}")]
    ReadLease {
        /// The Lease.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Replacing the Lease with a renewed one failed (a conflict included: the next renewal
    /// reads it again).
    #[error("renew Lease {name}")]
    RenewLease {
        /// The Lease.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Creating the Lease failed.
    #[error("create Lease {name}")]
    CreateLease {
        /// The Lease.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Listing the directory of the mounted credential failed.
    #[error("list the hub credential in {}", dir.display())]
    ListCredential {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Reading or parsing a kubeconfig file failed.
    #[error("read {}", path.display())]
    ReadKubeconfig {
        /// The kubeconfig.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Turning a kubeconfig into connection settings failed (no current context, a
    /// certificate file missing, ...).
    #[error("use {}", path.display())]
    UseKubeconfig {
        /// The kubeconfig.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Building a client from a kubeconfig's settings failed (its TLS settings, typically).
    #[error("build a client from {}", path.display())]
    BuildClient {
        /// The kubeconfig.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// A result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
