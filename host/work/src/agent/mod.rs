//! The work agent `flotilla klusterlet` runs beside the registration agent (ocm-reference §3).
//!
//! ```text
//!  hub-kubeconfig-secret (written and rotated by the registration agent)
//!      │ read; re-read every credential poll, controllers restarted on change
//!      ▼
//!  hub: ManifestWorks in ns <cluster> ──watch──▶ manifestwork::reconcile
//!        ▲ finalizer, status                     │ apply in kind order, record, clean up
//!        └───────────────────────────────────────┤
//!  managed: AppliedManifestWork <hubHash>-<work> ◀┘──▶ appliedmanifestwork::reconcile
//!           (finalizer: delete what it owns, evict when the work vanished from the hub)
//! ```
//!
//! The works controller is woken by a change of a work's generation or deletion, by the
//! on-demand watches of applied objects ([`watch`]: watched feedback changed, or drift of an
//! object the work keeps as written), and by its own requeues (status sync, resync ±50 %);
//! not by the agent's own finalizer and status writes, which would only make it read
//! everything again. The AppliedManifestWork controller likewise
//! ignores status writes. Both keep a store that the reconciles read instead of the server.
//!
//! Nothing is deleted because the hub cannot be reached: deletions follow only what the agent
//! read from the hub (a manifest dropped from a spec it saw, a work whose deletion it saw, or
//! a work missing from a successful list for the whole eviction grace period).

pub mod error;

mod appliedmanifestwork;
mod apply;
mod cleanup;
mod discovery;
mod executor;
mod hub;
mod manifestwork;
mod watch;

use std::{sync::Arc, time::Duration};

use flotilla_api::work::v1::{AppliedManifestWork, ManifestWork};
use flotilla_core::work::agent::names::hub_hash;
use flotilla_registration::names::{AGENT_NAMESPACE, HUB_KUBECONFIG_SECRET};
use kube::{
    Api, Client, Resource,
    runtime::{
        Controller, Predicate as _, PredicateConfig, WatchStreamExt as _,
        controller::Config as ControllerConfig, predicates, reflector, watcher,
    },
};

pub use error::{Error, Result};
pub use flotilla_registration::agent::Clients;

/// How the work agent runs. [`AgentOptions::default`] gives OCM's defaults.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// The cluster (namespace on the hub) whose works to apply; when `None`, the
    /// `cluster-name` key of the hub kubeconfig secret.
    pub cluster_name: Option<String>,
    /// `spec.agentID` of new AppliedManifestWorks; the hub hash when `None`, as in OCM.
    pub agent_id: Option<String>,
    /// Namespace of the hub kubeconfig secret (on the managed cluster; in hosted mode on the
    /// hosting cluster).
    pub agent_namespace: String,
    /// The secret holding the hub kubeconfig (`kubeconfig`, optionally `tls.crt`/`tls.key`,
    /// `cluster-name`), written by the registration agent.
    pub hub_kubeconfig_secret: String,
    /// How often status (availability, feedback, condition rules) is refreshed for works that
    /// need it (10 s, OCM's `--status-sync-interval`).
    pub status_sync_interval: Duration,
    /// Base of the full resync that reverts drift; each requeue is jittered ±50 % (4 minutes).
    pub resync_interval: Duration,
    /// How long an AppliedManifestWork whose work vanished from the hub is kept (60 minutes,
    /// OCM's `--appliedmanifestwork-eviction-grace-period`).
    pub eviction_grace_period: Duration,
    /// How often the hub kubeconfig secret is checked for a rotated credential (10 s).
    pub credential_poll_interval: Duration,
    /// How long applying a CRD waits for it to be Established before its custom resources
    /// are applied (30 s; they fail with a clear condition and are retried after that).
    pub crd_established_timeout: Duration,
    /// Retry delay after an executor was denied (60 s, as OCM).
    pub executor_retry_interval: Duration,
    /// Works reconciled at once (10, as OCM's workers).
    pub workers: u16,
}

impl Default for AgentOptions {
    fn default() -> Self {
        Self {
            cluster_name: None,
            agent_id: None,
            agent_namespace: AGENT_NAMESPACE.to_owned(),
            hub_kubeconfig_secret: HUB_KUBECONFIG_SECRET.to_owned(),
            status_sync_interval: Duration::from_secs(10),
            resync_interval: Duration::from_secs(4 * 60),
            eviction_grace_period: Duration::from_secs(60 * 60),
            credential_poll_interval: Duration::from_secs(10),
            crd_established_timeout: Duration::from_secs(30),
            executor_retry_interval: Duration::from_secs(60),
            workers: 10,
        }
    }
}

/// What both controllers share for one hub connection.
pub(crate) struct Context {
    /// Client of the hub, with the agent's hub credential.
    pub hub: Client,
    /// Client of the managed cluster.
    pub managed: Client,
    /// The cluster namespace on the hub.
    pub cluster: String,
    /// Lower-hex SHA-256 of the hub URL.
    pub hub_hash: String,
    /// `spec.agentID` of new AppliedManifestWorks.
    pub agent_id: String,
    /// Discovery of the managed cluster.
    pub discovery: discovery::Discovery,
    /// The options.
    pub options: AgentOptions,
    /// The works last listed from the hub (for eviction).
    pub works: reflector::Store<ManifestWork>,
    /// The AppliedManifestWorks of the managed cluster, as last watched.
    pub applied: reflector::Store<AppliedManifestWork>,
    /// On-demand watches of applied objects (watched feedback, drift).
    pub watches: watch::Watches,
    /// Events on the works, in the cluster namespace on the hub (the agent's hub role may
    /// create them there).
    pub hub_events: flotilla_kube::events::Events,
    /// Events on the AppliedManifestWorks, on the managed cluster.
    pub managed_events: flotilla_kube::events::Events,
}

