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
}

/// Runs the hub's controllers against the hub of `--kubeconfig` until interrupted.
pub async fn hub(global: &GlobalArgs, _args: &HubArgs) -> anyhow::Result<()> {
    let (client, _) = client(global).await.context("connect to the hub")?;
    flotilla_registration::admission::install(&client)
        .await
        .context("install admission policies")?;
    eprintln!("flotilla hub: running registration, work, plugin and add-on controllers");
    let work = flotilla_work::hub::run(client.clone(), flotilla_work::hub::HubOptions::default());
    // One registry shared by the AddOnPlugin controller (which loads plugin revisions into it)
    // and the add-on manager (which calls them).
    let runtime = flotilla_wasm::Runtime::new(flotilla_wasm::RuntimeConfig::default())
        .context("start the plugin runtime")?;
    let registry = std::sync::Arc::new(flotilla_wasm::PluginRegistry::new(runtime));
    let plugins = flotilla_wasm::controller::run(
        client.clone(),
        std::sync::Arc::clone(&registry),
        flotilla_wasm::controller::ControllerConfig::default(),
    );
    let addons = flotilla_addon_manager::run(
        client.clone(),
        registry,
        flotilla_addon_manager::Options::default(),
    );
    tokio::select! {
        result = hub::run(client, hub::HubOptions::default()) => result.context("hub controllers stopped"),
        () = work => anyhow::bail!("hub work controllers stopped"),
        () = plugins => anyhow::bail!("AddOnPlugin controller stopped"),
        () = addons => anyhow::bail!("add-on manager stopped"),
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
    eprintln!("flotilla klusterlet: running the registration agent");
    tokio::select! {
        result = agent::run(client, options) => result.context("registration agent stopped"),
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}
