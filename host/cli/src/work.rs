//! `flotilla create work`, `flotilla get works`, `flotilla delete work`: ManifestWorks in
//! clusteradm's vocabulary. `create` wraps the objects of a file or directory into one work
//! per cluster (named on the command line or chosen by a placement's decisions); `get` shows
//! Applied/Available/Progressing per work, or per manifest for one work; `delete` removes a
//! work from the named clusters.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::Args;
use flotilla_api::{
    cluster::v1beta1::PlacementDecision,
    work::v1::{Manifest, ManifestWork, ManifestWorkSpec, ManifestsTemplate},
};
use flotilla_core::conditions;
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde::Deserialize;
use serde_json::Value;

use crate::{
    cli::GlobalArgs,
    kube::client,
    output::{Format, print},
};

/// Label on a PlacementDecision naming its placement.
const PLACEMENT_LABEL: &str = "cluster.open-cluster-management.io/placement";

#[derive(Debug, Args)]
pub struct CreateWorkArgs {
    /// Name of the ManifestWork.
    pub name: String,
    /// A YAML/JSON file of objects (several documents allowed) or a directory of such files.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Clusters to create the work for, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        conflicts_with = "placement",
        required_unless_present = "placement"
    )]
    pub clusters: Vec<String>,
    /// A placement (NAMESPACE/NAME) whose decisions choose the clusters.
    #[arg(long)]
    pub placement: Option<String>,
    /// Replace the spec of works that already exist.
    #[arg(long)]
    pub overwrite: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct GetWorksArgs {
    /// Show only this work, with one line per manifest.
    pub name: Option<String>,
    /// Show works of this cluster only (default: every cluster).
    #[arg(long)]
    pub cluster: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct DeleteWorkArgs {
    /// Name of the ManifestWork.
    pub name: String,
    /// Clusters to delete the work from, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    pub clusters: Vec<String>,
}

/// The objects in `path` (a file, or every .yaml/.yml/.json file of a directory, by name).
pub fn read_manifests(path: &Path) -> anyhow::Result<Vec<Value>> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("read directory {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("yaml" | "yml" | "json")
                )
            })
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_owned()]
    };
    let mut manifests = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).with_context(|| format!("read {}", file.display()))?;
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value = Value::deserialize(document).with_context(|| format!("parse {}", file.display()))?;
            match value {
                Value::Null => {}
                Value::Object(_) => manifests.push(value),
                _ => bail!("{}: every document must be a Kubernetes object", file.display()),
            }
        }
    }
    if manifests.is_empty() {
        bail!("{} holds no objects", path.display());
    }
    Ok(manifests)
}

async fn placement_clusters(hub: &Client, placement: &str) -> anyhow::Result<Vec<String>> {
    let (namespace, name) = placement
        .split_once('/')
        .with_context(|| format!("--placement {placement:?}: use NAMESPACE/NAME"))?;
    let decisions = Api::<PlacementDecision>::namespaced(hub.clone(), namespace)
        .list(&ListParams::default().labels(&format!("{PLACEMENT_LABEL}={name}")))
        .await
        .with_context(|| format!("list the decisions of placement {placement}"))?;
    let mut clusters: Vec<String> = decisions
        .items
        .iter()
        .flat_map(|d| d.status.iter().flat_map(|s| s.decisions.iter()))
        .map(|d| d.cluster_name.clone())
        .filter(|c| !c.is_empty())
        .collect();
    clusters.sort();
    clusters.dedup();
    if clusters.is_empty() {
        bail!("placement {placement} has selected no clusters yet");
    }
    Ok(clusters)
}

