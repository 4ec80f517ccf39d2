//! One watch and one cache per kind, shared by every controller of a process that reads it.
//!
//! ```text
//!   apiserver ──watch──▶ Feed<K> ──slim──▶ Store<K> (one copy of each object)
//!                           │
//!                           ├──▶ subscriber 1: objects whose inputs₁(obj) changed, and deletions
//!                           └──▶ subscriber 2: …
//! ```
//!
//! Each controller used to run its own watch of the kinds it reads: a copy of every object
//! per controller in memory, a decoding of every event per controller, a watch each on the
//! apiserver. A feed keeps one store, trimmed by one `slim` function (the union of what its
//! readers use), and wakes each subscriber only when the part it reads changed.
//!
//! kube-runtime's shared reflectors (`store_shared` and `Writer::subscribe`, behind its
//! `unstable-runtime-subscribe` feature) do not fit: they pass on applied objects but not
//! deletions, which controllers that recreate or stop counting objects must see, and their
//! bounded buffer makes the fastest subscriber wait for the slowest.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use futures::StreamExt as _;
use futures::channel::mpsc::{UnboundedSender, unbounded};
use futures::stream::BoxStream;
use kube::Resource;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt as _, watcher as watch};
use serde::de::DeserializeOwned;

/// What a subscriber gets: the shared cache, and the objects whose part it reads changed (or
/// that were deleted), each only after the cache holds it.
pub type View<K> = (Store<K>, BoxStream<'static, Result<K, watcher::Error>>);

/// What of an object a subscriber reads, as a hash ([`hash_of`]); `None` when it cannot be
/// hashed, which counts as a change each time.
pub type Inputs<K> = fn(&K) -> Option<u64>;

/// Measures one feed's cache now: its objects, and their bytes as JSON ([`footprints`]).
type Footprint = Box<dyn Fn() -> (usize, usize) + Send + Sync>;

/// Every feed made in this process, by kind, for [`footprints`].
fn registered() -> &'static Mutex<Vec<(String, Footprint)>> {
    static FEEDS: OnceLock<Mutex<Vec<(String, Footprint)>>> = OnceLock::new();
    FEEDS.get_or_init(|| Mutex::new(Vec::new()))
}

/// The objects and their approximate bytes (as JSON) in each feed's cache in this process, by
/// kind: where the hub's memory goes. Serialises every cached object: for benchmarks and
/// diagnostics, not a hot path.
pub fn footprints() -> Vec<(String, usize, usize)> {
    let Ok(feeds) = registered().lock() else {
        return Vec::new();
    };
    feeds
        .iter()
        .map(|(kind, footprint)| {
            let (objects, bytes) = footprint();
            (kind.clone(), objects, bytes)
        })
        .collect()
}

/// One watch of kind `K` and its cache; see the module docs.
pub struct Feed<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    api: kube::Api<K>,
    config: watcher::Config,
    slim: fn(&mut K),
    store: Store<K>,
    writer: reflector::store::Writer<K>,
    subscribers: Vec<UnboundedSender<Event<K>>>,
}

impl<K> Feed<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    /// A feed of the objects `api` and `config` select, each kept as `slim` leaves it (managed
    /// fields are always dropped). Registers the cache for [`footprints`].
    pub fn new(api: kube::Api<K>, config: watcher::Config, slim: fn(&mut K)) -> Self {
        let (store, writer) = reflector::store();
        let measured: Store<K> = store.clone();
        if let Ok(mut feeds) = registered().lock() {
            feeds.push((
                K::kind(&()).into_owned(),
                Box::new(move || {
                    let objects = measured.state();
                    let bytes = objects
                        .iter()
                        .map(|o| serde_json::to_vec::<K>(o).map_or(0, |b| b.len()))
                        .sum();
                    (objects.len(), bytes)
                }),
            ));
        }
        Self {
            api,
            config,
            slim,
            store,
            writer,
            subscribers: Vec::new(),
        }
    }

    /// The shared cache.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// A subscriber woken when `inputs` of an object changes, and by every deletion.
    pub fn subscribe(&mut self, inputs: Inputs<K>) -> View<K> {
        let (sender, receiver) = unbounded();
        self.subscribers.push(sender);
        (self.store.clone(), changes(receiver.map(Ok), inputs).boxed())
    }

    /// A subscriber woken by every event of every object.
    pub fn subscribe_all(&mut self) -> View<K> {
        self.subscribe(|_| None)
    }

    /// Watches, fills the cache and passes every event to the subscribers, until dropped.
    /// Watch errors are retried with backoff (the subscribers never see them).
    pub async fn run(self) {
        let Self {
            api,
            config,
            slim,
            writer,
            subscribers,
            ..
        } = self;
        let kind = K::kind(&());
        // Boxed: a process runs a feed per kind side by side, and unboxed watch streams made
        // the future holding them all too large for a thread's stack in debug builds.
        let events = watch(api, config)
            .default_backoff()
            .modify(move |object: &mut K| {
                object.meta_mut().managed_fields = None;
                slim(object);
            })
            .reflect(writer)
            .boxed();
        events
            .for_each(|event| {
                match event {
                    Ok(event) => {
                        for subscriber in &subscribers {
                            // A subscriber gone (its controller ended) misses nothing it needs.
                            let _ = subscriber.unbounded_send(event.clone());
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, %kind, "watch failed; retrying"),
                }
                std::future::ready(())
            })
            .await;
    }
}

