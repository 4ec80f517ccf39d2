//! The hub registration's watches of the kinds several of its controllers read: one
//! [`Feed`] each, so a thousand clusters are held and decoded once, not once per controller.
//!
//! | kind | readers | kept |
//! |---|---|---|
//! | ManagedCluster | accept, lease, taint, addon_feature, clusterset, deletion | [`for_registration`] |
//! | ManagedClusterAddOn | lease, addon_feature | all but managed fields |

use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_core::registration::hub::cached::for_registration;
use flotilla_kube::feed::{Feed, Inputs};
use kube::{Api, Client, runtime::Controller, runtime::watcher};

/// Every shared feed; controllers subscribe before [`Feeds::run`] starts them.
pub(super) struct Feeds {
    pub(super) clusters: Feed<ManagedCluster>,
    pub(super) addons: Feed<ManagedClusterAddOn>,
}

impl Feeds {
    pub(super) fn new(client: &Client) -> Self {
        Self {
            clusters: Feed::new(
                Api::all(client.clone()),
                watcher::Config::default(),
                for_registration,
            ),
            addons: Feed::new(Api::all(client.clone()), watcher::Config::default(), |_| {}),
        }
    }

    /// A controller of every ManagedCluster in the shared cache, woken when the part of one
    /// that `inputs` hashes changes (what its reconcile reads): a cluster is written by
    /// several controllers and its agent, and each write woke every controller.
    pub(super) fn cluster_controller(
        &mut self,
        inputs: Inputs<ManagedCluster>,
    ) -> Controller<ManagedCluster> {
        let (clusters, changes) = self.clusters.subscribe(inputs);
        Controller::for_stream(changes, clusters)
    }

    /// Runs every watch until dropped.
    pub(super) async fn run(self) {
        futures::join!(self.clusters.run(), self.addons.run());
    }
}
