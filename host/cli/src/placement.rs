//! `flotilla create placement NAME`: a Placement from flags, with clusteradm's flag names
//! (`--namespace`, `--clustersets`, `--label-selectors`, `--count`, `--overwrite`) and
//! `--clusters` to choose clusters by name.
//!
//! As clusteradm does, every cluster set named must be bound to the namespace first (a
//! Placement selects only from bound sets), and an existing Placement is replaced only with
//! `--overwrite`. Each label selector is a predicate of its own (a cluster matching any is
//! selected); `--clusters` narrows every predicate to the clusters named, through the CEL
//! selector on `managedCluster.metadata.name`.

use anyhow::{Context as _, bail};
use clap::Args;
use flotilla_api::cluster::{
    v1beta1::{ClusterCelSelector, ClusterPredicate, ClusterSelector, Placement, PlacementSpec},
    v1beta2::ManagedClusterSetBinding,
};
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
};

use crate::{cli::GlobalArgs, kube::client};

/// `flotilla create placement NAME`.
#[derive(Debug, Args)]
pub struct CreatePlacementArgs {
    /// The Placement's name.
    pub name: String,
    /// The Placement's namespace (its cluster sets must be bound here).
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,
    /// Choose only these clusters (by name).
    #[arg(long, value_delimiter = ',')]
    pub clusters: Vec<String>,
    /// Choose from these cluster sets (each bound to the namespace); all bound sets if none.
    #[arg(long, value_delimiter = ',')]
    pub clustersets: Vec<String>,
    /// Label selectors (`env=prod,tier in (web)`); a cluster matching any one is chosen.
    /// Repeat the flag for several.
    #[arg(long = "label-selectors", visible_alias = "label-selector")]
    pub label_selectors: Vec<String>,
    /// How many clusters to choose (all that match if not given).
    #[arg(long, visible_alias = "num-clusters")]
    pub count: Option<i32>,
    /// Replace the Placement if it exists.
    #[arg(long)]
    pub overwrite: bool,
}

/// The CEL expression choosing the clusters named in `clusters`.
fn clusters_expression(clusters: &[String]) -> String {
    let names: Vec<String> = clusters.iter().map(|c| format!("'{c}'")).collect();
    format!("managedCluster.metadata.name in [{}]", names.join(", "))
}

/// The Placement `args` describe.
fn placement(args: &CreatePlacementArgs) -> anyhow::Result<Placement> {
    if let Some(bad) = args
        .clusters
        .iter()
        .find(|c| flotilla_core::names::dns_label_problem(c).is_some())
    {
        bail!("--clusters: {bad:?} is not a cluster name (a DNS label)");
    }
    let cel_selector = ClusterCelSelector {
        cel_expressions: if args.clusters.is_empty() {
            Vec::new()
        } else {
            vec![clusters_expression(&args.clusters)]
        },
    };
    let mut predicates = Vec::new();
    for text in &args.label_selectors {
        let label_selector =
            flotilla_core::selector::parse(text).with_context(|| "--label-selectors".to_owned())?;
        predicates.push(ClusterPredicate {
            required_cluster_selector: ClusterSelector {
                label_selector,
                cel_selector: cel_selector.clone(),
                ..ClusterSelector::default()
            },
        });
    }
    if predicates.is_empty() && !args.clusters.is_empty() {
        predicates.push(ClusterPredicate {
            required_cluster_selector: ClusterSelector {
                cel_selector,
                ..ClusterSelector::default()
            },
        });
    }
    if let Some(count) = args.count
        && count < 1
    {
        bail!("--count must be at least 1 (leave it out to choose every cluster that matches)");
    }
    Ok(Placement {
        metadata: ObjectMeta {
            name: Some(args.name.clone()),
            namespace: Some(args.namespace.clone()),
            ..ObjectMeta::default()
        },
        spec: PlacementSpec {
            cluster_sets: args.clustersets.clone(),
            number_of_clusters: args.count,
            predicates,
            ..PlacementSpec::default()
        },
        status: None,
    })
}

/// `flotilla create placement`.
pub async fn create(global: &GlobalArgs, args: &CreatePlacementArgs) -> anyhow::Result<()> {
    let desired = placement(args)?;
    let (hub, _) = client(global).await?;
    let (namespace, name) = (&args.namespace, &args.name);
    let bindings: Api<ManagedClusterSetBinding> = Api::namespaced(hub.clone(), namespace);
    for set in &args.clustersets {
        if bindings
            .get_opt(set)
            .await
            .with_context(|| format!("read the binding of cluster set {set} in namespace {namespace}"))?
            .is_none()
        {
            bail!(
                "cluster set {set} is not bound to namespace {namespace}; bind it first: \
                 flotilla clusterset bind {set} --namespace {namespace}"
            );
        }
    }
    let placements: Api<Placement> = Api::namespaced(hub, namespace);
    match placements
        .get_opt(name)
        .await
        .with_context(|| format!("read placement {namespace}/{name}"))?
    {
        None => {
            placements
                .create(&PostParams::default(), &desired)
                .await
                .with_context(|| format!("create placement {namespace}/{name}"))?;
            println!("placement {namespace}/{name} created");
        }
        Some(_) if !args.overwrite => {
            bail!("placement {namespace}/{name} already exists; pass --overwrite to replace its spec")
        }
        Some(existing) => {
            let replaced = Placement {
                metadata: ObjectMeta {
                    resource_version: existing.metadata.resource_version.clone(),
                    ..desired.metadata.clone()
                },
                status: None,
                ..desired
            };
            placements
                .replace(name, &PostParams::default(), &replaced)
                .await
                .with_context(|| format!("replace placement {namespace}/{name}"))?;
            println!("placement {namespace}/{name} replaced");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: CreatePlacementArgs,
    }

    fn parse(extra: &[&str]) -> CreatePlacementArgs {
        let mut argv = vec!["x", "web"];
        argv.extend_from_slice(extra);
        Cli::parse_from(argv).args
    }

    #[test]
    fn named_clusters_narrow_every_label_selector() {
        let placement = placement(&parse(&[
            "--clusters",
            "c1,c2",
            "--label-selectors",
            "env=prod",
            "--label-selector",
            "tier in (web)",
            "--num-clusters",
            "1",
        ]))
        .unwrap();
        assert_eq!(placement.spec.number_of_clusters, Some(1));
        assert_eq!(placement.spec.predicates.len(), 2);
        for predicate in &placement.spec.predicates {
            assert_eq!(
                predicate.required_cluster_selector.cel_selector.cel_expressions,
                ["managedCluster.metadata.name in ['c1', 'c2']"]
            );
        }
    }

    #[test]
    fn names_and_counts_that_cannot_be_are_refused() {
        assert!(placement(&parse(&["--clusters", "c1,'x"])).is_err());
        assert!(placement(&parse(&["--count", "0"])).is_err());
        let none = placement(&parse(&[])).unwrap();
        assert!(none.spec.predicates.is_empty());
    }
}
