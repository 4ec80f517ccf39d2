//! The deploy controller: for each ManagedClusterAddOn on an accepted cluster, the plugin's
//! `manifests()` output becomes the add-on's `addon-<name>-deploy-<i>` ManifestWorks, and the
//! add-on's status says how far it got (`ManifestApplied`, `Progressing`, `lastAppliedConfig`,
//! `supportedConfigs`).
//!
//! ```text
//!  ManagedClusterAddOn ─────────────────────────────┐
//!  ManifestWork (addon-name label) ─────────────────┤
//!  ClusterManagementAddOn, AddOnPlugin (same name) ─┼─▶ reconcile(add-on)
//!  ManagedCluster (cluster namespace) ──────────────┘
//! ```
//!
//! A change re-renders only the add-ons it affects: a work or cluster maps to its namespace's
//! add-ons, a CMA or plugin revision to the add-ons of that name. A config change reaches an
//! add-on only when the rollout controller releases it into the add-on's
//! `status.configReferences` (a change of the add-on itself), so configs are not watched here.
//! Likewise a new plugin revision re-renders an add-on that already has works only once the
//! rollout controller released it there (`flotilla_core::addon::revision`); until then its
//! works stay as they are.

mod apply;
mod configs;
mod hooks;
mod reconcile;
mod render;
mod status;
mod works;

use std::sync::Arc;

use crate::configs::ReleasedConfigs;
use crate::plugins::Plugins;
use flotilla_api::addon::consts::{ADDON_NAME_LABEL, managed_cluster_addon as mca};
use flotilla_api::addon::v1alpha1::{ClusterManagementAddOn, ManagedClusterAddOn};
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_api::work::v1::ManifestWork;
use flotilla_kube::events::Events;
use kube::runtime::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};

use crate::{Options, UnseenWrites};

/// What one reconcile needs.
pub(crate) struct Context {
    pub(crate) client: Client,
    /// Events on the add-ons: manifests applied or failing, their progress.
    pub(crate) events: Events,
    /// ManagedClusters (the feed's cache).
    pub(crate) clusters: Store<ManagedCluster>,
    /// ClusterManagementAddOns.
    pub(crate) cmas: Store<ClusterManagementAddOn>,
    /// The add-ons' works: read here, not listed per reconcile.
    pub(crate) works: flotilla_kube::feed::Namespaces<ManifestWork>,
    /// The works this controller wrote that the cache does not show yet: a reconcile that
    /// read a work from before its own write would apply it again.
    pub(crate) unseen: UnseenWrites<ManifestWork>,
    pub(crate) plugins: Arc<Plugins>,
    /// Released config objects, read once for all add-ons.
    pub(crate) configs: Arc<ReleasedConfigs>,
    /// The add-ons' one writer: what a reconcile reads them through and submits changes to.
    pub(crate) writer: crate::AddonWriter,
    pub(crate) options: Options,
    /// Bounds the plugin calls in flight ([`Options::max_concurrent_renders`]).
    pub(crate) renders: tokio::sync::Semaphore,
    /// How each add-on (`<cluster>/<name>`) was last deployed.
    pub(crate) deployed: std::sync::Mutex<std::collections::HashMap<String, Deployment>>,
}

/// How an add-on was last deployed, as fingerprints: with its inputs and works as they were,
/// a reconcile (woken by a status write, the agent's report, a resync) neither calls the
/// plugin nor applies. The output itself is not kept: five add-ons' outputs on a thousand
/// clusters held as JSON trees were a third of the hub's memory.
#[derive(Clone, Debug)]
pub(crate) struct Deployment {
    /// The fingerprint of everything the output depends on (plugin revision, cluster,
    /// add-on, configs).
    pub(crate) inputs: u64,
    /// Whether the output had pre-delete hooks.
    pub(crate) has_hooks: bool,
    /// The add-on's deploy works by name, as the apply left them (a few at most: a list takes
    /// less memory than a map).
    pub(crate) works: Vec<(String, LeftWork)>,
}

/// One deploy work as an apply left it.
#[derive(Clone, Debug)]
pub(crate) struct LeftWork {
    /// What the deploy compares of it (`work_fingerprint`).
    pub(crate) fingerprint: u64,
    /// The spec hash of the apiserver's answer to this process's last write of it, when that
    /// is not the hash applied (another manager's fields): the spec is then still as applied.
    pub(crate) answered: Option<String>,
}

