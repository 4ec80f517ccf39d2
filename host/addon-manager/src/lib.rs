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
//! reconcile); a reconcile of many steps (deploy, rollout) keeps each step in its own file
//! beside it. Every decision (configs, hashes, work names and splitting, conditions, install
//! plans) is a pure function in `flotilla_core::addon`. Every controller finds an add-on's plugin
//! through [`Plugins`]: the revision in the shared [`PluginRegistry`] the AddOnPlugin controller
//! fills, or, for an add-on whose config is an AddOnTemplate, an instance of the built-in
//! AddOnTemplate plugin for that template; [`run`] starts the controllers and runs until the
//! returned future is dropped.

mod configs;
mod csr;
mod deploy;
pub mod error;
mod feeds;
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
pub(crate) use writes::{AddonWriter, Writer};

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
    addons: &flotilla_kube::feed::Namespaces<flotilla_api::addon::v1alpha1::ManagedClusterAddOn>,
    cluster: &str,
) -> Vec<kube::runtime::reflector::ObjectRef<flotilla_api::addon::v1alpha1::ManagedClusterAddOn>> {
    addons
        .objects(cluster)
        .iter()
        .map(|a| kube::runtime::reflector::ObjectRef::from_obj(&**a))
        .collect()
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
pub(crate) const UNSEEN_FOR_AT_MOST: std::time::Duration = std::time::Duration::from_secs(10);

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

/// How soon a reconcile that found a cache still listing runs again.
pub(crate) const CACHE_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// The run settings of a per-add-on controller: [`Options::max_concurrent_reconciles`].
pub(crate) fn per_addon_config(options: &Options) -> kube::runtime::controller::Config {
    kube::runtime::controller::Config::default().concurrency(options.max_concurrent_reconciles)
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

pub(crate) use flotilla_kube::feed::hash_of;

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

/// The conditions of `addon` of the given types, for the controllers' feed `inputs`.
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

/// Runs the add-on manager, with feeds of its own, until dropped. `registry` is the one the
/// AddOnPlugin controller loads plugin revisions into.
pub async fn run(client: Client, registry: Arc<PluginRegistry>, options: Options) {
    let mut feeds = flotilla_kube::feed::Feeds::new(client.clone());
    let manager = start(&mut feeds, client, registry, options);
    futures::join!(feeds.run(), manager);
}

/// Subscribes the plugin, install, rollout, registration, deploy and health controllers to
/// `feeds` now, and returns them: they run concurrently until dropped, once `feeds` runs
/// beside them.
pub fn start(
    feeds: &mut flotilla_kube::feed::Feeds,
    client: Client,
    registry: Arc<PluginRegistry>,
    options: Options,
) -> impl Future<Output = ()> + use<> {
    let mut feeds = feeds::Feeds(feeds);
    // Every controller finds an add-on's plugin through this one value (`Plugins::for_addon`).
    let plugins = Arc::new(Plugins::new(registry, feeds.templates().store()));
    let configs = Arc::new(configs::ReleasedConfigs::default());
    let (writer, due_writes) = writes::StatusWriter::new(feeds.addons().store());
    let events = flotilla_kube::events::Events::new(client.clone(), EVENT_REPORTER);
    // Every controller subscribes before the feeds run, so none misses the first list.
    let plugin = plugin::run(&mut feeds, client.clone(), Arc::clone(&plugins), options.clone());
    let install = install::run(&mut feeds, client.clone(), options.clone());
    let rollout = rollout::run(
        &mut feeds,
        client.clone(),
        Arc::clone(&plugins),
        Arc::clone(&writer),
        events.clone(),
        options.clone(),
    );
    let registration = registration::run(
        &mut feeds,
        client.clone(),
        Arc::clone(&plugins),
        Arc::clone(&configs),
        Arc::clone(&writer),
        options.clone(),
    );
    let deploy = deploy::run(
        &mut feeds,
        client.clone(),
        Arc::clone(&plugins),
        configs.clone(),
        Arc::clone(&writer),
        events.clone(),
        options.clone(),
    );
    let health = health::run(
        &mut feeds,
        client.clone(),
        Arc::clone(&plugins),
        Arc::clone(&writer),
        events,
        options.clone(),
    );
    // Each on the heap: together they are too large a future for a thread's stack in debug builds.
    use futures::FutureExt as _;
    async move {
        tracing::info!("add-on manager starting");
        futures::join!(
            writes::run(Arc::clone(&writer), due_writes).boxed(),
            plugin.boxed(),
            install.boxed(),
            rollout.boxed(),
            registration.boxed(),
            csr::run(client, plugins, configs, options).boxed(),
            deploy.boxed(),
            health.boxed(),
        );
    }
}
