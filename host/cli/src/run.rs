//! `flotilla hub` and `flotilla klusterlet`: the long-running components, in the foreground.
//!
//! `flotilla hub` runs the registration controllers and the plugin host side by side: the
//! `AddOnPlugin` controller (fetch, validate, swap, report) over one plugin runtime whose
//! engine-wide settings are the `--plugin-*` flags. A failure of either stops the process.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use flotilla_plugin_loader::controller::ControllerConfig;
use flotilla_registration::{agent, hub, names};
use flotilla_wasm::{AllocatorChoice, FaultPolicy, PluginRegistry, Runtime, RuntimeConfig};

use crate::{cli::GlobalArgs, kube::instrumented_client};

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
    pub ops: OpsArgs,
    #[command(flatten)]
    pub leader: LeaderArgs,
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

/// Runs `work` under `election` (or directly when disabled), reporting leadership in metrics.
async fn leading<F: Future<Output = anyhow::Result<()>>>(
    client: &kube::Client,
    election: Option<flotilla_kube::leader::LeaderElection>,
    work: F,
) -> anyhow::Result<()> {
    let Some(election) = election else {
        return work.await;
    };
    struct Gauge(String);
    impl flotilla_kube::leader::LeaderObserver for Gauge {
        fn leading(&self, leading: bool) {
            flotilla_kube::metrics::global().set_leader(&self.0, leading);
        }
    }
    ensure_namespace(client, &election.namespace).await?;
    let api = kube::Api::namespaced(client.clone(), &election.namespace);
    eprintln!(
        "flotilla: waiting to lead lease {}/{} as {}",
        election.namespace, election.name, election.identity
    );
    election
        .run(api, &Gauge(election.name.clone()), work)
        .await
        .context("leader election")?
}

/// Creates the lease's namespace when missing (the hub's own namespace, which `flotilla init`
/// and deploy/hub create too), so a hub started on a bare cluster does not wait forever.
async fn ensure_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    let namespaces: kube::Api<Namespace> = kube::Api::all(client.clone());
    if namespaces
        .get_opt(name)
        .await
        .with_context(|| format!("read namespace {name}"))?
        .is_some()
    {
        return Ok(());
    }
    let namespace = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    match namespaces
        .create(&kube::api::PostParams::default(), &namespace)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(error).with_context(|| format!("create the leader lease namespace {name}")),
    }
}

