//! The helloworld add-on's agent, as OCM's helloworld example agent behaves: it copies every
//! ConfigMap of its cluster namespace on the hub into the add-on's install namespace on the
//! managed cluster, and renews Lease `helloworld` there so the klusterlet judges it Available.
//!
//! ```text
//!  hub (the add-on's own credential, secret helloworld-hub-kubeconfig mounted as files)
//!    ConfigMaps in <cluster> ──watch──▶ server-side apply ──▶ managed: ConfigMaps in <install ns>
//!  managed (the pod's service account)                           (labelled as copies; a copy
//!    Lease helloworld in <install ns> ◀── renewed every period     whose source is gone is deleted)
//! ```
//!
//! The hub credential is rotated by the klusterlet, which rewrites the mounted secret: the agent
//! rereads the files every [`flotilla_addon_agent::credential::CHECK`] and reconnects when they
//! changed. A ConfigMap the managed cluster already has under another owner (`kube-root-ca.crt`,
//! say) is never taken over: server-side apply without force refuses, and the agent logs and
//! skips it.

use std::{collections::BTreeSet, path::PathBuf, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use flotilla_addon_agent::{credential::HubCredential, lease::LeaseRenewer};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client, ResourceExt as _,
    api::{DeleteParams, ListParams, Patch, PatchParams},
    runtime::{WatchStreamExt as _, watcher},
};

/// The field manager of every write, so copies are this agent's and nobody else's; the holder
/// of its Lease and the prefix of its log lines.
const FIELD_MANAGER: &str = "helloworld-agent";
/// Marks a managed-cluster ConfigMap as a copy; its value is the hub namespace it came from.
const COPIED_FROM_LABEL: &str = "helloworld.open-cluster-management.io/copied-from";
/// Published into every namespace by the controller manager: each cluster has its own.
const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";

/// Command line, as the plugin's Deployment passes it.
#[derive(Debug, Parser)]
#[command(name = "helloworld-agent", version, about)]
struct Args {
    /// The add-on's hub kubeconfig (the mounted `<addon>-hub-kubeconfig` secret).
    #[arg(long)]
    hub_kubeconfig: PathBuf,
    /// This managed cluster's name: its namespace on the hub.
    #[arg(long)]
    cluster_name: String,
    /// The add-on's install namespace on the managed cluster.
    #[arg(long)]
    addon_namespace: String,
    /// The add-on's name: the Lease the klusterlet reads.
    #[arg(long, default_value = "helloworld")]
    addon_name: String,
    /// Seconds between lease renewals.
    #[arg(long, default_value_t = 60)]
    lease_seconds: u64,
    /// Log verbosity, as OCM's agents take it (`--v=2` and up log every copy); errors are always
    /// logged.
    #[arg(long = "v", default_value_t = 2)]
    verbosity: u8,
}

/// Verbosity from which every copy and deletion is logged.
const LOG_COPIES: u8 = 2;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let managed = Client::try_default()
        .await
        .context("connect to the managed cluster (in-cluster service account)")?;
    eprintln!(
        "helloworld-agent: copying ConfigMaps of hub namespace {} into {}, renewing Lease {} every {}s",
        args.cluster_name, args.addon_namespace, args.addon_name, args.lease_seconds
    );
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listen for SIGTERM")?;
    let lease = LeaseRenewer::new(
        managed.clone(),
        &args.addon_namespace,
        &args.addon_name,
        FIELD_MANAGER,
        Duration::from_secs(args.lease_seconds.max(1)),
    );
    tokio::select! {
        () = lease.run() => Ok(()),
        () = copy_forever(&managed, &args) => Ok(()),
        _ = terminate.recv() => {
            eprintln!("helloworld-agent: terminated");
            Ok(())
        }
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// Copies ConfigMaps for as long as the agent runs, reconnecting to the hub whenever the
/// mounted credential changes or the connection cannot be made.
async fn copy_forever(managed: &Client, args: &Args) {
    HubCredential::new(&args.hub_kubeconfig)
        .serve(FIELD_MANAGER, async |hub| copy_with(&hub, managed, args).await)
        .await;
}

/// Watches the cluster namespace on the hub and mirrors it; returns only if the watch ends.
async fn copy_with(hub: &Client, managed: &Client, args: &Args) {
    let sources: Api<ConfigMap> = Api::namespaced(hub.clone(), &args.cluster_name);
    let copies: Api<ConfigMap> = Api::namespaced(managed.clone(), &args.addon_namespace);
    let mut listed = BTreeSet::new();
    let mut events = std::pin::pin!(watcher(sources, watcher::Config::default()).default_backoff());
    while let Some(event) = events.next().await {
        let result = match event {
            Ok(watcher::Event::Apply(source)) => copy(&copies, &source, args).await,
            Ok(watcher::Event::Delete(source)) => remove(&copies, &source.name_any(), args).await,
            Ok(watcher::Event::Init) => {
                listed.clear();
                Ok(())
            }
            Ok(watcher::Event::InitApply(source)) => {
                listed.insert(source.name_any());
                copy(&copies, &source, args).await
            }
            Ok(watcher::Event::InitDone) => prune(&copies, args, &listed).await,
            Err(error) => Err(anyhow::anyhow!("watch ConfigMaps on the hub: {error}")),
        };
        if let Err(error) = result {
            eprintln!("helloworld-agent: {error:#}");
        }
    }
}

/// Applies the copy of `source` (its data and binary data, labelled as a copy).
async fn copy(copies: &Api<ConfigMap>, source: &ConfigMap, args: &Args) -> anyhow::Result<()> {
    let name = source.name_any();
    if name == ROOT_CA_CONFIGMAP {
        return Ok(());
    }
    let copy = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {COPIED_FROM_LABEL: args.cluster_name}},
        "data": source.data,
        "binaryData": source.binary_data,
    });
    copies
        .patch(&name, &PatchParams::apply(FIELD_MANAGER), &Patch::Apply(copy))
        .await
        .with_context(|| format!("copy ConfigMap {name}"))?;
    if args.verbosity >= LOG_COPIES {
        eprintln!("helloworld-agent: copied ConfigMap {name}");
    }
    Ok(())
}

/// Deletes the copy named `name`, if it is one.
async fn remove(copies: &Api<ConfigMap>, name: &str, args: &Args) -> anyhow::Result<()> {
    let Some(found) = copies
        .get_opt(name)
        .await
        .with_context(|| format!("read ConfigMap {name}"))?
    else {
        return Ok(());
    };
    if !found.labels().contains_key(COPIED_FROM_LABEL) {
        return Ok(());
    }
    copies
        .delete(name, &DeleteParams::default())
        .await
        .with_context(|| format!("delete the copy of ConfigMap {name}"))?;
    if args.verbosity >= LOG_COPIES {
        eprintln!("helloworld-agent: deleted the copy of ConfigMap {name}");
    }
    Ok(())
}

/// Deletes copies whose source was not listed (deleted while the agent was away).
async fn prune(copies: &Api<ConfigMap>, args: &Args, listed: &BTreeSet<String>) -> anyhow::Result<()> {
    let selector = format!("{COPIED_FROM_LABEL}={}", args.cluster_name);
    let found = copies
        .list(&ListParams::default().labels(&selector))
        .await
        .context("list the copies")?;
    for stale in found.items.iter().filter(|c| !listed.contains(&c.name_any())) {
        remove(copies, &stale.name_any(), args).await?;
    }
    Ok(())
}
