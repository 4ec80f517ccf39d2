//! On-demand watches of applied objects: a manifest whose feedback is watched
//! (`feedbackScrapeType: Watch`, ocm-reference §1) has its work reconciled when the object
//! changes on the managed cluster, instead of waiting for the status-sync poll; an object the
//! work keeps as written (strategies Update and ServerSideApply) has it reconciled when its
//! content changes — a hand edit is reverted at once instead of on the next resync.
//!
//! ```text
//!  manifestwork::reconcile ──set(work, objects)──▶ Interests (flotilla-core)
//!                                                    │ first work of a kind: start its watch
//!                                                    │ last work of a kind: stop it
//!  managed apiserver ──metadata watch per kind──▶ filter: objects some work asked for
//!                                                    │ wakes(): a change that matters
//!                                                    │ (not the agent's own write echoed,
//!                                                    │ not a status write, unless watched)
//!                                                    ▼
//!                          ObjectRef<ManifestWork> ──▶ the works controller (reconcile_on)
//! ```
//!
//! Each kind has one kube-runtime metadata watcher over all namespaces (objects' metadata only:
//! a change of any field, status included, changes the resourceVersion, and a change of the
//! spec the generation, which is all a trigger needs), with no store: events of objects no
//! work asked for are dropped as they arrive. What was last seen of each watched object is
//! kept, from the agent's own writes and reads as well as from events, so the echo of the
//! agent's own write wakes nobody.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex, MutexGuard},
};

use flotilla_api::work::v1::ManifestWork;
use flotilla_core::work::agent::watch::{Interests, Seen, Wake, WatchedKind, WatchedObject, wakes};
use futures::{StreamExt, channel::mpsc};
use kube::{
    Api, Client, ResourceExt,
    api::{DynamicObject, ObjectMeta},
    core::PartialObjectMeta,
    discovery::ApiResource,
    runtime::{WatchStreamExt, reflector::ObjectRef, watcher},
};
use tokio::task::AbortHandle;

/// Reconcile triggers of the works controller.
pub(crate) type Triggers = mpsc::UnboundedReceiver<ObjectRef<ManifestWork>>;

/// What the watch tasks share with the reconciles.
struct Shared {
    /// Which works watch which objects, and what was last seen of each watched object (or
    /// of one about to be watched: an object is seen as applied before its work registers it).
    interests: Mutex<(Interests, HashMap<WatchedObject, Seen>)>,
    /// Where a change of a watched object is sent as its works.
    trigger: mpsc::UnboundedSender<ObjectRef<ManifestWork>>,
    /// The cluster namespace of the works on the hub.
    cluster: String,
}

impl Shared {
    fn interests(&self) -> MutexGuard<'_, (Interests, HashMap<WatchedObject, Seen>)> {
        self.interests
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The running watches of one agent connection; dropping it stops them all.
pub(crate) struct Watches {
    client: Client,
    shared: Arc<Shared>,
    /// One task per watched kind. Invariant: its keys are the kinds of `shared.interests`.
    tasks: Mutex<HashMap<WatchedKind, AbortHandle>>,
}

impl Watches {
    /// Watches of the managed cluster through `client` for the works of `cluster`, and the
    /// stream of works to reconcile when a watched object changes.
    pub(crate) fn new(client: Client, cluster: String) -> (Self, Triggers) {
        let (trigger, triggers) = mpsc::unbounded();
        let watches = Self {
            client,
            shared: Arc::new(Shared {
                interests: Mutex::default(),
                trigger,
                cluster,
            }),
            tasks: Mutex::default(),
        };
        (watches, triggers)
    }

    /// Makes `work` watch exactly `objects` (none: it watches nothing), starting and stopping
    /// the watches of kinds as they gain their first or lose their last interested work.
    pub(crate) fn set(&self, work: &str, objects: BTreeMap<WatchedObject, Wake>) {
        // Lock order: tasks, then interests (a watch task only takes interests).
        let mut tasks = self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let changes = {
            let mut guard = self.shared.interests();
            let (interests, seen) = &mut *guard;
            let changes = interests.set(work, objects);
            for object in &changes.released {
                seen.remove(object);
            }
            changes
        };
        for kind in changes.stop {
            if let Some(task) = tasks.remove(&kind) {
                tracing::debug!(resource = %kind.resource, group = %kind.group, "no work watches this kind any more");
                task.abort();
            }
        }
        for kind in changes.start {
            tracing::debug!(resource = %kind.resource, group = %kind.group, "watching this kind for feedback");
            let task = tokio::spawn(watch_kind(self.client.clone(), kind.clone(), self.shared.clone()));
            tasks.insert(kind, task.abort_handle());
        }
    }
}

/// What `meta` tells of an object's content.
fn seen_of(meta: &ObjectMeta) -> Seen {
    Seen {
        resource_version: meta.resource_version.clone().unwrap_or_default(),
        generation: meta.generation,
        labels: meta.labels.clone().unwrap_or_default(),
        annotations: meta.annotations.clone().unwrap_or_default(),
    }
}

impl Watches {
    /// Remembers `object` as the agent just wrote or read it (`meta`), so the watch event of
    /// that very state wakes nobody. Objects no work watches (yet) are remembered too: a
    /// reconcile registers its objects after applying them.
    pub(crate) fn observed(&self, object: WatchedObject, meta: &ObjectMeta) {
        self.shared.interests().1.insert(object, seen_of(meta));
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        let tasks = self
            .tasks
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for (_, task) in tasks.drain() {
            task.abort();
        }
    }
}

/// Watches the objects of `kind` until aborted, sending the works of each changed object that
/// some work asked for.
async fn watch_kind(client: Client, kind: WatchedKind, shared: Arc<Shared>) {
    let resource = ApiResource {
        api_version: if kind.group.is_empty() {
            kind.version.clone()
        } else {
            format!("{}/{}", kind.group, kind.version)
        },
        group: kind.group.clone(),
        version: kind.version.clone(),
        kind: String::new(),
        plural: kind.resource.clone(),
    };
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client, &resource);
    // A re-list after a broken watch brings every object again: only a change that matters
    // to a work wakes it ([`wakes`]).
    let mut changes = watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(change) = changes.next().await {
        let object = match change {
            Ok(object) => object,
            Err(error) => {
                tracing::debug!(resource = %kind.resource, %error, "watch of applied objects interrupted; retrying");
                continue;
            }
        };
        let key = WatchedObject::new(&kind, &object.namespace().unwrap_or_default(), &object.name_any());
        let woken: Vec<String> = {
            let mut guard = shared.interests();
            let (interests, seen) = &mut *guard;
            let works = interests.works_for(&kind, &key.namespace, &key.name);
            if works.is_empty() {
                continue;
            }
            let now = seen_of(&object.metadata);
            let before = seen.insert(key, now.clone());
            works
                .into_iter()
                .filter(|(_, wake)| wakes(wake, before.as_ref(), &now))
                .map(|(work, _)| work)
                .collect()
        };
        for work in woken {
            let target = ObjectRef::new(&work).within(&shared.cluster);
            if shared.trigger.unbounded_send(target).is_err() {
                return;
            }
        }
    }
}
