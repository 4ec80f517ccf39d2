//! The add-on manager's Events against a real control plane (issue 30): the deploy reports an
//! add-on's manifests applied or failing on the ManagedClusterAddOn, the rollout a placement's
//! rollout completed (or impossible) on the ClusterManagementAddOn, and the health check a
//! change of availability on the add-on; each once, however often the controllers reconcile.
//!
//! The managed clusters' work agents are stood in for by [`support::spawn_agent`] and
//! [`support::report_feedback`]; PlacementDecisions are written directly.

#![allow(clippy::expect_used, reason = "tests fail loudly")]

use crate::support;

use std::time::Duration;

use flotilla_api::addon::consts::managed_cluster_addon as mca;
use flotilla_api::addon::v1alpha1::ClusterManagementAddOn;
use flotilla_api::work::v1::ManifestWork;
use flotilla_test_plugins as plugins;
use flotilla_testing::events;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use support::*;

const MCA: &str = "ManagedClusterAddOn";
const CMA: &str = "ClusterManagementAddOn";

/// Waits for the Event about the `kind` object `name` with `reason`.
async fn event(client: &Client, kind: &str, name: &str, reason: &str) -> Event {
    events::wait_for(client, kind, name, reason, TIMEOUT)
        .await
        .expect("Event")
}

/// The one Event about the `kind` object `name` (in `namespace`) with `reason`: a second one,
/// or a series, is a repeat.
async fn only_event(client: &Client, kind: &str, namespace: Option<&str>, name: &str, reason: &str) -> Event {
    let mut found: Vec<Event> = events::about(client, kind, name, reason)
        .await
        .expect("list Events")
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.namespace.as_deref()) == namespace)
        .collect();
    assert_eq!(found.len(), 1, "one {reason} Event: {found:#?}");
    let event = found.remove(0);
    assert!(event.series.is_none(), "{reason} was sent again: {event:#?}");
    event
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_and_rollout_report_applied_failed_and_completed_once() {
    let client = client().await;
    let addon = "hello-ev";
    let failing = Failing::default();
    failing.lock().expect("failing set").insert("evd-bad".to_owned());
    spawn_agent(client.clone(), "evd-", failing.clone());
    register_plugin(&client, addon, plugins::HELLOWORLD).await;
    await_cma(&client, addon).await;
    cluster(&client, "evd-ok").await;
    cluster(&client, "evd-bad").await;
    placement_deciding(&client, "events-rollout", "pl", &["evd-ok", "evd-bad"]).await;
    Api::<ClusterManagementAddOn>::all(client.clone())
        .patch(
            addon,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"installStrategy": {"type": "Placements", "placements": [
                    {"namespace": "events-rollout", "name": "pl"},
                    {"namespace": "events-rollout", "name": "nowhere"},
                ]}}}),
            ),
        )
        .await
        .expect("install strategy");

    // The deploy: applied on one cluster, failing on the other.
    let applied = event(&client, MCA, addon, mca::REASON_ADDON_MANIFEST_APPLIED).await;
    assert_eq!(applied.type_.as_deref(), Some("Normal"));
    assert_eq!(applied.action.as_deref(), Some("Deploy"));
    assert_eq!(applied.reporting_controller.as_deref(), Some("addon-manager"));
    assert_eq!(applied.metadata.namespace.as_deref(), Some("evd-ok"));
    let failed = event(&client, MCA, addon, mca::REASON_ADDON_MANIFEST_APPLIED_FAILED).await;
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
    assert_eq!(failed.metadata.namespace.as_deref(), Some("evd-bad"));
    assert_eq!(
        failed.note.as_deref(),
        Some("failed to apply the manifests of addon")
    );

    // The rollout: a missing placement warned about on the CMA (cluster-scoped: `default`).
    let missing = event(&client, CMA, addon, "PlacementNotFound").await;
    assert_eq!(missing.type_.as_deref(), Some("Warning"));
    assert_eq!(missing.action.as_deref(), Some("RollOut"));
    assert_eq!(missing.metadata.namespace.as_deref(), Some("default"));
    assert!(
        missing
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with("placement events-rollout/nowhere: ")),
        "{missing:#?}"
    );

    // The failing cluster recovers (its work touched, so the stand-in agent reports again):
    // the placement's rollout completes.
    failing.lock().expect("failing set").clear();
    Api::<ManifestWork>::namespaced(client.clone(), "evd-bad")
        .patch(
            &format!("addon-{addon}-deploy-0"),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"test/recovered": "true"}}})),
        )
        .await
        .expect("touch the failing work");
    let completed = event(&client, CMA, addon, "Completed").await;
    assert_eq!(completed.type_.as_deref(), Some("Normal"));
    assert!(
        completed
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with("placement events-rollout/pl: selected clusters 2.")),
        "{completed:#?}"
    );

    // Reconciled again and again (each add-on's status and works changed meanwhile, and the
    // CMA is touched here): nothing is sent twice.
    for n in 0..3 {
        Api::<ClusterManagementAddOn>::all(client.clone())
            .patch(
                addon,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"test/poke": n.to_string()}}})),
            )
            .await
            .expect("touch the CMA");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    only_event(
        &client,
        MCA,
        Some("evd-ok"),
        addon,
        mca::REASON_ADDON_MANIFEST_APPLIED,
    )
    .await;
    only_event(
        &client,
        MCA,
        Some("evd-bad"),
        addon,
        mca::REASON_ADDON_MANIFEST_APPLIED_FAILED,
    )
    .await;
    only_event(&client, CMA, None, addon, "PlacementNotFound").await;
    only_event(&client, CMA, None, addon, "Completed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_reports_available_then_unavailable_once_each() {
    let client = client().await;
    let addon = "health-ev";
    register_plugin(&client, addon, plugins::HELLOWORLD_CONFIG).await;
    await_cma(&client, addon).await;
    cluster(&client, "evh-c1").await;
    enable(&client, addon, "evh-c1", json!([])).await;
    let work = await_work(
        &client,
        "evh-c1",
        "addon-health-ev-deploy-0",
        "deploy work",
        |_| true,
    )
    .await;

    let ready = json!([
        int("Replicas", 1),
        int("ReadyReplicas", 1),
        text("isAvailable", "True")
    ]);
    report_feedback(&client, &work, "helloworld-agent", ready.clone()).await;
    let available = event(&client, MCA, addon, mca::REASON_PROBE_AVAILABLE).await;
    assert_eq!(available.type_.as_deref(), Some("Normal"));
    assert_eq!(available.action.as_deref(), Some("CheckHealth"));
    assert_eq!(available.metadata.namespace.as_deref(), Some("evh-c1"));

    let down = json!([
        int("Replicas", 1),
        int("ReadyReplicas", 0),
        text("isAvailable", "False")
    ]);
    report_feedback(&client, &work, "helloworld-agent", down.clone()).await;
    let unavailable = event(&client, MCA, addon, mca::REASON_PROBE_UNAVAILABLE).await;
    assert_eq!(unavailable.type_.as_deref(), Some("Warning"));
    assert!(
        unavailable
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with("Probe addon unavailable with err ")),
        "{unavailable:#?}"
    );

    // The same feedback reported again: checked again, not reported again.
    for _ in 0..3 {
        report_feedback(&client, &work, "helloworld-agent", down.clone()).await;
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    only_event(&client, MCA, Some("evh-c1"), addon, mca::REASON_PROBE_AVAILABLE).await;
    only_event(&client, MCA, Some("evh-c1"), addon, mca::REASON_PROBE_UNAVAILABLE).await;
}

