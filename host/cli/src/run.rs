//! `flotilla hub` and `flotilla klusterlet`: the long-running components, in the foreground.

use anyhow::Context as _;
use clap::Args;
use flotilla_registration::{agent, hub, names};

use crate::{cli::GlobalArgs, kube::client};

#[derive(Debug, Args)]
pub struct HubArgs {}

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
pub async fn hub(global: &GlobalArgs, _args: &HubArgs) -> anyhow::Result<()> {
    let (client, _) = client(global).await.context("connect to the hub")?;
    flotilla_registration::admission::install(&client)
        .await
        .context("install admission policies")?;
    flotilla_work::admission::install(&client)
        .await
        .context("install the ManifestWork admission policy")?;
    eprintln!("flotilla hub: running registration controllers");
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
