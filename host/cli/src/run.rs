//! The flags of `flotilla hub` and `flotilla klusterlet`, read into the settings that
//! [`crate::runtime`] runs the long-running components with, in the foreground.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use flotilla_plugin_loader::controller::ControllerConfig;
use flotilla_registration::{agent, names};
use flotilla_wasm::{AllocatorChoice, FaultPolicy, RuntimeConfig};

use crate::{cli::GlobalArgs, kube::instrumented_client, runtime};

/// How the plugin engine allocates instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PluginAllocator {
    /// Pooling when the address space allows, else on-demand.
    Auto,
    /// Pooling only (fails to start if the pool cannot be reserved).
    Pooling,
    /// On-demand only.
    OnDemand,
}

#[derive(Debug, Args)]
pub struct HubArgs {
    /// Do not run the plugin host (the `AddOnPlugin` controller).
    #[arg(long)]
    pub no_plugin_host: bool,
    /// Directory of compiled plugin artifacts (default: <flotilla cache>/plugin-artifacts).
    #[arg(long)]
    pub plugin_cache_dir: Option<PathBuf>,
    /// Compile every plugin at start instead of reading cached artifacts.
    #[arg(long)]
    pub no_plugin_cache: bool,
    /// How the plugin engine allocates instances.
    #[arg(long, value_enum, default_value_t = PluginAllocator::Auto)]
    pub plugin_allocator: PluginAllocator,
    /// Plugin calls alive at once across all plugins; further calls wait for a slot.
    #[arg(long, default_value_t = 64)]
    pub plugin_max_concurrent_calls: u32,
    /// Guest memory all plugin calls may hold at once, in MiB; keep it within the hub's own
    /// memory limit (deploy/hub: 1 GiB). One plugin may hold a quarter of it, which is also the
    /// largest `spec.limits.memoryMiB` an AddOnPlugin may ask for.
    #[arg(long, default_value_t = flotilla_wasm::DEFAULT_MEMORY_BUDGET_BYTES >> 20)]
    pub plugin_memory_budget_mib: u64,
    /// Largest component accepted from a source, in MiB (after decompression).
    #[arg(long, default_value_t = 32)]
    pub plugin_max_component_mib: usize,
    /// Epoch tick in milliseconds: how often a running plugin checks its deadline and yields.
    #[arg(long, default_value_t = 10)]
    pub plugin_epoch_tick_ms: u64,
    /// Seconds between re-reads of a healthy plugin whose source is not pinned by digest.
    #[arg(long, default_value_t = 300)]
    pub plugin_resync_seconds: u64,
    /// Longest one fetch of a plugin from its source may take, in seconds (a registry that
    /// holds the connection is given up on; the last good revision keeps serving).
    #[arg(long, default_value_t = flotilla_plugin_loader::controller::DEFAULT_FETCH_DEADLINE.as_secs())]
    pub plugin_fetch_timeout_seconds: u64,
    /// Consecutive runtime faults after which a plugin revision is quarantined.
    #[arg(long, default_value_t = FaultPolicy::DEFAULT_THRESHOLD)]
    pub plugin_quarantine_after: u32,
    /// First quarantine, in seconds; doubles with each quarantine of the same revision.
    #[arg(long, default_value_t = FaultPolicy::DEFAULT_QUARANTINE.as_secs())]
    pub plugin_quarantine_seconds: u64,
    /// Longest quarantine, in seconds.
    #[arg(long, default_value_t = FaultPolicy::DEFAULT_QUARANTINE_MAX.as_secs())]
    pub plugin_quarantine_max_seconds: u64,
    /// The one namespace whose Secrets an `AddOnPlugin` may name (`spec.source.oci.pullSecretRef`,
    /// `spec.signers[].caSecretRef`) and where an AddOnTemplate's `signingCA` must be; a
    /// reference to another namespace is refused with `Fetched` False `SecretOutsideNamespace`
    /// (a template's: an `AddOnCSRNotSigned` Event) and nothing is read. deploy/hub lets the hub
    /// read Secrets in its own namespace only: another namespace here needs a Role granting
    /// `get` on Secrets there. ConfigMap sources are not confined.
    #[arg(long, default_value = names::HUB_NAMESPACE)]
    pub plugin_secrets_namespace: String,
    /// Window, in seconds, over which runtime faults are counted in `AddOnPlugin` status.
    #[arg(long, default_value_t = FaultPolicy::DEFAULT_WINDOW.as_secs())]
    pub plugin_fault_window_seconds: u64,
    /// Where the hub's HTTPS webhook server listens (ManifestWork size validation); port 0
    /// picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub webhook_bind: std::net::SocketAddr,
    /// The host name or IP the apiserver reaches the webhook server at (default: the bind
    /// address); it goes into the serving certificate and the registered URL.
    #[arg(long)]
    pub webhook_host: Option<String>,
    /// The Service (`NAMESPACE/NAME`, port 443) in front of the hub replicas that the
    /// apiserver reaches the webhook through, when the hub runs in the hub cluster (as
    /// deploy/hub does); its DNS name goes into the serving certificate.
    #[arg(long, conflicts_with = "webhook_host", value_parser = parse_service)]
    pub webhook_service: Option<(String, String)>,
    #[command(flatten)]
    pub gateway: GatewayArgs,
    #[command(flatten)]
    pub ops: OpsArgs,
    #[command(flatten)]
    pub leader: LeaderArgs,
}

