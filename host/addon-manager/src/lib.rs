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

/// Objects as this process last wrote them, until the watches show it: a write started from
/// a cache still behind this process's last write is refused (409), so the add-on writer
/// ([`writes`]) starts each write from [`LatestWrites::latest`]. A conflict with someone
/// else's write (the klusterlet's) records the object as read after it.
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

/// Runs the plugin, install, rollout and deploy controllers concurrently until dropped. `registry` is
/// the one the AddOnPlugin controller loads plugin revisions into.
pub async fn run(client: Client, registry: Arc<PluginRegistry>, options: Options) {
    tracing::info!("add-on manager starting");
    // Every controller finds an add-on's plugin through this one value (`Plugins::for_addon`).
    let plugins = Arc::new(Plugins::new(registry));
    let configs = Arc::new(configs::ReleasedConfigs::default());
    let mut feeds = feeds::Feeds::new(&client);
    let (writer, due_writes) = writes::StatusWriter::new(feeds.addons.store());
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
    futures::join!(
        feeds.run().boxed(),
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use flotilla_api::addon::v1alpha1::{ManagedClusterAddOn, ManagedClusterAddOnSpec};
    use kube::ResourceExt as _;

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
    fn writes_of_other_objects_do_not_mix() {
        let writes = LatestWrites::default();
        writes.record(Some("1".into()), ManagedClusterAddOn::clone(&addon("2")));
        let mut other = ManagedClusterAddOn::clone(&addon("1"));
        other.metadata.namespace = Some("cluster2".into());
        assert_eq!(version(&writes.latest(Arc::new(other))), "1");
    }
}
