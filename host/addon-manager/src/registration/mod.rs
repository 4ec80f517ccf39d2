//! The registration controller: for each ManagedClusterAddOn driven by a plugin, writes
//! `status.registrations` and `status.namespace` from the plugin's `describe()` (expanded and
//! checked by `flotilla_core::addon::registration`), and applies the plugin's
//! `hub-permissions()` Roles and RoleBindings in the cluster namespace (owned by the add-on, so
//! garbage collection removes them with it), reporting `RegistrationApplied`.
//!
//! ```text
//!  ManagedClusterAddOn ─────────────────────────┐
//!  ManagedCluster (cluster namespace) ──────────┤
//!  ClusterManagementAddOn, AddOnPlugin (name) ──┼─▶ reconcile(add-on) ─▶ status.registrations,
//!                                               │                        status.namespace,
//!                                               │                        RegistrationApplied
//!                                               └───────────────────────▶ Role/RoleBinding in <cluster>
//! ```
//!
//! The klusterlet reads `status.registrations` to make its CSRs. The cluster's agent may write
//! that status too, so what the hub trusts is never read back from it: the CSR controller
//! (`crate::csr`) checks a CSR against the same computation ([`expected_registrations`],
//! [`expected_install_namespace`]) made again from the plugin's answer.

mod reconcile;

pub(crate) use reconcile::plugin_inputs;

use std::sync::Arc;

use crate::configs::ReleasedConfigs;
use crate::plugins::Plugins;
use flotilla_api::addon::consts::managed_cluster_addon as mca;
use flotilla_api::addon::v1alpha1::RegistrationConfig;
use flotilla_api::addon::v1alpha1::{ClusterManagementAddOn, ManagedClusterAddOn, Subject};
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_api::plugins::v1alpha1::AddOnPlugin;
use flotilla_core::addon::registration::{Declared, Refused, install_namespace, registrations};
use flotilla_wasm::types::Registration;
use kube::runtime::reflector::Store;
use kube::runtime::utils::PredicateConfig;
use kube::runtime::{Controller, WatchStreamExt, predicates, watcher};
use kube::{Api, Client, ResourceExt};

use crate::Options;

/// What one reconcile needs.
pub(crate) struct Context {
    pub(crate) client: Client,
    /// ManagedClusters, slimmed to what the plugin's inputs read ([`crate::slim_cluster`]).
    pub(crate) clusters: Store<ManagedCluster>,
    /// ClusterManagementAddOns.
    pub(crate) cmas: Store<ClusterManagementAddOn>,
    pub(crate) plugins: Arc<Plugins>,
    /// Released config objects, read once for all add-ons.
    pub(crate) configs: Arc<ReleasedConfigs>,
    /// The add-ons as the controllers last wrote them.
    pub(crate) writes: crate::AddonWrites,
    pub(crate) options: Options,
    /// When each add-on's hub permissions were last applied, and from which inputs.
    pub(crate) applied: std::sync::Mutex<Applied>,
}

/// Hub permissions applied, by add-on uid: (fingerprint of the inputs, when).
pub(crate) type Applied = std::collections::HashMap<String, (u64, std::time::Instant)>;

/// The plugin's declared registrations in the core's terms.
pub(crate) fn declared(registrations: &[Registration]) -> Vec<Declared> {
    let subject = |s: &flotilla_wasm::types::Subject| Subject {
        user: s.user.clone(),
        groups: s.groups.clone(),
        organization_units: s.organization_units.clone(),
    };
    registrations
        .iter()
        .map(|r| match r {
            Registration::KubeClient(kc) => Declared::KubeClient(kc.subject.as_ref().map(subject)),
            Registration::CustomSigner(cs) => Declared::CustomSigner {
                signer_name: cs.signer_name.clone(),
                subject: cs.subject.as_ref().map(subject),
            },
        })
        .collect()
}

