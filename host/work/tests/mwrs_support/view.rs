//! How the rollout tests read a replica set's works off a watch: each cluster's work in the
//! state the replica set reads from it (new, progressing, done, failed), and how many are in
//! flight after each event, in the API server's order.

use std::collections::BTreeMap;

use flotilla_api::work::v1::ManifestWork;
use kube::ResourceExt;
use kube::runtime::watcher::Event;

/// A cluster's work as last seen on the watch, read the way the replica set reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// No agent report at the current generation yet.
    New,
    Progressing,
    Done,
    Failed,
    /// Older than the template the test is rolling out (see [`View::min_generation`]).
    Outdated,
}

pub fn seen(work: &ManifestWork) -> Seen {
    let generation = work.metadata.generation;
    let conditions = work
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let at_generation = |type_: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == type_ && c.observed_generation == generation)
    };
    match (
        at_generation("Progressing").map(|c| c.status.as_str()),
        at_generation("Degraded"),
    ) {
        (Some("True"), Some(d)) if d.status == "True" => Seen::Failed,
        (Some("True"), _) => Seen::Progressing,
        (Some("False"), _) => Seen::Done,
        _ => Seen::New,
    }
}

/// The works of one replica set by cluster, as the watch last showed them.
#[derive(Default)]
pub struct View {
    /// The works by cluster.
    pub works: BTreeMap<String, ManifestWork>,
    /// Works below this generation carry an older template: neither in flight nor done.
    pub min_generation: i64,
}

impl View {
    /// Applies one watch event; returns the cluster whose work changed, if any.
    pub fn apply(&mut self, event: Event<ManifestWork>) -> Option<String> {
        match event {
            Event::Apply(work) | Event::InitApply(work) => {
                let cluster = work.namespace().unwrap();
                self.works.insert(cluster.clone(), work);
                Some(cluster)
            }
            Event::Delete(work) => {
                let cluster = work.namespace().unwrap();
                self.works.remove(&cluster);
                Some(cluster)
            }
            Event::Init | Event::InitDone => None,
        }
    }

    pub fn seen(&self, work: &ManifestWork) -> Seen {
        if work.metadata.generation.unwrap_or_default() < self.min_generation {
            Seen::Outdated
        } else {
            seen(work)
        }
    }

    pub fn count(&self, state: Seen) -> usize {
        self.works.values().filter(|w| self.seen(w) == state).count()
    }

    pub fn state(&self, cluster: &str) -> Option<Seen> {
        self.works.get(cluster).map(|w| self.seen(w))
    }

    pub fn in_flight(&self) -> usize {
        self.works.len() - self.count(Seen::Done) - self.count(Seen::Outdated)
    }
}
