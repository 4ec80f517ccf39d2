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
//! - [`tokens`]: each cluster's managed service account token, read when needed.
//! - [`registration`]: the APIService, and who the aggregation layer is.

pub mod registration;
pub mod route;
pub mod server;
pub mod tokens;
pub mod tunnel;
pub mod upstream;

pub use server::{FrontProxy, Gateway, Settings, Sources, serve};
pub use tokens::Tokens;

use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_core::registration::hub::cached::for_hub;
use flotilla_kube::feed::Feeds;

/// Secret (in the hub namespace) holding the gateway's CA and serving certificate, shared by
/// the hub's replicas.
pub const CERTIFICATE_SECRET: &str = "flotilla-hub-cluster-gateway-serving";

/// Secret (in the hub namespace) holding the cluster-proxy tunnel server's CA and serving
/// certificate, which `flotilla cluster-gateway --tunnel-credentials-dir` writes out for it.
pub const TUNNEL_CERTIFICATE_SECRET: &str = "flotilla-hub-cluster-proxy-serving";
/// The files of the tunnel server's credentials, as deploy/cluster-gateway names them.
pub mod tunnel_files {
    /// The CA of the agents' client certificates.
    pub const AGENT_CA: &str = "agent-ca.crt";
    /// The serving certificate.
    pub const CERT: &str = "tls.crt";
    /// Its private key.
    pub const KEY: &str = "tls.key";
}

/// What the gateway reads: the ManagedClusters, from the process's feeds (the hub's one cache
/// of them), and each cluster's token Secret `token_secret` (OCM's cluster-gateway names its
/// ManagedServiceAccount `cluster-gateway`), read with `client` one at a time.
pub fn sources(feeds: &mut Feeds, client: kube::Client, token_secret: &str) -> Sources {
    Sources {
        clusters: feeds.feed::<ManagedCluster>(None, Some(for_hub)).store(),
        tokens: Tokens::new(client, token_secret),
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