/// The cluster gateway: OCM's ClusterGateway API (`cluster.core.oam.dev/v1alpha1`), an
/// aggregated API through which hub users reach managed clusters' apiservers over the
/// cluster-proxy add-on's tunnels, with the managed-serviceaccount add-on's tokens.
#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// Serve the cluster gateway, reaching clusters through the cluster-proxy tunnel server's
    /// hub-side socket here.
    #[arg(long)]
    pub cluster_gateway_tunnel_socket: Option<PathBuf>,
    /// Where the cluster gateway listens (default: port 9444 of every address; with
    /// `--cluster-gateway-address`, a free port of that address).
    #[arg(long, requires = "cluster_gateway_tunnel_socket")]
    pub cluster_gateway_bind: Option<std::net::SocketAddr>,
    /// The Service (`NAMESPACE/NAME`, port 443) the gateway's APIService names; its DNS name
    /// goes into the serving certificate.
    #[arg(long, default_value = DEFAULT_GATEWAY_SERVICE, value_parser = parse_service)]
    pub cluster_gateway_service: (String, String),
    /// For a hub outside the hub cluster: the address the apiserver reaches the gateway at (not
    /// loopback, which the apiserver refuses as an endpoint); the hub writes the Service's
    /// Endpoints. Without it, the Service selects the gateway's pods (deploy/cluster-gateway).
    #[arg(long, requires = "cluster_gateway_tunnel_socket")]
    pub cluster_gateway_address: Option<std::net::IpAddr>,
    /// The Secret in each cluster namespace holding the managed service account token the
    /// gateway sends (OCM names the ManagedServiceAccount, and so its Secret, `cluster-gateway`).
    #[arg(long, default_value = "cluster-gateway")]
    pub cluster_gateway_token_secret: String,
}

/// deploy/cluster-gateway's Service in front of the cluster gateway.
const DEFAULT_GATEWAY_SERVICE: &str = "open-cluster-management-hub/flotilla-cluster-gateway";
/// The port the gateway listens on in deploy/cluster-gateway's pod.
const DEFAULT_GATEWAY_PORT: u16 = 9444;

impl GatewayArgs {
    /// The gateway's settings, when it is to be served.
    fn settings(&self) -> Option<runtime::gateway::GatewaySettings> {
        let tunnel_socket = self.cluster_gateway_tunnel_socket.clone()?;
        let bind = self
            .cluster_gateway_bind
            .unwrap_or_else(|| match self.cluster_gateway_address {
                Some(ip) => (ip, 0).into(),
                None => (std::net::Ipv4Addr::UNSPECIFIED, DEFAULT_GATEWAY_PORT).into(),
            });
        Some(runtime::gateway::GatewaySettings {
            tunnel_socket,
            bind,
            service: self.cluster_gateway_service.clone(),
            address: self.cluster_gateway_address,
            token_secret: self.cluster_gateway_token_secret.clone(),
        })
    }
}

