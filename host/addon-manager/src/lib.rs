//! The hub's add-on manager: one process drives every add-on whose hub logic is a plugin, where
//! OCM runs one Go controller Deployment per add-on.
//!
//! ```text
//!  watches                                   controller   writes
//!  AddOnPlugin (Ready), ClusterManagementAddOn ▶ plugin ──▶ ClusterManagementAddOn (lifecycle
//!                                                          addon-manager, addOnMeta, supportedConfigs)
//!  ClusterManagementAddOn, Placement,          ▶ install ─▶ ManagedClusterAddOns of the install
//!  PlacementDecision, ManagedClusterAddOn                   strategy's placements (CMA as owner)
//!  CMA, ManagedClusterAddOn, Placement,       ▶ rollout ─▶ configReferences and the plugin
//!  PlacementDecision, configs, AddOnPlugin                  revision released batch by batch,
//!                                                           Configured; CMA installProgressions
//!  ManagedClusterAddOn, ManifestWork, CMA,     ▶ deploy ──▶ addon-<name>-deploy-<i> ManifestWorks,
//!  AddOnPlugin, ManagedCluster                              addon-<name>-pre-delete (hooks, with
//!                                                           the pre-delete finalizer),
//!                                                           ManifestApplied/Progressing,
//!                                                           lastAppliedConfig, HookManifestCompleted
//!  ManagedClusterAddOn, ManifestWork,          ▶ health ──▶ healthCheck.mode, Available (work
//!  AddOnPlugin, ManagedCluster                              feedback ▶ workload rule or the
//!                                                           plugin's probe-health)
//!  ManagedClusterAddOn, CMA, AddOnPlugin      ▶ registration ▶ status.registrations/namespace,
//!                                                           hub-permissions Roles/RoleBindings,
//!                                                           RegistrationApplied
//!  CertificateSigningRequest (addon-name)     ▶ csr ─────▶ approval (host checks + approve-csr),
//!                                                           custom-signer certificates, Events
//! ```
//!
//! Each controller is a module with `mod.rs` (what it watches) and `reconcile.rs` (one
//! reconcile); every decision (configs, hashes, work names and splitting, conditions, install
//! plans) is a pure function in `flotilla_core::addon`. Every controller finds an add-on's plugin
//! through [`Plugins`]: the revision in the shared [`PluginRegistry`] the AddOnPlugin controller
//! fills, or, for an add-on whose config is an AddOnTemplate, an instance of the built-in
//! AddOnTemplate plugin for that template; [`run`] starts the controllers and runs until the
//! returned future is dropped.

mod configs;
mod csr;
mod deploy;
pub mod error;
mod health;
mod install;
mod plugin;
mod plugins;
mod prune;
mod registration;
mod rollout;
mod writes;

use std::sync::Arc;
use std::time::Duration;

use flotilla_wasm::PluginRegistry;
use kube::Client;

pub use csr::{CSR_REQUESTER_BURST, CSR_REQUESTER_REFILL};
pub use error::{Error, Result};
pub use plugins::Plugins;
pub(crate) use writes::{AddonWrites, defer_addon_status, write_addon_status};

/// The ManagedClusterAddOns of add-on `name` (one per cluster): what a change of its
/// ClusterManagementAddOn or AddOnPlugin re-reconciles.
pub(crate) fn addons_named(
    store: &kube::runtime::reflector::Store<flotilla_api::addon::v1alpha1::ManagedClusterAddOn>,
    name: &str,
) -> Vec<kube::runtime::reflector::ObjectRef<flotilla_api::addon::v1alpha1::ManagedClusterAddOn>> {
    use kube::ResourceExt as _;
    select(store, |a| a.name_any() == name)
}

/// The ManagedClusterAddOns in the namespace of cluster `cluster`: what a change of its
/// ManagedCluster re-reconciles.
pub(crate) fn addons_of_cluster(
    store: &kube::runtime::reflector::Store<flotilla_api::addon::v1alpha1::ManagedClusterAddOn>,
    cluster: &str,
) -> Vec<kube::runtime::reflector::ObjectRef<flotilla_api::addon::v1alpha1::ManagedClusterAddOn>> {
    use kube::ResourceExt as _;
    select(store, |a| a.namespace().as_deref() == Some(cluster))
}

