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
//!  PlacementDecision ─────────────────────────────────────────────────▶ its placement (label)
//!  Placement ─────────────────────────────────────────────────────────▶ itself
//! ```
//!
//! Events for one placement are coalesced by the controller's debounce; a placement is
//! requeued at its next toleration or score expiry, and after `resync` otherwise.

mod reconcile;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use flotilla_api::cluster::{
    consts::PLACEMENT_LABEL,
    v1::ManagedCluster,
    v1alpha1::AddOnPlacementScore,
    v1beta1::{Placement, PlacementDecision},
    v1beta2::{ManagedClusterSet, ManagedClusterSetBinding},
};
use flotilla_core::placement::{Compiled, name_of};
use futures::{Stream, StreamExt, stream::BoxStream};
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::{
        Controller, WatchStreamExt,
        controller::Config,
        events::{Recorder, Reporter},
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use serde::de::DeserializeOwned;

use crate::PlacementOptions;

/// Scheduling passes run by this process (all placements), for benchmarks and diagnostics.
pub(crate) static SCHEDULED: AtomicU64 = AtomicU64::new(0);

/// Decisions per cluster name.
type DecisionCounts = Arc<BTreeMap<String, i64>>;

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
    /// Compiled predicates per placement, keyed by uid and generation.
    compiled: Mutex<HashMap<String, (i64, Arc<Compiled>)>>,
    /// Bumped on every PlacementDecision event; the decision counts below follow it.
    decisions_version: Arc<AtomicU64>,
    /// Decisions per cluster over all placements, at a `decisions_version`.
    counts: Mutex<Option<(u64, DecisionCounts)>>,
    /// Per cluster, the sets it was last seen a member of.
    membership: Mutex<HashMap<String, BTreeSet<String>>>,
    /// Per PlacementDecision (`namespace/name`), the states this controller's own writes
    /// leave it in (after create, after the status patch). The watch event of an own write
    /// must not schedule the placement again: with Balance, a pass right after each write
    /// would chase the other placements' latest decisions and keep rewriting.
    pub(crate) written: Mutex<HashMap<String, Vec<DecisionState>>>,
    pub(crate) recorder: Recorder,
}

/// The parts of a PlacementDecision this controller writes: labels and cluster names.
pub(crate) type DecisionState = (BTreeMap<String, String>, Vec<String>);

/// The written state of `decision`.
pub(crate) fn decision_state(decision: &PlacementDecision) -> DecisionState {
    (
        decision.labels().clone(),
        decision
            .status
            .iter()
            .flat_map(|s| s.decisions.iter().map(|d| d.cluster_name.clone()))
            .collect(),
    )
}

impl Context {
    fn ready(&self) -> bool {
        self.ready.iter().all(|r| r.load(Ordering::Acquire))
    }

    /// The compiled form of `placement`'s current generation, compiling it when new.
    pub(crate) fn compiled(&self, placement: &Placement) -> Arc<Compiled> {
        let key = placement.uid().unwrap_or_else(|| placement.name_any());
        let generation = placement.metadata.generation.unwrap_or_default();
        let mut cache = self
            .compiled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((g, compiled)) = cache.get(&key)
            && *g == generation
        {
            return Arc::clone(compiled);
        }
        let compiled = Arc::new(flotilla_core::placement::compile(&placement.spec));
        cache.insert(key, (generation, Arc::clone(&compiled)));
        compiled
    }

