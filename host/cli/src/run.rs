//! `flotilla hub` and `flotilla klusterlet`: the long-running components, in the foreground.

use anyhow::Context as _;
use clap::Args;
use flotilla_registration::{agent, hub, names};

use crate::{cli::GlobalArgs, kube::client};

#[derive(Debug, Args)]
pub struct HubArgs {
    /// Where the hub's HTTPS webhook server listens (ManifestWork size validation); port 0
    /// picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub webhook_bind: std::net::SocketAddr,
    /// The host name or IP the apiserver reaches the webhook server at (default: the bind
    /// address); it goes into the serving certificate and the registered URL.
    #[arg(long)]
    pub webhook_host: Option<String>,
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
    eprintln!("flotilla hub: running registration controllers; webhook at {url}");
    tokio::select! {
        result = hub::run(client, hub::HubOptions::default()) => result.context("hub controllers stopped"),
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// Runs the klusterlet against the managed cluster of `--kubeconfig` until interrupted.
pub async fn klusterlet(global: &GlobalArgs, args: &KlusterletArgs) -> anyhow::Result<()> {
    let (client, _) = client(global).await.context("connect to the managed cluster")?;
    let options = agent::AgentOptions {
        cluster_name: args.cluster_name.clone(),
        agent_name: args.agent_name.clone(),
        agent_namespace: args.agent_namespace.clone(),
        lease_duration_seconds: args.lease_duration_seconds,
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
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}
