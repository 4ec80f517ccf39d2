//! On-demand watches of applied objects, for `feedbackScrapeType: Watch` (ocm-reference §1):
//! a manifest whose feedback is watched has its work reconciled when the object changes on the
//! managed cluster, instead of waiting for the status-sync poll.
//!
//! ```text
//!  manifestwork::reconcile ──set(work, objects)──▶ Interests (flotilla-core)
//!                                                    │ first work of a kind: start its watch
//!                                                    │ last work of a kind: stop it
//!  managed apiserver ──metadata watch per kind──▶ filter: objects some work asked for
//!                                                    │ resourceVersion changed
//!                                                    ▼
//!                          ObjectRef<ManifestWork> ──▶ the works controller (reconcile_on)
//! ```
//!
//! Each kind has one kube-runtime metadata watcher over all namespaces (objects' metadata only:
//! a change of any field, status included, changes the resourceVersion, which is all a trigger
//! needs), with no store: events of objects no work asked for are dropped as they arrive.

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, Mutex, MutexGuard},
};

use flotilla_api::work::v1::ManifestWork;
use flotilla_core::work::agent::watch::{Interests, WatchedKind, WatchedObject};
use futures::{StreamExt, channel::mpsc};
use kube::{
    Api, Client, ResourceExt,
    api::DynamicObject,
    core::PartialObjectMeta,
    discovery::ApiResource,
    runtime::{Predicate as _, PredicateConfig, WatchStreamExt, predicates, reflector::ObjectRef, watcher},
};
use tokio::task::AbortHandle;

/// Reconcile triggers of the works controller.
pub(crate) type Triggers = mpsc::UnboundedReceiver<ObjectRef<ManifestWork>>;

/// What the watch tasks share with the reconciles.
struct Shared {
    /// Which works watch which objects.
    interests: Mutex<Interests>,
    /// Where a change of a watched object is sent as its works.
    trigger: mpsc::UnboundedSender<ObjectRef<ManifestWork>>,
    /// The cluster namespace of the works on the hub.
    cluster: String,
}

impl Shared {
    fn interests(&self) -> MutexGuard<'_, Interests> {
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
    pub(crate) fn set(&self, work: &str, objects: BTreeSet<WatchedObject>) {
        // Lock order: tasks, then interests (a watch task only takes interests).
        let mut tasks = self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let changes = self.shared.interests().set(work, objects);
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
    let interested = {
        let (shared, kind) = (shared.clone(), kind.clone());
        move |object: &Result<PartialObjectMeta<DynamicObject>, watcher::Error>| {
            let keep = match object {
                Ok(object) => !shared
                    .interests()
                    .works_for(&kind, &object.namespace().unwrap_or_default(), &object.name_any())
                    .is_empty(),
                Err(_) => true,
            };
            std::future::ready(keep)
        }
    };
    // A re-list after a broken watch brings every object again: only a new resourceVersion
    // (a real change) wakes a work.
    let mut changes = watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .filter(interested)
        .predicate_filter(
            predicates::resource_version.fallback(predicates::generation),
            PredicateConfig::default(),
        )
        .boxed();
    while let Some(change) = changes.next().await {
        match change {
            Ok(object) => {
                let works = shared.interests().works_for(
                    &kind,
                    &object.namespace().unwrap_or_default(),
                    &object.name_any(),
                );
                for work in works {
                    let target = ObjectRef::new(&work).within(&shared.cluster);
                    if shared.trigger.unbounded_send(target).is_err() {
                        return;
                    }
                }
            }
            Err(error) => {
                tracing::debug!(resource = %kind.resource, %error, "feedback watch interrupted; retrying");
            }
        }
    }
}
