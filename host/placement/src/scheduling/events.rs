//! Placement Events, written off the scheduling path by one background writer.
//!
//! An Event is a courtesy to a person reading `kubectl describe`; a pass must neither wait for
//! it nor fail with it. Like the event broadcaster of OCM's controllers (client-go's, which
//! queues Events and writes them from one goroutine), a pass only queues its Events; one writer
//! publishes them through [`Publisher`] (which drops a repeat) when no pass runs (see
//! [`super::background`]). While an Event for the same object and reason waits, a newer one
//! replaces it, so a placement scheduled ten times in a second is reported
//! once with its latest scores. At most [`MAX_PENDING`] Events wait; more are dropped and
//! counted, so a storm cannot grow memory without bound.

use std::sync::atomic::Ordering;

use flotilla_kube::events::{Event, Publisher};
use k8s_openapi::api::core::v1::ObjectReference;

use super::background::{Busy, Coalescing, MAX_DEFER};

/// Most Events waiting to be written; the oldest are written first.
pub(crate) const MAX_PENDING: usize = 10_000;

/// Events by the object's uid (or namespace/name) and reason.
pub(crate) type EventQueue = Coalescing<(String, String), (ObjectReference, Event)>;

/// An empty Event queue.
pub(crate) fn queue() -> EventQueue {
    Coalescing::new(Some(MAX_PENDING))
}

/// Queues `event` about `reference`, replacing a waiting Event with the same reason.
pub(crate) fn publish(queue: &EventQueue, reference: ObjectReference, event: Event) {
    let object = reference.uid.clone().unwrap_or_else(|| {
        format!(
            "{}/{}",
            reference.namespace.as_deref().unwrap_or_default(),
            reference.name.as_deref().unwrap_or_default()
        )
    });
    queue.publish((object, event.reason.clone()), (reference, event));
}

/// Writes queued Events one at a time until dropped.
pub(crate) async fn write(queue: &EventQueue, busy: &Busy, publisher: Publisher) {
    loop {
        let (_, (reference, event)) = queue.next(busy, MAX_DEFER).await;
        // Failing to record an Event must not fail or repeat anything else.
        if let Err(error) = publisher.publish(&event, &reference).await {
            tracing::debug!(%error, "cannot record placement event");
        }
        let dropped = queue.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(dropped, "placement events dropped: too many waiting");
        }
    }
}

#[cfg(test)]
mod tests {
    use flotilla_kube::events::EventType;

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

    #[test]
    fn a_newer_event_for_the_same_object_and_reason_replaces_the_waiting_one_in_its_place() {
        let queue = queue();
        publish(&queue, reference("p"), event("ScoreUpdate", "a:1"));
        publish(&queue, reference("q"), event("ScoreUpdate", "b:1"));
        publish(&queue, reference("p"), event("DecisionUpdate", "updated"));
        publish(&queue, reference("p"), event("ScoreUpdate", "a:2"));
        let drained: Vec<(String, String, String)> = std::iter::from_fn(|| queue.pop())
            .map(|(_, (r, e))| (r.uid.unwrap_or_default(), e.reason, e.note.unwrap_or_default()))
            .collect();
        let row = |u: &str, r: &str, n: &str| (u.to_owned(), r.to_owned(), n.to_owned());
        assert_eq!(
            drained,
            [
                row("p", "ScoreUpdate", "a:2"),
                row("q", "ScoreUpdate", "b:1"),
                row("p", "DecisionUpdate", "updated"),
            ]
        );
    }

    #[test]
    fn events_beyond_the_limit_are_dropped_and_counted() {
        let queue = queue();
        for i in 0..=MAX_PENDING {
            publish(&queue, reference(&i.to_string()), event("ScoreUpdate", ""));
        }
        assert_eq!(queue.dropped.load(Ordering::Relaxed), 1);
        assert_eq!(std::iter::from_fn(|| queue.pop()).count(), MAX_PENDING);
    }
}
