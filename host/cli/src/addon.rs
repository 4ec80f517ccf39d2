//! `flotilla addon enable|disable|status` and `flotilla get addons`: add-ons on clusters, in
//! clusteradm's vocabulary. Enabling on clusters creates ManagedClusterAddOns (the Manual install
//! strategy); enabling on a placement adds it to the ClusterManagementAddOn's `Placements`
//! install strategy, and the hub's add-on manager follows its decisions.

use std::collections::BTreeSet;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use flotilla_api::{
    addon::{
        consts::{DEFAULT_INSTALL_NAMESPACE, managed_cluster_addon as mca},
        v1alpha1::{
            AddOnConfig, ClusterManagementAddOn, ConfigGroupResource, ConfigReferent, InstallStrategyType,
            ManagedClusterAddOn, ManagedClusterAddOnStatus, PlacementRef, PlacementStrategy,
        },
    },
    cluster::v1::ManagedCluster,
    plugins::v1alpha1::AddOnPlugin,
};
use flotilla_core::addon::revision;
use flotilla_core::conditions;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use crate::{
    cli::GlobalArgs,
    kube::client,
    output::{Format, print},
};

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Install add-ons on clusters, or on the clusters a placement selects.
    Enable(EnableArgs),
    /// Remove add-ons from clusters, or stop installing them through a placement.
    Disable(DisableArgs),
    /// Show one add-on on one cluster: conditions, registrations, health and the last plugin
    /// fault.
    Status(StatusArgs),
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The add-on's name.
    pub name: String,
    /// The cluster.
    #[arg(long)]
    pub cluster: String,
}

/// Where an add-on goes: named clusters or a placement.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct Target {
    /// Clusters (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub clusters: Vec<String>,
    /// A placement, `NAMESPACE/NAME`.
    #[arg(long)]
    pub placement: Option<String>,
}

#[derive(Debug, Args)]
pub struct EnableArgs {
    /// Add-on names (comma-separated).
    #[arg(long, value_delimiter = ',', required = true)]
    pub names: Vec<String>,
    #[command(flatten)]
    pub target: Target,
    /// The namespace the add-on's agent is installed into on the managed cluster.
    #[arg(long, default_value = DEFAULT_INSTALL_NAMESPACE)]
    pub namespace: String,
    /// A config, `GROUP/RESOURCE/NAMESPACE/NAME` (empty group for the core group, empty
    /// namespace for cluster-scoped configs); repeatable.
    #[arg(long = "config", value_parser = parse_config)]
    pub configs: Vec<AddOnConfig>,
}

#[derive(Debug, Args)]
pub struct DisableArgs {
    /// Add-on names (comma-separated).
    #[arg(long, value_delimiter = ',', required = true)]
    pub names: Vec<String>,
    #[command(flatten)]
    pub target: Target,
}

#[derive(Debug, Args)]
pub struct GetAddonsArgs {
    /// Only this cluster's add-ons.
    #[arg(long)]
    pub cluster: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub format: Format,
}

impl Command {
    pub async fn run(self, global: &GlobalArgs) -> anyhow::Result<()> {
        match self {
            Command::Enable(args) => enable(global, &args).await,
            Command::Disable(args) => disable(global, &args).await,
            Command::Status(args) => status(global, &args).await,
        }
    }
}

/// Parses `GROUP/RESOURCE/NAMESPACE/NAME`.
fn parse_config(text: &str) -> Result<AddOnConfig, String> {
    let parts: Vec<&str> = text.split('/').collect();
    let [group, resource, namespace, name] = parts[..] else {
        return Err(format!(
            "{text:?} is not GROUP/RESOURCE/NAMESPACE/NAME, e.g. \
             addon.open-cluster-management.io/addondeploymentconfigs/default/my-config"
        ));
    };
    if resource.is_empty() || name.is_empty() {
        return Err(format!("{text:?} needs a resource and a name"));
    }
    Ok(AddOnConfig {
        group_resource: ConfigGroupResource {
            group: group.to_owned(),
            resource: resource.to_owned(),
        },
        referent: ConfigReferent {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        },
    })
}

/// Parses `NAMESPACE/NAME`.
fn parse_placement(text: &str) -> anyhow::Result<PlacementRef> {
    match text.split_once('/') {
        Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(PlacementRef {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })
        }
        _ => bail!("--placement {text:?}: use NAMESPACE/NAME"),
    }
}

