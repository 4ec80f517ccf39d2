//! The scheduling controller: what it watches and how an event finds the placements it can
//! affect.
//!
//! ```text
//!  watch (managedFields stripped)   index                                  placements triggered
//!  ManagedCluster c ──────────────▶ sets c was and is a member of ──┐
//!  AddOnPlacementScore in ns c ───▶ sets c is a member of ──────────┤
//!  ManagedClusterSet s ───────────▶ {s} ────────────────────────────┴─▶ namespaces binding one of
//!                                                                       the sets ▶ placements there
//!                                                                       whose clusterSets allow it
//!  ManagedClusterSetBinding in ns ────────────────────────────────────▶ every placement in ns
//!  PlacementDecision ─────────────▶ DecisionIndex (own decisions, ────▶ its placement (label), unless
//!                                   Balance counts)                     the event echoes an own write
//!  Placement ─────────────────────────────────────────────────────────▶ itself, when its generation or
//!                                                                       scheduling annotation changed
//! ```
//!
//! Events for one placement are coalesced by the controller's debounce; a placement is
//! requeued at its next toleration or score expiry, and after `resync` otherwise. The
//! controller's own writes never schedule a placement again: the Placement watch ignores
//! status-only changes, and a PlacementDecision event that shows what this controller wrote is
//! dropped. (With Balance, a pass after each own write would chase the other placements'
//! latest decisions and rewrite them, over and over.) A pass writes its PlacementDecisions
//! itself; the Placement status and the Events are queued for background writers that run
//! while no pass does (see [`background`]), so that a burst of passes gets the apiserver to
//! itself.

mod background;
mod events;
mod reconcile;
mod status;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    hash::{DefaultHasher, Hash, Hasher},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use flotilla_api::cluster::{
    consts::{PLACEMENT_DISABLE_ANNOTATION, PLACEMENT_LABEL},
    v1::ManagedCluster,
    v1alpha1::AddOnPlacementScore,
    v1beta1::{Placement, PlacementDecision},
    v1beta2::{ManagedClusterSet, ManagedClusterSetBinding},
};
use flotilla_core::placement::{
    Compiled, ScoreTable,
    index::{DecisionIndex, Entry},
    name_of,
};
use flotilla_core::registration::hub::cached::for_hub;
use flotilla_kube::feed::{Feed, Feeds, Kind, changes};
use futures::{Stream, StreamExt, stream::BoxStream};
use kube::{
    Client, ResourceExt,
    runtime::{
        Controller,
        controller::Config,
        reflector::{ObjectRef, Store},
        watcher,
    },
};

use crate::PlacementOptions;
use background::Busy;
use events::EventQueue;
use flotilla_kube::events::{Publisher, Reporter};
use status::StatusQueue;

/// Scheduling passes run by this process (all placements), for benchmarks and diagnostics.
pub(crate) static SCHEDULED: AtomicU64 = AtomicU64::new(0);

/// Compiled predicates per placement uid, with the generation they were compiled from.
type CompiledCache = Mutex<HashMap<String, (i64, Arc<Compiled>)>>;

/// Caches, indexes and clients one reconcile reads.
pub(crate) struct Context {
    pub(crate) client: Client,
    pub(crate) options: PlacementOptions,
    pub(crate) placements: Store<Placement>,
    pub(crate) clusters: Store<ManagedCluster>,
    pub(crate) sets: Store<ManagedClusterSet>,
    pub(crate) bindings: Store<ManagedClusterSetBinding>,
    pub(crate) scores: Store<AddOnPlacementScore>,
    pub(crate) decisions: Store<PlacementDecision>,
    /// One flag per cache above except placements, true once it holds its first full list.
    ready: [Arc<AtomicBool>; 5],
    /// Compiled predicates per placement.
    compiled: Arc<CompiledCache>,
    /// PlacementDecisions by placement and the per-cluster counts Balance reads; follows the
    /// decisions cache event by event.
    pub(crate) decision_index: Mutex<DecisionIndex>,
    /// Bumped on every AddOnPlacementScore event; the score table below follows it.
    scores_version: AtomicU64,
    /// Every AddOnPlacementScore status, at a `scores_version`.
    score_table: Mutex<Option<(u64, Arc<ScoreTable>)>>,
    /// Per cluster, the sets it was last seen a member of.
    membership: Mutex<HashMap<String, BTreeSet<String>>>,
    /// Per PlacementDecision (`namespace/name`), the states this controller's own writes
    /// leave it in (after create, after the status patch). The watch event of an own write
    /// must not schedule the placement again.
    pub(crate) written: Mutex<HashMap<String, Vec<DecisionState>>>,
    /// Passes running now; the background writers wait while any is.
    pub(crate) busy: Busy,
    /// Placement statuses waiting for their writers.
    pub(crate) statuses: StatusQueue,
    /// Events waiting for their writer.
    pub(crate) events: EventQueue,
}

