//! [`flotilla_kube::events`] against a real apiserver: what a person reading `kubectl describe`
//! sees when an object's Event changes its note, repeats, or carries a note over the limit.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use flotilla_kube::events::Events;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, ResourceExt};

async fn subject(client: &Client, name: &str) -> ConfigMap {
    let object = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &object)
        .await
        .expect("create the ConfigMap")
}

/// The notes of the Events about `object`, oldest first, once there are `count` (Events are
/// written in the background) or at the timeout.
async fn notes_once(client: &Client, object: &ConfigMap, count: usize) -> Vec<String> {
    let what = format!("{count} Events");
    let found = flotilla_testing::wait::until(&what, std::time::Duration::from_secs(20), || async {
        let notes = notes(client, object).await;
        Ok::<_, String>((notes.len() >= count).then_some(notes))
    })
    .await;
    match found {
        Ok(notes) => notes,
        Err(_) => notes(client, object).await,
    }
}

/// The notes of the Events about `object`, oldest first.
async fn notes(client: &Client, object: &ConfigMap) -> Vec<String> {
    let mut events = Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default().fields(&format!("regarding.uid={}", object.uid().unwrap())))
        .await
        .expect("list Events")
        .items;
    events.sort_by_key(|e| e.event_time.clone().map(|t| t.0));
    events.into_iter().map(|e| e.note.unwrap_or_default()).collect()
}

/// Every note an object's Event takes is shown, in order, even under one reason and action
/// (kube's recorder would keep the first note and count the rest as its series); an Event
/// identical to one just written is not written again.
#[tokio::test]
async fn a_changed_note_is_its_own_event_and_a_repeat_is_dropped() {
    let cp = flotilla_testing::shared("kube-events").await.unwrap();
    let client = cp.admin_client().await.unwrap();
    let object = subject(&client, "changing-notes").await;
    let events = Events::new(client.clone(), "flotilla-test");

    for note in [
        "refused: first reason",
        "refused: second reason",
        "refused: first reason",
    ] {
        events
            .warning(&object, "Refused", "Approve", note.to_owned())
            .await;
    }
    events
        .warning(&object, "Refused", "Approve", "refused: second reason".to_owned())
        .await;

    // Given time for a third, which must not come.
    notes_once(&client, &object, 2).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        notes(&client, &object).await,
        ["refused: first reason", "refused: second reason"],
        "each distinct note once, a repeat within the window dropped"
    );
}

/// A note longer than the apiserver accepts is cut to fit rather than losing the whole Event.
#[tokio::test]
async fn a_note_over_the_limit_is_cut_and_the_event_written() {
    let cp = flotilla_testing::shared("kube-events").await.unwrap();
    let client = cp.admin_client().await.unwrap();
    let object = subject(&client, "long-note").await;
    let events = Events::new(client.clone(), "flotilla-test");

    events.normal(&object, "Long", "Report", "ü".repeat(5000)).await;

    let written = notes_once(&client, &object, 1).await;
    assert_eq!(written.len(), 1, "{written:?}");
    assert!(written[0].len() <= 1024 && written[0].chars().all(|c| c == 'ü'));
}

/// Events are written in the background, at most `EVENTS_IN_FLIGHT` at once and the rest by
/// the caller itself: a burst of twice as many, published without waiting for the apiserver,
/// all arrive.
#[tokio::test]
async fn a_burst_of_events_beyond_those_in_flight_all_arrive() {
    let cp = flotilla_testing::shared("kube-events").await.unwrap();
    let client = cp.admin_client().await.unwrap();
    let object = subject(&client, "burst").await;
    let events = Events::new(client.clone(), "flotilla-test");
    let count = 2 * flotilla_kube::events::EVENTS_IN_FLIGHT;

    for n in 0..count {
        events
            .normal(&object, "Burst", "Report", format!("event {n}"))
            .await;
    }

    let written = notes_once(&client, &object, count).await;
    assert_eq!(written.len(), count, "{written:?}");
}
