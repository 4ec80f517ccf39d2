//! The cluster gateway as the process serves it: inside `flotilla hub` (every replica serves,
//! the leader registers), or alone as `flotilla cluster-gateway` beside a tunnel server that
//! is not in the hub's pods (`flotilla up`).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use anyhow::Context as _;
use flotilla_registration::names;

/// How the cluster gateway is served.
#[derive(Clone, Debug)]
pub struct GatewaySettings {
    /// The cluster-proxy tunnel server's hub-side socket.
    pub tunnel_socket: PathBuf,
    /// Where it listens.
    pub bind: SocketAddr,
    /// The Service (namespace, name) the APIService names.
    pub service: (String, String),
    /// For a hub outside the cluster: the address the apiserver reaches it at, which the
    /// Service's Endpoints name. `None`: the Service selects the hub's pods (deploy/hub).
    pub address: Option<IpAddr>,
    /// The managed service account token Secret in each cluster namespace.
    pub token_secret: String,
}

/// A serving cluster gateway and what its APIService names.
pub(super) struct ServedGateway {
    backend: flotilla_gateway::registration::Backend,
    ca_pem: String,
    /// Dropping them stops the server and its ManagedCluster watch.
    _server: flotilla_gateway::Gateway,
    _clusters: AbortOnDrop,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts the cluster gateway on this replica, with the certificate every replica shares and a
/// ManagedCluster watch of its own (followers serve too, and run no other watches).
pub(super) async fn serve(
    client: &kube::Client,
    settings: &GatewaySettings,
) -> anyhow::Result<ServedGateway> {
    let (namespace, service) = settings.service.clone();
    let mut backend = flotilla_gateway::registration::Backend {
        namespace,
        service,
        address: None,
    };
    let certificate = flotilla_webhook::shared_certificate(
        client,
        names::HUB_NAMESPACE,
        flotilla_gateway::CERTIFICATE_SECRET,
        &[backend.host()],
    )
    .await
    .context("get the cluster gateway's serving certificate")?;
    let front_proxy = flotilla_gateway::registration::front_proxy(client)
        .await
        .context("read how the kube-apiserver calls aggregated APIs")?;
    let mut feeds = flotilla_kube::feed::Feeds::new(client.clone());
    let sources = flotilla_gateway::sources(&mut feeds, client.clone(), &settings.token_secret);
    let server = flotilla_gateway::serve(
        flotilla_gateway::Settings {
            bind: settings.bind,
            cert_pem: certificate.cert_pem,
            key_pem: certificate.key_pem,
            front_proxy,
            tunnel_socket: settings.tunnel_socket.clone(),
        },
        sources,
    )
    .await
    .context("start the cluster gateway")?;
    backend.address = settings.address.map(|ip| (ip, server.addr().port()));
    eprintln!(
        "flotilla hub: cluster gateway at https://{} through tunnels of {}",
        server.addr(),
        settings.tunnel_socket.display()
    );
    Ok(ServedGateway {
        backend,
        ca_pem: certificate.ca_pem,
        _server: server,
        _clusters: AbortOnDrop(tokio::spawn(feeds.run())),
    })
}

impl ServedGateway {
    /// Registers the APIService in front of it.
    pub(super) async fn register(&self, client: &kube::Client) -> anyhow::Result<()> {
        flotilla_gateway::registration::register(client, &self.backend, &self.ca_pem)
            .await
            .context("register the cluster gateway's APIService")?;
        eprintln!(
            "flotilla: cluster gateway registered as APIService {} through Service {}",
            flotilla_api::gateway::consts::API_SERVICE_NAME,
            self.backend.host()
        );
        Ok(())
    }
}

/// `flotilla cluster-gateway`: serves and registers the gateway, with the metrics and health
/// endpoint at `ops_bind`, until `shutdown` resolves.
pub async fn run(
    client: kube::Client,
    settings: GatewaySettings,
    ops_bind: SocketAddr,
    shutdown: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    super::serve_ops(ops_bind, &client, None, "cluster-gateway").await?;
    let gateway = serve(&client, &settings).await?;
    gateway.register(&client).await?;
    shutdown.await
}
