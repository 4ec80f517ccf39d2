//! Every feed of a process, one per kind and label selector, made by the first controller
//! that asks for it and shared by every controller after it.
//!
//! The hub's parts (registration, placement, work, the add-on manager, the plugin loader)
//! each read ManagedClusters, Placements, add-ons…; with a feed per part, each kind was
//! watched, decoded and held once per part. The process makes one [`Feeds`], every part
//! subscribes to it while it starts, and [`Feeds::run`] then runs each watch once.

use std::any::{Any, TypeId};
use std::collections::HashMap;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use kube::runtime::watcher;

use super::{Feed, Kind};

/// What a kind's cache keeps of each object; `None` keeps it whole (but its managed fields).
/// Every reader of a kind asks with the kind's one slim, the union of what its readers use,
/// kept beside the kind's other cache functions in `flotilla_core`.
pub type Slim<K> = Option<fn(&mut K)>;

/// A feed whose kind is known only to itself: what the registry keeps and runs.
trait Entry: Send {
    fn feed(&mut self) -> &mut dyn Any;
    /// The slim the feed was made with, to catch a reader asking with another.
    fn slim_address(&self) -> Option<usize>;
    fn run(self: Box<Self>) -> BoxFuture<'static, ()>;
}

struct Made<K>
where
    K: Kind,
{
    feed: Feed<K>,
    slim_address: Option<usize>,
}

impl<K> Entry for Made<K>
where
    K: Kind,
{
    fn feed(&mut self) -> &mut dyn Any {
        &mut self.feed
    }

    fn slim_address(&self) -> Option<usize> {
        self.slim_address
    }

    fn run(self: Box<Self>) -> BoxFuture<'static, ()> {
        self.feed.run().boxed()
    }
}

/// The feeds of one process; see the module docs.
pub struct Feeds {
    client: kube::Client,
    feeds: HashMap<(TypeId, Option<String>), Box<dyn Entry>>,
}

impl Feeds {
    /// No feeds yet; each is made at the first [`Feeds::feed`] of its kind and selector.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            feeds: HashMap::new(),
        }
    }

    /// The feed of every `K` that `labels` selects (every `K` when `None`), made now with
    /// `slim` if no one asked before.
    ///
    /// Lists come from the apiserver's watch cache (`resourceVersion=0`), as client-go
    /// informers list: a thousand clusters are not read from etcd page by page at every
    /// start and relist, and the watch that follows brings the cache up to date.
    ///
    /// # Panics
    ///
    /// In debug builds, when the feed was made with another slim: one reader would read
    /// what the other's slim dropped.
    pub fn feed<K>(&mut self, labels: Option<&str>, slim: Slim<K>) -> &mut Feed<K>
    where
        K: Kind,
    {
        let slim_address = slim.map(|f| f as usize);
        let client = &self.client;
        let entry = self
            .feeds
            .entry((TypeId::of::<K>(), labels.map(str::to_owned)))
            .or_insert_with(|| {
                let mut config = watcher::Config::default().any_semantic();
                if let Some(labels) = labels {
                    config = config.labels(labels);
                }
                let feed = Feed::new(kube::Api::all(client.clone()), config, slim.unwrap_or(|_| {}));
                Box::new(Made { feed, slim_address })
            });
        debug_assert_eq!(
            entry.slim_address(),
            slim_address,
            "every reader of {} asks with its one slim",
            K::kind(&())
        );
        entry
            .feed()
            .downcast_mut::<Feed<K>>()
            .expect("a feed is keyed by its kind's type")
    }

    /// Runs every feed until dropped. Subscribe before: a subscriber added later misses what
    /// was listed.
    pub async fn run(self) {
        futures::future::join_all(self.feeds.into_values().map(|entry| entry.run())).await;
    }
}
