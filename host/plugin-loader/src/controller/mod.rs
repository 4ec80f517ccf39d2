//! The `AddOnPlugin` controller: keeps the plugin registry in step with the `AddOnPlugin`
//! objects on the hub and reports every step in their status.
//!
//! ```text
//!   AddOnPlugin (cluster-scoped) ──watch──▶ reconcile ──────────────────────────────────────────┐
//!      spec.source ─ fetch (ConfigMap | OCI, capped, digest-checked)            Fetched         │
//!      spec.digest   └─▶ Runtime::load beside the serving revision              Validated       │
//!      spec.limits        (validate, compile, describe)                                         │
//!                          ├─ ok  → PluginSlot swap (atomic)                    Ready           │
//!                          └─ err → serving revision untouched                  Degraded True   │
//!                                                                                               ▼
//!   PluginRegistry ◀── lookup by add-on name (spec.addOnName, default metadata.name) ─ add-on manager
//! ```
//!
//! Watches: `AddOnPlugin`, and the metadata of ConfigMaps (never their bytes): a change to a
//! ConfigMap some plugin loads from reconciles the plugins again at once, so a new component
//! in a ConfigMap serves within seconds. Besides, sources are re-read every
//! [`ControllerConfig::resync`] unless the serving revision already has the pinned digest
//! (bytes named by digest cannot change). A failed attempt requeues with exponential backoff per object, and the last good
//! revision keeps serving meanwhile. Deleting an `AddOnPlugin` removes its add-on's slot (the
//! finalizer [`FINALIZER`] makes sure the host sees the deletion); calls in flight finish on the
//! revision they hold.
//!
//! Runtime faults: the runtime announces every change of a serving revision's fault summary
//! ([`flotilla_wasm::Runtime::subscribe_faults`]); a task beside the controller coalesces them for
//! [`ControllerConfig::fault_debounce`] and writes `status.faults` and `Degraded` of the owning
//! `AddOnPlugin` (without fetching anything), and again when time alone changes the summary (a
//! fault leaves the window, a quarantine ends).
//!
//! Two `AddOnPlugin`s naming the same add-on: the first one reconciled drives it, the other is
//! `Ready` False `AddOnNameConflict` until the first is deleted.

mod reconcile;
mod status;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use flotilla_api::plugins::v1alpha1::AddOnPlugin;
use flotilla_kube::feed::Feeds;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, ResourceExt as _};
use tokio::sync::broadcast;
use tokio::time::Instant;

pub use reconcile::reconcile;

use crate::PluginRegistry;
use crate::fetch::{DEFAULT_MAX_BYTES, Fetcher};

/// Finalizer the host puts on every `AddOnPlugin` so that deleting one unloads its plugin.
pub const FINALIZER: &str = "plugins.flotilla.dev/plugin-host";

/// Settings of the controller. The defaults suit a hub.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Largest component accepted from a source, after decompression.
    pub max_fetch_bytes: usize,
    /// How often a healthy `AddOnPlugin` whose bytes are not pinned by digest is re-read.
    pub resync: Duration,
    /// First retry delay after a failed attempt; doubles per consecutive failure.
    pub backoff_min: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
    /// How long runtime-fault announcements are gathered before one status write per plugin.
    pub fault_debounce: Duration,
    /// The one namespace whose Secrets an `AddOnPlugin` may name (`pullSecretRef`, signers'
    /// `caSecretRef`); other references are refused before anything is read
    /// ([`flotilla_core::plugin_sources`]).
    pub secrets_namespace: String,
    /// Longest one fetch of a plugin's bytes may take, all requests together; past it the
    /// fetch fails (`Fetched` False `FetchTimedOut`) and the last good revision keeps serving.
    pub fetch_deadline: Duration,
}

/// Default [`ControllerConfig::fetch_deadline`]: ample for a component of the largest
/// accepted size from a slow registry, short enough that a stuck one is reported.
pub const DEFAULT_FETCH_DEADLINE: Duration = Duration::from_secs(120);

/// The hub's own namespace, where [`ControllerConfig::secrets_namespace`] points by default.
pub const DEFAULT_SECRETS_NAMESPACE: &str = "open-cluster-management-hub";

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            max_fetch_bytes: DEFAULT_MAX_BYTES,
            resync: Duration::from_secs(300),
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
            fault_debounce: Duration::from_secs(1),
            secrets_namespace: DEFAULT_SECRETS_NAMESPACE.to_owned(),
            fetch_deadline: DEFAULT_FETCH_DEADLINE,
        }
    }
}

