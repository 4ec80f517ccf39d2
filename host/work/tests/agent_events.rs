//! The work agent's Events against real hub and managed control planes (issue 30): a work
//! applied or failing is reported on the work, in its cluster namespace on the hub, with OCM's
//! condition reasons, once however often the agent reconciles it; an evicted record is
//! reported on the managed cluster.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use crate::agent_support;

use std::time::Duration;

use agent_support::*;
use flotilla_api::work::v1::{AppliedManifestWork, ManifestWork};
use flotilla_core::work::agent::names::{applied_manifest_work_name, hub_hash};
use flotilla_testing::events;
use flotilla_work::agent::AgentOptions;
use k8s_openapi::api::events::v1::Event;
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use serde_json::{Value, json};

fn config_map(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name, "namespace": namespace },
        "data": { "k": "v" },
    })
}

/// The one Event about work `name` with `reason`, after the agent had time to reconcile it
/// several times (status sync 1 s, resync 2–6 s): a second one, or a series, is a repeat.
async fn only_event(agent: &Agent, name: &str, reason: &str) -> Event {
    events::wait_for(&agent.hub, "ManifestWork", name, reason, TIMEOUT)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(8)).await;
    let mut found = events::about(&agent.hub, "ManifestWork", name, reason)
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "one {reason} Event: {found:#?}");
    let event = found.remove(0);
    assert!(event.series.is_none(), "{reason} was sent again: {event:#?}");
    event
}

#[tokio::test]
async fn an_applied_work_is_reported_once_on_the_work() {
    let agent = start_agent("cluster-events-ok").await;
    let ns = "events-ok";
    namespace(&agent.managed, ns).await;
    let work = agent.create(&work("reported", vec![config_map(ns, "cm")])).await;
    agent.wait_condition("reported", "Applied", "True").await;

    let applied = only_event(&agent, "reported", "AppliedManifestWorkComplete").await;
    assert_eq!(applied.type_.as_deref(), Some("Normal"));
    assert_eq!(applied.action.as_deref(), Some("Apply"));
    assert_eq!(applied.reporting_controller.as_deref(), Some("work-agent"));
    assert_eq!(
        applied.metadata.namespace.as_deref(),
        Some(agent.cluster.as_str())
    );
    let regarding = applied.regarding.as_ref().unwrap();
    assert_eq!(regarding.namespace.as_deref(), Some(agent.cluster.as_str()));
    assert_eq!(regarding.uid, work.metadata.uid);
    assert_eq!(
        applied.note.as_deref(),
        Some("all 1 manifests are applied (generation 1)")
    );
    let available = only_event(&agent, "reported", "ResourcesAvailable").await;
    assert_eq!(available.type_.as_deref(), Some("Normal"));
}

#[tokio::test]
async fn a_failing_work_is_warned_about_once_while_the_agent_retries_it() {
    let agent = start_agent("cluster-events-fail").await;
    // The namespace does not exist: the apply fails on every status sync.
    agent
        .create(&work("failing", vec![config_map("events-nosuch", "cm")]))
        .await;
    agent.wait_condition("failing", "Applied", "False").await;

    let failed = only_event(&agent, "failing", "AppliedManifestWorkFailed").await;
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
    let note = failed.note.unwrap_or_default();
    assert!(
        note.starts_with("1 of 1 manifests failed to apply; manifest 0 (ConfigMap cm): ")
            && note.contains("events-nosuch"),
        "{note}"
    );
    assert!(note.ends_with("(generation 1)"), "{note}");
}

#[tokio::test]
async fn an_evicted_record_is_reported_on_the_managed_cluster() {
    let cluster = "cluster-events-evict";
    let options = AgentOptions {
        eviction_grace_period: Duration::from_secs(3),
        ..options(cluster)
    };
    let agent = start_agent_with(cluster, options.clone()).await;
    let ns = "events-evict";
    namespace(&agent.managed, ns).await;
    agent.create(&work("evicted", vec![config_map(ns, "cm")])).await;
    agent.wait_condition("evicted", "Applied", "True").await;

    // The work disappears while no agent runs (its finalizer removed by hand).
    let (hub, _) = planes().await;
    let (hub_admin, managed) = (agent.hub.clone(), agent.managed.clone());
    drop(agent);
    let works: Api<ManifestWork> = Api::namespaced(hub_admin, cluster);
    let patch = json!({ "metadata": { "finalizers": null } });
    works
        .patch("evicted", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    works.delete("evicted", &DeleteParams::default()).await.unwrap();

    let name = applied_manifest_work_name(&hub_hash(hub.server()), "evicted");
    let _agent = start_agent_with(cluster, options).await;
    let records: Api<AppliedManifestWork> = Api::all(managed.clone());
    wait_object(&records, &name, "record evicted", |record| record.is_none()).await;

    let started = events::wait_for(
        &managed,
        "AppliedManifestWork",
        &name,
        "AppliedManifestWorkEvictionStarted",
        TIMEOUT,
    )
    .await
    .unwrap();
    assert_eq!(started.type_.as_deref(), Some("Normal"));
    assert_eq!(
        started.note.as_deref(),
        Some(
            "ManifestWork evicted is gone from the hub; its resources are deleted unless it returns within 3s"
        )
    );
    let evicted = events::wait_for(
        &managed,
        "AppliedManifestWork",
        &name,
        "AppliedManifestWorkEvicted",
        TIMEOUT,
    )
    .await
    .unwrap();
    assert_eq!(evicted.type_.as_deref(), Some("Warning"));
    assert_eq!(evicted.action.as_deref(), Some("Evict"));
}