/// `flotilla cluster-gateway`: the gateway alone, beside a tunnel server outside the hub's pods.
#[derive(Debug, Args)]
pub struct ClusterGatewayArgs {
    #[command(flatten)]
    pub gateway: GatewayArgs,
    /// Write the cluster-proxy tunnel server's credentials into this directory first (its
    /// agents' CA, and a serving certificate kept in Secret flotilla-hub-cluster-proxy-serving),
    /// for a tunnel server beside this process (deploy/cluster-gateway).
    #[arg(long, requires = "tunnel_server_host")]
    pub tunnel_credentials_dir: Option<PathBuf>,
    /// A name agents reach the tunnel server by (repeatable): it goes into its certificate.
    #[arg(long)]
    pub tunnel_server_host: Vec<String>,
    #[command(flatten)]
    pub ops: OpsArgs,
}

/// Where `/metrics`, `/healthz` and `/readyz` are served.
#[derive(Debug, Args)]
pub struct OpsArgs {
    /// Address of the plain-HTTP metrics and health endpoint; port 0 picks a free one (printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub ops_bind: std::net::SocketAddr,
}

/// Lease-based leader election among replicas (durations as OCM's controllers use by default).
#[derive(Debug, Args)]
pub struct LeaderArgs {
    /// Act without electing a leader (one replica only).
    #[arg(long)]
    pub disable_leader_election: bool,
    /// Namespace of the leader lease.
    #[arg(long, default_value = names::HUB_NAMESPACE)]
    pub leader_election_namespace: String,
    /// This replica's identity in the lease (default: host name and a random suffix).
    #[arg(long)]
    pub leader_election_identity: Option<String>,
    /// How long followers wait after the leader's last renewal (e.g. `137s`).
    #[arg(long, default_value = "137s", value_parser = parse_duration)]
    pub leader_election_lease_duration: Duration,
    /// How long the leader acts without a successful renewal (e.g. `107s`).
    #[arg(long, default_value = "107s", value_parser = parse_duration)]
    pub leader_election_renew_deadline: Duration,
    /// How often to try to acquire or renew the lease (e.g. `26s`).
    #[arg(long, default_value = "26s", value_parser = parse_duration)]
    pub leader_election_retry_period: Duration,
}

impl LeaderArgs {
    /// The election for lease `name`, or None when disabled.
    fn election(&self, name: &str) -> Option<flotilla_kube::leader::LeaderElection> {
        (!self.disable_leader_election).then(|| flotilla_kube::leader::LeaderElection {
            namespace: self.leader_election_namespace.clone(),
            name: name.to_owned(),
            identity: self
                .leader_election_identity
                .clone()
                .unwrap_or_else(default_identity),
            lease_duration: self.leader_election_lease_duration,
            renew_deadline: self
                .leader_election_renew_deadline
                .min(self.leader_election_lease_duration),
            retry_period: self.leader_election_retry_period,
        })
    }
}

/// `<host name>_<random>`, as client-go names candidates: unique per process.
fn default_identity() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "flotilla".to_owned());
    format!("{host}_{:08x}", fastrand::u32(..))
}