/// The add-ons this hub knows: a ClusterManagementAddOn's name, or the add-on an AddOnPlugin
/// drives (its ClusterManagementAddOn may not be made yet).
async fn known_addons(hub: &kube::Client) -> anyhow::Result<BTreeSet<String>> {
    let managed = Api::<ClusterManagementAddOn>::all(hub.clone())
        .list(&ListParams::default())
        .await
        .context("list ClusterManagementAddOns")?;
    let plugins = Api::<AddOnPlugin>::all(hub.clone())
        .list(&ListParams::default())
        .await
        .context("list AddOnPlugins")?;
    Ok(managed
        .items
        .iter()
        .map(ResourceExt::name_any)
        .chain(plugins.items.iter().map(plugin_addon))
        .collect())
}

/// Refuses names no add-on of this hub has, listing those it has (clusteradm refuses an
/// unknown add-on too; a ManagedClusterAddOn for one would wait forever for a manager).
fn check_known(names: &[String], known: &BTreeSet<String>) -> anyhow::Result<()> {
    let unknown: Vec<String> = names
        .iter()
        .filter(|n| !known.contains(*n))
        .map(|n| format!("{n:?}"))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let existing = if known.is_empty() {
        "none".to_owned()
    } else {
        known.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
    };
    bail!(
        "no add-on {} on this hub (no ClusterManagementAddOn or AddOnPlugin of that name); \
         add-ons here: {existing}\nregister one with `flotilla plugin register NAME --oci REF`, or \
         pick one of those",
        unknown.join(", ")
    )
}

async fn enable(global: &GlobalArgs, args: &EnableArgs) -> anyhow::Result<()> {
    let (hub, _) = client(global).await.context("connect to the hub")?;
    check_known(&args.names, &known_addons(&hub).await?)?;
    if let Some(placement) = &args.target.placement {
        let placement = parse_placement(placement)?;
        for name in &args.names {
            edit_placements(&hub, name, |placements| {
                let entry = PlacementStrategy {
                    placement: placement.clone(),
                    configs: args.configs.clone(),
                    ..Default::default()
                };
                match placements.iter_mut().find(|p| p.placement == placement) {
                    Some(existing) => {
                        existing.configs = entry.configs;
                    }
                    None => placements.push(entry),
                }
            })
            .await?;
            eprintln!(
                "add-on {name:?} is installed on the clusters of placement {}/{}",
                placement.namespace, placement.name
            );
        }
        return Ok(());
    }
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    for cluster in &args.target.clusters {
        if clusters.get_opt(cluster).await?.is_none() {
            bail!("no ManagedCluster {cluster:?} on this hub (see `flotilla get clusters`)");
        }
    }
    for cluster in &args.target.clusters {
        let addons: Api<ManagedClusterAddOn> = Api::namespaced(hub.clone(), cluster);
        for name in &args.names {
            let addon: ManagedClusterAddOn = serde_json::from_value(json!({
                "apiVersion": "addon.open-cluster-management.io/v1alpha1",
                "kind": "ManagedClusterAddOn",
                "metadata": { "name": name, "namespace": cluster },
                "spec": { "installNamespace": args.namespace, "configs": args.configs },
            }))?;
            match addons.create(&PostParams::default(), &addon).await {
                Ok(_) => eprintln!("add-on {name:?} enabled on cluster {cluster:?}"),
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    let patch =
                        json!({ "spec": { "installNamespace": args.namespace, "configs": args.configs } });
                    addons
                        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .with_context(|| format!("update add-on {name:?} on cluster {cluster:?}"))?;
                    eprintln!("add-on {name:?} on cluster {cluster:?} updated");
                }
                Err(error) => {
                    return Err(error)
                        .with_context(|| format!("enable add-on {name:?} on cluster {cluster:?}"));
                }
            }
        }
    }
    Ok(())
}

async fn disable(global: &GlobalArgs, args: &DisableArgs) -> anyhow::Result<()> {
    let (hub, _) = client(global).await.context("connect to the hub")?;
    if let Some(placement) = &args.target.placement {
        let placement = parse_placement(placement)?;
        for name in &args.names {
            edit_placements(&hub, name, |placements| {
                placements.retain(|p| p.placement != placement)
            })
            .await?;
            eprintln!(
                "add-on {name:?} is no longer installed through placement {}/{}",
                placement.namespace, placement.name
            );
        }
        return Ok(());
    }
    for cluster in &args.target.clusters {
        let addons: Api<ManagedClusterAddOn> = Api::namespaced(hub.clone(), cluster);
        for name in &args.names {
            match addons.delete(name, &DeleteParams::default()).await {
                Ok(_) => eprintln!("add-on {name:?} disabled on cluster {cluster:?}"),
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    eprintln!("add-on {name:?} was not enabled on cluster {cluster:?}");
                }
                Err(error) => {
                    return Err(error)
                        .with_context(|| format!("disable add-on {name:?} on cluster {cluster:?}"));
                }
            }
        }
    }
    Ok(())
}

