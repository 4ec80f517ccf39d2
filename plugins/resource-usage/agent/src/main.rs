//! The resource-usage-collect add-on's agent, as OCM's (addon-contrib
//! `resource-usage-collect-addon`) behaves: it keeps the managed cluster's Nodes and Pods in
//! memory, scores the CPU, memory, GPUs and TPUs they leave free every period, and publishes
//! the scores as AddOnPlacementScore `resource-usage-score` in its cluster namespace on the
//! hub, for placements whose prioritizers have a `scoreCoordinate` of type AddOn. It renews
//! Lease `<addon>` in its install namespace so the klusterlet judges it Available.
//!
//! ```text
//!  managed (the pod's service account, or --kubeconfig)
//!    Nodes ──watch──▶ store ─┐
//!    Pods  ──watch──▶ store ─┼─ every period ─▶ score::compute ─▶ publish::plan ─┐
//!    (not Succeeded/Failed)  │                                                  │ only changes,
//!    Lease <addon> in <install ns> ◀── renewed every --lease-seconds             │ and validUntil
//!  hub (the add-on's own credential, secret <addon>-hub-kubeconfig mounted)     ▼ refreshes
//!    AddOnPlacementScore resource-usage-score in <cluster>, status {scores, validUntil}
//! ```
//!
//! The scores themselves are in the crate's library ([`resource_usage_agent::score`]); what is
//! written when, in [`publish`]. The hub credential is rotated by the klusterlet, which rewrites
//! the mounted secret: the agent rereads the files every
//! [`flotilla_addon_agent::credential::CHECK`] and reconnects when they changed.
//! Both that and the Lease are [`flotilla_addon_agent`]'s, shared with the other add-ons' agents.

mod publish;

