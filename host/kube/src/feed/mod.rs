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

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use futures::StreamExt as _;
use futures::channel::mpsc::{UnboundedSender, unbounded};
use futures::stream::BoxStream;
use kube::Resource;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt as _, watcher as watch};
use serde::de::DeserializeOwned;

mod process;
pub use process::{Feeds, Slim};

/// What a feed can watch and cache: a kind of the apiserver's, decoded, measured and shared
/// between threads.
pub trait Kind:
    Resource<DynamicType = ()>
    + Clone
    + DeserializeOwned
    + serde::Serialize
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Kind for K where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// What a subscriber gets: the shared cache, and the objects whose part it reads changed (or
/// that were deleted), each only after the cache holds it.
pub type View<K> = (Store<K>, BoxStream<'static, Result<K, watcher::Error>>);

/// What of an object a subscriber reads, as a hash ([`hash_of`]); `None` when it cannot be
/// hashed, which counts as a change each time.
pub type Inputs<K> = fn(&K) -> Option<u64>;

/// One feed's cache as [`footprints`] measures it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Footprint {
    /// The kind cached.
    pub kind: String,
    /// How many objects the cache holds.
    pub objects: usize,
    /// Their size as JSON.
    pub json_bytes: usize,
    /// The heap bytes a copy of them allocates, as the `allocated` counter passed to
    /// [`footprints`] counts them: what the cache holds, less the store's own index.
    pub heap_bytes: u64,
}

/// Measures one feed's cache now, with a counter of the bytes this thread allocated.
type Measure = Box<dyn Fn(&dyn Fn() -> u64) -> Footprint + Send + Sync>;

/// Every feed made in this process, for [`footprints`].
fn registered() -> &'static Mutex<Vec<Measure>> {
    static FEEDS: OnceLock<Mutex<Vec<Measure>>> = OnceLock::new();
    FEEDS.get_or_init(|| Mutex::new(Vec::new()))
}

/// Each feed's cache in this process: where the hub's memory goes. `allocated` counts the
/// bytes the calling thread has allocated so far (the allocator's statistic, such as
/// jemalloc's `thread.allocated`); each cache is copied once between two readings of it.
/// Serialises and copies every cached object: for benchmarks and diagnostics, not a hot path.
pub fn footprints(allocated: &dyn Fn() -> u64) -> Vec<Footprint> {
    let Ok(feeds) = registered().lock() else {
        return Vec::new();
    };
    feeds.iter().map(|measure| measure(allocated)).collect()
}

/// [`Footprint`] of `objects`, copying them between two readings of `allocated`.
fn footprint<K: Clone + serde::Serialize>(
    kind: String,
    objects: &[std::sync::Arc<K>],
    allocated: &dyn Fn() -> u64,
) -> Footprint {
    let json_bytes = objects
        .iter()
        .map(|o| serde_json::to_vec::<K>(o).map_or(0, |b| b.len()))
        .sum();
    let mut copy: Vec<K> = Vec::with_capacity(objects.len());
    let before = allocated();
    copy.extend(objects.iter().map(|o| K::clone(o)));
    let heap_bytes = allocated().saturating_sub(before);
    drop(copy);
    Footprint {
        kind,
        objects: objects.len(),
        json_bytes,
        heap_bytes,
    }
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
    namespaces: Option<Namespaces<K>>,
}

/// The names of a feed's objects per namespace, so a reader of one namespace's objects
/// (an add-on's works in its cluster's namespace) looks up a few instead of scanning every
/// object of the kind: with one scan per reconcile the cost grew as clusters squared.
/// kube-runtime's `Store` keeps no index but its key.
pub struct Namespaces<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store: Store<K>,
    names: Arc<RwLock<NamespaceIndex>>,
}

impl<K> Clone for Namespaces<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            names: self.names.clone(),
        }
    }
}

impl<K> Namespaces<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// The cache the index points into.
    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    /// The cached objects in `namespace`, in name order.
    pub fn objects(&self, namespace: &str) -> Vec<Arc<K>> {
        let names: Vec<String> = match self.names.read() {
            Ok(index) => index.names(namespace).cloned().collect(),
            Err(_) => return Vec::new(),
        };
        names
            .iter()
            .filter_map(|name| self.store.get(&ObjectRef::new(name).within(namespace)))
            .collect()
    }
}

/// Names per namespace, as the events of a reflected watch leave them.
#[derive(Default, Debug)]
struct NamespaceIndex {
    names: HashMap<String, BTreeSet<String>>,
}

impl NamespaceIndex {
    fn names(&self, namespace: &str) -> impl Iterator<Item = &String> {
        self.names.get(namespace).into_iter().flatten()
    }

    /// Follows one event. After a relist (`InitDone`) it keeps only what the store holds:
    /// objects deleted while the watch was down send no `Delete`.
    fn follow<K>(&mut self, event: &Event<K>, store: &Store<K>)
    where
        K: Resource<DynamicType = ()> + Clone + 'static,
    {
        let key = |object: &K| Some((object.meta().namespace.clone()?, object.meta().name.clone()?));
        match event {
            Event::Apply(object) | Event::InitApply(object) => {
                if let Some((namespace, name)) = key(object) {
                    self.names.entry(namespace).or_default().insert(name);
                }
            }
            Event::Delete(object) => {
                if let Some((namespace, name)) = key(object)
                    && let Some(names) = self.names.get_mut(&namespace)
                {
                    names.remove(&name);
                    if names.is_empty() {
                        self.names.remove(&namespace);
                    }
                }
            }
            Event::Init => {}
            Event::InitDone => {
                self.names.retain(|namespace, names| {
                    names.retain(|name| store.get(&ObjectRef::new(name).within(namespace)).is_some());
                    !names.is_empty()
                });
            }
        }
    }
}

