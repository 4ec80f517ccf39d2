//! The hub's kube-apiserver stops under a running agent; works are changed, deleted and
//! created on the hub while the agent still cannot reach it: nothing applied is deleted during
//! the outage, and after it the end state is the one a run without the outage gives, object by
//! object.
//!
//! A stopped apiserver takes no writes, so the writes are queued until it is back; the agent
//! reaches the hub through a proxy that stays cut until they are made, so it has to catch up
//! with them rather than watch them happen.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use crate::agent_support;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use agent_support::*;
use flotilla_api::work::v1::Manifest;
use flotilla_testing::ControlPlane;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams},
    runtime::watcher,
};
use serde_json::{Value, json};

fn config_map(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name, "namespace": namespace },
        "data": { "name": name },
    })
}

async fn uids(cms: &Api<ConfigMap>) -> BTreeMap<String, String> {
    cms.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|c| c.name_any() != "kube-root-ca.crt" && c.metadata.deletion_timestamp.is_none())
        .map(|c| (c.name_any(), c.uid().unwrap()))
        .collect()
}

#[tokio::test]
async fn nothing_is_deleted_while_the_hub_apiserver_is_down_and_the_agent_catches_up_after() {
    let (_, managed) = planes().await;
    // A hub of this test's own: it is the one that stops.
    let mut hub = ControlPlane::start("work-outage-hub").await.unwrap();
    let proxy = HubProxy::start(hub.server().trim_start_matches("https://").to_owned()).await;
    let cluster = "cluster-outage";
    let agent = start_agent_on(&hub, managed, cluster, options(cluster), Some(&proxy.url)).await;
    let ns = "work-outage";
    namespace(&agent.managed, ns).await;
    agent
        .create(&work("stay", vec![config_map(ns, "a"), config_map(ns, "b")]))
        .await;
    let mut change = work("change", vec![config_map(ns, "c"), config_map(ns, "d")]);
    agent.create(&change).await;
    agent.create(&work("gone", vec![config_map(ns, "e")])).await;
    for name in ["stay", "change", "gone"] {
        agent.wait_condition(name, "Applied", "True").await;
    }
    let cms: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), ns);
    let before = uids(&cms).await;
    assert_eq!(
        before.keys().cloned().collect::<Vec<_>>(),
        vec!["a", "b", "c", "d", "e"]
    );

    // Record every deletion on the managed cluster from now on.
    let deletions: Arc<Mutex<Vec<String>>> = Arc::default();
    let recorded = deletions.clone();
    let watched = cms.clone();
    let watch = tokio::spawn(async move {
        let mut stream = watcher(watched, watcher::Config::default()).boxed();
        while let Some(Ok(event)) = stream.next().await {
            match event {
                watcher::Event::Delete(cm) => recorded.lock().unwrap().push(cm.name_any()),
                watcher::Event::Apply(cm) if cm.metadata.deletion_timestamp.is_some() => {
                    recorded.lock().unwrap().push(cm.name_any());
                }
                _ => {}
            }
        }
    });

    hub.stop_apiserver().unwrap();
    // Several resyncs and status syncs of the agent pass while the hub's API is down.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let during = deletions.lock().unwrap().clone();
    let deleted_during: Vec<String> = {
        let now = uids(&cms).await;
        before.keys().filter(|k| !now.contains_key(*k)).cloned().collect()
    };
    assert!(
        during.is_empty() && deleted_during.is_empty(),
        "deleted during the outage: {during:?} {deleted_during:?}"
    );

    // The API returns; the queued writes land while the agent still cannot reach it: a
    // manifest dropped and one added, a work deleted, a work created.
    proxy.cut();
    hub.start_apiserver().await.unwrap();
    change.spec.workload.manifests = vec![Manifest(config_map(ns, "c")), Manifest(config_map(ns, "f"))];
    agent.set_spec("change", &change.spec).await;
    agent
        .works()
        .delete("gone", &DeleteParams::default())
        .await
        .unwrap();
    agent.create(&work("new", vec![config_map(ns, "g")])).await;
    let still = uids(&cms).await;
    assert_eq!(still, before, "the agent acted before it could see the hub again");

    proxy.restore();
    agent.wait_condition("change", "Applied", "True").await;
    agent.wait_gone("gone").await;
    agent.wait_condition("new", "Applied", "True").await;
    wait_object(&cms, "d", "d deleted", |cm| cm.is_none()).await;
    wait_object(&cms, "e", "e deleted", |cm| cm.is_none()).await;
    watch.abort();

    // Object by object: what a run without the outage gives, the survivors untouched.
    let after = uids(&cms).await;
    assert_eq!(
        after.keys().cloned().collect::<Vec<_>>(),
        vec!["a", "b", "c", "f", "g"]
    );
    for name in ["a", "b", "c"] {
        assert_eq!(after[name], before[name], "{name} was recreated");
    }
    let deleted: Vec<String> = deletions.lock().unwrap().clone();
    let mut deleted_once = deleted.clone();
    deleted_once.dedup();
    assert!(deleted_once.iter().all(|n| n == "d" || n == "e"), "{deleted:?}");
}
