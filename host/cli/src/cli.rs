//! The command-line surface (see the design's `cli.md`). Each subcommand's work lives in its
//! own module; this file only declares arguments and dispatches.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::{
    accept, addon, addon_agent, clean, clusterset, completion, controlplane, down, get, init, join,
    placement, plugin, run, status, up, upgrade, work,
};

/// Flotilla: a multicluster control plane that speaks Open Cluster Management's APIs.
#[derive(Debug, Parser)]
#[command(name = "flotilla", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command understands.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Kubeconfig of the cluster to talk to (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// Log lines as human-readable text or as JSON objects (one per line, with the span of
    /// each reconcile: controller and object).
    #[arg(long, global = true, env = "FLOTILLA_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// On failure, also print the apiserver's raw answer (its Status object).
    #[arg(short = 'v', long, global = true)]
    pub verbose: bool,
    /// Where local control planes and other local state live.
    #[arg(long, global = true, env = "FLOTILLA_STATE_DIR", default_value = ".flotilla")]
    pub state_dir: PathBuf,
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per event, for log collectors.
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a whole local Flotilla in the background: a hub and managed clusters on local
    /// control planes, an OCI registry, the hub and klusterlets, and the helloworld add-on.
    Up(up::UpArgs),
    /// Stop everything `flotilla up` started under the state directory.
    Down(down::DownArgs),
    /// Show what `flotilla up` runs and how healthy it is; non-zero exit if anything is down.
    Status,
    /// Run the hub's controllers (registration, …) against the hub cluster.
    Hub(Box<run::HubArgs>),
    /// Run the managed-cluster agent (registration, …) against a managed cluster.
    Klusterlet(run::KlusterletArgs),
    /// Serve the ClusterGateway API (`cluster.core.oam.dev`) for the hub cluster, beside a
    /// cluster-proxy tunnel server, when `flotilla hub` does not serve it itself.
    ClusterGateway(run::ClusterGatewayArgs),
    /// Prepare a hub: CRDs, RBAC, a bootstrap identity, admission, default cluster sets; print
    /// the join command.
    Init(init::InitArgs),
    /// Register this (managed) cluster with a hub.
    Join(join::JoinArgs),
    /// Approve joining clusters' certificate requests and accept them.
    Accept(accept::AcceptArgs),
    /// Remove the klusterlet from a managed cluster.
    Unjoin(join::UnjoinArgs),
    /// Remove the hub's Flotilla install (what `flotilla init` created); refused while
    /// ManagedClusters exist, unless --force.
    Clean(clean::CleanArgs),
    /// Roll the hub's or a klusterlet's Deployment to another image.
    #[command(subcommand)]
    Upgrade(upgrade::Command),
    /// Show clusters, cluster sets, placements, works or the join command.
    #[command(subcommand)]
    Get(get::Command),
    /// Create ManifestWorks, cluster sets and Placements.
    #[command(subcommand)]
    Create(CreateCommand),
    /// Delete ManifestWorks and cluster sets.
    #[command(subcommand)]
    Delete(DeleteCommand),
    /// Bind cluster sets to namespaces (or unbind them) and choose their clusters.
    #[command(subcommand)]
    Clusterset(clusterset::Command),
    /// Enable or disable add-ons on clusters or placements.
    #[command(subcommand)]
    Addon(addon::Command),
    /// Run a real local Kubernetes control plane (etcd, kube-apiserver,
    /// kube-controller-manager) on loopback.
    #[command(subcommand)]
    Controlplane(controlplane::Command),
    /// Run, inspect and publish add-on plugins (WebAssembly components).
    #[command(subcommand)]
    Plugin(plugin::Command),
    /// Print a shell completion script (bash, zsh or fish).
    Completion(completion::CompletionArgs),
    /// A stand-in add-on agent that only renews its lease (for demos and tests).
    #[command(hide = true)]
    AddonAgent(addon_agent::AddonAgentArgs),
}

/// `flotilla create …`.
#[derive(Debug, Subcommand)]
pub enum CreateCommand {
    /// Wrap the objects of a file or directory in a ManifestWork for each cluster.
    Work(work::CreateWorkArgs),
    /// Create an empty cluster set (clusters join it with `flotilla clusterset set`).
    Clusterset(clusterset::CreateArgs),
    /// Create a Placement choosing clusters by name, cluster set, labels and count.
    Placement(placement::CreatePlacementArgs),
}

/// `flotilla delete …`.
#[derive(Debug, Subcommand)]
pub enum DeleteCommand {
    /// Delete a ManifestWork from clusters.
    Work(work::DeleteWorkArgs),
    /// Delete a cluster set that is bound to no namespace.
    Clusterset(clusterset::DeleteArgs),
}

impl Cli {
    pub async fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Up(args) => up::up(&self.global, &args).await,
            Command::Down(args) => down::down(&self.global, &args).await,
            Command::Status => status::status(&self.global).await,
            Command::Hub(args) => run::hub(&self.global, &args).await,
            Command::Klusterlet(args) => run::klusterlet(&self.global, &args).await,
            Command::ClusterGateway(args) => run::cluster_gateway(&self.global, &args).await,
            Command::Init(args) => init::init(&self.global, &args).await,
            Command::Join(args) => join::join(&self.global, &args).await,
            Command::Accept(args) => accept::accept(&self.global, &args).await,
            Command::Unjoin(args) => join::unjoin(&self.global, &args).await,
            Command::Clean(args) => clean::clean(&self.global, &args).await,
            Command::Upgrade(command) => command.run(&self.global).await,
            Command::Get(command) => command.run(&self.global).await,
            Command::Create(CreateCommand::Work(args)) => work::create(&self.global, &args).await,
            Command::Delete(DeleteCommand::Work(args)) => work::delete(&self.global, &args).await,
            Command::Create(CreateCommand::Clusterset(args)) => clusterset::create(&self.global, &args).await,
            Command::Create(CreateCommand::Placement(args)) => placement::create(&self.global, &args).await,
            Command::Delete(DeleteCommand::Clusterset(args)) => clusterset::delete(&self.global, &args).await,
            Command::Clusterset(command) => command.run(&self.global).await,
            Command::Addon(command) => command.run(&self.global).await,
            Command::Controlplane(command) => command.run(&self.global).await,
            Command::Plugin(command) => command.run(&self.global).await,
            Command::Completion(args) => {
                completion::completion(&args);
                Ok(())
            }
            Command::AddonAgent(args) => addon_agent::run(&self.global, &args).await,
        }
    }
}
