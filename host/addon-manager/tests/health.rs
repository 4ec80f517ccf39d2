//! Hub-side add-on health against a real control plane with real plugins: the deploy works ask
//! the work agent for the probe fields' feedback, and the feedback (written here in place of the
//! managed cluster's work agent) becomes the add-on's `Available` — through helloworld-config's
//! `probe-health` (Deployment feedback), and Unknown naming the fault when `probe-health` traps.

#![allow(clippy::expect_used, reason = "tests fail loudly")]

use crate::support;

use flotilla_api::addon::consts::managed_cluster_addon as mca;
use flotilla_api::addon::v1alpha1::{HealthCheckMode, ManagedClusterAddOn};
use flotilla_api::work::v1::FeedBackType;
use flotilla_test_plugins as plugins;
use kube::{Api, Client};
use serde_json::json;
use support::*;

async fn health_mode(client: &Client, cluster: &str, addon: &str) -> Option<HealthCheckMode> {
    Api::<ManagedClusterAddOn>::namespaced(client.clone(), cluster)
        .get(addon)
        .await
        .expect("add-on")
        .status?
        .health_check
        .mode
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_feedback_goes_through_probe_health_to_available_and_back_to_unavailable() {
    let client = client().await;
    register_plugin(&client, "health-cfg", plugins::HELLOWORLD_CONFIG).await;
    await_cma(&client, "health-cfg").await;
    cluster(&client, "health-c1").await;
    enable(&client, "health-cfg", "health-c1", json!([])).await;

    // The deploy work asks for the probe field's feedback, as describe() declares it.
    let work = await_work(
        &client,
        "health-c1",
        "addon-health-cfg-deploy-0",
        "deploy work",
        |_| true,
    )
    .await;
    let probe = work
        .spec
        .manifest_configs
        .iter()
        .find(|c| {
            c.resource_identifier.resource == "deployments"
                && c.resource_identifier.name == "helloworld-agent"
        })
        .expect("a manifest config for the probed Deployment");
    assert_eq!(probe.resource_identifier.namespace, AGENT_NAMESPACE);
    let types: Vec<FeedBackType> = probe.feedback_rules.iter().map(|r| r.type_).collect();
    assert_eq!(types, [FeedBackType::WellKnownStatus, FeedBackType::JSONPaths]);
    assert_eq!(probe.feedback_rules[1].json_paths[0].name, "isAvailable");

    // Applied, no feedback yet: Unknown NoProbeResult.
    report_feedback(&client, &work, "helloworld-agent", json!([])).await;
    await_condition(
        &client,
        "health-c1",
        "health-cfg",
        mca::CONDITION_AVAILABLE,
        |c| c.status == "Unknown" && c.reason == mca::REASON_NO_PROBE_RESULT,
    )
    .await;
    assert_eq!(
        health_mode(&client, "health-c1", "health-cfg").await,
        Some(HealthCheckMode::Customized)
    );

    // A ready replica: the plugin says available.
    report_feedback(
        &client,
        &work,
        "helloworld-agent",
        json!([
            int("Replicas", 1),
            int("ReadyReplicas", 1),
            text("isAvailable", "True")
        ]),
    )
    .await;
    let available = await_condition(
        &client,
        "health-c1",
        "health-cfg",
        mca::CONDITION_AVAILABLE,
        |c| c.status == "True",
    )
    .await;
    assert_eq!(available.reason, mca::REASON_PROBE_AVAILABLE);

    // No ready replica, Deployment not Available: the plugin says unavailable.
    report_feedback(
        &client,
        &work,
        "helloworld-agent",
        json!([
            int("Replicas", 1),
            int("ReadyReplicas", 0),
            text("isAvailable", "False")
        ]),
    )
    .await;
    let unavailable = await_condition(
        &client,
        "health-c1",
        "health-cfg",
        mca::CONDITION_AVAILABLE,
        |c| c.status == "False",
    )
    .await;
    assert_eq!(unavailable.reason, mca::REASON_PROBE_UNAVAILABLE);
    assert!(
        unavailable
            .message
            .starts_with("Probe addon unavailable with err "),
        "{}",
        unavailable.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapping_probe_health_leaves_the_addon_unknown_naming_the_fault_never_available() {
    let client = client().await;
    register_plugin(&client, "probe-trap", plugins::HOSTILE_PROBE_TRAP).await;
    await_cma(&client, "probe-trap").await;
    cluster(&client, "health-c2").await;
    enable(&client, "probe-trap", "health-c2", json!([])).await;
    let work = await_work(
        &client,
        "health-c2",
        "addon-probe-trap-deploy-0",
        "deploy work",
        |_| true,
    )
    .await;
    report_feedback(
        &client,
        &work,
        "agent",
        json!([int("Replicas", 1), int("ReadyReplicas", 1)]),
    )
    .await;
    let unknown = await_condition(
        &client,
        "health-c2",
        "probe-trap",
        mca::CONDITION_AVAILABLE,
        |c| c.status == "Unknown" && c.message.contains("trap"),
    )
    .await;
    assert_eq!(unknown.reason, mca::REASON_NO_PROBE_RESULT);
    assert!(unknown.message.contains("probe-health"), "{}", unknown.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_addon_gets_lease_mode_and_its_available_is_left_to_the_klusterlet() {
    let client = client().await;
    register_plugin(&client, "health-lease", plugins::HELLOWORLD).await;
    await_cma(&client, "health-lease").await;
    cluster(&client, "health-c3").await;
    enable(&client, "health-lease", "health-c3", json!([])).await;
    let work = await_work(
        &client,
        "health-c3",
        "addon-health-lease-deploy-0",
        "deploy work",
        |_| true,
    )
    .await;
    assert!(
        work.spec.manifest_configs.is_empty(),
        "no feedback asked for a lease add-on"
    );
    agent_applied(&client, &work).await;
    await_condition(
        &client,
        "health-c3",
        "health-lease",
        mca::CONDITION_MANIFEST_APPLIED,
        |c| c.status == "True",
    )
    .await;
    flotilla_testing::wait::until("lease mode written", TIMEOUT, || async {
        Ok::<_, kube::Error>(
            (health_mode(&client, "health-c3", "health-lease").await == Some(HealthCheckMode::Lease))
                .then_some(()),
        )
    })
    .await
    .expect("mode");
    let addon = Api::<ManagedClusterAddOn>::namespaced(client.clone(), "health-c3")
        .get("health-lease")
        .await
        .expect("add-on");
    let conditions = addon.status.map(|s| s.conditions).unwrap_or_default();
    assert!(
        !conditions.iter().any(|c| c.type_ == mca::CONDITION_AVAILABLE),
        "the hub does not judge a lease add-on: {conditions:?}"
    );
}