/// The objects in `store` matching `keep`, as references to reconcile: how a watch on one
/// kind maps to the objects of another that depend on it.
pub(crate) fn select<K>(
    store: &kube::runtime::reflector::Store<K>,
    keep: impl Fn(&K) -> bool,
) -> Vec<kube::runtime::reflector::ObjectRef<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    store
        .state()
        .iter()
        .filter(|object| keep(object))
        .map(|object| kube::runtime::reflector::ObjectRef::from_obj(object.as_ref()))
        .collect()
}

/// What a controller gets of the [`AddonFeed`]: the shared cache, and
/// the add-ons whose part it reads changed (or that were deleted).
pub(crate) type AddonView = (
    kube::runtime::reflector::Store<flotilla_api::addon::v1alpha1::ManagedClusterAddOn>,
    futures::stream::BoxStream<
        'static,
        Result<flotilla_api::addon::v1alpha1::ManagedClusterAddOn, kube::runtime::watcher::Error>,
    >,
);

/// One watch and one cache of every ManagedClusterAddOn for the five controllers that read
/// them (install, registration, health, deploy, rollout). Each had its own: copies of every
/// add-on in memory, decodings of every write, watches on the apiserver. Each
/// controller subscribes ([`AddonFeed::subscribe`]) before the feed runs, and is woken only
/// by changes to what it reads ([`changes`]).
pub(crate) struct AddonFeed {
    store: kube::runtime::reflector::Store<flotilla_api::addon::v1alpha1::ManagedClusterAddOn>,
    writer: kube::runtime::reflector::store::Writer<flotilla_api::addon::v1alpha1::ManagedClusterAddOn>,
    subscribers: Vec<
        futures::channel::mpsc::UnboundedSender<
            kube::runtime::watcher::Event<flotilla_api::addon::v1alpha1::ManagedClusterAddOn>,
        >,
    >,
}

impl AddonFeed {
    pub(crate) fn new() -> Self {
        let (store, writer) = kube::runtime::reflector::store();
        Self {
            store,
            writer,
            subscribers: Vec::new(),
        }
    }

    /// The cache of every add-on.
    pub(crate) fn store(
        &self,
    ) -> kube::runtime::reflector::Store<flotilla_api::addon::v1alpha1::ManagedClusterAddOn> {
        self.store.clone()
    }

    /// A controller's view of the add-ons, woken when `inputs` (a hash of what it reads of an
    /// add-on) changes.
    pub(crate) fn subscribe(
        &mut self,
        inputs: fn(&flotilla_api::addon::v1alpha1::ManagedClusterAddOn) -> Option<u64>,
    ) -> AddonView {
        use futures::StreamExt as _;
        let (sender, receiver) = futures::channel::mpsc::unbounded();
        self.subscribers.push(sender);
        (self.store.clone(), changes(receiver.map(Ok), inputs).boxed())
    }

