//! The command-line surface (see the design's `cli.md`). Each subcommand's work lives in its
//! own module; this file only declares arguments and dispatches.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::controlplane;

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
    /// Where local control planes and other local state live.
    #[arg(long, global = true, env = "FLOTILLA_STATE_DIR", default_value = ".flotilla")]
    pub state_dir: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a real local Kubernetes control plane (etcd, kube-apiserver,
    /// kube-controller-manager) on loopback.
    #[command(subcommand)]
    Controlplane(controlplane::Command),
}

impl Cli {
    pub async fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Controlplane(command) => command.run(&self.global).await,
        }
    }
}