/// Changes the placements of add-on `name`'s install strategy with `edit` and writes them back
/// (type `Placements`, also with none left), guarded by the resourceVersion read. The hub's own
/// controllers write the ClusterManagementAddOn too: on a conflict it is read and edited again.
async fn edit_placements(
    hub: &kube::Client,
    name: &str,
    edit: impl Fn(&mut Vec<PlacementStrategy>),
) -> anyhow::Result<()> {
    const ATTEMPTS: usize = 5;
    let api: Api<ClusterManagementAddOn> = Api::all(hub.clone());
    for attempt in 1..=ATTEMPTS {
        let Some(cma) = api.get_opt(name).await? else {
            bail!(
                "no ClusterManagementAddOn {name:?} on this hub: register its plugin first \
                 (`flotilla plugin register {name} --oci REF`)"
            );
        };
        let mut strategy = cma.spec.install_strategy.clone();
        edit(&mut strategy.placements);
        // `Placements` even when none remain: the hub then removes the add-ons it installed, where
        // `Manual` would leave them in place (as OCM does).
        strategy.type_ = InstallStrategyType::Placements;
        // An empty list is left out of the type's JSON, but a merge patch must say it to clear it.
        let mut install_strategy = serde_json::to_value(&strategy)?;
        install_strategy["placements"] = serde_json::to_value(&strategy.placements)?;
        let patch = json!({
            "metadata": { "resourceVersion": cma.resource_version() },
            "spec": { "installStrategy": install_strategy },
        });
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < ATTEMPTS => continue,
            Err(error) => {
                return Err(error).with_context(|| format!("update the install strategy of add-on {name:?}"));
            }
        }
    }
    bail!("ClusterManagementAddOn {name:?} kept changing under {ATTEMPTS} attempts to edit it; try again")
}

/// `flotilla get addons`: one row per add-on and cluster.
pub async fn get(global: &GlobalArgs, args: &GetAddonsArgs) -> anyhow::Result<()> {
    let (hub, _) = client(global).await.context("connect to the hub")?;
    let api: Api<ManagedClusterAddOn> = match &args.cluster {
        Some(cluster) => Api::namespaced(hub.clone(), cluster),
        None => Api::all(hub.clone()),
    };
    let mut addons = api.list(&ListParams::default()).await?.items;
    addons.sort_by_key(|a| (a.namespace(), a.name_any()));
    // The revision each plugin serves, by add-on (what a revision rollout rolls out).
    let serving: std::collections::BTreeMap<String, String> = Api::<AddOnPlugin>::all(hub)
        .list(&ListParams::default())
        .await
        .context("list AddOnPlugins")?
        .items
        .into_iter()
        .filter_map(|p| Some((plugin_addon(&p), p.status?.digest?)))
        .collect();
    let rows = addons
        .iter()
        .map(|addon| {
            let status = addon.status.clone().unwrap_or_default();
            let state = |type_: &str| {
                conditions::find(&status.conditions, type_)
                    .map(|c| format!("{} ({})", c.status, c.reason))
                    .unwrap_or_else(|| "-".to_owned())
            };
            let configs = if status.config_references.is_empty() {
                "-".to_owned()
            } else {
                let applied = status
                    .config_references
                    .iter()
                    .filter(|r| r.desired_config.is_some() && r.desired_config == r.last_applied_config)
                    .count();
                format!("{applied}/{} applied", status.config_references.len())
            };
            let revision = revision::describe(
                serving.get(&addon.name_any()).map(String::as_str),
                revision::AddonRevisions::from_annotations(addon.metadata.annotations.as_ref()),
                &status.conditions,
            );
            vec![
                addon.namespace().unwrap_or_default(),
                addon.name_any(),
                state(mca::CONDITION_AVAILABLE),
                health_mode(&status),
                registrations(&status),
                state(mca::CONDITION_MANIFEST_APPLIED),
                state(mca::CONDITION_PROGRESSING),
                configs,
                revision,
            ]
        })
        .collect();
    print(
        args.format,
        &addons,
        &[
            "CLUSTER",
            "NAME",
            "AVAILABLE",
            "HEALTH",
            "REGISTRATIONS",
            "MANIFESTAPPLIED",
            "PROGRESSING",
            "CONFIGS",
            "REVISION",
        ],
        rows,
    )
}