    /// Watches the add-ons, fills the cache and passes every event to the subscribers, until
    /// dropped. Watch errors are retried with backoff (the subscribers never see them).
    pub(crate) async fn run(self, client: Client) {
        use futures::StreamExt as _;
        use kube::ResourceExt as _;
        use kube::runtime::{WatchStreamExt as _, watcher};
        let Self {
            writer, subscribers, ..
        } = self;
        watcher(kube::Api::all(client), watcher::Config::default())
            .default_backoff()
            .modify(|addon: &mut flotilla_api::addon::v1alpha1::ManagedClusterAddOn| {
                addon.managed_fields_mut().clear()
            })
            .reflect(writer)
            .for_each(|event| {
                match event {
                    Ok(event) => {
                        for subscriber in &subscribers {
                            // A subscriber gone (its controller ended) misses nothing it needs.
                            let _ = subscriber.unbounded_send(event.clone());
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "ManagedClusterAddOn watch failed; retrying"),
                }
                std::future::ready(())
            })
            .await;
    }
}

/// The objects of a reflected watch whose `inputs` (a hash of what a controller reads of
/// them) changed since they were last seen, and every deleted one. kube-runtime's
/// `predicate_filter` drops deletions (a deleted object hashes as it last did), which the
/// install and rollout controllers must see: a deleted add-on is made again, or no longer counts.
pub(crate) fn changes<K>(
    events: impl futures::Stream<Item = Result<kube::runtime::watcher::Event<K>, kube::runtime::watcher::Error>>
    + Send
    + 'static,
    inputs: fn(&K) -> Option<u64>,
) -> impl futures::Stream<Item = Result<K, kube::runtime::watcher::Error>> + Send + 'static
where
    K: kube::Resource<DynamicType = ()> + Clone + Send + 'static,
{
    use futures::StreamExt as _;
    use kube::runtime::reflector::ObjectRef;
    use kube::runtime::watcher::Event;
    let mut seen: std::collections::HashMap<ObjectRef<K>, Option<u64>> = std::collections::HashMap::new();
    events.filter_map(move |event| {
        let changed = match event {
            Err(e) => Some(Err(e)),
            Ok(Event::Apply(object) | Event::InitApply(object)) => {
                let hash = inputs(&object);
                (seen.insert(ObjectRef::from_obj(&object), hash) != Some(hash)).then_some(Ok(object))
            }
            Ok(Event::Delete(object)) => {
                seen.remove(&ObjectRef::from_obj(&object));
                Some(Ok(object))
            }
            Ok(Event::Init | Event::InitDone) => None,
        };
        std::future::ready(changed)
    })
}

/// Writes of a controller that its cache does not show yet, each with the resourceVersions
/// its write made stale (`None`: the object did not exist). A controller that plans from its
/// cache checks [`UnseenWrites::pending`] first and, while its own last writes are not in,
/// waits for them (they arrive within milliseconds) instead of acting on the state before.
pub(crate) struct UnseenWrites<K: kube::Resource<DynamicType = ()>>(
    std::sync::Mutex<std::collections::HashMap<kube::runtime::reflector::ObjectRef<K>, Unseen>>,
);

/// One write not seen yet: the stale resourceVersions, and when it was recorded.
struct Unseen {
    stale: Vec<Option<String>>,
    at: std::time::Instant,
}

/// How long a write is waited for at most: an object deleted right after the write may never
/// show the written state (a relisted watch skips it).
const UNSEEN_FOR_AT_MOST: std::time::Duration = std::time::Duration::from_secs(10);

impl<K: kube::Resource<DynamicType = ()>> Default for UnseenWrites<K> {
    fn default() -> Self {
        Self(std::sync::Mutex::new(std::collections::HashMap::new()))
    }
}

impl<K> UnseenWrites<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    /// Records a write of `object`: its states at the `stale` resourceVersions are outdated.
    pub(crate) fn record(&self, object: kube::runtime::reflector::ObjectRef<K>, stale: Vec<Option<String>>) {
        if let Ok(mut unseen) = self.0.lock() {
            let at = std::time::Instant::now();
            unseen.insert(object, Unseen { stale, at });
        }
    }

    /// Whether an object that `of` selects is still seen (its resourceVersion as `version`
    /// gives it) as it was before a recorded write; writes seen since are forgotten.
    pub(crate) fn pending(
        &self,
        version: impl Fn(&kube::runtime::reflector::ObjectRef<K>) -> Option<String>,
        of: impl Fn(&kube::runtime::reflector::ObjectRef<K>) -> bool,
    ) -> bool {
        let Ok(mut unseen) = self.0.lock() else {
            return false;
        };
        unseen.retain(|key, write| {
            write.at.elapsed() < UNSEEN_FOR_AT_MOST && write.stale.contains(&version(key))
        });
        unseen.keys().any(of)
    }
}

/// The resourceVersion of `key` in `store` (None: absent), for [`UnseenWrites::pending`].
pub(crate) fn version_in<K>(
    store: &kube::runtime::reflector::Store<K>,
    key: &kube::runtime::reflector::ObjectRef<K>,
) -> Option<String>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    store.get(key).and_then(|o| o.meta().resource_version.clone())
}

