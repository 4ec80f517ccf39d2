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
//! rereads the files every [`CREDENTIAL_CHECK`] and reconnects when they changed. A ConfigMap
//! the managed cluster already has under another owner (`kube-root-ca.crt`, say) is never taken
//! over: server-side apply without force refuses, and the agent logs and skips it.

use std::{collections::BTreeSet, path::PathBuf, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use futures::StreamExt as _;
use k8s_openapi::{
    api::{
        coordination::v1::{Lease, LeaseSpec},
        core::v1::ConfigMap,
    },
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api, Client, Config, ResourceExt as _,
    api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
    runtime::{WatchStreamExt as _, watcher},
};

/// The field manager of every write, so copies are this agent's and nobody else's.
const FIELD_MANAGER: &str = "helloworld-agent";
/// Marks a managed-cluster ConfigMap as a copy; its value is the hub namespace it came from.
const COPIED_FROM_LABEL: &str = "helloworld.open-cluster-management.io/copied-from";
/// Published into every namespace by the controller manager: each cluster has its own.
const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
/// How often the mounted hub credential is compared with the one in use.
const CREDENTIAL_CHECK: Duration = Duration::from_secs(20);

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
    tokio::select! {
        () = renew_forever(&managed, &args) => Ok(()),
        () = copy_forever(&managed, &args) => Ok(()),
        _ = terminate.recv() => {
            eprintln!("helloworld-agent: terminated");
            Ok(())
        }
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// Renews the lease every period; a failure is logged and retried at the next one.
async fn renew_forever(managed: &Client, args: &Args) {
    let period = Duration::from_secs(args.lease_seconds.max(1));
    let leases: Api<Lease> = Api::namespaced(managed.clone(), &args.addon_namespace);
    loop {
        if let Err(error) = renew(&leases, &args.addon_name, period).await {
            eprintln!("helloworld-agent: {error:#}");
        }
        tokio::time::sleep(period).await;
    }
}

/// Sets `renewTime` of Lease `name` to now, creating it if needed.
async fn renew(leases: &Api<Lease>, name: &str, period: Duration) -> anyhow::Result<()> {
    let now = MicroTime(Timestamp::now());
    match leases
        .get_opt(name)
        .await
        .with_context(|| format!("read Lease {name}"))?
    {
        Some(mut lease) => {
            lease.spec.get_or_insert_with(LeaseSpec::default).renew_time = Some(now);
            leases
                .replace(name, &PostParams::default(), &lease)
                .await
                .with_context(|| format!("renew Lease {name}"))?;
        }
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(FIELD_MANAGER.to_owned()),
                    lease_duration_seconds: i32::try_from(period.as_secs()).ok(),
                    renew_time: Some(now),
                    ..LeaseSpec::default()
                }),
            };
            leases
                .create(&PostParams::default(), &lease)
                .await
                .with_context(|| format!("create Lease {name}"))?;
        }
    }
    Ok(())
}

/// Copies ConfigMaps for as long as the agent runs, reconnecting to the hub whenever the
/// mounted credential changes or the connection cannot be made.
async fn copy_forever(managed: &Client, args: &Args) {
    loop {
        let credential = match read_credential(&args.hub_kubeconfig).await {
            Ok(files) => files,
            Err(error) => {
                eprintln!("helloworld-agent: {error:#}");
                tokio::time::sleep(CREDENTIAL_CHECK).await;
                continue;
            }
        };
        let hub = match hub_client(&args.hub_kubeconfig).await {
            Ok(hub) => hub,
            Err(error) => {
                eprintln!("helloworld-agent: {error:#}");
                tokio::time::sleep(CREDENTIAL_CHECK).await;
                continue;
            }
        };
        tokio::select! {
            () = copy_with(&hub, managed, args) => {}
            () = until_changed(&args.hub_kubeconfig, credential) => {
                eprintln!("helloworld-agent: the hub credential changed; reconnecting");
            }
        }
    }
}

/// The bytes of every file in the credential's directory (kubeconfig, certificate, key).
async fn read_credential(kubeconfig: &std::path::Path) -> anyhow::Result<Vec<(PathBuf, Vec<u8>)>> {
    let dir = kubeconfig.parent().unwrap_or(std::path::Path::new("."));
    let mut files = Vec::new();
    let mut entries = tokio::fs::read_dir(dir)
        .await
        .with_context(|| format!("list the hub credential in {}", dir.display()))?;
    while let Some(entry) = entries.next_entry().await.context("list the hub credential")? {
        let path = entry.path();
        // Secret volumes keep their files behind `..data` links; hidden entries are the links.
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if let Ok(bytes) = tokio::fs::read(&path).await {
            files.push((path, bytes));
        }
    }
    files.sort();
    Ok(files)
}

/// Returns once the credential files differ from `current`.
async fn until_changed(kubeconfig: &std::path::Path, current: Vec<(PathBuf, Vec<u8>)>) {
    loop {
        tokio::time::sleep(CREDENTIAL_CHECK).await;
        if read_credential(kubeconfig).await.is_ok_and(|now| now != current) {
            return;
        }
    }
}

/// A hub client from the mounted kubeconfig, whose certificate paths are relative to it.
async fn hub_client(path: &std::path::Path) -> anyhow::Result<Client> {
    let kubeconfig = Kubeconfig::read_from(path).with_context(|| format!("read {}", path.display()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("use {}", path.display()))?;
    Client::try_from(config).context("build the hub client")
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
