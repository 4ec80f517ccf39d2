//! Kubernetes Events on the objects the controllers act on. Events are best-effort, as in
//! client-go: a failure to publish one is logged and never fails the reconcile that acted.
//!
//! Reconciles repeat (resyncs, conflicts, requeues), so the same Event would be published again
//! and again. Like client-go's broadcaster, which keeps repeats in memory and writes a series
//! rarely, an Event identical to one published for the same object within [`REPEAT_WINDOW`] is
//! dropped by [`Publisher`] ([`Repeats`]).
//!
//! Events are written by [`Publisher`], not kube's `Recorder`: the recorder folds every Event
//! with the same object, type, reason and action into the first one's series and keeps the first
//! note for minutes, so a new refusal, new scores or a new generation would never be shown
//! (client-go's correlator keys on the message too).
//!
//! [`Events`] writes in the background: a reconcile does not wait for its Events (a round trip
//! each, on every new add-on), unless [`EVENTS_IN_FLIGHT`] are being written already; then it
//! writes its own and waits, so a slow apiserver holds no more than that many in memory. The
//! repeat check runs before, in the reconcile's order.
//!
//! ```text
//!  reconcile ─▶ Events::normal / warning / conditions ─▶ Publisher::admit ─▶ (background) create
//!                                                         └─ Repeats: seen within the window? drop
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{Api, PostParams};
pub use kube::runtime::events::{Event, EventType, Reporter};

/// How long an Event is not published again for the same object with the same type, reason and
/// note: long against a resync, short enough that a state that lasts is reported again.
pub const REPEAT_WINDOW: Duration = Duration::from_secs(10 * 60);

/// Most Events remembered; past it the ones outside the window are forgotten, and if all are
/// inside it, all are (a storm of distinct Events is not held in memory).
const REMEMBERED: usize = 4096;

/// The longest note the apiserver accepts on an `events.k8s.io/v1` Event, in bytes.
const NOTE_MAX_BYTES: usize = 1024;

/// Most Events of one [`Events`] written in the background at once.
pub const EVENTS_IN_FLIGHT: usize = 32;

/// An Event [`Publisher::admit`] let through, ready to be written by [`Publisher::create`].
pub struct Admitted {
    namespace: String,
    event: KubeEvent,
}

/// Writes each Event as a new `events.k8s.io/v1` Event of one reporting component, dropping an
/// Event identical to one it wrote within [`REPEAT_WINDOW`].
#[derive(Clone)]
pub struct Publisher {
    client: kube::Client,
    reporter: Reporter,
    repeats: Arc<Mutex<Repeats>>,
}

impl Publisher {
    /// Events reported as `reporter`.
    pub fn new(client: kube::Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            repeats: Arc::default(),
        }
    }

    /// Creates `event` about `reference`, in the referenced object's namespace (`default` for a
    /// cluster-scoped one, as kubectl looks for it there), unless it is a repeat.
    pub async fn publish(&self, event: &Event, reference: &ObjectReference) -> Result<(), kube::Error> {
        match self.admit(event, reference) {
            Some(admitted) => self.create(admitted).await,
            None => Ok(()),
        }
    }

    /// `event` about `reference` as it will be written, or None for a repeat (which is not
    /// written).
    pub fn admit(&self, event: &Event, reference: &ObjectReference) -> Option<Admitted> {
        let key = RepeatKey {
            object: reference.uid.clone().unwrap_or_else(|| {
                format!(
                    "{}/{}/{}",
                    reference.kind.as_deref().unwrap_or_default(),
                    reference.namespace.as_deref().unwrap_or_default(),
                    reference.name.as_deref().unwrap_or_default()
                )
            }),
            warning: event.type_ == EventType::Warning,
            reason: event.reason.clone(),
            note: event.note.clone().unwrap_or_default(),
        };
        let first = self
            .repeats
            .lock()
            .map_or(true, |mut repeats| repeats.first_in_window(key, Instant::now()));
        if !first {
            tracing::trace!(
                reason = event.reason,
                "Event published within the repeat window; dropped"
            );
            return None;
        }
        Some(Admitted {
            namespace: reference.namespace.as_deref().unwrap_or("default").to_owned(),
            event: self.event(event, reference, Timestamp::now()),
        })
    }

    /// Writes an admitted Event.
    pub async fn create(&self, admitted: Admitted) -> Result<(), kube::Error> {
        Api::<KubeEvent>::namespaced(self.client.clone(), &admitted.namespace)
            .create(&PostParams::default(), &admitted.event)
            .await
            .map(drop)
    }

    fn event(&self, event: &Event, reference: &ObjectReference, now: Timestamp) -> KubeEvent {
        let subject = reference.name.as_deref().unwrap_or(&self.reporter.controller);
        KubeEvent {
            metadata: ObjectMeta {
                // Unique per write: the time, and a random suffix for two writes in one instant.
                name: Some(format!(
                    "{subject}.{:x}{:04x}",
                    now.as_nanosecond(),
                    fastrand::u16(..)
                )),
                namespace: reference.namespace.clone(),
                ..ObjectMeta::default()
            },
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            note: event.note.as_deref().map(within_note_limit),
            event_time: Some(MicroTime(now)),
            regarding: Some(reference.clone()),
            related: event.secondary.clone(),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            type_: Some(
                match event.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_owned(),
            ),
            ..KubeEvent::default()
        }
    }
}

/// `note` cut at a character boundary to what the apiserver accepts.
fn within_note_limit(note: &str) -> String {
    let mut end = note.len().min(NOTE_MAX_BYTES);
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    note[..end].to_owned()
}

/// Publishes the Events of one component (`reporting_controller`).
#[derive(Clone)]
pub struct Events {
    publisher: Publisher,
    /// Permits for the Events written in the background ([`EVENTS_IN_FLIGHT`]).
    in_flight: Arc<tokio::sync::Semaphore>,
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
            publisher: Publisher::new(client, reporter),
            in_flight: Arc::new(tokio::sync::Semaphore::new(EVENTS_IN_FLIGHT)),
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
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: None,
        };
        let Some(admitted) = self.publisher.admit(&event, &reference) else {
            return;
        };
        let reason = reason.to_owned();
        let publisher = self.publisher.clone();
        let write = async move {
            if let Err(error) = publisher.create(admitted).await {
                tracing::debug!(%error, reason, "could not publish an Event");
            }
        };
        match Arc::clone(&self.in_flight).try_acquire_owned() {
            Ok(permit) => {
                tokio::spawn(async move {
                    write.await;
                    drop(permit);
                });
            }
            Err(_) => write.await,
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
    fn a_long_note_is_cut_at_a_character_boundary_within_the_limit() {
        let note = "é".repeat(NOTE_MAX_BYTES);
        let cut = within_note_limit(&note);
        assert!(cut.len() <= NOTE_MAX_BYTES && cut.len() >= NOTE_MAX_BYTES - 1);
        assert!(note.starts_with(&cut));
        assert_eq!(within_note_limit("short"), "short");
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