/// The objects of a reflected watch whose `inputs` changed since they were last seen, and
/// every deleted one. kube-runtime's `predicate_filter` drops deletions (a deleted object
/// hashes as it last did), which controllers that recreate or stop counting objects must see.
pub fn changes<K>(
    events: impl futures::Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
    inputs: Inputs<K>,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + 'static,
{
    let mut seen: HashMap<ObjectRef<K>, Option<u64>> = HashMap::new();
    events.filter_map(move |event| {
        let changed = match event {
            Err(e) => Some(Err(e)),
            Ok(Event::Apply(object) | Event::InitApply(object)) => {
                let hash = inputs(&object);
                let unchanged =
                    hash.is_some() && seen.insert(ObjectRef::from_obj(&object), hash) == Some(hash);
                (!unchanged).then_some(Ok(object))
            }
            Ok(Event::Delete(object)) => {
                seen.remove(&ObjectRef::from_obj(&object));
                Some(Ok(object))
            }
            Ok(Event::Init | Event::InitDone) => None,
        };
        std::future::ready(changed)
    })
}

/// A hash of `parts` (their JSON): what a subscriber's [`Inputs`] returns.
pub fn hash_of(parts: &impl serde::Serialize) -> Option<u64> {
    use std::hash::{Hash as _, Hasher as _};
    let bytes = serde_json::to_vec(parts).ok()?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    Some(hasher.finish())
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::watcher::Event;

    use super::{changes, hash_of};

    fn config_map(name: &str, value: &str, version: &str) -> ConfigMap {
        let mut map = ConfigMap::default();
        map.metadata.name = Some(name.into());
        map.metadata.namespace = Some("ns".into());
        map.metadata.resource_version = Some(version.into());
        map.data = Some([("key".to_owned(), value.to_owned())].into());
        map
    }

    fn data(map: &ConfigMap) -> Option<u64> {
        hash_of(&map.data)
    }

    async fn passed(events: Vec<Event<ConfigMap>>, inputs: super::Inputs<ConfigMap>) -> Vec<String> {
        changes(futures::stream::iter(events.into_iter().map(Ok)), inputs)
            .map(|object| {
                object
                    .map(|o| o.metadata.resource_version.unwrap_or_default())
                    .unwrap_or_default()
            })
            .collect()
            .await
    }

    #[tokio::test]
    async fn only_changes_of_what_a_subscriber_reads_pass_and_every_deletion_does() {
        let events = vec![
            Event::InitApply(config_map("a", "1", "1")),
            Event::InitDone,
            // A new resourceVersion, the same data: a status write, say.
            Event::Apply(config_map("a", "1", "2")),
            Event::Apply(config_map("a", "2", "3")),
            Event::Delete(config_map("a", "2", "4")),
            // Made again with what it had: new to the subscriber.
            Event::Apply(config_map("a", "2", "5")),
        ];
        assert_eq!(passed(events, data).await, ["1", "3", "4", "5"]);
    }

    #[tokio::test]
    async fn a_subscriber_of_everything_sees_every_event() {
        let events = vec![
            Event::Apply(config_map("a", "1", "1")),
            Event::Apply(config_map("a", "1", "2")),
        ];
        assert_eq!(passed(events, |_| None).await, ["1", "2"]);
    }
}