/// Starts the metrics and health endpoint with the process's series.
async fn serve_ops(
    args: &OpsArgs,
    client: &kube::Client,
    plugins: Option<&PluginRegistry>,
    component: &str,
) -> anyhow::Result<()> {
    let mut registry = prometheus_client::registry::Registry::default();
    flotilla_kube::metrics::global().register(&mut registry);
    if let Some(plugins) = plugins {
        plugins.runtime().metrics().register(&mut registry);
    }
    let addr = crate::ops::serve(args.ops_bind, registry, client.clone()).await?;
    eprintln!("flotilla {component}: metrics and health at http://{addr} (/metrics, /healthz, /readyz)");
    Ok(())
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

/// Runs the hub's controllers against the hub of `--kubeconfig` until interrupted. Every
/// replica serves the webhook and the metrics and health endpoint; only the elected leader
/// writes (admission objects, the webhook registration, the controllers).
pub async fn hub(global: &GlobalArgs, args: &HubArgs) -> anyhow::Result<()> {
    let shutdown = shutdown_signal()?;
    let (client, _) = instrumented_client(global).await.context("connect to the hub")?;
    let endpoint = webhook_endpoint(args);
    let host = endpoint.service_host().unwrap_or_else(|| {
        args.webhook_host
            .clone()
            .unwrap_or_else(|| args.webhook_bind.ip().to_string())
    });
    // Every replica serves the one certificate kept in the hub namespace, so the registered
    // caBundle holds whichever replica leads.
    let certificate =
        flotilla_webhook::shared_certificate(&client, names::HUB_NAMESPACE, std::slice::from_ref(&host))
            .await
            .context("get the webhook's serving certificate")?;
    let webhook = flotilla_webhook::serve(args.webhook_bind, &certificate)
        .await
        .context("start the webhook server")?;
    eprintln!("flotilla hub: webhook server at https://{}", webhook.addr);
    // A URL endpoint names each path; a Service reference takes the path beside it.
    let at = |path: &str| match &endpoint {
        flotilla_webhook::Endpoint::Url(_) => {
            flotilla_webhook::Endpoint::Url(format!("https://{host}:{}{path}", webhook.addr.port()))
        }
        service => service.clone(),
    };
    let conversion_endpoint = at(flotilla_webhook::CONVERT_PATH);
    let endpoint = at(flotilla_webhook::VALIDATE_PATH);
    let plugin_host = if args.no_plugin_host {
        None
    } else {
        let runtime = Runtime::new(args.runtime_config()).context("start the plugin runtime")?;
        Some(Arc::new(PluginRegistry::new(runtime)))
    };
    serve_ops(&args.ops, &client, plugin_host.as_deref(), "hub").await?;
    let controllers = async {
        flotilla_registration::admission::install(&client)
            .await
            .context("install admission policies")?;
        flotilla_work::admission::install(&client)
            .await
            .context("install the ManifestWork admission policy")?;
        flotilla_webhook::register_endpoint(&client, &endpoint, &webhook.ca_pem)
            .await
            .context("register the ManifestWork webhook")?;
        match &endpoint {
            flotilla_webhook::Endpoint::Url(url) => {
                eprintln!("flotilla hub: ManifestWork webhook at {url}")
            }
            flotilla_webhook::Endpoint::Service { namespace, name } => {
                eprintln!("flotilla hub: ManifestWork webhook through Service {namespace}/{name}")
            }
        }
        flotilla_webhook::register_conversion(&client, &conversion_endpoint, &webhook.ca_pem)
            .await
            .context("register the add-on conversion webhook")?;
        let conversion = flotilla_webhook::keep_conversion(
            client.clone(),
            conversion_endpoint.clone(),
            webhook.ca_pem.clone(),
        );
        tokio::select! {
            result = run_hub_controllers(client.clone(), args, plugin_host) => result,
            () = conversion => Ok(()),
        }
    };
    let until_stopped = async {
        tokio::select! {
            result = controllers => result,
            result = shutdown => result,
        }
    };
    leading(&client, args.leader.election(HUB_LEASE), until_stopped).await
}

/// Where the apiserver reaches the webhook: the `--webhook-service`, else a URL (its port
/// known once the server listens).
fn webhook_endpoint(args: &HubArgs) -> flotilla_webhook::Endpoint {
    match &args.webhook_service {
        Some((namespace, name)) => flotilla_webhook::Endpoint::Service {
            namespace: namespace.clone(),
            name: name.clone(),
        },
        None => flotilla_webhook::Endpoint::Url(String::new()),
    }
}

/// Name of the hub replicas' leader lease.
const HUB_LEASE: &str = "flotilla-hub";

/// The hub's controllers, until one stops.
async fn run_hub_controllers(
    client: kube::Client,
    args: &HubArgs,
    plugin_host: Option<Arc<PluginRegistry>>,
) -> anyhow::Result<()> {
    match &plugin_host {
        None => eprintln!(
            "flotilla hub: running registration, placement and work controllers (plugin host and add-on manager disabled)"
        ),
        Some(registry) => eprintln!(
            "flotilla hub: running registration, placement and work controllers, the plugin host ({:?} allocator) and the add-on manager",
            registry.runtime().allocator()
        ),
    }
    let plugins = {
        let client = client.clone();
        let config = args.controller_config();
        let registry = plugin_host.clone();
        async move {
            match registry {
                Some(registry) => flotilla_plugin_loader::controller::run(client, registry, config).await,
                None => std::future::pending().await,
            }
        }
    };
    let placement = flotilla_placement::run(client.clone(), flotilla_placement::PlacementOptions::default());
    // The add-on manager calls the plugins the AddOnPlugin controller loads into the registry.
    let addons = {
        let client = client.clone();
        let options = flotilla_addon_manager::Options {
            plugin_secrets_namespace: args.plugin_secrets_namespace.clone(),
            ..flotilla_addon_manager::Options::default()
        };
        async move {
            match plugin_host {
                Some(registry) => flotilla_addon_manager::run(client, registry, options).await,
                None => std::future::pending().await,
            }
        }
    };
    let work = flotilla_work::hub::run(client.clone(), flotilla_work::hub::HubOptions::default());
    tokio::select! {
        result = hub::run(client, hub::HubOptions::default()) => result.context("hub controllers stopped"),
        () = placement => anyhow::bail!("placement controller stopped"),
        () = work => anyhow::bail!("hub work controllers stopped"),
        () = plugins => anyhow::bail!("the AddOnPlugin controller stopped"),
        () = addons => anyhow::bail!("the add-on manager stopped"),
    }
}

/// Runs the klusterlet against the managed cluster of `--kubeconfig` until interrupted.
pub async fn klusterlet(global: &GlobalArgs, args: &KlusterletArgs) -> anyhow::Result<()> {
    let shutdown = shutdown_signal()?;
    tokio::pin!(shutdown);
    let (client, _) = instrumented_client(global).await.context(match args.mode {
        KlusterletMode::Default => "connect to the managed cluster",
        KlusterletMode::Hosted => "connect to the hosting cluster",
    })?;
    serve_ops(&args.ops, &client, None, "klusterlet").await?;
    let options = agent::AgentOptions {
        cluster_name: args.cluster_name.clone(),
        agent_name: args.agent_name.clone(),
        agent_namespace: args.agent_namespace.clone(),
        lease_duration_seconds: args.lease_duration_seconds,
        addon_lease_duration: Duration::from_secs(args.addon_lease_duration_seconds.max(1)),
        ..Default::default()
    };
    // The work agent uses the hub credential the registration agent writes (and rotates)
    // into the hub kubeconfig secret of the same agent namespace.
    let work_options = flotilla_work::agent::AgentOptions {
        cluster_name: args.cluster_name.clone(),
        agent_namespace: args.agent_namespace.clone(),
        eviction_grace_period: args.eviction_grace_period,
        status_sync_interval: args.status_sync_interval,
        ..Default::default()
    };
    if args.mode == KlusterletMode::Default {
        eprintln!("flotilla klusterlet: running the registration agent and the work agent");
        let clients = agent::Clients::same(client);
        return tokio::select! {
            result = agent::run_with(clients.clone(), options) => result.context("registration agent stopped"),
            result = flotilla_work::agent::run_with(clients, work_options) => result.context("work agent stopped"),
            result = &mut shutdown => result,
        };
    }
    // Hosted: the agents run on a client made from the external-managed-kubeconfig secret,
    // and start again on a new client when the secret changes.
    let secret = format!(
        "{}/{}",
        args.agent_namespace,
        names::EXTERNAL_MANAGED_KUBECONFIG_SECRET
    );
    loop {
        eprintln!("flotilla klusterlet: hosted mode; reading the managed cluster's kubeconfig from {secret}");
        let managed = tokio::select! {
            managed = agent::hosted::managed_client(&client, &options) => managed,
            result = &mut shutdown => return result,
        };
        let clients = agent::Clients {
            agent: client.clone(),
            managed: managed.client,
        };
        eprintln!("flotilla klusterlet: running the registration agent and the work agent");
        tokio::select! {
            result = agent::run_with(clients.clone(), options.clone()) => return result.context("registration agent stopped"),
            result = flotilla_work::agent::run_with(clients, work_options.clone()) => return result.context("work agent stopped"),
            result = &mut shutdown => return result,
            () = agent::hosted::wait_for_change(&client, &args.agent_namespace, &managed.kubeconfig) => {
                eprintln!("flotilla klusterlet: {secret} changed; restarting the agents on the new kubeconfig");
            }
        }
    }
}

/// Listens for the process being asked to stop — SIGTERM (what Kubernetes sends a pod) or
/// Ctrl-C — from now on; the returned future resolves when it is. Registered before anything
/// starts, so an early SIGTERM is not the default (fatal) action. Returning ends the
/// controllers' futures, so the process exits with success.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = anyhow::Result<()>>> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listen for SIGTERM")?;
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("listen for Ctrl-C")?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => eprintln!("flotilla: SIGTERM received; stopping"),
            _ = interrupt.recv() => eprintln!("flotilla: interrupted; stopping"),
        }
        Ok(())
    })
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