/// The `reportingController` of the work agent's Events (OCM's component name).
pub(crate) const EVENT_REPORTER: &str = "work-agent";

/// Hash of whether `object` is being deleted: with the generation, what wakes the controllers
/// (a finalizer or status written by the agent itself changes neither).
fn deleting<K: Resource>(object: &K) -> Option<u64> {
    Some(u64::from(object.meta().deletion_timestamp.is_some()))
}

/// Runs the work agent against the managed cluster `managed`, which also holds the hub
/// kubeconfig secret, until dropped: waits for the secret, runs the controllers on it, and
/// starts them again on a new credential.
pub async fn run(managed: Client, options: AgentOptions) -> Result<()> {
    run_with(Clients::same(managed), options).await
}

/// [`run`] with the hub kubeconfig secret read from [`Clients::agent`] (hosted mode: the
/// hosting cluster). Everything applied, and the AppliedManifestWorks, stay on
/// [`Clients::managed`], as in OCM's hosted mode.
pub async fn run_with(clients: Clients, options: AgentOptions) -> Result<()> {
    let Clients { agent, managed } = clients;
    loop {
        let connection = hub::wait_for(&agent, &options).await;
        let fingerprint = connection.fingerprint.clone();
        tracing::info!(hub = %connection.server, cluster = %connection.cluster, "work agent starting");
        tokio::select! {
            () = run_controllers(managed.clone(), options.clone(), connection) => {}
            () = hub::wait_for_change(&agent, &options, &fingerprint) => {
                tracing::info!("hub credential changed; restarting the work agent's controllers");
            }
        }
    }
}

async fn run_controllers(managed: Client, options: AgentOptions, connection: hub::Connection) {
    let works_api: Api<ManifestWork> = Api::namespaced(connection.client.clone(), &connection.cluster);
    let (works, works_writer) = reflector::store();
    let work_changes = reflector(works_writer, watcher(works_api, watcher::Config::default()))
        .default_backoff()
        .applied_objects()
        .predicate_filter(
            predicates::generation.combine(deleting),
            PredicateConfig::default(),
        );
    let (watches, triggers) = watch::Watches::new(managed.clone(), connection.cluster.clone());
    let works_controller = Controller::for_stream(work_changes, works.clone())
        .reconcile_on(triggers)
        .with_config(ControllerConfig::default().concurrency(options.workers));

    let applied_api: Api<AppliedManifestWork> = Api::all(managed.clone());
    let (applied, applied_writer) = reflector::store();
    let applied_changes = reflector(applied_writer, watcher(applied_api, watcher::Config::default()))
        .default_backoff()
        .applied_objects()
        .predicate_filter(
            predicates::generation.combine(deleting),
            PredicateConfig::default(),
        );
    let applied_controller = Controller::for_stream(applied_changes, applied.clone());

    let hash = hub_hash(&connection.server);
    let context = Arc::new(Context {
        hub_events: flotilla_kube::events::Events::new(connection.client.clone(), EVENT_REPORTER),
        managed_events: flotilla_kube::events::Events::new(managed.clone(), EVENT_REPORTER),
        hub: connection.client,
        managed: managed.clone(),
        cluster: connection.cluster,
        agent_id: options.agent_id.clone().unwrap_or_else(|| hash.clone()),
        hub_hash: hash,
        discovery: discovery::Discovery::new(managed),
        works,
        applied,
        watches,
        options,
    });
    let applied_context = context.clone();
    let restored_context = context.clone();
    let controllers = async move {
        tokio::join!(
            flotilla_kube::controller::run(
                "work-agent-manifestwork",
                works_controller,
                manifestwork::reconcile,
                context
            ),
            async move {
                // Eviction decides from the hub's list: start only once it has been read.
                if applied_context.works.wait_until_ready().await.is_ok() {
                    flotilla_kube::controller::run(
                        "work-agent-appliedmanifestwork",
                        applied_controller,
                        appliedmanifestwork::reconcile,
                        applied_context,
                    )
                    .await;
                }
            }
        );
    };
    tokio::select! {
        _ = controllers => {}
        () = hub_went_back(&restored_context) => {
            tracing::warn!(
                "the hub's state is older than works this agent has seen (restored from a backup?); \
                 restarting the work agent's controllers to read it afresh"
            );
        }
    }
}

/// Returns once the hub's works list is older than works already in the store, checked every
/// resync interval: the watch would wait forever for a resourceVersion the restored hub has
/// not reached, with the store showing works the hub no longer has.
async fn hub_went_back(ctx: &Context) {
    loop {
        tokio::time::sleep(ctx.options.resync_interval).await;
        let Ok(current) = hub_resource_version(ctx).await else {
            continue;
        };
        let seen = ctx.works.state();
        let versions = seen.iter().filter_map(|w| w.metadata.resource_version.as_deref());
        if flotilla_core::work::agent::eviction::hub_went_back(versions, &current) {
            return;
        }
    }
}

/// The hub's current resourceVersion for the cluster's works (a list of at most one), read
/// from the hub rather than the watch, whose store a restored hub leaves behind.
pub(crate) async fn hub_resource_version(ctx: &Context) -> Result<String> {
    let works: Api<ManifestWork> = Api::namespaced(ctx.hub.clone(), &ctx.cluster);
    let list = works
        .list_metadata(&kube::api::ListParams::default().limit(1))
        .await
        .map_err(Error::kube(format!("list ManifestWorks in {}", ctx.cluster)))?;
    Ok(list.metadata.resource_version.unwrap_or_default())
}