/// Errors that stop one reconcile (status writes, finalizers). Fetch and validation failures are
/// not errors: they are reported in status and retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A write to the API server failed; retried by [`error_policy`].
    #[error(transparent)]
    Kube(#[from] flotilla_kube::Error),
    /// Reading an `AddOnPlugin` (to write its faults) failed.
    #[error("read AddOnPlugin {name}: {source}")]
    Read {
        /// The plugin's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// What every reconcile shares. Nothing is global: a test can run two controllers side by side.
pub struct Context {
    pub(crate) client: Client,
    pub(crate) registry: Arc<PluginRegistry>,
    pub(crate) fetcher: Fetcher,
    pub(crate) config: ControllerConfig,
    pub(crate) state: Mutex<State>,
    /// Failed API writes in a row per `AddOnPlugin`, for [`error_policy`]'s backoff.
    pub(crate) api_failures: flotilla_kube::backoff::Failures,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Bookkeeping across reconciles.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Add-on name → the `AddOnPlugin` that drives it.
    pub(crate) owners: HashMap<String, String>,
    /// `AddOnPlugin` name → consecutive failed attempts (for backoff).
    pub(crate) failures: HashMap<String, u32>,
    /// `AddOnPlugin` name → the generation and time of its last successful fetch.
    pub(crate) fetched: HashMap<String, (Option<i64>, std::time::Instant)>,
    /// `AddOnPlugin`s whose source ConfigMap changed since their last fetch.
    pub(crate) stale: HashSet<String>,
}

impl Context {
    /// A context for `registry`, reading sources with `client`.
    pub fn new(client: Client, registry: Arc<PluginRegistry>, config: ControllerConfig) -> Self {
        Self {
            fetcher: Fetcher::new(client.clone(), config.max_fetch_bytes)
                .with_deadline(config.fetch_deadline),
            client,
            registry,
            config,
            state: Mutex::new(State::default()),
            api_failures: flotilla_kube::backoff::Failures::default(),
        }
    }

    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `plugin` was fetched successfully for `generation` within the resync period and
    /// its source has not changed since.
    pub(crate) fn fetched_recently(&self, plugin: &str, generation: Option<i64>) -> bool {
        let state = self.state();
        !state.stale.contains(plugin)
            && state
                .fetched
                .get(plugin)
                .is_some_and(|(g, at)| *g == generation && at.elapsed() < self.config.resync)
    }

    /// Notes a successful fetch of `plugin` for `generation`.
    pub(crate) fn record_fetch(&self, plugin: &str, generation: Option<i64>) {
        let mut state = self.state();
        state.stale.remove(plugin);
        state
            .fetched
            .insert(plugin.to_owned(), (generation, std::time::Instant::now()));
    }

    /// The delay before retrying `plugin` after its `n`-th consecutive failure.
    pub(crate) fn backoff(&self, n: u32) -> Duration {
        let factor = 2u32.saturating_pow(n.saturating_sub(1).min(16));
        self.config
            .backoff_min
            .saturating_mul(factor)
            .min(self.config.backoff_max)
    }
}

/// Requeue policy for [`ReconcileError`]s (API writes): conflicts at once, the rest backing
/// off ([`flotilla_kube::backoff`]).
pub fn error_policy(plugin: Arc<AddOnPlugin>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    tracing::warn!(%error, "AddOnPlugin reconcile failed");
    let attempt = ctx.api_failures.failed(&plugin.name_any());
    flotilla_kube::backoff::requeue_after(error, attempt)
}

/// Runs the controller, with a feed of its own, until the watch stream ends.
pub async fn run(client: Client, registry: Arc<PluginRegistry>, config: ControllerConfig) {
    let mut feeds = Feeds::new(client.clone());
    let controller = start(&mut feeds, client, registry, config);
    futures::join!(feeds.run(), controller);
}

/// Subscribes the controller to the AddOnPlugins of `feeds` now, and returns it: it runs once
/// `feeds` runs beside it. The hub starts it once, with the registry the add-on manager looks
/// plugins up in ([`PluginRegistry::get`] by add-on name).
pub fn start(
    feeds: &mut Feeds,
    client: Client,
    registry: Arc<PluginRegistry>,
    config: ControllerConfig,
) -> impl Future<Output = ()> + use<> {
    let (plugins, plugin_changes) = feeds.feed::<AddOnPlugin>(None, None).subscribe_all();
    let controller = Controller::for_stream(plugin_changes, plugins.clone());
    let fault_events = registry.runtime().subscribe_faults();
    let context = Arc::new(Context::new(client.clone(), registry, config));
    let marks = Arc::clone(&context);
    let source_changes = watcher(
        Api::<PartialObjectMeta<ConfigMap>>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .touched_objects()
    .filter_map(move |changed| {
        let readers: Vec<String> = match changed {
            Ok(config_map) => {
                let (namespace, name) = (config_map.namespace().unwrap_or_default(), config_map.name_any());
                plugins
                    .state()
                    .iter()
                    .filter(|plugin| {
                        plugin
                            .spec
                            .source
                            .config_map
                            .as_ref()
                            .is_some_and(|source| source.namespace == namespace && source.name == name)
                    })
                    .map(|plugin| plugin.name_any())
                    .collect()
            }
            Err(_) => Vec::new(),
        };
        let is_source = !readers.is_empty();
        marks.state().stale.extend(readers);
        std::future::ready(is_source.then_some(()))
    });
    let faults = report_faults(Arc::clone(&context), fault_events);
    let controller = controller
        .reconcile_all_on(source_changes)
        .run(
            |plugin, ctx| async move {
                let name = plugin.name_any();
                let result = reconcile(plugin, Arc::clone(&ctx)).await;
                if result.is_ok() {
                    ctx.api_failures.succeeded(&name);
                }
                result
            },
            error_policy,
            context,
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "AddOnPlugin controller event");
            }
        });
    async move {
        tokio::select! {
            () = controller => {}
            () = faults => {}
        }
    }
}