use std::{path::PathBuf, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use flotilla_addon_agent::{
    credential::{self, HubCredential},
    lease::LeaseRenewer,
};
use futures::StreamExt as _;
use k8s_openapi::{
    api::core::v1::{Node, NodeStatus, Pod, PodStatus},
    jiff::Timestamp,
};
use kube::{
    Api, Client, Resource, ResourceExt as _,
    runtime::{
        WatchStreamExt as _,
        reflector::{self, Store, store::Writer},
        watcher,
    },
};
use resource_usage_agent::score;

/// Command line, as the plugin's Deployment passes it.
#[derive(Debug, Parser)]
#[command(name = "resource-usage-agent", version, about)]
struct Args {
    /// The add-on's hub kubeconfig (the mounted `<addon>-hub-kubeconfig` secret).
    #[arg(long)]
    hub_kubeconfig: PathBuf,
    /// This managed cluster's name: its namespace on the hub.
    #[arg(long)]
    cluster_name: String,
    /// The add-on's install namespace on the managed cluster, where its Lease is.
    #[arg(long)]
    addon_namespace: String,
    /// The add-on's name: the Lease the klusterlet reads.
    #[arg(long, default_value = "resource-usage-collect")]
    addon_name: String,
    /// A kubeconfig for the managed cluster; by default the pod's service account (or
    /// `$KUBECONFIG` outside a pod).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Seconds between scorings (OCM's agent resyncs every 60 s).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    period: u64,
    /// Seconds the published scores stay valid (`status.validUntil`), at least three periods;
    /// 0 publishes no expiry, as OCM's agent does.
    #[arg(long, default_value_t = 600)]
    valid_for: u64,
    /// Seconds between lease renewals.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    lease_seconds: u64,
}

impl Args {
    fn period(&self) -> Duration {
        Duration::from_secs(self.period)
    }

    /// How long published scores stay valid: none when `--valid-for=0`, else at least three
    /// periods, so that a refresh due at half of it always lands before it expires.
    fn validity(&self) -> Option<Duration> {
        (self.valid_for > 0).then(|| Duration::from_secs(self.valid_for.max(self.period.saturating_mul(3))))
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let managed = managed_client(&args)
        .await
        .context("connect to the managed cluster")?;
    eprintln!(
        "resource-usage-agent: scoring cluster {} every {}s into {}/{}, validity {}, renewing Lease {} in {} every {}s",
        args.cluster_name,
        args.period,
        args.cluster_name,
        publish::SCORE_NAME,
        args.validity()
            .map_or_else(|| "unlimited".to_owned(), |v| format!("{}s", v.as_secs())),
        args.addon_name,
        args.addon_namespace,
        args.lease_seconds,
    );
    let (nodes, node_writer) = reflector::store::<Node>();
    let (pods, pod_writer) = reflector::store::<Pod>();
    let node_feed = reflect(
        Api::all(managed.clone()),
        watcher::Config::default(),
        node_writer,
        strip_node,
    );
    // Pods that finished hold nothing: the API server leaves them out of the watch, and reports
    // a pod that finishes as deleted from it.
    let pod_feed = reflect(
        Api::all(managed.clone()),
        watcher::Config::default().fields(PODS_HOLDING_RESOURCES),
        pod_writer,
        strip_pod,
    );
    let lease = LeaseRenewer::new(
        managed,
        &args.addon_namespace,
        &args.addon_name,
        publish::FIELD_MANAGER,
        Duration::from_secs(args.lease_seconds),
    );
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listen for SIGTERM")?;
    // Every branch but the signals runs for as long as the process does.
    tokio::select! {
        () = node_feed => Ok(()),
        () = pod_feed => Ok(()),
        () = lease.run() => Ok(()),
        () = publish_forever(&nodes, &pods, &args) => Ok(()),
        _ = terminate.recv() => {
            eprintln!("resource-usage-agent: terminated");
            Ok(())
        }
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// The field selector of the pod watch: phases that may still hold resources.
const PODS_HOLDING_RESOURCES: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// The managed cluster: `--kubeconfig` if given, else in-cluster or `$KUBECONFIG`.
async fn managed_client(args: &Args) -> anyhow::Result<Client> {
    match &args.kubeconfig {
        Some(path) => Ok(credential::client(path).await?),
        None => Client::try_default()
            .await
            .context("no in-cluster service account nor kubeconfig"),
    }
}

/// Keeps `writer`'s store in step with the objects of `api`, with `strip` applied to each;
/// errors are logged and the watch retried with backoff. Never returns.
async fn reflect<K>(api: Api<K>, config: watcher::Config, writer: Writer<K>, strip: fn(&mut K))
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let events = watcher(api, config)
        .modify(strip)
        .default_backoff()
        .reflect(writer);
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        if let Err(error) = event {
            eprintln!("resource-usage-agent: watch {}: {error}", K::plural(&()));
        }
    }
}

/// Drops what the scores never read from a Node (images, conditions, addresses), to keep the
/// store small; keeps `spec.unschedulable` and `status.allocatable`.
fn strip_node(node: &mut Node) {
    node.managed_fields_mut().clear();
    node.annotations_mut().clear();
    if let Some(status) = &mut node.status {
        *status = NodeStatus {
            allocatable: status.allocatable.take(),
            ..NodeStatus::default()
        };
    }
}

/// Drops what the scores never read from a Pod (managed fields, annotations, status beyond
/// the phase); keeps the spec.
fn strip_pod(pod: &mut Pod) {
    pod.managed_fields_mut().clear();
    pod.annotations_mut().clear();
    if let Some(status) = &mut pod.status {
        *status = PodStatus {
            phase: status.phase.take(),
            ..PodStatus::default()
        };
    }
}

/// Publishes for as long as the agent runs, reconnecting to the hub whenever the mounted
/// credential changes or the connection cannot be made.
async fn publish_forever(nodes: &Store<Node>, pods: &Store<Pod>, args: &Args) {
    HubCredential::new(&args.hub_kubeconfig)
        .serve(publish::FIELD_MANAGER, async |hub| {
            let hub = publish::Hub::new(hub, &args.cluster_name);
            publish_with(&hub, nodes, pods, args).await;
        })
        .await;
}

/// Scores and publishes every period once both stores hold a full list; a failure is logged
/// and retried at the next period. Returns only if a store's writer is gone.
async fn publish_with(hub: &publish::Hub, nodes: &Store<Node>, pods: &Store<Pod>, args: &Args) {
    if nodes.wait_until_ready().await.is_err() || pods.wait_until_ready().await.is_err() {
        return;
    }
    let mut ticks = tokio::time::interval(args.period());
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let (nodes, pods) = (nodes.state(), pods.state());
        let computed = score::compute(nodes.iter().map(AsRef::as_ref), pods.iter().map(AsRef::as_ref));
        match hub
            .publish(&computed.scores, Timestamp::now(), args.validity())
            .await
        {
            Ok(publish::Outcome::Unchanged) => {}
            Ok(publish::Outcome::Written) => log_written(&computed, nodes.len(), pods.len()),
            Err(error) => eprintln!("resource-usage-agent: {error:#}"),
        }
    }
}

/// One line per publication: the free amounts and the scores.
fn log_written(computed: &score::Computed, nodes: usize, pods: usize) {
    let free: Vec<String> = score::RESOURCES
        .iter()
        .zip(&computed.available)
        .map(|(r, a)| format!("{}={}/{}", r.name, a.node, a.cluster))
        .collect();
    let scores: Vec<String> = computed
        .scores
        .iter()
        .map(|s| format!("{}={}", s.name, s.value))
        .collect();
    eprintln!(
        "resource-usage-agent: published from {nodes} nodes and {pods} pods; free (node/cluster) {}; scores {}",
        free.join(" "),
        scores.join(" ")
    );
}
