//! The managed-serviceaccount add-on's agent, as OCM's (open-cluster-management-io/
//! managed-serviceaccount, `pkg/addon/agent/controller/token.go`) behaves: for every
//! ManagedServiceAccount in its cluster namespace on the hub it keeps a ServiceAccount of the
//! same name in its install namespace here, and that ServiceAccount's token, with the managed
//! cluster's CA, in a Secret of the same name next to the ManagedServiceAccount; it deletes the
//! ServiceAccount once the ManagedServiceAccount is gone. It renews Lease `<addon>` in its
//! install namespace so the klusterlet judges it Available.
//!
//! ```text
//!  hub (the add-on's own credential, secret <addon>-hub-kubeconfig mounted)
//!    ManagedServiceAccounts in <cluster> ──watch──▶ store ─┐
//!    Secrets in <cluster>, labelled ours ──watch──────────┤ names
//!  managed (the pod's service account, or --kubeconfig)    ├──▶ queue ─▶ reconcile(name) one at a time
//!    ServiceAccounts in <install ns>, labelled ours ─watch─┤          (errors: again after a pause)
//!    every --check-period: every name ───────────────────┘
//!    Lease <addon> in <install ns> ◀── renewed every --lease-seconds
//! ```
//!
//! The decisions are in [`token`], the reads and writes of one pass in [`reconcile`]. Every
//! name is passed over again each check period: that is when a token is reviewed on the
//! managed cluster (a revoked one is replaced within a period) and when one nearing its expiry
//! is replaced. The hub credential is rotated by the klusterlet, which rewrites the mounted
//! secret: the agent rereads the files every [`flotilla_addon_agent::credential::CHECK`] and
//! reconnects when they changed. Both that and the Lease are [`flotilla_addon_agent`]'s, shared
//! with the other add-ons' agents.

mod ca;
mod msa;
mod reconcile;
mod token;