/// Status conditions other writers own: the registration and health controllers and the
/// klusterlet. Their changes never change what the deploy renders.
const OTHERS_CONDITIONS: &[&str] = &[
    mca::CONDITION_AVAILABLE,
    mca::CONDITION_REGISTRATION_APPLIED,
    mca::CONDITION_CLUSTER_CERTIFICATE_ROTATED,
];

/// What of an add-on the deploy reads: all of it but the status parts others write
/// (registrations, namespace, health check and their conditions) and the resourceVersion.
pub(crate) fn deploy_inputs(addon: &ManagedClusterAddOn) -> Option<u64> {
    let mut addon = addon.clone();
    addon.metadata.resource_version = None;
    addon.metadata.managed_fields = None;
    if let Some(status) = addon.status.as_mut() {
        status.registrations.clear();
        status.namespace.clear();
        status.health_check = Default::default();
        status
            .conditions
            .retain(|c| !OTHERS_CONDITIONS.contains(&c.type_.as_str()));
    }
    crate::hash_of(&addon)
}

/// What the deploy reads of a work: its spec (compared with the rendered one), labels and
/// status conditions (`ManifestApplied`, `Progressing`); the agent's per-manifest status and
/// feedback values, which change far more often, are the health check's.
fn deploy_work_inputs(work: &ManifestWork) -> Option<u64> {
    crate::hash_of(&(
        &work.metadata.labels,
        &work.metadata.annotations,
        work.metadata.deletion_timestamp.is_some(),
        &work.spec,
        work.status.as_ref().map(|s| &s.conditions),
    ))
}

/// Subscribes the controller to the feeds; the returned future runs it until dropped.
pub(crate) fn run(
    feeds: &mut crate::feeds::Feeds<'_>,
    client: Client,
    plugins: Arc<Plugins>,
    configs: Arc<ReleasedConfigs>,
    writer: crate::AddonWriter,
    events: Events,
    options: Options,
) -> impl Future<Output = ()> + use<> {
    let (addons, addon_changes) = feeds.addons().subscribe(deploy_inputs);
    // The clusters, CMAs and works a reconcile reads come from the feeds, not a GET each time.
    let (clusters, cluster_changes) = feeds.clusters().subscribe(crate::feeds::cluster_for_render);
    let (cmas, cma_changes) = feeds.cmas().subscribe(crate::feeds::cma_annotations);
    let (_, work_changes) = feeds.works().subscribe(deploy_work_inputs);
    let (_, plugin_changes) = feeds.plugins().subscribe_all();
    let controller =
        Controller::for_stream(addon_changes, addons).with_config(crate::per_addon_config(&options));
    let (by_cma, by_plugin, by_cluster) = (controller.store(), controller.store(), feeds.addons_by_cluster());
    let controller = controller
        .watches_stream(work_changes, |work| {
            let addon = work.labels().get(ADDON_NAME_LABEL)?;
            Some(ObjectRef::new(addon).within(&work.namespace()?))
        })
        .watches_stream(cma_changes, move |cma| {
            crate::addons_named(&by_cma, &cma.name_any())
        })
        .watches_stream(plugin_changes, move |plugin| {
            crate::addons_named(&by_plugin, &crate::plugin::addon_name(&plugin))
        })
        .watches_stream(cluster_changes, move |cluster| {
            crate::addons_of_cluster(&by_cluster, &cluster.name_any())
        })
        // A release renders as soon as the rollout submits it, before it is written: the
        // deploy's own changes then usually go out in the same status write.
        .reconcile_on(writer.submissions_of(crate::Writer::Rollout));
    let store = controller.store();
    let context = Arc::new(Context {
        client,
        events,
        clusters,
        cmas,
        works: feeds.works_by_cluster(),
        unseen: UnseenWrites::default(),
        plugins,
        configs,
        writer,
        renders: tokio::sync::Semaphore::new(options.max_concurrent_renders.max(1)),
        deployed: std::sync::Mutex::default(),
        options,
    });
    let pruning = Arc::clone(&context);
    async move {
        futures::join!(
            flotilla_kube::controller::run("addon-deploy", controller, reconcile::reconcile, context),
            crate::prune::every_interval(store, move |addons| {
                let live = addons
                    .iter()
                    .map(|a| format!("{}/{}", a.namespace().unwrap_or_default(), a.name_any()))
                    .collect();
                let rendered = crate::prune::retain_live(&pruning.deployed, &live);
                let names = addons.iter().map(|a| a.name_any()).collect();
                let templates = pruning.plugins.retain_templates_of(&names);
                if rendered + templates > 0 {
                    tracing::debug!(rendered, templates, "cached outputs of deleted add-ons dropped");
                }
            }),
        );
    }
}
