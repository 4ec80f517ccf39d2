//! The kinds the hub registration's controllers read, from the process's shared feeds
//! ([`flotilla_kube::feed::Feeds`]): a thousand clusters are held and decoded once, not once
//! per controller or per part of the hub.
//!
//! | kind | readers here | kept |
//! |---|---|---|
//! | ManagedCluster | accept, lease, taint, addon_feature, clusterset, deletion | [`for_hub`] |
//! | ManagedClusterAddOn | lease, addon_feature | all but managed fields |
//! | ManagedClusterSet | clusterset, clustersetbinding | all but managed fields |
//! | ManagedClusterSetBinding | clustersetbinding | all but managed fields |

use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_api::cluster::v1beta2::{ManagedClusterSet, ManagedClusterSetBinding};
use flotilla_core::registration::hub::cached::for_hub;
use flotilla_kube::feed::{Feed, Inputs};
use kube::runtime::Controller;

/// The shared feeds, as the registration controllers ask for them; they subscribe before the
/// process runs the feeds.
pub(super) struct Feeds<'a>(pub(super) &'a mut flotilla_kube::feed::Feeds);

impl Feeds<'_> {
    pub(super) fn clusters(&mut self) -> &mut Feed<ManagedCluster> {
        self.0.feed(None, Some(for_hub))
    }

    pub(super) fn addons(&mut self) -> &mut Feed<ManagedClusterAddOn> {
        self.0.feed(None, None)
    }

    pub(super) fn sets(&mut self) -> &mut Feed<ManagedClusterSet> {
        self.0.feed(None, None)
    }

    pub(super) fn bindings(&mut self) -> &mut Feed<ManagedClusterSetBinding> {
        self.0.feed(None, None)
    }

    /// A controller of every ManagedCluster in the shared cache, woken when the part of one
    /// that `inputs` hashes changes (what its reconcile reads): a cluster is written by
    /// several controllers and its agent, and each write woke every controller.
    pub(super) fn cluster_controller(
        &mut self,
        inputs: Inputs<ManagedCluster>,
    ) -> Controller<ManagedCluster> {
        let (clusters, changes) = self.clusters().subscribe(inputs);
        Controller::for_stream(changes, clusters)
    }
}