/// `flotilla create work`.
pub async fn create(global: &GlobalArgs, args: &CreateWorkArgs) -> anyhow::Result<()> {
    let manifests = read_manifests(&args.file)?;
    let (hub, _) = client(global).await.context("connect to the hub")?;
    let clusters = match &args.placement {
        Some(placement) => placement_clusters(&hub, placement).await?,
        None => args.clusters.clone(),
    };
    let spec = ManifestWorkSpec {
        workload: ManifestsTemplate {
            manifests: manifests.into_iter().map(Manifest).collect(),
        },
        ..ManifestWorkSpec::default()
    };
    let mut written = Vec::new();
    for cluster in &clusters {
        let api: Api<ManifestWork> = Api::namespaced(hub.clone(), cluster);
        let work = ManifestWork::new(&args.name, spec.clone());
        let result = match api.create(&PostParams::default(), &work).await {
            Err(kube::Error::Api(status)) if status.code == 409 => {
                if !args.overwrite {
                    bail!(
                        "work {} already exists on cluster {cluster}; pass --overwrite to replace its spec",
                        args.name
                    );
                }
                let patch = serde_json::json!({ "spec": spec });
                api.patch(&args.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
            }
            other => other,
        };
        let work = result.with_context(|| format!("create work {} on cluster {cluster}", args.name))?;
        if args.format == Format::Table {
            println!(
                "work {} {} on cluster {cluster}",
                args.name,
                if args.overwrite { "applied" } else { "created" }
            );
        }
        written.push(work);
    }
    if args.format != Format::Table {
        print(args.format, &written, &[], Vec::new())?;
    }
    Ok(())
}

fn status_of(work: &ManifestWork, type_: &str) -> String {
    work.status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, type_))
        .map_or_else(|| "Unknown".to_owned(), |c| c.status.clone())
}

/// `flotilla get works`.
pub async fn get(global: &GlobalArgs, args: &GetWorksArgs) -> anyhow::Result<()> {
    let (hub, _) = client(global).await.context("connect to the hub")?;
    let api: Api<ManifestWork> = match &args.cluster {
        Some(cluster) => Api::namespaced(hub, cluster),
        None => Api::all(hub),
    };
    let mut works = api
        .list(&ListParams::default())
        .await
        .context("list works")?
        .items;
    if let Some(name) = &args.name {
        works.retain(|w| &w.name_any() == name);
        if works.is_empty() {
            bail!(
                "no work {name} found{}",
                args.cluster
                    .as_ref()
                    .map(|c| format!(" on cluster {c}"))
                    .unwrap_or_default()
            );
        }
    }
    works.sort_by_key(|w| (w.namespace().unwrap_or_default(), w.name_any()));
    if args.name.is_some() && args.format == Format::Table {
        let mut rows = Vec::new();
        for work in &works {
            for manifest in work
                .status
                .iter()
                .flat_map(|s| s.resource_status.manifests.iter())
            {
                let meta = &manifest.resource_meta;
                let status = |type_: &str| {
                    conditions::find(&manifest.conditions, type_)
                        .map_or_else(|| "Unknown".to_owned(), |c| c.status.clone())
                };
                let message = conditions::find(&manifest.conditions, "Applied")
                    .filter(|c| c.status != "True")
                    .map(|c| c.message.clone())
                    .unwrap_or_default();
                rows.push(vec![
                    work.namespace().unwrap_or_default(),
                    meta.ordinal.to_string(),
                    meta.kind.clone(),
                    meta.namespace.clone(),
                    meta.name.clone(),
                    status("Applied"),
                    status("Available"),
                    message,
                ]);
            }
        }
        return print(
            args.format,
            &works,
            &[
                "CLUSTER",
                "ORDINAL",
                "KIND",
                "NAMESPACE",
                "NAME",
                "APPLIED",
                "AVAILABLE",
                "MESSAGE",
            ],
            rows,
        );
    }
    let rows = works
        .iter()
        .map(|w| {
            vec![
                w.namespace().unwrap_or_default(),
                w.name_any(),
                w.spec.workload.manifests.len().to_string(),
                status_of(w, "Applied"),
                status_of(w, "Available"),
                status_of(w, "Progressing"),
            ]
        })
        .collect();
    print(
        args.format,
        &works,
        &[
            "CLUSTER",
            "NAME",
            "MANIFESTS",
            "APPLIED",
            "AVAILABLE",
            "PROGRESSING",
        ],
        rows,
    )
}

/// `flotilla delete work`.
pub async fn delete(global: &GlobalArgs, args: &DeleteWorkArgs) -> anyhow::Result<()> {
    let (hub, _) = client(global).await.context("connect to the hub")?;
    for cluster in &args.clusters {
        let api: Api<ManifestWork> = Api::namespaced(hub.clone(), cluster);
        match api.delete(&args.name, &DeleteParams::default()).await {
            Ok(_) => println!("work {} deleted from cluster {cluster}", args.name),
            Err(kube::Error::Api(status)) if status.code == 404 => {
                println!("work {} not found on cluster {cluster}", args.name);
            }
            Err(error) => {
                return Err(error).with_context(|| format!("delete work {} on cluster {cluster}", args.name));
            }
        }
    }
    Ok(())
}
