//! The add-on manager's watches: one [`Feed`] per kind its controllers read, each kept as the
//! union of what its readers use, and what of each object wakes which controller.
//!
//! | kind | readers | kept |
//! |---|---|---|
//! | ManagedClusterAddOn | install, rollout, registration, deploy, health | all |
//! | ManagedCluster | install, registration, deploy, health | all but capacity and allocatable |
//! | ClusterManagementAddOn | plugin, install, rollout, registration, deploy, health | all |
//! | AddOnPlugin | plugin, rollout, registration, deploy, health | all |
//! | ManifestWork (add-on label) | deploy, health | all |
//! | Placement, PlacementDecision (placement label) | install, rollout | all |
//!
//! Managed fields are dropped from every object ([`Feed::new`]).

use flotilla_api::addon::consts::ADDON_NAME_LABEL;
use flotilla_api::addon::v1alpha1::{ClusterManagementAddOn, ManagedClusterAddOn};
use flotilla_api::cluster::consts::PLACEMENT_LABEL;
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_api::cluster::v1beta1::{Placement, PlacementDecision};
use flotilla_api::plugins::v1alpha1::AddOnPlugin;
use flotilla_api::work::v1::ManifestWork;
use flotilla_kube::feed::{Feed, hash_of};
use kube::{Api, Client, runtime::watcher};

/// Every feed of the add-on manager; controllers subscribe before [`Feeds::run`] starts them.
pub(crate) struct Feeds {
    pub(crate) addons: Feed<ManagedClusterAddOn>,
    pub(crate) clusters: Feed<ManagedCluster>,
    pub(crate) cmas: Feed<ClusterManagementAddOn>,
    pub(crate) plugins: Feed<AddOnPlugin>,
    pub(crate) works: Feed<ManifestWork>,
    pub(crate) placements: Feed<Placement>,
    pub(crate) decisions: Feed<PlacementDecision>,
}

impl Feeds {
    pub(crate) fn new(client: &Client) -> Self {
        let all = watcher::Config::default;
        Self {
            addons: Feed::new(Api::all(client.clone()), all(), |_| {}),
            clusters: Feed::new(Api::all(client.clone()), all(), slim_cluster),
            cmas: Feed::new(Api::all(client.clone()), all(), |_| {}),
            plugins: Feed::new(Api::all(client.clone()), all(), |_| {}),
            works: Feed::new(Api::all(client.clone()), all().labels(ADDON_NAME_LABEL), |_| {}),
            placements: Feed::new(Api::all(client.clone()), all(), |_| {}),
            decisions: Feed::new(Api::all(client.clone()), all().labels(PLACEMENT_LABEL), |_| {}),
        }
    }

    /// Runs every watch until dropped.
    pub(crate) async fn run(self) {
        use futures::FutureExt as _;
        futures::join!(
            self.addons.run().boxed(),
            self.clusters.run().boxed(),
            self.cmas.run().boxed(),
            self.plugins.run().boxed(),
            self.works.run().boxed(),
            self.placements.run().boxed(),
            self.decisions.run().boxed(),
        );
    }
}

/// Drops of a ManagedCluster what no controller here reads: its capacity and allocatable,
/// rewritten by its agent with every resource change.
fn slim_cluster(cluster: &mut ManagedCluster) {
    if let Some(status) = cluster.status.as_mut() {
        status.capacity.clear();
        status.allocatable.clear();
    }
}

/// What rendering reads of a cluster (the plugin's inputs): metadata, spec and status but its
/// conditions, whose transitions change no manifest.
pub(crate) fn cluster_for_render(cluster: &ManagedCluster) -> Option<u64> {
    let status = cluster.status.as_ref().map(|s| {
        let mut s = s.clone();
        s.conditions = None;
        s
    });
    hash_of(&(
        &cluster.metadata.labels,
        &cluster.metadata.annotations,
        cluster.metadata.deletion_timestamp.is_some(),
        &cluster.spec,
        status,
    ))
}

/// What the health check reads of a cluster: [`cluster_for_render`] and its conditions
/// (an unavailable cluster's add-ons are Unknown).
pub(crate) fn cluster_with_conditions(cluster: &ManagedCluster) -> Option<u64> {
    hash_of(&(
        &cluster.metadata.labels,
        &cluster.metadata.annotations,
        cluster.metadata.deletion_timestamp.is_some(),
        &cluster.spec,
        &cluster.status,
    ))
}

/// Of a CMA, only whether it is ours: its annotations. Its status, which the rollout writes at
/// every step, must not wake the per-add-on controllers.
pub(crate) fn cma_annotations(cma: &ClusterManagementAddOn) -> Option<u64> {
    hash_of(&cma.metadata.annotations)
}