/// The parts of a PlacementDecision this controller writes: labels and cluster names.
pub(crate) type DecisionState = (BTreeMap<String, String>, Vec<String>);

/// The written state of `decision`.
pub(crate) fn decision_state(decision: &PlacementDecision) -> DecisionState {
    (decision.labels().clone(), decided_clusters(decision))
}

/// The clusters in `decision`'s status, in order.
fn decided_clusters(decision: &PlacementDecision) -> Vec<String> {
    decision
        .status
        .iter()
        .flat_map(|s| s.decisions.iter().map(|d| d.cluster_name.clone()))
        .collect()
}

/// Locks `mutex`, going on with the data if a panicking thread poisoned it (every critical
/// section here leaves the data consistent).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Context {
    fn ready(&self) -> bool {
        self.ready.iter().all(|r| r.load(Ordering::Acquire))
    }

    /// The compiled form of `placement`'s current generation, compiling it when new.
    pub(crate) fn compiled(&self, placement: &Placement) -> Arc<Compiled> {
        let key = placement.uid().unwrap_or_else(|| placement.name_any());
        let generation = placement.metadata.generation.unwrap_or_default();
        let mut cache = lock(&self.compiled);
        if let Some((g, compiled)) = cache.get(&key)
            && *g == generation
        {
            return Arc::clone(compiled);
        }
        let compiled = Arc::new(flotilla_core::placement::compile(&placement.spec));
        cache.insert(key, (generation, Arc::clone(&compiled)));
        compiled
    }

    /// Every AddOnPlacementScore status, rebuilt only after a score changed.
    pub(crate) fn score_table(&self) -> Arc<ScoreTable> {
        let version = self.scores_version.load(Ordering::Acquire);
        let mut cached = lock(&self.score_table);
        if let Some((v, table)) = cached.as_ref()
            && *v == version
        {
            return Arc::clone(table);
        }
        let table: ScoreTable = self
            .scores
            .state()
            .iter()
            .filter_map(|s| Some(((s.namespace()?, s.name_any()), s.status.clone()?)))
            .collect();
        let table = Arc::new(table);
        *cached = Some((version, Arc::clone(&table)));
        table
    }

    /// Placements in namespaces binding one of `sets`, whose `clusterSets` allow one of them.
    pub(crate) fn placements_seeing(&self, sets: &BTreeSet<String>) -> Vec<ObjectRef<Placement>> {
        if sets.is_empty() {
            return Vec::new();
        }
        let mut namespaces: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for binding in self.bindings.state() {
            let set = binding.name_any();
            if sets.contains(&set) {
                namespaces
                    .entry(binding.namespace().unwrap_or_default())
                    .or_default()
                    .insert(set);
            }
        }
        self.placements
            .state()
            .iter()
            .filter(|p| {
                namespaces
                    .get(&p.namespace().unwrap_or_default())
                    .is_some_and(|bound| {
                        p.spec.cluster_sets.is_empty()
                            || p.spec.cluster_sets.iter().any(|s| bound.contains(s))
                    })
            })
            .map(|p| ObjectRef::from_obj(p.as_ref()))
            .collect()
    }

    /// Whether `cluster` is a member of `set`.
    fn is_member(set: &ManagedClusterSet, cluster: &ManagedCluster) -> bool {
        // A set whose selector is malformed selects nobody, as in the scheduler.
        flotilla_core::registration::hub::clusterset::is_member(
            name_of(&set.metadata),
            &set.spec.cluster_selector,
            cluster.labels(),
        )
        .unwrap_or(false)
    }

    /// The sets `cluster` is a member of now.
    fn sets_of(&self, cluster: &ManagedCluster) -> BTreeSet<String> {
        self.sets
            .state()
            .iter()
            .filter(|s| Self::is_member(s, cluster))
            .map(|s| s.name_any())
            .collect()
    }

    /// Recomputes every cluster's sets from the caches (after a relist of clusters or sets).
    fn rebuild_membership(&self) {
        let sets = self.sets.state();
        let membership: HashMap<String, BTreeSet<String>> = self
            .clusters
            .state()
            .iter()
            .map(|c| {
                let member_of = sets
                    .iter()
                    .filter(|s| Self::is_member(s, c))
                    .map(|s| s.name_any())
                    .collect();
                (c.name_any(), member_of)
            })
            .collect();
        *lock(&self.membership) = membership;
    }

    /// Placements a change of `cluster` (or its deletion) can affect; updates the index.
    fn on_cluster(&self, cluster: &ManagedCluster, deleted: bool) -> Vec<ObjectRef<Placement>> {
        let now = if deleted {
            BTreeSet::new()
        } else {
            self.sets_of(cluster)
        };
        let mut membership = lock(&self.membership);
        let before = if deleted {
            membership.remove(&cluster.name_any()).unwrap_or_default()
        } else {
            membership
                .insert(cluster.name_any(), now.clone())
                .unwrap_or_default()
        };
        drop(membership);
        self.placements_seeing(&before.union(&now).cloned().collect())
    }

    /// Placements that can see cluster `name` (for its AddOnPlacementScores).
    fn on_cluster_namespace(&self, name: &str) -> Vec<ObjectRef<Placement>> {
        let sets = lock(&self.membership).get(name).cloned().unwrap_or_default();
        self.placements_seeing(&sets)
    }

    /// Placements a change of `set` (or its deletion) can affect; updates the index for it.
    fn on_set(&self, set: &ManagedClusterSet, deleted: bool) -> Vec<ObjectRef<Placement>> {
        let name = set.name_any();
        let clusters = self.clusters.state();
        let mut membership = lock(&self.membership);
        for cluster in clusters {
            let sets = membership.entry(cluster.name_any()).or_default();
            if !deleted && Self::is_member(set, &cluster) {
                sets.insert(name.clone());
            } else {
                sets.remove(&name);
            }
        }
        drop(membership);
        self.placements_seeing(&BTreeSet::from([name]))
    }

    /// Updates the decision index with a change of `decision`; returns its placement unless
    /// the change only echoes this controller's own write (or own deletion).
    fn on_decision(&self, decision: &PlacementDecision, deleted: bool) -> Vec<ObjectRef<Placement>> {
        let namespace = decision.namespace().unwrap_or_default();
        let key = (namespace.clone(), decision.name_any());
        let placement = decision.labels().get(PLACEMENT_LABEL).cloned();
        {
            let mut index = lock(&self.decision_index);
            if deleted {
                index.delete(&key);
            } else {
                index.apply(
                    key.clone(),
                    Entry {
                        placement: placement.clone(),
                        clusters: decided_clusters(decision),
                    },
                );
            }
        }
        let own = {
            let written = lock(&self.written);
            match written.get(&format!("{}/{}", key.0, key.1)) {
                // Deleted by this controller: it forgot the decision first.
                None => deleted,
                Some(states) => !deleted && states.contains(&decision_state(decision)),
            }
        };
        match placement {
            Some(placement) if !own => vec![ObjectRef::new(&placement).within(&namespace)],
            _ => Vec::new(),
        }
    }

    /// Rebuilds the decision index from the cache (after a relist).
    fn rebuild_decision_index(&self) {
        let entries = self.decisions.state().into_iter().map(|d| {
            (
                (d.namespace().unwrap_or_default(), d.name_any()),
                Entry {
                    placement: d.labels().get(PLACEMENT_LABEL).cloned(),
                    clusters: decided_clusters(&d),
                },
            )
        });
        lock(&self.decision_index).reset(entries);
    }

    /// Every placement in `namespace`.
    fn in_namespace(&self, namespace: &str) -> Vec<ObjectRef<Placement>> {
        self.placements
            .state()
            .iter()
            .filter(|p| p.namespace().as_deref() == Some(namespace))
            .map(|p| ObjectRef::from_obj(p.as_ref()))
            .collect()
    }
}

