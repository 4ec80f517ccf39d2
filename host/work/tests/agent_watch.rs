//! The work agent's watches of applied objects against real hub and managed control planes:
//! with `feedbackScrapeType: Watch`, a change of the object on the managed cluster reaches the
//! work's status feedback at once, even when the status-sync poll is ten minutes away; with
//! `Poll` (the default), the next status sync brings it, as before. A hand edit of an applied
//! object is reverted at once, even when the resync is ten minutes away.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use crate::agent_support;

use std::time::Duration;

use agent_support::*;
use flotilla_api::work::v1::{
    FeedBackType, FeedbackRule, FeedbackScrapeType, JsonPath, ManifestConfigOption, ManifestWork,
    ResourceIdentifier,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use serde_json::json;

/// Longer than any test waits: only a watch can bring a change in time.
const TEN_MINUTES: Duration = Duration::from_secs(600);

/// A work `name` with one ConfigMap `name` in `ns` whose annotation `note` is reported as
/// feedback `note`, scraped as `scrape`.
fn noted_config_map(name: &str, ns: &str, scrape: Option<FeedbackScrapeType>) -> ManifestWork {
    let mut work = work(
        name,
        vec![json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": name, "namespace": ns },
            "data": { "level": "1" },
        })],
    );
    work.spec.manifest_configs = vec![ManifestConfigOption {
        resource_identifier: ResourceIdentifier {
            group: String::new(),
            resource: "configmaps".into(),
            namespace: ns.into(),
            name: name.into(),
        },
        feedback_rules: vec![FeedbackRule {
            type_: FeedBackType::JSONPaths,
            json_paths: vec![JsonPath {
                name: "note".into(),
                version: String::new(),
                path: ".metadata.annotations.note".into(),
            }],
        }],
        feedback_scrape_type: scrape,
        ..Default::default()
    }];
    work
}

/// The feedback value `note` of the work's first manifest.
fn note(work: &ManifestWork) -> Option<String> {
    work.status
        .as_ref()?
        .resource_status
        .manifests
        .first()?
        .status_feedbacks
        .values
        .iter()
        .find(|v| v.name == "note")?
        .value
        .string
        .clone()
}

/// Sets the annotation `note` of ConfigMap `name` by hand on the managed cluster.
async fn annotate(config_maps: &Api<ConfigMap>, name: &str, value: &str) {
    let patch = json!({ "metadata": { "annotations": { "note": value } } });
    config_maps
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("annotate the ConfigMap");
}

#[tokio::test]
async fn watched_feedback_follows_each_change_on_the_managed_cluster_without_waiting_for_the_poll() {
    let options = flotilla_work::agent::AgentOptions {
        status_sync_interval: TEN_MINUTES,
        resync_interval: TEN_MINUTES,
        ..options("cluster-watch")
    };
    let agent = start_agent_with("cluster-watch", options).await;
    let ns = "work-watch";
    namespace(&agent.managed, ns).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), ns);

    agent
        .create(&noted_config_map("watched", ns, Some(FeedbackScrapeType::Watch)))
        .await;
    agent.wait_condition("watched", "Applied", "True").await;
    // Nothing to report yet: the annotation is not there.
    let applied = agent.wait_condition("watched", "Available", "True").await;
    assert_eq!(note(&applied), None);

    for value in ["first", "second"] {
        annotate(&config_maps, "watched", value).await;
        let work = agent
            .wait_work("watched", &format!("feedback note={value}"), |w| {
                note(w).as_deref() == Some(value)
            })
            .await;
        let synced = manifest_condition(&work, 0, "StatusFeedbackSynced").expect("StatusFeedbackSynced");
        assert_eq!(synced.status, "True");
    }

    agent
        .works()
        .delete("watched", &DeleteParams::default())
        .await
        .unwrap();
    agent.wait_gone("watched").await;
}

#[tokio::test]
async fn polled_feedback_still_follows_a_change_on_the_next_status_sync() {
    // The test options poll every second.
    let agent = start_agent("cluster-poll").await;
    let ns = "work-poll";
    namespace(&agent.managed, ns).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), ns);

    agent.create(&noted_config_map("polled", ns, None)).await;
    let applied = agent.wait_condition("polled", "Available", "True").await;
    assert_eq!(note(&applied), None);
    annotate(&config_maps, "polled", "seen").await;
    agent
        .wait_work("polled", "feedback note=seen", |w| {
            note(w).as_deref() == Some("seen")
        })
        .await;
}

#[tokio::test]
async fn a_hand_edit_is_reverted_without_waiting_for_the_resync() {
    let options = flotilla_work::agent::AgentOptions {
        status_sync_interval: TEN_MINUTES,
        resync_interval: TEN_MINUTES,
        ..options("cluster-drift")
    };
    let agent = start_agent_with("cluster-drift", options).await;
    let ns = "work-drift";
    namespace(&agent.managed, ns).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), ns);

    agent
        .create(&work(
            "kept",
            vec![json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": "kept", "namespace": ns },
                "data": { "level": "1" },
            })],
        ))
        .await;
    agent.wait_condition("kept", "Applied", "True").await;
    for attempt in ["2", "3"] {
        let patch = json!({ "data": { "level": attempt } });
        config_maps
            .patch("kept", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("edit the ConfigMap by hand");
        wait_object(
            &config_maps,
            "kept",
            &format!("the hand edit level={attempt} reverted"),
            |cm| {
                cm.and_then(|cm| cm.data.as_ref())
                    .is_some_and(|d| d["level"] == "1")
            },
        )
        .await;
    }
}