impl<K> Feed<K>
where
    K: Kind,
{
    /// A feed of the objects `api` and `config` select, each kept as `slim` leaves it (managed
    /// fields are always dropped). Registers the cache for [`footprints`].
    pub fn new(api: kube::Api<K>, config: watcher::Config, slim: fn(&mut K)) -> Self {
        let (store, writer) = reflector::store();
        let measured: Store<K> = store.clone();
        if let Ok(mut feeds) = registered().lock() {
            feeds.push(Box::new(move |allocated| {
                footprint(K::kind(&()).into_owned(), &measured.state(), allocated)
            }));
        }
        Self {
            api,
            config,
            slim,
            store,
            writer,
            subscribers: Vec::new(),
            namespaces: None,
        }
    }

    /// The feed's objects by namespace, kept from the next [`Feed::run`] on.
    pub fn namespaces(&mut self) -> Namespaces<K> {
        self.namespaces
            .get_or_insert_with(|| Namespaces {
                store: self.store.clone(),
                names: Arc::default(),
            })
            .clone()
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

    /// A subscriber of the watch's events themselves, relists (`Init`, `InitDone`) among
    /// them: for readers that keep indexes of their own and rebuild them once a relist is in
    /// the cache. Each event arrives after the cache holds it.
    pub fn subscribe_events(&mut self) -> (Store<K>, BoxStream<'static, Event<K>>) {
        let (sender, receiver) = unbounded();
        self.subscribers.push(sender);
        (self.store.clone(), receiver.boxed())
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
            namespaces,
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
                        // Before the subscribers hear of it, as the store.
                        if let Some(namespaces) = &namespaces
                            && let Ok(mut index) = namespaces.names.write()
                        {
                            index.follow(&event, &namespaces.store);
                        }
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

    use super::{Footprint, changes, footprint, hash_of};

    fn config_map(name: &str, value: &str, version: &str) -> ConfigMap {
        let mut map = ConfigMap::default();
        map.metadata.name = Some(name.into());
        map.metadata.namespace = Some("ns".into());
        map.metadata.resource_version = Some(version.into());
        map.data = Some([("key".to_owned(), value.to_owned())].into());
        map
    }

    #[test]
    fn a_footprint_counts_what_copying_the_objects_allocates() {
        let objects = [config_map("a", "1", "1"), config_map("b", "2", "1")].map(std::sync::Arc::new);
        let readings = std::cell::Cell::new(0);
        // A counter that moves by 1000 bytes between its two readings.
        let allocated = || {
            readings.set(readings.get() + 1);
            1000 * readings.get()
        };
        let measured = footprint("ConfigMap".to_owned(), &objects, &allocated);
        let json =
            serde_json::to_vec(&*objects[0]).unwrap().len() + serde_json::to_vec(&*objects[1]).unwrap().len();
        assert_eq!(
            measured,
            Footprint {
                kind: "ConfigMap".into(),
                objects: 2,
                json_bytes: json,
                heap_bytes: 1000,
            }
        );
        assert_eq!(readings.get(), 2);
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

    #[test]
    fn the_namespace_index_follows_the_watch_and_forgets_what_a_relist_no_longer_holds() {
        let (store, mut writer) = kube::runtime::reflector::store::<ConfigMap>();
        let namespaces = super::Namespaces {
            store,
            names: std::sync::Arc::default(),
        };
        let in_namespace = |namespace: &str, name: &str| {
            let mut map = config_map(name, "1", "1");
            map.metadata.namespace = Some(namespace.into());
            map
        };
        let names = |namespace: &str| -> Vec<String> {
            namespaces
                .objects(namespace)
                .iter()
                .map(|o| o.metadata.name.clone().unwrap())
                .collect()
        };
        let mut follow = |event: Event<ConfigMap>| {
            writer.apply_watcher_event(&event);
            namespaces
                .names
                .write()
                .unwrap()
                .follow(&event, &namespaces.store);
        };
        follow(Event::Init);
        follow(Event::InitApply(in_namespace("one", "b")));
        follow(Event::InitApply(in_namespace("one", "a")));
        follow(Event::InitApply(in_namespace("two", "c")));
        follow(Event::InitDone);
        assert_eq!(names("one"), ["a", "b"]);
        assert_eq!(names("two"), ["c"]);
        follow(Event::Delete(in_namespace("one", "b")));
        follow(Event::Apply(in_namespace("two", "d")));
        assert_eq!(names("one"), ["a"]);
        assert_eq!(names("two"), ["c", "d"]);
        // The watch restarts; `c` was deleted meanwhile and sends no Delete.
        follow(Event::Init);
        follow(Event::InitApply(in_namespace("one", "a")));
        follow(Event::InitApply(in_namespace("two", "d")));
        follow(Event::InitDone);
        assert_eq!(names("two"), ["d"]);
        assert_eq!(namespaces.names.read().unwrap().names("two").count(), 1);
        assert!(names("three").is_empty());
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
