//! `flotilla get clusters|clustersets|placements|works|addons|token`: tables in clusteradm's spirit, or
//! objects with `-o yaml|json`.

use clap::{Args, Subcommand};
use flotilla_api::cluster::{
    consts::{
        CLUSTER_SET_LABEL, PLACEMENT_LABEL, managed_cluster as mc, managed_cluster_set as mcs,
        placement as pl,
    },
    v1::ManagedCluster,
    v1beta1::{Placement, PlacementDecision},
    v1beta2::{ManagedClusterSet, ManagedClusterSetBinding},
};
use flotilla_core::conditions;
use kube::{Api, ResourceExt, api::ListParams};

use crate::{
    cli::GlobalArgs,
    init,
    kube::client,
    output::{Format, print},
};

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Managed clusters: acceptance, availability, cluster set, capacity and version.
    #[command(visible_alias = "cluster")]
    Clusters(OutputArgs),
    /// Cluster sets: the namespaces they are bound to and how many clusters they select.
    #[command(visible_alias = "clusterset")]
    Clustersets(OutputArgs),
    /// ManifestWorks: Applied/Available/Progressing per work, or per manifest for one work.
    #[command(visible_alias = "work")]
    Works(crate::work::GetWorksArgs),
    /// Placements: selected clusters, and whether they are satisfied or why not.
    #[command(visible_alias = "placement")]
    Placements(PlacementsArgs),
    /// Add-ons per cluster: Available, ManifestApplied, Progressing and config rollout.
    #[command(visible_alias = "addon")]
    Addons(crate::addon::GetAddonsArgs),
    /// The command that joins a cluster to this hub.
    Token(init::TokenArgs),
}

#[derive(Debug, Args)]
pub struct PlacementsArgs {
    /// Only placements of this namespace (default: every namespace).
    #[arg(short = 'n', long = "namespace")]
    pub namespace: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub format: Format,
}

impl Command {
    pub async fn run(self, global: &GlobalArgs) -> anyhow::Result<()> {
        match self {
            Command::Clusters(args) => clusters(global, args.format).await,
            Command::Clustersets(args) => clustersets(global, args.format).await,
            Command::Works(args) => crate::work::get(global, &args).await,
            Command::Placements(args) => placements(global, &args).await,
            Command::Addons(args) => crate::addon::get(global, &args).await,
            Command::Token(args) => init::token(global, &args).await,
        }
    }
}

fn condition_status(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    type_: &str,
) -> String {
    conditions::find(conditions, type_).map_or_else(|| "Unknown".to_owned(), |c| c.status.clone())
}

async fn clusters(global: &GlobalArgs, format: Format) -> anyhow::Result<()> {
    let (hub, _) = client(global).await?;
    let mut items = Api::<ManagedCluster>::all(hub)
        .list(&ListParams::default())
        .await?
        .items;
    items.sort_by_key(|c| c.name_any());
    let rows = items
        .iter()
        .map(|c| {
            let status = c.status.clone().unwrap_or_default();
            let conditions = status.conditions.clone().unwrap_or_default();
            let quantity = |name: &str| status.capacity.get(name).map(|q| q.0.clone()).unwrap_or_default();
            vec![
                c.name_any(),
                c.spec.hub_accepts_client.to_string(),
                condition_status(&conditions, mc::CONDITION_AVAILABLE),
                c.labels().get(CLUSTER_SET_LABEL).cloned().unwrap_or_default(),
                quantity("cpu"),
                quantity("memory"),
                status.version.kubernetes.clone(),
            ]
        })
        .collect();
    print(
        format,
        &items,
        &[
            "NAME",
            "ACCEPTED",
            "AVAILABLE",
            "CLUSTERSET",
            "CPU",
            "MEMORY",
            "KUBERNETES VERSION",
        ],
        rows,
    )
}

async fn clustersets(global: &GlobalArgs, format: Format) -> anyhow::Result<()> {
    let (hub, _) = client(global).await?;
    let mut sets = Api::<ManagedClusterSet>::all(hub.clone())
        .list(&ListParams::default())
        .await?
        .items;
    sets.sort_by_key(|s| s.name_any());
    let bindings = Api::<ManagedClusterSetBinding>::all(hub)
        .list(&ListParams::default())
        .await?
        .items;
    let rows = sets
        .iter()
        .map(|set| {
            let mut namespaces: Vec<String> = bindings
                .iter()
                .filter(|b| b.spec.cluster_set == set.name_any())
                .filter_map(|b| b.namespace())
                .collect();
            namespaces.sort();
            let conditions = set
                .status
                .clone()
                .unwrap_or_default()
                .conditions
                .unwrap_or_default();
            let status = conditions::find(&conditions, mcs::CONDITION_EMPTY)
                .map(|c| c.message.clone())
                .unwrap_or_default();
            vec![
                set.name_any(),
                (!namespaces.is_empty()).to_string(),
                namespaces.join(","),
                status,
            ]
        })
        .collect();
    print(format, &sets, &["NAME", "BOUND", "NAMESPACES", "STATUS"], rows)
}

async fn placements(global: &GlobalArgs, args: &PlacementsArgs) -> anyhow::Result<()> {
    let (hub, _) = client(global).await?;
    let (placements_api, decisions_api): (Api<Placement>, Api<PlacementDecision>) = match &args.namespace {
        Some(ns) => (Api::namespaced(hub.clone(), ns), Api::namespaced(hub, ns)),
        None => (Api::all(hub.clone()), Api::all(hub)),
    };
    let mut items = placements_api.list(&ListParams::default()).await?.items;
    items.sort_by_key(|p| (p.namespace(), p.name_any()));
    let decisions = decisions_api
        .list(&ListParams::default().labels(PLACEMENT_LABEL))
        .await?
        .items;
    let rows = items
        .iter()
        .map(|p| {
            let mut selected: Vec<String> = decisions
                .iter()
                .filter(|d| {
                    d.namespace() == p.namespace() && d.labels().get(PLACEMENT_LABEL) == Some(&p.name_any())
                })
                .flat_map(|d| d.status.iter().flat_map(|s| s.decisions.iter()))
                .map(|d| d.cluster_name.clone())
                .collect();
            selected.sort();
            let conditions = p
                .status
                .clone()
                .unwrap_or_default()
                .conditions
                .unwrap_or_default();
            let satisfied = conditions::find(&conditions, pl::CONDITION_SATISFIED);
            let misconfigured = conditions::find(&conditions, pl::CONDITION_MISCONFIGURED)
                .filter(|c| c.status == conditions::TRUE);
            // Why not: the misconfiguration first, then the satisfied condition's own words.
            let why = match (satisfied, misconfigured) {
                (_, Some(m)) => m.message.clone(),
                (Some(s), None) if s.status != conditions::TRUE => format!("{}: {}", s.reason, s.message),
                _ => String::new(),
            };
            vec![
                p.namespace().unwrap_or_default(),
                p.name_any(),
                satisfied.map_or_else(|| "Unknown".to_owned(), |c| c.status.clone()),
                selected.len().to_string(),
                selected.join(","),
                why,
            ]
        })
        .collect();
    print(
        args.format,
        &items,
        &[
            "NAMESPACE",
            "NAME",
            "SATISFIED",
            "SELECTED",
            "CLUSTERS",
            "WHY NOT",
        ],
        rows,
    )
}
