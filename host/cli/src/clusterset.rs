//! `flotilla clusterset bind|set`: bind a cluster set into a namespace (so that Placements there
//! may select its clusters), and put clusters into an exclusive cluster set, as clusteradm does.

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use flotilla_api::cluster::{
    consts::CLUSTER_SET_LABEL,
    v1::ManagedCluster,
    v1beta2::{ManagedClusterSet, ManagedClusterSetBinding, SelectorType},
};
use flotilla_kube::apply::apply;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

use crate::{cli::GlobalArgs, kube::client};

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Bind a cluster set into a namespace (a ManagedClusterSetBinding named after the set).
    Bind(BindArgs),
    /// Put clusters into a cluster set (the exclusive clusterset label on each cluster).
    Set(SetArgs),
}

#[derive(Debug, Args)]
pub struct BindArgs {
    /// The cluster set.
    pub set: String,
    /// The namespace to bind it into.
    #[arg(long, short = 'n')]
    pub namespace: String,
}

#[derive(Debug, Args)]
pub struct SetArgs {
    /// The cluster set.
    pub set: String,
    /// The clusters to move into the set.
    #[arg(long, value_delimiter = ',', required = true)]
    pub clusters: Vec<String>,
}

impl Command {
    pub async fn run(self, global: &GlobalArgs) -> anyhow::Result<()> {
        match self {
            Command::Bind(args) => bind(global, &args).await,
            Command::Set(args) => set(global, &args).await,
        }
    }
}

async fn bind(global: &GlobalArgs, args: &BindArgs) -> anyhow::Result<()> {
    let (hub, _) = client(global).await?;
    if Api::<ManagedClusterSet>::all(hub.clone())
        .get_opt(&args.set)
        .await?
        .is_none()
    {
        eprintln!(
            "warning: cluster set {} does not exist yet; the binding reports Bound=False until it does",
            args.set
        );
    }
    let binding: ManagedClusterSetBinding = serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSetBinding",
        "metadata": {"name": args.set, "namespace": args.namespace},
        "spec": {"clusterSet": args.set},
    }))?;
    apply(&Api::namespaced(hub, &args.namespace), &binding)
        .await
        .with_context(|| format!("bind cluster set {} into namespace {}", args.set, args.namespace))?;
    println!(
        "cluster set {} is bound to namespace {}",
        args.set, args.namespace
    );
    Ok(())
}

async fn set(global: &GlobalArgs, args: &SetArgs) -> anyhow::Result<()> {
    let (hub, _) = client(global).await?;
    let Some(set) = Api::<ManagedClusterSet>::all(hub.clone())
        .get_opt(&args.set)
        .await?
    else {
        bail!("cluster set {} does not exist", args.set);
    };
    if set.spec.cluster_selector.selector_type != SelectorType::ExclusiveClusterSetLabel {
        bail!(
            "cluster set {} selects clusters by a label selector; change the clusters' labels instead",
            args.set
        );
    }
    let clusters: Api<ManagedCluster> = Api::all(hub);
    let patch = json!({"metadata": {"labels": {CLUSTER_SET_LABEL: args.set}}});
    for name in &args.clusters {
        clusters
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("move cluster {name} into cluster set {}", args.set))?;
        println!("cluster {name} is in cluster set {}", args.set);
    }
    Ok(())
}