impl HubArgs {
    /// The plugin runtime's settings from the flags.
    fn runtime_config(&self) -> RuntimeConfig {
        let cache_dir = (!self.no_plugin_cache).then(|| {
            self.plugin_cache_dir
                .clone()
                .unwrap_or_else(|| flotilla_localenv::binary::cache_dir().join("plugin-artifacts"))
        });
        RuntimeConfig {
            allocator: match self.plugin_allocator {
                PluginAllocator::Auto => AllocatorChoice::Auto,
                PluginAllocator::Pooling => AllocatorChoice::Pooling,
                PluginAllocator::OnDemand => AllocatorChoice::OnDemand,
            },
            max_concurrent_calls: self.plugin_max_concurrent_calls,
            memory_budget_bytes: self.plugin_memory_budget_mib.saturating_mul(1 << 20),
            max_component_bytes: self.plugin_max_component_mib.saturating_mul(1 << 20),
            epoch_tick: Duration::from_millis(self.plugin_epoch_tick_ms.max(1)),
            cache_dir,
            faults: FaultPolicy {
                threshold: self.plugin_quarantine_after.max(1),
                quarantine: Duration::from_secs(self.plugin_quarantine_seconds.max(1)),
                quarantine_max: Duration::from_secs(self.plugin_quarantine_max_seconds.max(1)),
                window: Duration::from_secs(self.plugin_fault_window_seconds.max(1)),
                ..FaultPolicy::default()
            },
            ..RuntimeConfig::default()
        }
    }

    /// The `AddOnPlugin` controller's settings from the flags.
    fn controller_config(&self) -> ControllerConfig {
        ControllerConfig {
            max_fetch_bytes: self.plugin_max_component_mib.saturating_mul(1 << 20),
            resync: Duration::from_secs(self.plugin_resync_seconds.max(1)),
            fetch_deadline: Duration::from_secs(self.plugin_fetch_timeout_seconds.max(1)),
            secrets_namespace: self.plugin_secrets_namespace.clone(),
            ..ControllerConfig::default()
        }
    }
}

#[derive(Debug, Args)]
pub struct KlusterletArgs {
    /// This cluster's name on the hub (default: the stored name, else a random one).
    #[arg(long)]
    pub cluster_name: Option<String>,
    /// This agent's name (default: the stored name, else a random one).
    #[arg(long)]
    pub agent_name: Option<String>,
    /// The agent namespace on the managed cluster (holds the bootstrap and hub kubeconfigs).
    #[arg(long, default_value = names::AGENT_NAMESPACE)]
    pub agent_namespace: String,
    /// `leaseDurationSeconds` of the ManagedCluster the agent creates; the hub marks the cluster
    /// Unknown after five of these without a renewal.
    #[arg(long, default_value_t = 60)]
    pub lease_duration_seconds: i32,
    /// The period add-on agents renew their leases at; an add-on whose lease is older than five
    /// of these is reported unavailable (OCM: 60).
    #[arg(long, default_value_t = 60)]
    pub addon_lease_duration_seconds: u64,
    /// How long an AppliedManifestWork whose ManifestWork vanished from the hub is kept before
    /// its objects are removed (e.g. `60m`, `2h`).
    #[arg(long = "appliedmanifestwork-eviction-grace-period", default_value = "60m", value_parser = parse_duration)]
    pub eviction_grace_period: std::time::Duration,
    /// How often the work agent refreshes status feedback (e.g. `10s`).
    #[arg(long = "status-sync-interval", default_value = "10s", value_parser = parse_duration)]
    pub status_sync_interval: std::time::Duration,
    /// Where the agent's own objects live: `default` on the managed cluster of
    /// `--kubeconfig`; `hosted` on the cluster of `--kubeconfig` (the hosting cluster), with
    /// the managed cluster reached through the kubeconfig in Secret
    /// `external-managed-kubeconfig` (key `kubeconfig`) in the agent namespace there.
    #[arg(long, value_enum, default_value_t = KlusterletMode::Default)]
    pub mode: KlusterletMode,
    #[command(flatten)]
    pub ops: OpsArgs,
}

/// Where a klusterlet runs and keeps its objects (OCM's klusterlet `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KlusterletMode {
    /// On the managed cluster.
    Default,
    /// On a hosting cluster, reaching the managed cluster through a kubeconfig secret.
    Hosted,
}

/// `NAMESPACE/NAME` of a Service.
fn parse_service(text: &str) -> Result<(String, String), String> {
    match text.split_once('/') {
        Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((namespace.to_owned(), name.to_owned()))
        }
        _ => Err(format!("{text:?} is not NAMESPACE/NAME of a Service")),
    }
}