/// A change seen by one of the reflectors.
enum Change<K> {
    /// Part of a (re)list; the cache holds it once [`Change::Listed`] arrives.
    Listing,
    /// A (re)list is complete and in the cache.
    Listed,
    /// Created or changed.
    Applied(Arc<K>),
    /// Deleted.
    Deleted(Arc<K>),
}

/// A subscription to the shared `feed` that marks `ready` once the first list is in the cache,
/// and yields each change.
fn reflect<K>(
    feed: &mut Feed<K>,
    ready: Arc<AtomicBool>,
) -> (Store<K>, impl Stream<Item = Change<K>> + Send + 'static)
where
    K: Kind,
{
    let (store, events) = feed.subscribe_events();
    let changes = events.map(move |event| match event {
        watcher::Event::Init | watcher::Event::InitApply(_) => Change::Listing,
        watcher::Event::InitDone => {
            ready.store(true, Ordering::Release);
            Change::Listed
        }
        watcher::Event::Apply(object) => Change::Applied(Arc::new(object)),
        watcher::Event::Delete(object) => Change::Deleted(Arc::new(object)),
    });
    (store, changes)
}

/// What of a Placement can change its decisions: its generation (the spec) and the scheduling
/// annotation. Status-only changes, the controller's own writes among them, hash the same.
fn scheduling_inputs(placement: &Placement) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    placement.metadata.generation.hash(&mut hasher);
    placement
        .annotations()
        .get(PLACEMENT_DISABLE_ANNOTATION)
        .hash(&mut hasher);
    Some(hasher.finish())
}