/// The add-ons as this process last wrote them, until the watches show it. Four controllers
/// write each add-on's status, each from its own cache; one whose cache was still behind
/// another's write sent a patch the apiserver refused (409), and reconciled again: on a
/// thousand new add-ons that was a conflict for every second status write. A reconcile takes
/// its add-on through [`LatestWrites::latest`] instead, so its patch starts from the state the
/// last write left. A write of someone else (the klusterlet) still ends in a conflict, which
/// forgets what was recorded ([`LatestWrites::forget`]).
pub(crate) struct LatestWrites<K: kube::Resource<DynamicType = ()>>(std::sync::Mutex<Latest<K>>);

/// The last writes by object, and the size at which expired ones are swept next.
struct Latest<K: kube::Resource<DynamicType = ()>> {
    writes: std::collections::HashMap<kube::runtime::reflector::ObjectRef<K>, Written<K>>,
    sweep_at: usize,
}

/// One object as last written: the resourceVersions it replaced, and when.
struct Written<K> {
    outdated: Vec<String>,
    object: Arc<K>,
    at: std::time::Instant,
}

impl<K: kube::Resource<DynamicType = ()>> Default for LatestWrites<K> {
    fn default() -> Self {
        Self(std::sync::Mutex::new(Latest {
            writes: std::collections::HashMap::new(),
            sweep_at: 64,
        }))
    }
}

impl<K> LatestWrites<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    /// Records `written`, the object as returned by a write made from resourceVersion `base`.
    pub(crate) fn record(&self, base: Option<String>, written: K) {
        let key = kube::runtime::reflector::ObjectRef::from_obj(&written);
        let Ok(mut latest) = self.0.lock() else {
            return;
        };
        let mut outdated: Vec<String> = match latest.writes.remove(&key) {
            Some(before) if before.at.elapsed() < UNSEEN_FOR_AT_MOST => {
                let mut outdated = before.outdated;
                outdated.extend(before.object.meta().resource_version.clone());
                outdated
            }
            _ => Vec::new(),
        };
        outdated.extend(base);
        latest.writes.insert(
            key,
            Written {
                outdated,
                object: Arc::new(written),
                at: std::time::Instant::now(),
            },
        );
        if latest.writes.len() >= latest.sweep_at {
            latest.writes.retain(|_, w| w.at.elapsed() < UNSEEN_FOR_AT_MOST);
            latest.sweep_at = (2 * latest.writes.len()).max(64);
        }
    }

    /// `cached`, or the state this process wrote since if the cache is behind it.
    pub(crate) fn latest(&self, cached: Arc<K>) -> Arc<K> {
        let key = kube::runtime::reflector::ObjectRef::from_obj(cached.as_ref());
        let Ok(mut latest) = self.0.lock() else {
            return cached;
        };
        let Some(written) = latest.writes.get(&key) else {
            return cached;
        };
        let version = cached.meta().resource_version.as_ref();
        if written.at.elapsed() < UNSEEN_FOR_AT_MOST && version.is_some_and(|v| written.outdated.contains(v))
        {
            return Arc::clone(&written.object);
        }
        if written.at.elapsed() >= UNSEEN_FOR_AT_MOST
            || version == written.object.meta().resource_version.as_ref()
        {
            // The cache caught up (or the write is too old to matter).
            latest.writes.remove(&key);
        }
        cached
    }

    /// Forgets the writes of `object`: a conflict showed someone else wrote it since.
    pub(crate) fn forget(&self, object: &kube::runtime::reflector::ObjectRef<K>) {
        if let Ok(mut latest) = self.0.lock() {
            latest.writes.remove(object);
        }
    }
}

/// How soon a reconcile that found a cache still listing runs again.
pub(crate) const CACHE_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// The run settings of a per-add-on controller: [`Options::max_concurrent_reconciles`].
pub(crate) fn per_addon_config(options: &Options) -> kube::runtime::controller::Config {
    kube::runtime::controller::Config::default().concurrency(options.max_concurrent_reconciles)
}

