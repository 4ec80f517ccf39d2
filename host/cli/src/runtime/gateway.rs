//! The cluster gateway as the process serves it: alone as `flotilla cluster-gateway` beside the
//! cluster-proxy tunnel server (deploy/cluster-gateway's one pod, or `flotilla up`'s processes),
//! or inside `flotilla hub` (every replica serves, the leader registers; every replica needs
//! the tunnels then, so it suits one replica beside its tunnel server). Agents hold their
//! tunnel to one server, and only a gateway beside that server can use it.

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
    /// Service's Endpoints name. `None`: the Service selects the gateway's pods (deploy/cluster-gateway).
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

/// Where `flotilla cluster-gateway` writes the tunnel server's credentials, and for which names.
#[derive(Clone, Debug)]
pub struct TunnelCredentials {
    /// The directory the tunnel server reads them from (deploy/cluster-gateway's shared volume).
    pub dir: PathBuf,
    /// The names agents reach the tunnel server by.
    pub hosts: Vec<String>,
}

/// Writes the tunnel server's credentials into `credentials.dir`: the CA of the agents' client
/// certificates (the hub apiserver's client CA, which signs the add-on credentials) and a
/// serving certificate for `credentials.hosts`, kept in Secret
/// [`flotilla_gateway::TUNNEL_CERTIFICATE_SECRET`] so that a restart serves the same one (its
/// CA is what agents are given). Each file is written whole, then renamed into place.
async fn write_tunnel_credentials(
    client: &kube::Client,
    credentials: &TunnelCredentials,
) -> anyhow::Result<()> {
    use flotilla_gateway::tunnel_files;
    let certificate = flotilla_webhook::shared_certificate(
        client,
        names::HUB_NAMESPACE,
        flotilla_gateway::TUNNEL_CERTIFICATE_SECRET,
        &credentials.hosts,
    )
    .await
    .context("get the tunnel server's serving certificate")?;
    let agent_ca = flotilla_gateway::registration::client_ca(client)
        .await
        .context("read the CA of the agents' credentials")?;
    for (name, text, mode) in [
        (tunnel_files::AGENT_CA, agent_ca.as_str(), 0o644),
        (tunnel_files::CERT, certificate.cert_pem.as_str(), 0o644),
        (tunnel_files::KEY, certificate.key_pem.as_str(), 0o600),
    ] {
        write_whole(&credentials.dir.join(name), text, mode)?;
    }
    eprintln!(
        "flotilla cluster-gateway: tunnel server credentials in {} for {}; agents verify it with ca.crt of Secret {}/{}",
        credentials.dir.display(),
        credentials.hosts.join(", "),
        names::HUB_NAMESPACE,
        flotilla_gateway::TUNNEL_CERTIFICATE_SECRET
    );
    Ok(())
}

/// Writes `text` to `path` with `mode`: a temporary file renamed into place, so the reader
/// never sees half of it.
fn write_whole(path: &std::path::Path, text: &str, mode: u32) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let partial = path.with_extension("partial");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&partial)
        .with_context(|| format!("create {}", partial.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("write {}", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("move {} into place", path.display()))
}

/// `flotilla cluster-gateway`: serves and registers the gateway (having written the tunnel
/// server's credentials, when asked), with the metrics and health endpoint at `ops_bind`,
/// until `shutdown` resolves.
pub async fn run(
    client: kube::Client,
    settings: GatewaySettings,
    credentials: Option<TunnelCredentials>,
    ops_bind: SocketAddr,
    shutdown: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    if let Some(credentials) = &credentials {
        write_tunnel_credentials(&client, credentials).await?;
    }
    super::serve_ops(ops_bind, &client, None, "cluster-gateway").await?;
    let gateway = serve(&client, &settings).await?;
    gateway.register(&client).await?;
    shutdown.await
}
