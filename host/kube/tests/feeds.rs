//! [`flotilla_kube::feed::Feeds`] against a real apiserver: the parts of a process that read a
//! kind share its one watch and cache, each woken by what it reads.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use std::time::Duration;

use flotilla_kube::feed::{Feeds, hash_of};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::watcher::Event;
use kube::{Api, ResourceExt as _};

const LABEL: &str = "flotilla.dev/feeds-test";

fn labelled(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some([(LABEL.to_owned(), "yes".to_owned())].into()),
            ..Default::default()
        },
        data: Some([("key".to_owned(), "1".to_owned())].into()),
        ..Default::default()
    }
}

/// The next item of `stream`, which must come within 20 s.
async fn next<S: futures::Stream + Unpin>(stream: &mut S, what: &str) -> S::Item {
    tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .unwrap_or_else(|_| panic!("{what} within 20 s"))
        .unwrap_or_else(|| panic!("the stream ended before {what}"))
}

fn data(map: &ConfigMap) -> Option<u64> {
    hash_of(&map.data)
}

/// Two readers asking for the same kind and selector get one cache (the very objects, not
/// copies); a reader of the events sees the list begin and end, which readers that keep
/// indexes of their own rebuild on; a reader of `data` is not woken by a label change.
#[tokio::test]
async fn readers_of_a_kind_share_one_cache_and_each_is_woken_by_what_it_reads() {
    let cp = flotilla_testing::shared("kube-feeds").await.unwrap();
    let client = cp.admin_client().await.unwrap();
    let api = Api::<ConfigMap>::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &labelled("listed"))
        .await
        .unwrap();

    let mut feeds = Feeds::new(client.clone());
    let (first_store, mut data_changes) = feeds.feed::<ConfigMap>(Some(LABEL), None).subscribe(data);
    let (second_store, mut events) = feeds.feed::<ConfigMap>(Some(LABEL), None).subscribe_events();
    let running = tokio::spawn(feeds.run());

    let mut listed = Vec::new();
    loop {
        let event = next(&mut events, "the first list").await;
        match event {
            Event::Init => listed.push("init".to_owned()),
            Event::InitApply(map) => listed.push(map.name_any()),
            Event::InitDone => break,
            Event::Apply(_) | Event::Delete(_) => {}
        }
    }
    assert_eq!(listed, ["init", "listed"]);
    let first = first_store.get(&kube::runtime::reflector::ObjectRef::new("listed").within("default"));
    let second = second_store.get(&kube::runtime::reflector::ObjectRef::new("listed").within("default"));
    assert!(
        std::sync::Arc::ptr_eq(&first.unwrap(), &second.unwrap()),
        "one cache, not one per reader"
    );
    let woken = next(&mut data_changes, "the listed object").await.unwrap();
    assert_eq!(woken.name_any(), "listed");

    // A label change: the events reader sees it, the data reader is not woken; then a data
    // change wakes it.
    let patch = |body: serde_json::Value| {
        let api = api.clone();
        async move {
            api.patch("listed", &PatchParams::default(), &Patch::Merge(body))
                .await
                .unwrap()
        }
    };
    patch(serde_json::json!({"metadata": {"labels": {"other": "x"}}})).await;
    let relabelled = next(&mut events, "the label change").await;
    assert!(matches!(relabelled, Event::Apply(map) if map.labels().contains_key("other")));
    patch(serde_json::json!({"data": {"key": "2"}})).await;
    let woken = next(&mut data_changes, "the data change").await.unwrap();
    assert_eq!(
        woken.data.unwrap().get("key").map(String::as_str),
        Some("2"),
        "the label change woke the data reader"
    );
    running.abort();
}

/// A reader that asks for a kind with another slim than the feed was made with would read
/// what the other dropped: debug builds refuse it.
#[tokio::test]
#[cfg(debug_assertions)]
#[should_panic(expected = "asks with its one slim")]
async fn a_reader_asking_with_another_slim_is_refused() {
    let cp = flotilla_testing::shared("kube-feeds").await.unwrap();
    let client = cp.admin_client().await.unwrap();
    let mut feeds = Feeds::new(client);
    fn no_data(map: &mut ConfigMap) {
        map.data = None;
    }
    let _ = feeds.feed::<ConfigMap>(None, Some(no_data)).store();
    let _ = feeds.feed::<ConfigMap>(None, None).store();
}
