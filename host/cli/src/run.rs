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
use flotilla_registration::{agent, hub, names};
use flotilla_wasm::controller::ControllerConfig;
use flotilla_wasm::{AllocatorChoice, FaultPolicy, PluginRegistry, Runtime, RuntimeConfig};

use crate::{cli::GlobalArgs, kube::client};

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
    /// Largest `spec.limits.memoryMiB` an AddOnPlugin may ask for.
    #[arg(long, default_value_t = 1024)]
    pub plugin_max_memory_mib: u64,
    /// Largest component accepted from a source, in MiB (after decompression).
    #[arg(long, default_value_t = 32)]
    pub plugin_max_component_mib: usize,
    /// Epoch tick in milliseconds: how often a running plugin checks its deadline and yields.
    #[arg(long, default_value_t = 10)]
    pub plugin_epoch_tick_ms: u64,
    /// Seconds between re-reads of a healthy plugin whose source is not pinned by digest.
    #[arg(long, default_value_t = 300)]
    pub plugin_resync_seconds: u64,
    /// Consecutive runtime faults after which a plugin revision is quarantined.
    #[arg(long, default_value_t = FaultPolicy::DEFAULT_THRESHOLD)]
    pub plugin_quarantine_after: u32,
    /// First quarantine, in seconds; doubles with each quarantine of the same revision.
    #[arg(long, default_value_t = FaultPolicy::DEFAULT_QUARANTINE.as_secs())]
    pub plugin_quarantine_seconds: u64,
    /// Longest quarantine, in seconds.
    #[arg(long, default_value_t = FaultPolicy::DEFAULT_QUARANTINE_MAX.as_secs())]
    pub plugin_quarantine_max_seconds: u64,
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
}

impl HubArgs {
    /// The plugin runtime's settings from the flags.
    fn runtime_config(&self) -> RuntimeConfig {
        let cache_dir = (!self.no_plugin_cache).then(|| {
            self.plugin_cache_dir
                .clone()
                .unwrap_or_else(|| flotilla_testing::binary::cache_dir().join("plugin-artifacts"))
        });
        RuntimeConfig {
            allocator: match self.plugin_allocator {
                PluginAllocator::Auto => AllocatorChoice::Auto,
                PluginAllocator::Pooling => AllocatorChoice::Pooling,
                PluginAllocator::OnDemand => AllocatorChoice::OnDemand,
            },
            max_concurrent_calls: self.plugin_max_concurrent_calls,
            max_memory_bytes: self.plugin_max_memory_mib.saturating_mul(1 << 20),
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
}

/// A duration such as `90s`, `60m` or `1h 30m` (jiff's friendly format).
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let signed: k8s_openapi::jiff::SignedDuration = text
        .parse()
        .map_err(|e| format!("{text:?} is not a duration such as 90s, 60m or 2h: {e}"))?;
    std::time::Duration::try_from(signed).map_err(|_| format!("{text:?} must not be negative"))
}

/// Runs the hub's controllers against the hub of `--kubeconfig` until interrupted.
pub async fn hub(global: &GlobalArgs, args: &HubArgs) -> anyhow::Result<()> {
    let shutdown = shutdown_signal()?;
    let (client, _) = client(global).await.context("connect to the hub")?;
    flotilla_registration::admission::install(&client)
        .await
        .context("install admission policies")?;
    flotilla_work::admission::install(&client)
        .await
        .context("install the ManifestWork admission policy")?;
    let host = args
        .webhook_host
        .clone()
        .unwrap_or_else(|| args.webhook_bind.ip().to_string());
    let webhook = flotilla_work::webhook::serve(args.webhook_bind, std::slice::from_ref(&host))
        .await
        .context("start the webhook server")?;
    let url = format!(
        "https://{host}:{}{}",
        webhook.addr.port(),
        flotilla_work::webhook::VALIDATE_PATH
    );
    flotilla_work::webhook::register(&client, &url, &webhook.ca_pem)
        .await
        .context("register the ManifestWork webhook")?;
    eprintln!("flotilla hub: ManifestWork webhook at {url}");
    let plugin_host = if args.no_plugin_host {
        eprintln!(
            "flotilla hub: running registration, placement and work controllers (plugin host and add-on manager disabled)"
        );
        None
    } else {
        let runtime = Runtime::new(args.runtime_config()).context("start the plugin runtime")?;
        eprintln!(
            "flotilla hub: running registration, placement and work controllers, the plugin host ({:?} allocator) and the add-on manager",
            runtime.allocator()
        );
        Some(Arc::new(PluginRegistry::new(runtime)))
    };
    let plugins = {
        let client = client.clone();
        let config = args.controller_config();
        let registry = plugin_host.clone();
        async move {
            match registry {
                Some(registry) => flotilla_wasm::controller::run(client, registry, config).await,
                None => std::future::pending().await,
            }
        }
    };
    let placement = flotilla_placement::run(client.clone(), flotilla_placement::PlacementOptions::default());
    // The add-on manager calls the plugins the AddOnPlugin controller loads into the registry.
    let addons = {
        let client = client.clone();
        async move {
            match plugin_host {
                Some(registry) => {
                    flotilla_addon_manager::run(client, registry, flotilla_addon_manager::Options::default())
                        .await
                }
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
        result = shutdown => result,
    }
}

/// Runs the klusterlet against the managed cluster of `--kubeconfig` until interrupted.
pub async fn klusterlet(global: &GlobalArgs, args: &KlusterletArgs) -> anyhow::Result<()> {
    let shutdown = shutdown_signal()?;
    let (client, _) = client(global).await.context("connect to the managed cluster")?;
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
    eprintln!("flotilla klusterlet: running the registration agent and the work agent");
    tokio::select! {
        result = agent::run(client.clone(), options) => result.context("registration agent stopped"),
        result = flotilla_work::agent::run(client, work_options) => result.context("work agent stopped"),
        result = shutdown => result,
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