use std::{collections::BTreeSet, path::PathBuf, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use flotilla_addon_agent::{
    credential::{self, HubCredential},
    lease::LeaseRenewer,
};
use futures::{Stream, StreamExt as _};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::{
    Api, Client, Config, Resource, ResourceExt as _,
    runtime::{
        WatchStreamExt as _,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::msa::ManagedServiceAccount;

/// The field manager and Lease holder of the agent's writes, and the prefix of its log lines.
pub const FIELD_MANAGER: &str = "managed-serviceaccount-agent";

/// The longest pause before a failed pass over a name is tried again.
const RETRY: Duration = Duration::from_secs(5);

/// Command line, as the plugin's Deployment passes it.
#[derive(Debug, Parser)]
#[command(name = "managed-serviceaccount-agent", version, about)]
struct Args {
    /// The add-on's hub kubeconfig (the mounted `<addon>-hub-kubeconfig` secret).
    #[arg(long)]
    hub_kubeconfig: PathBuf,
    /// This managed cluster's name: its namespace on the hub.
    #[arg(long)]
    cluster_name: String,
    /// The add-on's install namespace on the managed cluster: where the ServiceAccounts and
    /// the Lease are.
    #[arg(long)]
    addon_namespace: String,
    /// The add-on's name: the Lease the klusterlet reads.
    #[arg(long, default_value = "managed-serviceaccount")]
    addon_name: String,
    /// A kubeconfig for the managed cluster; by default the pod's service account (or
    /// `$KUBECONFIG` outside a pod).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Seconds between passes over every ManagedServiceAccount, each reviewing its token on the
    /// managed cluster.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    check_period: u64,
    /// Seconds between lease renewals.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    lease_seconds: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = managed_config(&args)
        .await
        .context("connect to the managed cluster")?;
    let ca = ca::ca_pem(&config).context("read the managed cluster's CA")?;
    let managed = Client::try_from(config).context("connect to the managed cluster")?;
    eprintln!(
        "managed-serviceaccount-agent: ServiceAccounts in {} for the ManagedServiceAccounts of hub namespace {}, checked every {}s; renewing Lease {} every {}s",
        args.addon_namespace, args.cluster_name, args.check_period, args.addon_name, args.lease_seconds,
    );

    let (names, queue) = unbounded_channel();
    let (accounts, account_writer) = reflector::store::<ServiceAccount>();
    let account_feed = watcher(
        Api::<ServiceAccount>::namespaced(managed.clone(), &args.addon_namespace),
        watcher::Config::default().labels(msa::IS_MANAGED_SELECTOR),
    )
    .default_backoff()
    .reflect(account_writer)
    .touched_objects();
    let account_feed = forward(account_feed, names.clone());
    let lease = LeaseRenewer::new(
        managed.clone(),
        &args.addon_namespace,
        &args.addon_name,
        FIELD_MANAGER,
        Duration::from_secs(args.lease_seconds),
    );
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listen for SIGTERM")?;
    // Every branch but the signals runs for as long as the process does.
    tokio::select! {
        () = account_feed => Ok(()),
        () = lease.run() => Ok(()),
        () = serve(&args, &managed, &ca, &accounts, names, queue) => Ok(()),
        _ = terminate.recv() => {
            eprintln!("managed-serviceaccount-agent: terminated");
            Ok(())
        }
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// The managed cluster: `--kubeconfig` if given, else in-cluster or `$KUBECONFIG`.
async fn managed_config(args: &Args) -> anyhow::Result<Config> {
    match &args.kubeconfig {
        Some(path) => Ok(credential::config(path).await?),
        None => Config::infer()
            .await
            .context("no in-cluster service account nor kubeconfig"),
    }
}

/// Sends the name of every object `events` touches; errors are logged (the watch retries with
/// backoff). Never returns.
async fn forward<K: Resource>(
    events: impl Stream<Item = Result<K, watcher::Error>>,
    names: UnboundedSender<String>,
) {
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        match event {
            Ok(object) => {
                let _ = names.send(object.name_any());
            }
            Err(error) => eprintln!("managed-serviceaccount-agent: watch: {error}"),
        }
    }
}

/// Works for as long as the agent runs, reconnecting to the hub whenever the mounted
/// credential changes or the connection cannot be made.
async fn serve(
    args: &Args,
    managed: &Client,
    ca: &[u8],
    accounts: &Store<ServiceAccount>,
    names: UnboundedSender<String>,
    mut queue: UnboundedReceiver<String>,
) {
    let serve_with = async |hub: Client| {
        let ctx = reconcile::Context::new(
            hub.clone(),
            &args.cluster_name,
            managed.clone(),
            &args.addon_namespace,
            ca.to_vec(),
        );
        let (msas, msa_writer) = reflector::store::<ManagedServiceAccount>();
        let msa_feed = watcher(ctx.msas.clone(), watcher::Config::default())
            .default_backoff()
            .reflect(msa_writer)
            .touched_objects();
        // Someone changing or deleting a token Secret gets it rewritten.
        let secret_feed = watcher(
            Api::<Secret>::namespaced(hub, &args.cluster_name),
            watcher::Config::default().labels(msa::IS_MANAGED_SELECTOR),
        )
        .default_backoff()
        .touched_objects();
        tokio::select! {
            () = forward(msa_feed, names.clone()) => {}
            () = forward(secret_feed, names.clone()) => {}
            () = work(&ctx, &args.cluster_name, &msas, accounts, &mut queue, &names, args.check_period) => {}
        }
    };
    HubCredential::new(&args.hub_kubeconfig)
        .serve(FIELD_MANAGER, serve_with)
        .await;
}

/// Passes over every queued name, one at a time, once both stores hold a full list; every
/// `check_period` seconds every name is queued. Returns only if a store's writer is gone.
async fn work(
    ctx: &reconcile::Context,
    cluster: &str,
    msas: &Store<ManagedServiceAccount>,
    accounts: &Store<ServiceAccount>,
    queue: &mut UnboundedReceiver<String>,
    names: &UnboundedSender<String>,
    check_period: u64,
) {
    if msas.wait_until_ready().await.is_err() || accounts.wait_until_ready().await.is_err() {
        return;
    }
    let period = Duration::from_secs(check_period);
    let retry = RETRY.min(period);
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut pending = BTreeSet::new();
    loop {
        tokio::select! {
            _ = ticks.tick() => {
                // The ServiceAccounts too: one whose ManagedServiceAccount went while the agent
                // was away is deleted.
                pending.extend(msas.state().iter().map(|m| m.name_any()));
                pending.extend(accounts.state().iter().map(|a| a.name_any()));
            }
            Some(name) = queue.recv() => {
                pending.insert(name);
            }
        }
        while let Ok(name) = queue.try_recv() {
            pending.insert(name);
        }
        while let Some(name) = pending.pop_first() {
            let msa = msas.get(&ObjectRef::new(&name).within(cluster));
            match reconcile::reconcile(&name, msa.as_deref(), ctx).await {
                Ok(reconcile::Outcome::Refreshed(why)) => {
                    eprintln!("managed-serviceaccount-agent: {name}: new token ({why})");
                }
                Ok(reconcile::Outcome::Removed) => {
                    eprintln!(
                        "managed-serviceaccount-agent: {name}: ManagedServiceAccount gone, ServiceAccount deleted"
                    );
                }
                Ok(reconcile::Outcome::Kept | reconcile::Outcome::Nothing) => {}
                Err(error) => {
                    eprintln!("managed-serviceaccount-agent: {name}: {error:#}");
                    let names = names.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(retry).await;
                        let _ = names.send(name);
                    });
                }
            }
        }
    }
}
