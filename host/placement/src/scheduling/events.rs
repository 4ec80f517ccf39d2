//! Placement Events, written off the scheduling path by one background writer.
//!
//! An Event is a courtesy to a person reading `kubectl describe`; a reconcile must neither wait
//! for it nor fail with it. Like the event broadcaster of OCM's controllers (client-go's, which
//! queues Events and writes them from one goroutine), a reconcile only queues its Events here;
//! one writer publishes them through kube's [`Recorder`] (which turns a repeated Event into a
//! series). Beyond that, a burst is coalesced: while an Event for the same object and reason
//! waits, a newer one replaces it, so a placement scheduled ten times in a second is reported
//! once with its latest scores. At most [`MAX_PENDING`] Events wait; more are dropped and
//! counted, so a storm cannot grow memory without bound.
//!
//! ```text
//!  reconcile ──publish──▶ pending (object, reason) ─▶ latest Event ──one writer──▶ events.k8s.io
//! ```

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, Recorder};
use tokio::sync::Notify;

/// Most Events waiting to be written; the oldest are written first.
pub(crate) const MAX_PENDING: usize = 10_000;

/// Which pending Event a newer one replaces: the object's uid (or namespace/name) and the reason.
type Key = (String, String);

/// Events waiting for the writer.
#[derive(Default)]
struct Pending {
    /// Keys in the order their first Event arrived.
    order: VecDeque<Key>,
    /// The latest Event per key.
    latest: HashMap<Key, (ObjectReference, Event)>,
}

/// The queue between reconciles and the Event writer.
#[derive(Default)]
pub(crate) struct EventQueue {
    pending: Mutex<Pending>,
    ready: Notify,
    /// Events dropped because [`MAX_PENDING`] were waiting.
    dropped: AtomicU64,
}

impl EventQueue {
    /// Queues `event` about `reference`, replacing a waiting Event with the same reason.
    pub(crate) fn publish(&self, reference: ObjectReference, event: Event) {
        let object = reference.uid.clone().unwrap_or_else(|| {
            format!(
                "{}/{}",
                reference.namespace.as_deref().unwrap_or_default(),
                reference.name.as_deref().unwrap_or_default()
            )
        });
        let key = (object, event.reason.clone());
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(waiting) = pending.latest.get_mut(&key) {
            *waiting = (reference, event);
            return;
        }
        if pending.order.len() >= MAX_PENDING {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        pending.order.push_back(key.clone());
        pending.latest.insert(key, (reference, event));
        drop(pending);
        self.ready.notify_one();
    }

    /// The oldest waiting Event, if any.
    fn pop(&self) -> Option<(ObjectReference, Event)> {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = pending.order.pop_front()?;
        pending.latest.remove(&key)
    }

    /// Writes queued Events one at a time until dropped.
    pub(crate) async fn run(&self, recorder: Recorder) {
        loop {
            let Some((reference, event)) = self.pop() else {
                // A publish between the failed pop and this wait left a permit: no Event is lost.
                self.ready.notified().await;
                continue;
            };
            // Failing to record an Event must not fail or repeat anything else.
            if let Err(error) = recorder.publish(&event, &reference).await {
                tracing::debug!(%error, "cannot record placement event");
            }
            let dropped = self.dropped.swap(0, Ordering::Relaxed);
            if dropped > 0 {
                tracing::warn!(dropped, "placement events dropped: too many waiting");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::events::EventType;

    use super::*;

    fn reference(uid: &str) -> ObjectReference {
        ObjectReference {
            uid: Some(uid.into()),
            ..Default::default()
        }
    }

    fn event(reason: &str, note: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(note.into()),
            action: "Updated".into(),
            secondary: None,
        }
    }

    fn drain(queue: &EventQueue) -> Vec<(String, String, String)> {
        std::iter::from_fn(|| queue.pop())
            .map(|(r, e)| (r.uid.unwrap_or_default(), e.reason, e.note.unwrap_or_default()))
            .collect()
    }

    #[test]
    fn a_newer_event_for_the_same_object_and_reason_replaces_the_waiting_one_in_its_place() {
        let queue = EventQueue::default();
        queue.publish(reference("p"), event("ScoreUpdate", "a:1"));
        queue.publish(reference("q"), event("ScoreUpdate", "b:1"));
        queue.publish(reference("p"), event("DecisionUpdate", "updated"));
        queue.publish(reference("p"), event("ScoreUpdate", "a:2"));
        let row = |u: &str, r: &str, n: &str| (u.to_owned(), r.to_owned(), n.to_owned());
        assert_eq!(
            drain(&queue),
            [
                row("p", "ScoreUpdate", "a:2"),
                row("q", "ScoreUpdate", "b:1"),
                row("p", "DecisionUpdate", "updated"),
            ]
        );
    }

    #[test]
    fn events_beyond_the_limit_are_dropped_and_counted() {
        let queue = EventQueue::default();
        for i in 0..=MAX_PENDING {
            queue.publish(reference(&i.to_string()), event("ScoreUpdate", ""));
        }
        assert_eq!(queue.dropped.load(Ordering::Relaxed), 1);
        assert_eq!(drain(&queue).len(), MAX_PENDING);
    }
}