/// `status.healthCheck.mode`, `-` before the hub wrote it.
fn health_mode(status: &ManagedClusterAddOnStatus) -> String {
    status
        .health_check
        .mode
        .map_or_else(|| "-".to_owned(), |m| format!("{m:?}"))
}

/// The signers of `status.registrations`, `-` for none.
fn registrations(status: &ManagedClusterAddOnStatus) -> String {
    if status.registrations.is_empty() {
        return "-".to_owned();
    }
    status
        .registrations
        .iter()
        .map(|r| r.signer_name.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// `flotilla addon status NAME --cluster C`.
pub async fn status(global: &GlobalArgs, args: &StatusArgs) -> anyhow::Result<()> {
    let (hub, _) = client(global).await.context("connect to the hub")?;
    let addon = Api::<ManagedClusterAddOn>::namespaced(hub.clone(), &args.cluster)
        .get_opt(&args.name)
        .await
        .with_context(|| format!("read add-on {} on cluster {}", args.name, args.cluster))?;
    let Some(addon) = addon else {
        bail!(
            "add-on {} is not enabled on cluster {} (flotilla addon enable --names {} --clusters {})",
            args.name,
            args.cluster,
            args.name,
            args.cluster
        );
    };
    let plugins = Api::<AddOnPlugin>::all(hub)
        .list(&ListParams::default())
        .await
        .context("list AddOnPlugins")?
        .items
        .into_iter()
        .filter(|p| plugin_addon(p) == args.name)
        .collect::<Vec<_>>();
    print!("{}", render_status(&addon, &plugins)?);
    Ok(())
}

/// The add-on an AddOnPlugin drives: `spec.addOnName`, else its name.
fn plugin_addon(plugin: &AddOnPlugin) -> String {
    if plugin.spec.add_on_name.is_empty() {
        plugin.name_any()
    } else {
        plugin.spec.add_on_name.clone()
    }
}

/// The text of `flotilla addon status`.
fn render_status(addon: &ManagedClusterAddOn, plugins: &[AddOnPlugin]) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    let status = addon.status.clone().unwrap_or_default();
    let mut out = String::new();
    writeln!(out, "Add-on:          {}", addon.name_any())?;
    writeln!(out, "Cluster:         {}", addon.namespace().unwrap_or_default())?;
    let namespace = flotilla_core::addon::health::install_namespace(addon);
    writeln!(out, "Namespace:       {namespace}")?;
    let available = conditions::find(&status.conditions, mca::CONDITION_AVAILABLE).map_or_else(
        || "not reported yet".to_owned(),
        |c| format!("Available {} ({}): {}", c.status, c.reason, c.message),
    );
    writeln!(out, "Health:          {} — {available}", health_mode(&status))?;
    if status.registrations.is_empty() {
        writeln!(out, "Registrations:   none")?;
    } else {
        writeln!(out, "Registrations:")?;
        for r in &status.registrations {
            let subject = &r.subject;
            writeln!(
                out,
                "  {}  user={}  groups={}",
                r.signer_name,
                if subject.user.is_empty() {
                    "-"
                } else {
                    &subject.user
                },
                if subject.groups.is_empty() {
                    "-".to_owned()
                } else {
                    subject.groups.join(",")
                }
            )?;
        }
    }
    writeln!(out, "Conditions:")?;
    let mut table = tabwriter::TabWriter::new(Vec::new()).padding(3);
    let mut rows = String::from("  TYPE\tSTATUS\tREASON\tMESSAGE\n");
    for c in &status.conditions {
        writeln!(rows, "  {}\t{}\t{}\t{}", c.type_, c.status, c.reason, c.message)?;
    }
    std::io::Write::write_all(&mut table, rows.as_bytes())?;
    out.push_str(&String::from_utf8_lossy(
        &table.into_inner().context("align table")?,
    ));
    if plugins.is_empty() {
        writeln!(out, "Plugin:          none registered")?;
    }
    for plugin in plugins {
        let plugin_status = plugin.status.clone().unwrap_or_default();
        writeln!(
            out,
            "Plugin:          {} ({})",
            plugin.name_any(),
            plugin_status.digest.as_deref().unwrap_or("not loaded")
        )?;
        let last = plugin_status.faults.and_then(|f| f.last);
        match last {
            None => writeln!(out, "Last plugin fault: none")?,
            Some(fault) => writeln!(
                out,
                "Last plugin fault: {} {}{}: {}",
                fault.hook,
                fault.kind,
                fault.time.map(|t| format!(" at {}", t.0)).unwrap_or_default(),
                fault.message
            )?,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_shows_health_registrations_conditions_and_the_last_plugin_fault() {
        let addon: ManagedClusterAddOn = serde_json::from_value(json!({
            "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
            "metadata": {"name": "probe-trap", "namespace": "cluster1"},
            "spec": {},
            "status": {
                "namespace": "agents",
                "healthCheck": {"mode": "Customized"},
                "registrations": [{"signerName": "kubernetes.io/kube-apiserver-client",
                                   "subject": {"user": "u", "groups": ["g1", "g2"]}}],
                "conditions": [{"type": "Available", "status": "Unknown", "reason": "NoProbeResult",
                                "message": "probe-health gave no verdict: plugin fault (trap): boom",
                                "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            },
        }))
        .unwrap();
        let plugin: AddOnPlugin = serde_json::from_value(json!({
            "apiVersion": "plugins.flotilla.dev/v1alpha1", "kind": "AddOnPlugin",
            "metadata": {"name": "probe-trap"},
            "spec": {"source": {"configMap": {"namespace": "p", "name": "p", "key": "k"}}},
            "status": {"digest": "sha256:abc", "faults": {"windowSeconds": 60, "consecutive": 1,
                       "last": {"hook": "probe-health", "kind": "trap", "message": "boom"}}},
        }))
        .unwrap();
        let text = render_status(&addon, &[plugin]).unwrap();
        for expected in [
            "Namespace:       agents",
            "Health:          Customized — Available Unknown (NoProbeResult): probe-health gave no verdict",
            "kubernetes.io/kube-apiserver-client  user=u  groups=g1,g2",
            "Available   Unknown   NoProbeResult",
            "Plugin:          probe-trap (sha256:abc)",
            "Last plugin fault: probe-health trap: boom",
        ] {
            assert!(text.contains(expected), "{expected:?} missing from:\n{text}");
        }
        let quiet = render_status(&ManagedClusterAddOn::new("a", Default::default()), &[]).unwrap();
        assert!(quiet.contains("Health:          - — not reported yet"), "{quiet}");
        assert!(quiet.contains("Registrations:   none"), "{quiet}");
        assert!(quiet.contains("Plugin:          none registered"), "{quiet}");
    }

    #[test]
    fn unknown_addons_are_refused_naming_those_that_exist() {
        let known: BTreeSet<String> = ["helloworld".to_owned(), "probe".to_owned()].into();
        assert!(check_known(&["helloworld".to_owned()], &known).is_ok());
        let message = check_known(&["nosuch".to_owned(), "probe".to_owned()], &known)
            .unwrap_err()
            .to_string();
        let first = message.lines().next().unwrap();
        assert_eq!(
            first,
            "no add-on \"nosuch\" on this hub (no ClusterManagementAddOn or AddOnPlugin of that name); \
             add-ons here: helloworld, probe"
        );
        let none = check_known(&["x".to_owned()], &BTreeSet::new())
            .unwrap_err()
            .to_string();
        assert!(none.contains("add-ons here: none"), "{none}");
    }

    #[test]
    fn configs_and_placements_parse_or_say_what_is_expected() {
        let config =
            parse_config("addon.open-cluster-management.io/addondeploymentconfigs/default/cfg").unwrap();
        assert_eq!(config.group_resource.resource, "addondeploymentconfigs");
        assert_eq!(config.referent.namespace, "default");
        let core = parse_config("/configmaps//cfg").unwrap();
        assert_eq!(
            (
                core.group_resource.group.as_str(),
                core.referent.namespace.as_str()
            ),
            ("", "")
        );
        assert!(
            parse_config("addondeploymentconfigs/cfg")
                .unwrap_err()
                .contains("GROUP/RESOURCE/NAMESPACE/NAME")
        );
        assert!(parse_config("g//ns/cfg").is_err());
        assert_eq!(parse_placement("default/web").unwrap().name, "web");
        assert!(parse_placement("web").is_err());
        assert!(parse_placement("a/b/c").is_err());
    }
}