/// A duration such as `90s`, `60m` or `1h 30m` (jiff's friendly format).
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let signed: k8s_openapi::jiff::SignedDuration = text
        .parse()
        .map_err(|e| format!("{text:?} is not a duration such as 90s, 60m or 2h: {e}"))?;
    std::time::Duration::try_from(signed).map_err(|_| format!("{text:?} must not be negative"))
}

/// Runs the hub against the hub cluster of `--kubeconfig` until interrupted.
pub async fn hub(global: &GlobalArgs, args: &HubArgs) -> anyhow::Result<()> {
    let shutdown = runtime::shutdown_signal()?;
    let (client, _) = instrumented_client(global).await.context("connect to the hub")?;
    let settings = runtime::hub::HubSettings {
        plugins: (!args.no_plugin_host).then(|| args.runtime_config()),
        loader: args.controller_config(),
        plugin_secrets_namespace: args.plugin_secrets_namespace.clone(),
        webhook_bind: args.webhook_bind,
        webhook_host: args.webhook_host.clone(),
        webhook_service: args.webhook_service.clone(),
        ops_bind: args.ops.ops_bind,
        election: args.leader.election(runtime::hub::HUB_LEASE),
        gateway: args.gateway.settings(),
    };
    runtime::hub::run(client, settings, shutdown).await
}

/// Serves the cluster gateway for the hub cluster of `--kubeconfig` until interrupted.
pub async fn cluster_gateway(global: &GlobalArgs, args: &ClusterGatewayArgs) -> anyhow::Result<()> {
    let Some(settings) = args.gateway.settings() else {
        anyhow::bail!(
            "--cluster-gateway-tunnel-socket is required: the gateway reaches clusters only through tunnels"
        );
    };
    let shutdown = runtime::shutdown_signal()?;
    let (client, _) = instrumented_client(global).await.context("connect to the hub")?;
    let credentials = args
        .tunnel_credentials_dir
        .clone()
        .map(|dir| runtime::gateway::TunnelCredentials {
            dir,
            hosts: args.tunnel_server_host.clone(),
        });
    runtime::gateway::run(client, settings, credentials, args.ops.ops_bind, shutdown).await
}

/// Runs the klusterlet against the managed cluster of `--kubeconfig` until interrupted.
pub async fn klusterlet(global: &GlobalArgs, args: &KlusterletArgs) -> anyhow::Result<()> {
    let shutdown = runtime::shutdown_signal()?;
    let (client, _) = instrumented_client(global).await.context(match args.mode {
        KlusterletMode::Default => "connect to the managed cluster",
        KlusterletMode::Hosted => "connect to the hosting cluster",
    })?;
    let settings = runtime::klusterlet::KlusterletSettings {
        registration: agent::AgentOptions {
            cluster_name: args.cluster_name.clone(),
            agent_name: args.agent_name.clone(),
            agent_namespace: args.agent_namespace.clone(),
            lease_duration_seconds: args.lease_duration_seconds,
            addon_lease_duration: Duration::from_secs(args.addon_lease_duration_seconds.max(1)),
            ..Default::default()
        },
        work: flotilla_work::agent::AgentOptions {
            cluster_name: args.cluster_name.clone(),
            agent_namespace: args.agent_namespace.clone(),
            eviction_grace_period: args.eviction_grace_period,
            status_sync_interval: args.status_sync_interval,
            ..Default::default()
        },
        hosted: args.mode == KlusterletMode::Hosted,
        ops_bind: args.ops.ops_bind,
    };
    runtime::klusterlet::run(client, settings, shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_service_is_namespace_slash_name() {
        assert_eq!(
            parse_service("open-cluster-management-hub/flotilla-hub-webhook"),
            Ok((
                "open-cluster-management-hub".to_owned(),
                "flotilla-hub-webhook".to_owned()
            ))
        );
        for bad in ["", "name", "/name", "ns/", "a/b/c"] {
            assert!(parse_service(bad).is_err(), "{bad:?}");
        }
    }
}
