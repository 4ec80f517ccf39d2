//! The hub's webhook server: the validating webhook for what CEL cannot express — the 500 KiB
//! limit on a ManifestWork's manifests (their encoded size; CEL has no way to measure it) — and
//! the add-on CRDs' conversion webhook (v1alpha1 ⇄ v1beta1, [`flotilla_api::addon::conversion`]).
//! The other work rules are `flotilla_work::admission`'s policy, enforced by the apiserver itself.
//!
//! ```text
//!  kube-apiserver ──HTTPS (CA in caBundle)──▶ /validate-manifestwork ──▶ allowed / denied + message
//!                                           ─▶ /convert ──▶ ClusterManagementAddOn / ManagedClusterAddOn
//!                                                           in the requested version, or a failure
//! ```
//!
//! Every hub replica serves the same CA and serving certificate, kept in Secret
//! [`CERTIFICATE_SECRET`] of the hub namespace: the first replica to start makes them and
//! creates the Secret, and a replica that loses that race (the create conflicts) reads the
//! winner's. So the `caBundle` registered with `flotilla.dev-manifestwork-size` stays valid
//! whichever replica leads and across restarts. The add-on CRDs' conversion is registered with
//! the same CA and endpoint (path [`CONVERT_PATH`]).

#![deny(missing_docs)]

use std::net::SocketAddr;

mod certificate;
mod registration;
mod server;

pub use certificate::{ServingCertificate, shared_certificate};
pub use registration::{
    Endpoint, configuration, configuration_for, conversion_patch, converts_through, keep_conversion,
    register, register_conversion, register_endpoint,
};
pub use server::{Webhook, review, serve, serve_on_loopback, size_violation};

/// Path of the ManifestWork size check.
pub const VALIDATE_PATH: &str = "/validate-manifestwork";
/// Path of the add-on CRDs' conversion webhook (OCM's path).
pub const CONVERT_PATH: &str = "/convert";
/// The CRDs whose versions the conversion webhook converts between.
pub const CONVERTED_CRDS: [&str; 2] = [
    "clustermanagementaddons.addon.open-cluster-management.io",
    "managedclusteraddons.addon.open-cluster-management.io",
];
/// Name of the ValidatingWebhookConfiguration.
pub const CONFIGURATION_NAME: &str = "flotilla.dev-manifestwork-size";

/// Secret (in the hub namespace) holding the webhook's CA and serving certificate.
pub const CERTIFICATE_SECRET: &str = "flotilla-hub-webhook-serving";
/// Why the webhook could not start or register.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Making the CA or serving certificate failed.
    #[error("make the webhook certificate: {0}")]
    Certificate(String),
    /// Reading or creating the shared certificate's Secret failed.
    #[error("read or create the serving certificate Secret {namespace}/{name}: {source}")]
    Secret {
        /// The hub namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The shared certificate's Secret is unusable.
    #[error(
        "the serving certificate Secret {namespace}/{name} {problem}; delete it and restart the hub replicas to make a new one"
    )]
    StoredCertificate {
        /// The hub namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
    /// Binding the listener failed.
    #[error("listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Registering the configuration failed.
    #[error(transparent)]
    Register(#[from] flotilla_kube::Error),
    /// Switching an add-on CRD's conversion to the webhook failed.
    #[error("switch the conversion of CRD {crd} to the hub's webhook: {source}")]
    Conversion {
        /// The CRD.
        crd: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}