/// Keeps of a ManagedCluster what rendering reads (metadata, `hubAcceptsClient`, claims and
/// version for the plugin's inputs): conditions, capacity and managed fields are dropped, so
/// the cache stays small.
pub(crate) fn slim_cluster(cluster: &mut flotilla_api::cluster::v1::ManagedCluster) {
    kube::ResourceExt::managed_fields_mut(cluster).clear();
    if let Some(status) = cluster.status.as_mut() {
        status.conditions = None;
        status.capacity.clear();
        status.allocatable.clear();
    }
}

/// Keeps of a ManagedCluster what the health check reads: [`slim_cluster`] but its conditions.
pub(crate) fn cluster_with_conditions(cluster: &mut flotilla_api::cluster::v1::ManagedCluster) {
    kube::ResourceExt::managed_fields_mut(cluster).clear();
    if let Some(status) = cluster.status.as_mut() {
        status.capacity.clear();
        status.allocatable.clear();
    }
}

/// The clusters of `stream` whose kept part changed: a cluster's agent rewrites its status
/// (capacity, heartbeats) far more often than anything a controller reads of it changes.
pub(crate) fn cluster_changes(
    stream: impl futures::Stream<
        Item = Result<flotilla_api::cluster::v1::ManagedCluster, kube::runtime::watcher::Error>,
    > + Send
    + 'static,
) -> impl futures::Stream<Item = Result<flotilla_api::cluster::v1::ManagedCluster, kube::runtime::watcher::Error>>
+ Send
+ 'static {
    use kube::runtime::WatchStreamExt as _;
    stream.predicate_filter(
        |c: &flotilla_api::cluster::v1::ManagedCluster| {
            hash_of(&(
                &c.metadata.labels,
                &c.metadata.annotations,
                c.metadata.deletion_timestamp.is_some(),
                &c.spec,
                &c.status,
            ))
        },
        kube_runtime::utils::PredicateConfig::default(),
    )
}

/// A controller's own cache of ManagedClusters, each kept as `slim` leaves it, and the stream
/// of clusters that changed, to map to the add-ons they affect. A controller reads clusters
/// from its cache instead of a GET per reconcile; since the change comes out of the stream
/// only after the cache has it, a reconcile it triggers reads it.
pub(crate) fn cluster_cache(
    client: &Client,
    slim: fn(&mut flotilla_api::cluster::v1::ManagedCluster),
) -> (
    kube::runtime::reflector::Store<flotilla_api::cluster::v1::ManagedCluster>,
    impl futures::Stream<Item = Result<flotilla_api::cluster::v1::ManagedCluster, kube::runtime::watcher::Error>>
    + Send
    + 'static,
) {
    cache(kube::Api::all(client.clone()), Default::default(), slim)
}

/// A controller's own cache of ClusterManagementAddOns (managed fields dropped) and the stream
/// of those that changed, as [`cluster_cache`].
pub(crate) fn cma_cache(
    client: &Client,
) -> (
    kube::runtime::reflector::Store<flotilla_api::addon::v1alpha1::ClusterManagementAddOn>,
    impl futures::Stream<
        Item = Result<flotilla_api::addon::v1alpha1::ClusterManagementAddOn, kube::runtime::watcher::Error>,
    > + Send
    + 'static,
) {
    cache(kube::Api::all(client.clone()), Default::default(), |cma| {
        kube::ResourceExt::managed_fields_mut(cma).clear()
    })
}

/// The add-ons' works (those with the add-on label), each kept as `slim` leaves it, and the
/// stream of those that changed, as [`cluster_cache`]: what deploy and health read instead of a
/// LIST per reconcile, each trimmed to its own needs.
pub(crate) fn works_cache(
    client: &Client,
    slim: fn(&mut flotilla_api::work::v1::ManifestWork),
) -> (
    kube::runtime::reflector::Store<flotilla_api::work::v1::ManifestWork>,
    impl futures::Stream<Item = Result<flotilla_api::work::v1::ManifestWork, kube::runtime::watcher::Error>>
    + Send
    + 'static,
) {
    let config =
        kube::runtime::watcher::Config::default().labels(flotilla_api::addon::consts::ADDON_NAME_LABEL);
    cache(kube::Api::all(client.clone()), config, slim)
}

