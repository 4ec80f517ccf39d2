//! Kubernetes Events on the objects the controllers act on, through kube's [`Recorder`] (which
//! folds repeats into an event series). Events are best-effort, as in client-go: a failure to
//! publish one is logged and never fails the reconcile that acted.

use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Publishes the Events of one component (`reporting_controller`).
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
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

    async fn publish<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &object.object_ref(&())).await {
            tracing::debug!(%error, reason, "could not publish an Event");
        }
    }
}
