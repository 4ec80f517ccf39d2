//! `flotilla clusterset bind|unbind|set` and `flotilla create|delete clusterset`: bind a cluster
//! set into a namespace (so that Placements there may select its clusters) or unbind it, put
//! clusters into an exclusive cluster set, and make or remove sets, as clusteradm does.

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use flotilla_api::cluster::consts::{DEFAULT_CLUSTER_SET, GLOBAL_CLUSTER_SET};
use flotilla_api::cluster::{
    consts::CLUSTER_SET_LABEL,
    v1::ManagedCluster,
    v1beta2::{ManagedClusterSet, ManagedClusterSetBinding, SelectorType},
};
use flotilla_kube::apply::apply;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use crate::{cli::GlobalArgs, kube::client};

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Bind a cluster set into a namespace (a ManagedClusterSetBinding named after the set).
    Bind(BindArgs),
    /// Remove a cluster set's binding from a namespace.
    Unbind(BindArgs),
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
            Command::Unbind(args) => unbind(global, &args).await,
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

/// `flotilla create clusterset NAME`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The cluster set's name.
    pub name: String,
}

/// `flotilla delete clusterset NAME`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// The cluster set's name.
    pub name: String,
}

/// `flotilla create clusterset`: an empty set whose clusters carry its label (`clusterset
/// set` puts them in). One that exists already is left as it is.
pub async fn create(global: &GlobalArgs, args: &CreateArgs) -> anyhow::Result<()> {
    let (hub, _) = client(global).await?;
    let set: ManagedClusterSet = serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSet",
        "metadata": {"name": args.name},
        "spec": {"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}},
    }))?;
    match Api::<ManagedClusterSet>::all(hub)
        .create(&PostParams::default(), &set)
        .await
    {
        Ok(_) => println!("cluster set {} created", args.name),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            println!("cluster set {} already exists", args.name);
        }
        Err(error) => return Err(error).with_context(|| format!("create cluster set {}", args.name)),
    }
    Ok(())
}

/// `flotilla delete clusterset`: refused while the set is bound (Placements in those
/// namespaces would lose its clusters unannounced) and for the sets the hub keeps.
pub async fn delete(global: &GlobalArgs, args: &DeleteArgs) -> anyhow::Result<()> {
    if [DEFAULT_CLUSTER_SET, GLOBAL_CLUSTER_SET].contains(&args.name.as_str()) {
        bail!(
            "cluster set {} is kept by the hub, which would make it again; remove its bindings instead \
             (`flotilla clusterset unbind {} --namespace NS`)",
            args.name,
            args.name
        );
    }
    let (hub, _) = client(global).await?;
    let sets: Api<ManagedClusterSet> = Api::all(hub.clone());
    if sets
        .get_opt(&args.name)
        .await
        .with_context(|| format!("read cluster set {}", args.name))?
        .is_none()
    {
        bail!(
            "no cluster set {} on this hub (`flotilla get clustersets` lists them)",
            args.name
        );
    }
    let mut bound: Vec<String> = Api::<ManagedClusterSetBinding>::all(hub)
        .list(&ListParams::default())
        .await
        .context("list cluster set bindings")?
        .items
        .iter()
        .filter(|b| b.spec.cluster_set == args.name)
        .filter_map(ResourceExt::namespace)
        .collect();
    bound.sort();
    if let Some(first) = bound.first() {
        bail!(
            "cluster set {} is bound to namespace(s) {}; unbind it first (`flotilla clusterset unbind {} \
             --namespace {first}`)",
            args.name,
            bound.join(", "),
            args.name
        );
    }
    sets.delete(&args.name, &DeleteParams::default())
        .await
        .with_context(|| format!("delete cluster set {}", args.name))?;
    println!("cluster set {} deleted", args.name);
    Ok(())
}

async fn unbind(global: &GlobalArgs, args: &BindArgs) -> anyhow::Result<()> {
    let (hub, _) = client(global).await?;
    let bindings: Api<ManagedClusterSetBinding> = Api::namespaced(hub, &args.namespace);
    match bindings.delete(&args.set, &DeleteParams::default()).await {
        Ok(_) => {
            println!(
                "cluster set {} is no longer bound to namespace {}",
                args.set, args.namespace
            );
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 404 => bail!(
            "cluster set {} is not bound to namespace {} (`flotilla get clustersets` shows its namespaces)",
            args.set,
            args.namespace
        ),
        Err(error) => Err(error).with_context(|| {
            format!(
                "unbind cluster set {} from namespace {}",
                args.set, args.namespace
            )
        }),
    }
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