fn cache<K>(
    api: kube::Api<K>,
    config: kube::runtime::watcher::Config,
    slim: fn(&mut K),
) -> (
    kube::runtime::reflector::Store<K>,
    impl futures::Stream<Item = Result<K, kube::runtime::watcher::Error>> + Send + 'static,
)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    use kube::runtime::{WatchStreamExt as _, reflector, watcher};
    let (store, writer) = reflector::store();
    let stream = reflector(writer, watcher(api, config).default_backoff().modify(slim)).touched_objects();
    (store, stream)
}

/// Whether both caches hold their first full list ([`flotilla_kube::controller::cache_ready`],
/// never awaited): before that, an object missing from one may only not be listed yet.
pub(crate) fn caches_ready<A, B>(
    a: &kube::runtime::reflector::Store<A>,
    b: &kube::runtime::reflector::Store<B>,
) -> bool
where
    A: kube::Resource<DynamicType = ()> + Clone + 'static,
    B: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    flotilla_kube::controller::cache_ready(a) && flotilla_kube::controller::cache_ready(b)
}

/// A hash of `parts` (their JSON), for the [`AddonFeed`] subscribers' `inputs`.
pub(crate) fn hash_of(parts: &impl serde::Serialize) -> Option<u64> {
    use std::hash::{Hash as _, Hasher as _};
    let bytes = serde_json::to_vec(parts).ok()?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    Some(hasher.finish())
}

/// A fingerprint of everything a plugin's answer depends on, to call it only when an input
/// changed. The inputs' `Debug` forms are deterministic (ordered maps), which is all a
/// fingerprint needs; a collision would only reuse an answer for identical-looking inputs.
pub(crate) fn fingerprint(parts: &[&dyn std::fmt::Debug]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for part in parts {
        format!("{part:?}").hash(&mut hasher);
    }
    hasher.finish()
}

/// The conditions of `addon` of the given types, for the [`AddonFeed`] subscribers' `inputs`.
pub(crate) fn conditions_of<'a>(
    addon: &'a flotilla_api::addon::v1alpha1::ManagedClusterAddOn,
    types: &'a [&str],
) -> impl Iterator<Item = &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> + 'a {
    addon
        .status
        .iter()
        .flat_map(|s| s.conditions.iter())
        .filter(move |c| types.contains(&c.type_.as_str()))
}

/// Field manager of the add-on manager's server-side applies (CMAs and works).
pub const FIELD_MANAGER: &str = "addon-manager";

/// Settings of the add-on manager.
#[derive(Clone, Debug)]
pub struct Options {
    /// How often every object is looked at again without a change (repairs drift).
    pub resync: Duration,
    /// How soon an add-on whose plugin is not loaded yet, or whose call failed, is retried.
    pub retry: Duration,
    /// Most plugin `manifests()` calls in flight at once, over all add-ons and clusters.
    pub max_concurrent_renders: usize,
    /// Most reconciles in flight at once in each per-add-on controller (deploy, health,
    /// registration). Unbounded, a thousand new add-ons put thousands of requests in flight
    /// at once, and the apiserver served each controller slowly and their status writes
    /// conflicted.
    pub max_concurrent_reconciles: u16,
    /// The one namespace whose Secrets an `AddOnPlugin` may name: a signer's `caSecretRef`
    /// elsewhere is never read, and its CSRs are not signed (the plugin host refuses such an
    /// `AddOnPlugin` too, [`flotilla_core::plugin_sources`]).
    pub plugin_secrets_namespace: String,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            resync: Duration::from_secs(300),
            retry: Duration::from_secs(10),
            max_concurrent_renders: 16,
            max_concurrent_reconciles: 16,
            plugin_secrets_namespace: "open-cluster-management-hub".to_owned(),
        }
    }
}

/// The `reportingController` of the add-on manager's Events.
pub const EVENT_REPORTER: &str = "addon-manager";

