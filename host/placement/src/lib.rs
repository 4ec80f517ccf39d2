//! The placement controller `flotilla hub` runs: thin I/O around the pure scheduler in
//! `flotilla_core::placement`. It keeps stripped caches of everything a decision reads, finds
//! the placements an event can affect through indexes, and writes PlacementDecisions and the
//! Placement status only when they change.

#![deny(missing_docs)]

pub mod error;
mod scheduling;

use std::time::Duration;

use kube::Client;

pub use error::{Error, Result};

/// Settings of the placement controller.
#[derive(Clone, Debug)]
pub struct PlacementOptions {
    /// How often each placement is scheduled again without an event (other placements'
    /// decisions change Balance scores without touching this one).
    pub resync: Duration,
    /// How long a burst of events for one placement is gathered into one reconcile.
    pub debounce: Duration,
    /// Reconciles running at once; as many Placement status writers run once they pause.
    pub concurrency: u16,
}

impl Default for PlacementOptions {
    fn default() -> Self {
        Self {
            resync: Duration::from_secs(300),
            debounce: Duration::from_millis(100),
            concurrency: 8,
        }
    }
}

/// How many scheduling passes the placement controllers of this process have run.
pub fn scheduling_passes() -> u64 {
    scheduling::SCHEDULED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Runs the placement controller, with feeds of its own, until the future is dropped.
pub async fn run(client: Client, options: PlacementOptions) {
    let mut feeds = flotilla_kube::feed::Feeds::new(client.clone());
    let controller = start(&mut feeds, client, options);
    futures::join!(feeds.run(), controller);
}

/// Subscribes the placement controller to `feeds` now, and returns it: it runs until dropped,
/// once `feeds` runs beside it.
pub fn start(
    feeds: &mut flotilla_kube::feed::Feeds,
    client: Client,
    options: PlacementOptions,
) -> impl Future<Output = ()> + use<> {
    let controller = scheduling::start(feeds, client, options);
    async move {
        tracing::info!("placement controller starting");
        controller.await;
    }
}