/// Writes runtime faults into the owning `AddOnPlugin`s' status as they are announced, and
/// again when the summary changes by time alone. Ends when the runtime is gone.
async fn report_faults(ctx: Arc<Context>, mut events: broadcast::Receiver<String>) {
    use tokio::sync::broadcast::error::{RecvError, TryRecvError};
    // Add-ons to look at again at a time: when a fault leaves the window or a quarantine ends.
    let mut due: BTreeMap<String, Instant> = BTreeMap::new();
    let mut pending: BTreeSet<String> = BTreeSet::new();
    loop {
        let next = due.values().min().copied();
        tokio::select! {
            event = events.recv() => match event {
                Ok(addon) => {
                    pending.insert(addon);
                }
                Err(RecvError::Lagged(_)) => pending.extend(ctx.state().owners.keys().cloned()),
                Err(RecvError::Closed) => return,
            },
            () = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {
                let now = Instant::now();
                due.retain(|addon, at| {
                    let keep = *at > now;
                    if !keep {
                        pending.insert(addon.clone());
                    }
                    keep
                });
            }
        }
        if pending.is_empty() {
            continue;
        }
        // A fault storm becomes one status write per plugin per debounce period.
        tokio::time::sleep(ctx.config.fault_debounce).await;
        loop {
            match events.try_recv() {
                Ok(addon) => {
                    pending.insert(addon);
                }
                Err(TryRecvError::Lagged(_)) => pending.extend(ctx.state().owners.keys().cloned()),
                Err(TryRecvError::Empty | TryRecvError::Closed) => break,
            }
        }
        for addon in std::mem::take(&mut pending) {
            match write_faults(&ctx, &addon).await {
                Ok(Some(after)) => {
                    // A little past the change, so the summary has surely moved on.
                    due.insert(addon, Instant::now() + after + Duration::from_millis(100));
                }
                Ok(None) => {
                    due.remove(&addon);
                }
                Err(error) => {
                    tracing::warn!(%addon, %error, "cannot write plugin faults into status; retrying");
                    due.insert(
                        addon,
                        Instant::now() + ctx.config.backoff_min.max(Duration::from_secs(1)),
                    );
                }
            }
        }
    }
}

/// Writes the fault summary of `addon`'s serving revision into its `AddOnPlugin`'s status.
/// Returns how long until the summary changes by time alone.
async fn write_faults(ctx: &Context, addon: &str) -> Result<Option<Duration>, ReconcileError> {
    let Some(owner) = ctx.state().owners.get(addon).cloned() else {
        return Ok(None);
    };
    let Some(serving) = ctx.registry.get(addon) else {
        return Ok(None);
    };
    let api: Api<AddOnPlugin> = Api::all(ctx.client.clone());
    let plugin = api.get_opt(&owner).await.map_err(|source| ReconcileError::Read {
        name: owner.clone(),
        source,
    })?;
    let Some(plugin) = plugin else {
        return Ok(None);
    };
    let mut status = plugin.status.clone().unwrap_or_default();
    // The status must describe this revision; a reconcile in progress writes its own.
    if status.digest.as_deref() != Some(serving.digest().to_string().as_str()) {
        return Ok(None);
    }
    let summary = serving.faults();
    let generation = status.observed_generation;
    let window = ctx.registry.runtime().fault_policy().window.as_secs();
    status::apply_faults(
        &mut status,
        Some(&summary),
        window,
        generation,
        k8s_openapi::jiff::Timestamp::now(),
    );
    flotilla_kube::status::patch_if_changed(&api, &plugin, plugin.status.as_ref(), &status).await?;
    Ok(summary
        .next_change
        .map(|at| at.duration_since(SystemTime::now()).unwrap_or_default()))
}