    /// Forgets the compiled form of a deleted placement.
    fn forget(&self, placement: &Placement) {
        let key = placement.uid().unwrap_or_else(|| placement.name_any());
        self.compiled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&key);
    }

    /// Decisions per cluster over every PlacementDecision, recounted only after a change.
    pub(crate) fn decision_counts(&self) -> Arc<BTreeMap<String, i64>> {
        let version = self.decisions_version.load(Ordering::Acquire);
        let mut cached = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((v, counts)) = cached.as_ref()
            && *v == version
        {
            return Arc::clone(counts);
        }
        let mut counts = BTreeMap::new();
        for decision in self.decisions.state() {
            for d in decision.status.iter().flat_map(|s| s.decisions.iter()) {
                *counts.entry(d.cluster_name.clone()).or_insert(0) += 1;
            }
        }
        let counts = Arc::new(counts);
        *cached = Some((version, Arc::clone(&counts)));
        counts
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

    /// The sets `cluster` is a member of now.
    fn sets_of(&self, cluster: &ManagedCluster) -> BTreeSet<String> {
        let labels = cluster.labels();
        self.sets
            .state()
            .iter()
            .filter(|s| {
                flotilla_core::registration::hub::clusterset::is_member(
                    name_of(&s.metadata),
                    &s.spec.cluster_selector,
                    labels,
                )
                .unwrap_or(false)
            })
            .map(|s| s.name_any())
            .collect()
    }

    /// Placements a change of `cluster` (or its deletion) can affect; updates the index.
    fn on_cluster(&self, cluster: &ManagedCluster, seen: Seen) -> Vec<ObjectRef<Placement>> {
        let deleted = seen == Seen::Deleted;
        let now = if deleted {
            BTreeSet::new()
        } else {
            self.sets_of(cluster)
        };
        let mut membership = self
            .membership
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = if deleted {
            membership.remove(&cluster.name_any()).unwrap_or_default()
        } else {
            membership
                .insert(cluster.name_any(), now.clone())
                .unwrap_or_default()
        };
        drop(membership);
        if seen == Seen::Initial {
            return Vec::new();
        }
        self.placements_seeing(&before.union(&now).cloned().collect())
    }

    /// Placements that can see cluster `name` (for its AddOnPlacementScores).
    fn on_cluster_namespace(&self, name: &str) -> Vec<ObjectRef<Placement>> {
        let sets = self
            .membership
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .cloned()
            .unwrap_or_default();
        self.placements_seeing(&sets)
    }

    /// Placements a change of set `set` can affect; refreshes the index for it.
    fn on_set(&self, set: &str, seen: Seen) -> Vec<ObjectRef<Placement>> {
        let clusters = self.clusters.state();
        let mut membership = self
            .membership
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for cluster in clusters {
            let sets = self.sets_of(&cluster);
            membership.insert(cluster.name_any(), sets);
        }
        drop(membership);
        if seen == Seen::Initial {
            return Vec::new();
        }
        self.placements_seeing(&BTreeSet::from([set.to_owned()]))
    }

    /// Whether a PlacementDecision event only echoes this controller's own write (or own
    /// deletion), so that its placement need not be scheduled again.
    fn is_own_write(&self, decision: &PlacementDecision, seen: Seen) -> bool {
        let key = format!(
            "{}/{}",
            decision.namespace().unwrap_or_default(),
            decision.name_any()
        );
        let written = self
            .written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match (seen, written.get(&key)) {
            // Deleted by this controller: it forgot the decision first.
            (Seen::Deleted, None) => true,
            (Seen::Changed, Some(states)) => states.contains(&decision_state(decision)),
            _ => false,
        }
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

/// What happened to an object seen by one of the reflectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// Part of the first list: feeds the indexes, triggers nothing (every placement gets an
    /// initial reconcile from the controller's own watch anyway).
    Initial,
    /// Created or changed.
    Changed,
    /// Deleted.
    Deleted,
}

/// A change seen by one of the reflectors.
type Change<K> = (Arc<K>, Seen);

/// A reflector over every `K` whose objects lose their managedFields, marking `ready` once
/// the first list is in, and yielding each later change.
fn reflect<K>(
    client: &Client,
    writer: reflector::store::Writer<K>,
    ready: Arc<AtomicBool>,
) -> impl Stream<Item = Change<K>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    watcher(Api::<K>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .modify(|object| object.managed_fields_mut().clear())
        .reflect(writer)
        .filter_map(move |event| {
            let change = match event {
                Ok(watcher::Event::InitDone) => {
                    ready.store(true, Ordering::Release);
                    None
                }
                Ok(watcher::Event::InitApply(object)) => Some((Arc::new(object), Seen::Initial)),
                Ok(watcher::Event::Apply(object)) => Some((Arc::new(object), Seen::Changed)),
                Ok(watcher::Event::Delete(object)) => Some((Arc::new(object), Seen::Deleted)),
                Ok(_) => None,
                Err(error) => {
                    tracing::debug!(%error, "placement cache watch error; retrying");
                    None
                }
            };
            std::future::ready(change)
        })
}

/// Runs the controller until dropped.
pub(crate) async fn run(client: Client, options: PlacementOptions) {
    let flags: [Arc<AtomicBool>; 5] = std::array::from_fn(|_| Arc::new(AtomicBool::new(false)));
    let (clusters, clusters_writer) = reflector::store();
    let (sets, sets_writer) = reflector::store();
    let (bindings, bindings_writer) = reflector::store();
    let (scores, scores_writer) = reflector::store();
    let (decisions, decisions_writer) = reflector::store();
    let cluster_changes = reflect::<ManagedCluster>(&client, clusters_writer, Arc::clone(&flags[0]));
    let set_changes = reflect::<ManagedClusterSet>(&client, sets_writer, Arc::clone(&flags[1]));
    let binding_changes =
        reflect::<ManagedClusterSetBinding>(&client, bindings_writer, Arc::clone(&flags[2]));
    let score_changes = reflect::<AddOnPlacementScore>(&client, scores_writer, Arc::clone(&flags[3]));
    let decision_changes = reflect::<PlacementDecision>(&client, decisions_writer, Arc::clone(&flags[4]));

    let controller = Controller::new(Api::<Placement>::all(client.clone()), watcher::Config::default())
        .with_config(
            Config::default()
                .debounce(options.debounce)
                .concurrency(options.concurrency),
        );
    let decisions_version = Arc::new(AtomicU64::new(0));
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "flotilla-placement".into(),
            instance: None,
        },
    );
    let context = Arc::new(Context {
        client,
        options,
        placements: controller.store(),
        clusters,
        sets,
        bindings,
        scores,
        decisions,
        ready: flags,
        compiled: Mutex::new(HashMap::new()),
        decisions_version: Arc::clone(&decisions_version),
        counts: Mutex::new(None),
        membership: Mutex::new(HashMap::new()),
        written: Mutex::new(HashMap::new()),
        recorder,
    });

    let triggers: Vec<BoxStream<'static, Vec<ObjectRef<Placement>>>> = vec![
        {
            let ctx = Arc::clone(&context);
            cluster_changes
                .map(move |(c, seen)| ctx.on_cluster(&c, seen))
                .boxed()
        },
        {
            let ctx = Arc::clone(&context);
            set_changes
                .map(move |(s, seen)| ctx.on_set(&s.name_any(), seen))
                .boxed()
        },
        {
            let ctx = Arc::clone(&context);
            binding_changes
                .filter(|(_, seen)| std::future::ready(*seen != Seen::Initial))
                .map(move |(b, _)| ctx.in_namespace(&b.namespace().unwrap_or_default()))
                .boxed()
        },
        {
            let ctx = Arc::clone(&context);
            score_changes
                .filter(|(_, seen)| std::future::ready(*seen != Seen::Initial))
                .map(move |(s, _)| ctx.on_cluster_namespace(&s.namespace().unwrap_or_default()))
                .boxed()
        },
        {
            let ctx = Arc::clone(&context);
            decision_changes
                .map(move |(d, seen)| {
                    decisions_version.fetch_add(1, Ordering::AcqRel);
                    if seen == Seen::Initial || ctx.is_own_write(&d, seen) {
                        return Vec::new();
                    }
                    match (d.labels().get(PLACEMENT_LABEL), d.namespace()) {
                        (Some(placement), Some(ns)) => vec![ObjectRef::new(placement).within(&ns)],
                        _ => Vec::new(),
                    }
                })
                .boxed()
        },
    ];
    let trigger = futures::stream::select_all(triggers).flat_map(futures::stream::iter);
    let controller = controller.reconcile_on(trigger);
    flotilla_kube::controller::run("placement", controller, reconcile::reconcile, context).await;
}
