//! Kubernetes Events on the objects the controllers act on, through kube's [`Recorder`]. Events
//! are best-effort, as in client-go: a failure to publish one is logged and never fails the
//! reconcile that acted.
//!
//! Reconciles repeat (resyncs, conflicts, requeues), so the same Event would be published again
//! and again: kube's recorder would patch the Event's series on every repeat. Like client-go's
//! broadcaster, which keeps repeats in memory and writes a series rarely, an Event identical to
//! one published for the same object within [`REPEAT_WINDOW`] is dropped here ([`Repeats`]).
//!
//! ```text
//!  reconcile ─▶ Events::normal / warning / conditions ─▶ Repeats (seen within the window? drop)
//!                                                        └─▶ Recorder ─▶ events.k8s.io/v1 Event
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// How long an Event is not published again for the same object with the same type, reason and
/// note: long against a resync, short enough that a state that lasts is reported again.
pub const REPEAT_WINDOW: Duration = Duration::from_secs(10 * 60);

/// Most Events remembered; past it the ones outside the window are forgotten, and if all are
/// inside it, all are (a storm of distinct Events is not held in memory).
const REMEMBERED: usize = 4096;

/// Publishes the Events of one component (`reporting_controller`).
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
    repeats: Arc<Mutex<Repeats>>,
}

/// A condition type whose changes an Event reports (see [`Events::conditions`]).
#[derive(Clone, Copy, Debug)]
pub struct ConditionEvent {
    /// The condition type, e.g. `Applied`.
    pub type_: &'static str,
    /// The Event's `action`: what the controller did, e.g. `Apply`.
    pub action: &'static str,
    /// Whether the condition as it now is deserves a Warning rather than a Normal Event.
    pub warning: fn(&Condition) -> bool,
}

/// [`ConditionEvent::warning`] for conditions that are bad when `False`.
pub fn when_false(condition: &Condition) -> bool {
    condition.status == flotilla_core::conditions::FALSE
}

/// [`ConditionEvent::warning`] for conditions that are bad unless `True` (`Unknown` too).
pub fn unless_true(condition: &Condition) -> bool {
    condition.status != flotilla_core::conditions::TRUE
}

/// [`ConditionEvent::warning`] for conditions whose every state is Normal (e.g. progress).
pub fn never(_: &Condition) -> bool {
    false
}

impl Events {
    /// Events reported as `controller` (e.g. `flotilla-hub`).
    pub fn new(client: kube::Client, controller: &str) -> Self {
        let reporter = Reporter {
            controller: controller.to_owned(),
            instance: std::env::var("HOSTNAME").ok(),
        };
        Self {
            recorder: Recorder::new(client, reporter),
            repeats: Arc::default(),
        }
    }

    /// A Normal event on `object`: `reason` (CamelCase), `action` (what was done) and a note
    /// a person can read.
    pub async fn normal<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.publish(object, EventType::Normal, reason, action, note)
            .await;
    }

    /// A Warning event on `object`.
    pub async fn warning<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.publish(object, EventType::Warning, reason, action, note)
            .await;
    }

    /// One Event per condition of `watched` that changed from `before` to `after`
    /// ([`flotilla_core::conditions::changed`]), with the condition's reason and message: call
    /// it once the status with `after` is written, so the Events say what the object shows.
    pub async fn conditions<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        before: &[Condition],
        after: &[Condition],
        watched: &[ConditionEvent],
    ) {
        self.conditions_of(object, None, before, after, watched).await;
    }

    /// [`Events::conditions`] of one part of `object` (e.g. a placement of an add-on's
    /// install progressions), named first in each note.
    pub async fn conditions_of<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        part: Option<&str>,
        before: &[Condition],
        after: &[Condition],
        watched: &[ConditionEvent],
    ) {
        for watch in watched {
            let Some(condition) = flotilla_core::conditions::changed(before, after, watch.type_) else {
                continue;
            };
            let type_ = if (watch.warning)(condition) {
                EventType::Warning
            } else {
                EventType::Normal
            };
            let note = match part {
                Some(part) => format!("{part}: {}", condition_note(condition)),
                None => condition_note(condition),
            };
            self.publish(object, type_, &condition.reason, watch.action, note)
                .await;
        }
    }

    async fn publish<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let reference = object.object_ref(&());
        let key = RepeatKey {
            object: reference.uid.clone().unwrap_or_else(|| {
                format!(
                    "{}/{}/{}",
                    reference.kind.as_deref().unwrap_or_default(),
                    reference.namespace.as_deref().unwrap_or_default(),
                    reference.name.as_deref().unwrap_or_default()
                )
            }),
            warning: type_ == EventType::Warning,
            reason: reason.to_owned(),
            note: note.clone(),
        };
        let first = self
            .repeats
            .lock()
            .map_or(true, |mut repeats| repeats.first_in_window(key, Instant::now()));
        if !first {
            tracing::trace!(reason, "Event published within the repeat window; dropped");
            return;
        }
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            tracing::debug!(%error, reason, "could not publish an Event");
        }
    }
}