/// The registrations `plugin` gives `addon` on `cluster`: its `describe()` expanded and checked
/// ([`registrations`]). This is what the hub writes to `status.registrations` and the only thing
/// it approves add-on CSRs against.
pub(crate) fn expected_registrations(
    plugin: &flotilla_wasm::Plugin,
    cluster: &str,
    addon: &str,
) -> Result<Vec<RegistrationConfig>, Refused> {
    registrations(&declared(&plugin.options().registrations), cluster, addon)
}

/// The install namespace of `addon` as the hub computes it (`status.namespace`): the released
/// AddOnDeploymentConfig's, the spec's, the plugin's default, in that order.
pub(crate) async fn expected_install_namespace(
    client: &Client,
    configs: &ReleasedConfigs,
    addon: &ManagedClusterAddOn,
    plugin: &flotilla_wasm::Plugin,
) -> crate::Result<String> {
    let status = addon.status.clone().unwrap_or_default();
    let adc_namespace = reconcile::deployment_config_namespace(client, configs, &status).await?;
    Ok(install_namespace(
        adc_namespace.as_deref(),
        &addon.spec.install_namespace,
        plugin.options().default_install_namespace.as_deref(),
    ))
}

/// What of an add-on the registration reads or owns: its spec and metadata, the released
/// configs (the install namespace may come from one), and its own status parts.
pub(crate) fn registration_inputs(addon: &ManagedClusterAddOn) -> Option<u64> {
    let status = addon.status.as_ref();
    crate::hash_of(&(
        addon.metadata.generation,
        addon.metadata.deletion_timestamp.is_some(),
        &addon.metadata.annotations,
        status.map(|s| (&s.config_references, &s.registrations, &s.namespace)),
        crate::conditions_of(addon, &[mca::CONDITION_REGISTRATION_APPLIED]).collect::<Vec<_>>(),
    ))
}

/// Runs the controller until dropped.
pub(crate) async fn run(
    client: Client,
    plugins: Arc<Plugins>,
    configs: Arc<ReleasedConfigs>,
    writes: crate::AddonWrites,
    (addons, addon_changes): crate::AddonView,
    options: Options,
) {
    let controller =
        Controller::for_stream(addon_changes, addons).with_config(crate::per_addon_config(&options));
    let (by_cma, by_plugin, by_cluster) = (controller.store(), controller.store(), controller.store());
    // The clusters and CMAs a reconcile reads come from these caches, not a GET each time.
    let (clusters, cluster_stream) = crate::cluster_cache(&client, crate::slim_cluster);
    let (cmas, cma_stream) = crate::cma_cache(&client);
    let controller = controller
        // Of a CMA the registration reads only its annotations (is it ours?).
        .watches_stream(
            cma_stream.predicate_filter(predicates::annotations, PredicateConfig::default()),
            move |cma| crate::addons_named(&by_cma, &cma.name_any()),
        )
        .watches_stream(crate::cluster_changes(cluster_stream), move |cluster| {
            crate::addons_of_cluster(&by_cluster, &cluster.name_any())
        })
        .watches(
            Api::<AddOnPlugin>::all(client.clone()),
            watcher::Config::default(),
            move |plugin| crate::addons_named(&by_plugin, &crate::plugin::addon_name(&plugin)),
        );
    let store = controller.store();
    let context = Arc::new(Context {
        client,
        clusters,
        cmas,
        plugins,
        configs,
        writes,
        options,
        applied: std::sync::Mutex::new(Applied::new()),
    });
    let pruning = Arc::clone(&context);
    futures::join!(
        flotilla_kube::controller::run("addon-registration", controller, reconcile::reconcile, context),
        crate::prune::every_interval(store, move |addons| {
            let live = addons.iter().filter_map(|a| a.uid()).collect();
            let applied = crate::prune::retain_live(&pruning.applied, &live);
            if applied > 0 {
                tracing::debug!(applied, "applied permissions of deleted add-ons forgotten");
            }
        }),
    );
}
