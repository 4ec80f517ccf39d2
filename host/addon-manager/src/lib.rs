//! The hub's add-on manager: one process drives every add-on whose hub logic is a plugin, where
//! OCM runs one Go controller Deployment per add-on.
//!
//! ```text
//!  watches                                   controller   writes
//!  AddOnPlugin (Ready), ClusterManagementAddOn ▶ plugin ──▶ ClusterManagementAddOn (lifecycle
//!                                                          addon-manager, addOnMeta, supportedConfigs)
//!  ClusterManagementAddOn, Placement,          ▶ install ─▶ ManagedClusterAddOns of the install
//!  PlacementDecision, ManagedClusterAddOn                   strategy's placements (CMA as owner)
//!  CMA, ManagedClusterAddOn, Placement,       ▶ rollout ─▶ configReferences released batch by
//!  PlacementDecision, configs                               batch, Configured; CMA
//!                                                           installProgressions
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
}

impl Default for Options {
    fn default() -> Self {
        Self {
            resync: Duration::from_secs(300),
            retry: Duration::from_secs(10),
            max_concurrent_renders: 16,
        }
    }
}

/// Runs the plugin, install, rollout and deploy controllers concurrently until dropped. `registry` is
/// the one the AddOnPlugin controller loads plugin revisions into.
pub async fn run(client: Client, registry: Arc<PluginRegistry>, options: Options) {
    tracing::info!("add-on manager starting");
    // Every controller finds an add-on's plugin through this one value (`Plugins::for_addon`).
    let plugins = Arc::new(Plugins::new(registry));
    futures::join!(
        plugin::run(client.clone(), Arc::clone(&plugins), options.clone()),
        install::run(client.clone(), options.clone()),
        rollout::run(client.clone(), options.clone()),
        registration::run(client.clone(), Arc::clone(&plugins), options.clone()),
        csr::run(client.clone(), Arc::clone(&plugins), options.clone()),
        deploy::run(client.clone(), Arc::clone(&plugins), options.clone()),
        health::run(client, plugins, options),
    );
}
