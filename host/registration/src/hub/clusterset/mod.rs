//! The cluster set controller (OCM's managed cluster set controllers): keeps the hub's
//! `default` and `global` sets in place and reports, for every set, whether it selects any
//! cluster.
//!
//! ```text
//!  every hub_sets_interval ─▶ ensure `default` (exclusive label) and `global` (all) exist
//!  ManagedClusterSet ──────────────────────────────┐
//!  ManagedCluster (the shared cache) ──────────────┴─▶ reconcile(set) ─▶ restore default/global
//!    any change re-evaluates every set                                    selector; ClusterSetEmpty
//! ```

mod reconcile;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use flotilla_api::cluster::v1::ManagedCluster;
use futures::StreamExt;
use kube::{
    Client,
    runtime::{Controller, reflector::Store},
};

use super::{HubOptions, feeds::Feeds};

/// What one cluster set reconcile needs.
pub(super) struct Context {
    /// Client with the hub's identity.
    pub(super) client: Client,
    /// Resync interval.
    pub(super) options: HubOptions,
    /// Every ManagedCluster, kept current by a watch; read to count members.
    pub(super) clusters: Store<ManagedCluster>,
    /// Turns true once `clusters` holds the first full list.
    pub(super) clusters_ready: tokio::sync::watch::Receiver<bool>,
}

/// Runs the cluster set controller and the `default`/`global` upkeep until dropped.
pub(super) fn run(
    feeds: &mut Feeds<'_>,
    client: Client,
    options: HubOptions,
) -> impl Future<Output = ()> + use<> {
    // Membership is a matter of labels alone.
    let (clusters, cluster_changes) = feeds
        .clusters()
        .subscribe(|cluster| flotilla_kube::feed::hash_of(&cluster.metadata.labels));
    // `Store::wait_until_ready` wakes only one of several concurrent waiters (it sits on a
    // oneshot receiver), which stalls all but one set's first reconcile; one task waits on
    // it and a watch channel wakes every waiter.
    let (ready_sender, clusters_ready) = tokio::sync::watch::channel(false);
    let listed = clusters.clone();
    let (sets, set_changes) = feeds.sets().subscribe_all();
    let controller = Controller::for_stream(set_changes, sets).reconcile_all_on(cluster_changes.map(|_| ()));
    let interval = options.hub_sets_interval;
    let context = Arc::new(Context {
        client: client.clone(),
        options,
        clusters,
        clusters_ready,
    });
    async move {
        futures::join!(
            flotilla_kube::controller::run("clusterset", controller, reconcile::reconcile, context),
            keep_hub_sets(client, interval),
            async move {
                if listed.wait_until_ready().await.is_ok() {
                    ready_sender.send_replace(true);
                }
            },
        );
    }
}

/// Creates the `default` and `global` sets whenever they are missing, every `interval`.
async fn keep_hub_sets(client: Client, interval: std::time::Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if let Err(error) = reconcile::ensure_hub_sets(&client).await {
            tracing::warn!(%error, "cannot ensure the default and global cluster sets");
        }
    }
}