/// Stands in for the work agent: `work` `Applied` = `status` at its generation.
async fn report_applied(client: &Client, work: &ManifestWork, status: &str) {
    let generation = work.metadata.generation.unwrap_or_default();
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    let condition = json!({"type": "Applied", "status": status, "reason": "Flapping", "message": "",
                           "observedGeneration": generation, "lastTransitionTime": now});
    Api::<ManifestWork>::namespaced(
        client.clone(),
        &work.metadata.namespace.clone().unwrap_or_default(),
    )
    .patch_status(
        work.metadata.name.as_deref().unwrap_or_default(),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [condition]}})),
    )
    .await
    .expect("report work status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flapping_addon_is_reported_once_per_state_within_the_window() {
    let client = client().await;
    let addon = "flap-ev";
    register_plugin(&client, addon, plugins::HELLOWORLD).await;
    await_cma(&client, addon).await;
    cluster(&client, "evf-c1").await;
    enable(&client, addon, "evf-c1", json!([])).await;
    let work = await_work(&client, "evf-c1", "addon-flap-ev-deploy-0", "deploy work", |_| {
        true
    })
    .await;

    // Applied, failed, applied, failed...: each state is told once in the repeat window.
    for _ in 0..3 {
        for (status, reason) in [
            ("True", mca::REASON_ADDON_MANIFEST_APPLIED),
            ("False", mca::REASON_ADDON_MANIFEST_APPLIED_FAILED),
        ] {
            report_applied(&client, &work, status).await;
            await_condition(&client, "evf-c1", addon, mca::CONDITION_MANIFEST_APPLIED, |c| {
                c.reason == reason
            })
            .await;
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    only_event(
        &client,
        MCA,
        Some("evf-c1"),
        addon,
        mca::REASON_ADDON_MANIFEST_APPLIED,
    )
    .await;
    only_event(
        &client,
        MCA,
        Some("evf-c1"),
        addon,
        mca::REASON_ADDON_MANIFEST_APPLIED_FAILED,
    )
    .await;
}