/// The note of an Event for `condition`: its message, with the generation it was computed at.
fn condition_note(condition: &Condition) -> String {
    let message = if condition.message.is_empty() {
        format!("{} is {}", condition.type_, condition.status)
    } else {
        condition.message.clone()
    };
    match condition.observed_generation {
        Some(generation) => format!("{message} (generation {generation})"),
        None => message,
    }
}

/// What makes two Events the same.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct RepeatKey {
    /// The object's uid (else kind/namespace/name).
    object: String,
    warning: bool,
    reason: String,
    note: String,
}

/// When each Event was last published, to drop repeats within [`REPEAT_WINDOW`].
#[derive(Debug, Default)]
struct Repeats {
    published: HashMap<RepeatKey, Instant>,
}

impl Repeats {
    /// Whether `key` was not published within the window before `now`; if so, it is now.
    fn first_in_window(&mut self, key: RepeatKey, now: Instant) -> bool {
        if let Some(at) = self.published.get(&key)
            && now.saturating_duration_since(*at) < REPEAT_WINDOW
        {
            return false;
        }
        if self.published.len() >= REMEMBERED {
            self.published
                .retain(|_, at| now.saturating_duration_since(*at) < REPEAT_WINDOW);
            if self.published.len() >= REMEMBERED {
                self.published.clear();
            }
        }
        self.published.insert(key, now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(object: &str, reason: &str, note: &str) -> RepeatKey {
        RepeatKey {
            object: object.into(),
            warning: false,
            reason: reason.into(),
            note: note.into(),
        }
    }

    #[test]
    fn the_same_event_is_published_once_per_window() {
        let mut repeats = Repeats::default();
        let start = Instant::now();
        assert!(repeats.first_in_window(key("uid", "Applied", "done"), start));
        assert!(!repeats.first_in_window(key("uid", "Applied", "done"), start + Duration::from_secs(1)));
        assert!(!repeats.first_in_window(
            key("uid", "Applied", "done"),
            start + REPEAT_WINDOW - Duration::from_secs(1)
        ));
        assert!(repeats.first_in_window(key("uid", "Applied", "done"), start + REPEAT_WINDOW));
    }

    #[test]
    fn another_object_reason_or_note_is_another_event() {
        let mut repeats = Repeats::default();
        let now = Instant::now();
        assert!(repeats.first_in_window(key("uid", "Applied", "done"), now));
        assert!(repeats.first_in_window(key("other", "Applied", "done"), now));
        assert!(repeats.first_in_window(key("uid", "Failed", "done"), now));
        assert!(repeats.first_in_window(key("uid", "Applied", "generation 2"), now));
        let warning = RepeatKey {
            warning: true,
            ..key("uid", "Applied", "done")
        };
        assert!(repeats.first_in_window(warning, now));
    }

    #[test]
    fn memory_stays_bounded_in_a_storm_of_distinct_events() {
        let mut repeats = Repeats::default();
        let now = Instant::now();
        for n in 0..REMEMBERED * 2 {
            assert!(repeats.first_in_window(key(&n.to_string(), "R", "n"), now));
        }
        assert!(repeats.published.len() <= REMEMBERED);
    }
}
