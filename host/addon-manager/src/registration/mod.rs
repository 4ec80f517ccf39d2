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
use flotilla_core::addon::registration::{Declared, Refused, install_namespace, registrations};
use flotilla_wasm::types::Registration;
use kube::runtime::Controller;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};

use crate::Options;

/// What one reconcile needs.
pub(crate) struct Context {
    pub(crate) client: Client,
    /// ManagedClusters (the feed's cache).
    pub(crate) clusters: Store<ManagedCluster>,
    /// ClusterManagementAddOns.
    pub(crate) cmas: Store<ClusterManagementAddOn>,
    pub(crate) plugins: Arc<Plugins>,
    /// Released config objects, read once for all add-ons.
    pub(crate) configs: Arc<ReleasedConfigs>,
    /// The add-ons' one writer: what a reconcile reads them through and submits changes to.
    pub(crate) writer: crate::AddonWriter,
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

/// Subscribes the controller to the feeds; the returned future runs it until dropped.
pub(crate) fn run(
    feeds: &mut crate::feeds::Feeds<'_>,
    client: Client,
    plugins: Arc<Plugins>,
    configs: Arc<ReleasedConfigs>,
    writer: crate::AddonWriter,
    options: Options,
) -> impl Future<Output = ()> + use<> {
    let (addons, addon_changes) = feeds.addons().subscribe(registration_inputs);
    // The clusters and CMAs a reconcile reads come from the feeds, not a GET each time.
    let (clusters, cluster_changes) = feeds.clusters().subscribe(crate::feeds::cluster_for_render);
    let (cmas, cma_changes) = feeds.cmas().subscribe(crate::feeds::cma_annotations);
    let (_, plugin_changes) = feeds.plugins().subscribe_all();
    let controller =
        Controller::for_stream(addon_changes, addons).with_config(crate::per_addon_config(&options));
    let (by_cma, by_plugin, by_cluster) = (controller.store(), controller.store(), feeds.addons_by_cluster());
    let controller = controller
        .watches_stream(cma_changes, move |cma| {
            crate::addons_named(&by_cma, &cma.name_any())
        })
        .watches_stream(cluster_changes, move |cluster| {
            crate::addons_of_cluster(&by_cluster, &cluster.name_any())
        })
        .watches_stream(plugin_changes, move |plugin| {
            crate::addons_named(&by_plugin, &crate::plugin::addon_name(&plugin))
        });
    let store = controller.store();
    let context = Arc::new(Context {
        client,
        clusters,
        cmas,
        plugins,
        configs,
        writer,
        options,
        applied: std::sync::Mutex::new(Applied::new()),
    });
    let pruning = Arc::clone(&context);
    async move {
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
}