/// Runs the plugin, install, rollout and deploy controllers concurrently until dropped. `registry` is
/// the one the AddOnPlugin controller loads plugin revisions into.
pub async fn run(client: Client, registry: Arc<PluginRegistry>, options: Options) {
    tracing::info!("add-on manager starting");
    // Every controller finds an add-on's plugin through this one value (`Plugins::for_addon`).
    let plugins = Arc::new(Plugins::new(registry));
    let configs = Arc::new(configs::ReleasedConfigs::default());
    let mut feed = AddonFeed::new();
    let (writes, deferred) = writes::SharedWrites::new(feed.store());
    let events = flotilla_kube::events::Events::new(client.clone(), EVENT_REPORTER);
    let (install_view, rollout_view, registration_view, deploy_view, health_view) = (
        feed.subscribe(install::install_inputs),
        feed.subscribe(rollout::rollout_inputs),
        feed.subscribe(registration::registration_inputs),
        feed.subscribe(deploy::deploy_inputs),
        feed.subscribe(health::health_inputs),
    );
    futures::join!(
        feed.run(client.clone()),
        writes::run(Arc::clone(&writes), deferred),
        plugin::run(client.clone(), Arc::clone(&plugins), options.clone()),
        install::run(client.clone(), install_view, options.clone()),
        rollout::run(
            client.clone(),
            Arc::clone(&plugins),
            Arc::clone(&writes),
            rollout_view,
            events.clone(),
            options.clone()
        ),
        registration::run(
            client.clone(),
            Arc::clone(&plugins),
            Arc::clone(&configs),
            Arc::clone(&writes),
            registration_view,
            options.clone()
        ),
        csr::run(
            client.clone(),
            Arc::clone(&plugins),
            Arc::clone(&configs),
            options.clone()
        ),
        deploy::run(
            client.clone(),
            Arc::clone(&plugins),
            configs,
            Arc::clone(&writes),
            deploy_view,
            events.clone(),
            options.clone()
        ),
        health::run(client, plugins, writes, health_view, events, options),
    );
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use flotilla_api::addon::v1alpha1::{ManagedClusterAddOn, ManagedClusterAddOnSpec};
    use kube::ResourceExt as _;
    use kube::runtime::reflector::ObjectRef;

    use super::LatestWrites;

    fn addon(version: &str) -> Arc<ManagedClusterAddOn> {
        let mut addon = ManagedClusterAddOn::new("hello", ManagedClusterAddOnSpec::default());
        addon.metadata.namespace = Some("cluster1".into());
        addon.metadata.resource_version = Some(version.into());
        Arc::new(addon)
    }

    fn version(addon: &ManagedClusterAddOn) -> String {
        addon.resource_version().unwrap_or_default()
    }

    #[test]
    fn a_cache_behind_the_writes_gives_the_last_one() {
        let writes = LatestWrites::default();
        writes.record(Some("1".into()), ManagedClusterAddOn::clone(&addon("2")));
        writes.record(Some("2".into()), ManagedClusterAddOn::clone(&addon("3")));
        assert_eq!(version(&writes.latest(addon("1"))), "3");
        assert_eq!(version(&writes.latest(addon("2"))), "3");
    }

    #[test]
    fn a_cache_that_caught_up_or_moved_on_is_its_own_answer() {
        let writes = LatestWrites::default();
        writes.record(Some("1".into()), ManagedClusterAddOn::clone(&addon("2")));
        // Someone else wrote after us: the cache knows better.
        assert_eq!(version(&writes.latest(addon("7"))), "7");
        // Caught up: the record is dropped, so an old version no longer maps to it.
        assert_eq!(version(&writes.latest(addon("2"))), "2");
        assert_eq!(version(&writes.latest(addon("1"))), "1");
    }

    #[test]
    fn a_conflict_forgets_the_writes() {
        let writes = LatestWrites::default();
        writes.record(Some("1".into()), ManagedClusterAddOn::clone(&addon("2")));
        writes.forget(&ObjectRef::from_obj(addon("1").as_ref()));
        assert_eq!(version(&writes.latest(addon("1"))), "1");
    }

    #[test]
    fn writes_of_other_objects_do_not_mix() {
        let writes = LatestWrites::default();
        writes.record(Some("1".into()), ManagedClusterAddOn::clone(&addon("2")));
        let mut other = ManagedClusterAddOn::clone(&addon("1"));
        other.metadata.namespace = Some("cluster2".into());
        assert_eq!(version(&writes.latest(Arc::new(other))), "1");
    }
}
