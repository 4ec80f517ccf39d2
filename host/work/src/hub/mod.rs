//! The hub side of ManifestWork: the controllers `flotilla hub` runs for works.
//!
//! ```text
//!  watches                                          controller                writes
//!  ManifestWorkReplicaSet, its ManifestWorks, ───▶ manifestworkreplicaset ──▶ ManifestWorks per
//!  PlacementDecisions, Placements                                             chosen cluster, status
//! ```
//!
//! Each controller is a module with `mod.rs` (what it watches) and `reconcile.rs` (one
//! reconcile, whose steps are files beside it); the decisions are pure functions in
//! `flotilla_core::work` and `flotilla_core::rollout`. [`run`] starts them and runs until the
//! returned future is dropped.

pub mod error;
mod manifestworkreplicaset;

use std::time::Duration;

use kube::Client;

pub use error::{Error, Result};

/// Settings of the hub work controllers; the defaults are OCM's.
#[derive(Clone, Debug)]
pub struct HubOptions {
    /// Longest wait before a replica set is looked at again without a change (OCM: 30 min).
    pub resync: Duration,
}

impl Default for HubOptions {
    fn default() -> Self {
        Self {
            resync: Duration::from_secs(30 * 60),
        }
    }
}

/// Runs every hub work controller, with feeds of their own, until the future is dropped.
pub async fn run(client: Client, options: HubOptions) {
    let mut feeds = flotilla_kube::feed::Feeds::new(client.clone());
    let controllers = start(&mut feeds, client, options);
    futures::join!(feeds.run(), controllers);
}

/// Subscribes every hub work controller to `feeds` now, and returns them: they run until
/// dropped, once `feeds` runs beside them.
pub fn start(
    feeds: &mut flotilla_kube::feed::Feeds,
    client: Client,
    options: HubOptions,
) -> impl Future<Output = ()> + use<> {
    let replica_sets = manifestworkreplicaset::start(feeds, client, options);
    async move {
        tracing::info!("hub work controllers starting");
        replica_sets.await;
    }
}