/// The placements whose [`scheduling_inputs`] changed, and every deleted one, whose compiled
/// form is forgotten.
fn placement_triggers(
    feed: &mut Feed<Placement>,
    compiled: Arc<CompiledCache>,
) -> (
    Store<Placement>,
    impl Stream<Item = Result<Placement, watcher::Error>> + Send + 'static,
) {
    let (store, events) = feed.subscribe_events();
    let events = events.inspect(move |event| {
        if let watcher::Event::Delete(placement) = event {
            let key = placement.uid().unwrap_or_else(|| placement.name_any());
            lock(&compiled).remove(&key);
        }
    });
    (store, changes(events.map(Ok), scheduling_inputs))
}

/// Subscribes the controller to `feeds` now, and returns it: it runs until dropped, once
/// `feeds` runs.
pub(crate) fn start(
    feeds: &mut Feeds,
    client: Client,
    options: PlacementOptions,
) -> impl Future<Output = ()> + use<> {
    let flags: [Arc<AtomicBool>; 5] = std::array::from_fn(|_| Arc::new(AtomicBool::new(false)));
    let (clusters, cluster_changes) = reflect(
        feeds.feed::<ManagedCluster>(None, Some(for_hub)),
        Arc::clone(&flags[0]),
    );
    let (sets, set_changes) = reflect(feeds.feed::<ManagedClusterSet>(None, None), Arc::clone(&flags[1]));
    let (bindings, binding_changes) = reflect(
        feeds.feed::<ManagedClusterSetBinding>(None, None),
        Arc::clone(&flags[2]),
    );
    let (scores, score_changes) = reflect(
        feeds.feed::<AddOnPlacementScore>(None, None),
        Arc::clone(&flags[3]),
    );
    // Decisions are found by their placement's label, as OCM's controller lists them.
    let (decisions, decision_changes) = reflect(
        feeds.feed::<PlacementDecision>(Some(PLACEMENT_LABEL), None),
        Arc::clone(&flags[4]),
    );
    let compiled: Arc<CompiledCache> = Arc::default();
    let (placements, placement_changes) =
        placement_triggers(feeds.feed::<Placement>(None, None), Arc::clone(&compiled));
    let controller = Controller::for_stream(placement_changes, placements.clone()).with_config(
        Config::default()
            .debounce(options.debounce)
            .concurrency(options.concurrency),
    );
    let publisher = Publisher::new(
        client.clone(),
        Reporter {
            controller: "flotilla-placement".into(),
            instance: None,
        },
    );
    let context = Arc::new(Context {
        client,
        options,
        placements,
        clusters,
        sets,
        bindings,
        scores,
        decisions,
        ready: flags,
        compiled,
        decision_index: Mutex::new(DecisionIndex::default()),
        scores_version: AtomicU64::new(0),
        score_table: Mutex::new(None),
        membership: Mutex::new(HashMap::new()),
        written: Mutex::new(HashMap::new()),
        busy: Busy::default(),
        statuses: StatusQueue::new(None),
        events: events::queue(),
    });

    // Objects seen while (re)listing trigger nothing: every placement gets a first reconcile
    // from its own watch anyway, and the indexes are rebuilt once the list is complete.
    let triggers: Vec<BoxStream<'static, Vec<ObjectRef<Placement>>>> = vec![
        {
            let ctx = Arc::clone(&context);
            cluster_changes
                .map(move |change| match change {
                    Change::Listing => Vec::new(),
                    Change::Listed => {
                        ctx.rebuild_membership();
                        Vec::new()
                    }
                    Change::Applied(c) => ctx.on_cluster(&c, false),
                    Change::Deleted(c) => ctx.on_cluster(&c, true),
                })
                .boxed()
        },
        {
            let ctx = Arc::clone(&context);
            set_changes
                .map(move |change| match change {
                    Change::Listing => Vec::new(),
                    Change::Listed => {
                        ctx.rebuild_membership();
                        Vec::new()
                    }
                    Change::Applied(s) => ctx.on_set(&s, false),
                    Change::Deleted(s) => ctx.on_set(&s, true),
                })
                .boxed()
        },
        {
            let ctx = Arc::clone(&context);
            binding_changes
                .map(move |change| match change {
                    Change::Applied(b) | Change::Deleted(b) => {
                        ctx.in_namespace(&b.namespace().unwrap_or_default())
                    }
                    Change::Listing | Change::Listed => Vec::new(),
                })
                .boxed()
        },
        {
            let ctx = Arc::clone(&context);
            score_changes
                .map(move |change| {
                    ctx.scores_version.fetch_add(1, Ordering::AcqRel);
                    match change {
                        Change::Applied(s) | Change::Deleted(s) => {
                            ctx.on_cluster_namespace(&s.namespace().unwrap_or_default())
                        }
                        Change::Listing | Change::Listed => Vec::new(),
                    }
                })
                .boxed()
        },
        {
            let ctx = Arc::clone(&context);
            decision_changes
                .map(move |change| match change {
                    Change::Listing => Vec::new(),
                    Change::Listed => {
                        ctx.rebuild_decision_index();
                        Vec::new()
                    }
                    Change::Applied(d) => ctx.on_decision(&d, false),
                    Change::Deleted(d) => ctx.on_decision(&d, true),
                })
                .boxed()
        },
    ];
    let trigger = futures::stream::select_all(triggers).flat_map(futures::stream::iter);
    let controller = controller.reconcile_on(trigger);
    let writers = Arc::clone(&context);
    // The background writers never finish; they stop with the controller.
    async move {
        let status_writers = futures::future::join_all(
            (0..writers.options.concurrency.max(1)).map(|_| status::write(&writers)),
        );
        tokio::select! {
            () = flotilla_kube::controller::run("placement", controller, reconcile::reconcile, context) => {}
            _ = status_writers => {}
            () = events::write(&writers.events, &writers.busy, publisher) => {}
        }
    }
}
