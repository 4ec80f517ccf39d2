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
mod registration;
mod rollout;

use std::sync::Arc;
use std::time::Duration;

use flotilla_wasm::PluginRegistry;
use kube::Client;

pub use error::{Error, Result};
pub use plugins::Plugins;

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

/// A controller's ManagedClusterAddOn watch (`K`: the add-ons, or their metadata alone): fills
/// a store of every add-on (managed fields dropped) and yields an add-on only when `inputs`, a
/// hash of the part of it that controller reads, changed, or when it is deleted ([`changes`]).
/// Four controllers write an add-on's status, each its own part; without this, every write
/// woke all of them for nothing, which on a thousand clusters was most of the hub's work and
/// most of its status-write conflicts.
pub(crate) fn addon_triggers<K>(
    client: &Client,
    inputs: fn(&K) -> Option<u64>,
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
    use kube::ResourceExt as _;
    use kube::runtime::{WatchStreamExt as _, reflector, watcher};
    let (store, writer) = reflector::store();
    let events = watcher(kube::Api::<K>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .modify(|addon| addon.managed_fields_mut().clear())
        .reflect(writer);
    (store, changes(events, inputs))
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

    /// Whether `store` still shows an object that `of` selects as it was before a recorded
    /// write; writes the cache has caught up with are forgotten.
    pub(crate) fn pending(
        &self,
        store: &kube::runtime::reflector::Store<K>,
        of: impl Fn(&kube::runtime::reflector::ObjectRef<K>) -> bool,
    ) -> bool {
        let Ok(mut unseen) = self.0.lock() else {
            return false;
        };
        unseen.retain(|key, write| {
            let version = store.get(key).and_then(|o| o.meta().resource_version.clone());
            write.at.elapsed() < UNSEEN_FOR_AT_MOST && write.stale.contains(&version)
        });
        unseen.keys().any(of)
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

/// A hash of `parts` (their JSON), for [`addon_triggers`]' predicates.
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

/// The conditions of `addon` of the given types, for [`addon_triggers`]' predicates.
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
}

impl Default for Options {
    fn default() -> Self {
        Self {
            resync: Duration::from_secs(300),
            retry: Duration::from_secs(10),
            max_concurrent_renders: 16,
            max_concurrent_reconciles: 16,
        }
    }
}

/// Runs the plugin, install, rollout and deploy controllers concurrently until dropped. `registry` is
/// the one the AddOnPlugin controller loads plugin revisions into.
pub async fn run(client: Client, registry: Arc<PluginRegistry>, options: Options) {
    tracing::info!("add-on manager starting");
    // Every controller finds an add-on's plugin through this one value (`Plugins::for_addon`).
    let plugins = Arc::new(Plugins::new(registry));
    let configs = Arc::new(configs::ReleasedConfigs::default());
    futures::join!(
        plugin::run(client.clone(), Arc::clone(&plugins), options.clone()),
        install::run(client.clone(), options.clone()),
        rollout::run(client.clone(), Arc::clone(&plugins), options.clone()),
        registration::run(
            client.clone(),
            Arc::clone(&plugins),
            Arc::clone(&configs),
            options.clone()
        ),
        csr::run(client.clone(), Arc::clone(&plugins), options.clone()),
        deploy::run(client.clone(), Arc::clone(&plugins), configs, options.clone()),
        health::run(client, plugins, options),
    );
}
