//! The hub's cluster gateway: OCM's ClusterGateway API (`cluster.core.oam.dev/v1alpha1`),
//! served as an aggregated API behind the hub's kube-apiserver, so that
//! `/apis/cluster.core.oam.dev/v1alpha1/clustergateways/<cluster>/proxy/<path>` reaches
//! `<path>` on the managed cluster's kube-apiserver — through the cluster-proxy add-on's
//! reverse tunnel, which the cluster dials out, so the hub needs no route to it.
//!
//! - [`tunnel`]: opening a connection to a cluster's apiserver through the tunnel server.
//! - [`upstream`]: TLS (the cluster's CA) and HTTP over that connection.
//! - [`route`]: which part of the API a path names (pure).
//! - [`server`]: the HTTPS server the aggregation layer calls.

pub mod registration;
pub mod route;
pub mod server;
pub mod tunnel;
pub mod upstream;

pub use server::{FrontProxy, Gateway, Settings, Sources, serve};

use flotilla_api::{
    authentication::consts::{IS_MANAGED_SERVICE_ACCOUNT_LABEL, IS_MANAGED_SERVICE_ACCOUNT_VALUE},
    cluster::v1::ManagedCluster,
};
use flotilla_core::registration::hub::cached::for_hub;
use flotilla_kube::feed::Feeds;
use k8s_openapi::api::core::v1::Secret;

/// What the gateway reads, from the process's feeds: the ManagedClusters (the hub's one
/// cache of them) and the Secrets the managed-serviceaccount agents write, by their label.
pub fn sources(feeds: &mut Feeds) -> Sources {
    let tokens = format!("{IS_MANAGED_SERVICE_ACCOUNT_LABEL}={IS_MANAGED_SERVICE_ACCOUNT_VALUE}");
    Sources {
        clusters: feeds.feed::<ManagedCluster>(None, Some(for_hub)).store(),
        secrets: feeds.feed::<Secret>(Some(&tokens), None).store(),
    }
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A certificate or key could not be used.
    #[error("gateway certificate: {0}")]
    Certificate(String),
    /// The listening socket could not be opened.
    #[error("listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// What failed.
        source: std::io::Error,
    },
}
