//! The helloworld plugin through the real host: every hook, built as a wasm32-wasip2 component,
//! compiled by wasmtime and called in the sandbox.

use crate::common;

use common::{addon, agent_csr, cluster, load};
use flotilla_test_plugins::HELLOWORLD;
use flotilla_wasm::Limits;
use flotilla_wasm::types::{CsrDecision, HealthMode, HealthStatus, KubeClientRegistration, Registration};

const NS: &str = "open-cluster-management-agent-addon";

#[tokio::test]
async fn describe_reports_a_kube_client_registration_and_lease_health() {
    let plugin = load("helloworld", HELLOWORLD, Limits::default()).await.unwrap();
    let options = plugin.options();
    assert_eq!(
        options.registrations,
        vec![Registration::KubeClient(KubeClientRegistration { subject: None })]
    );
    assert_eq!(options.health, HealthMode::Lease);
    assert_eq!(plugin.wit_version().to_string(), "0.1.0");
}

#[tokio::test]
async fn manifests_deploy_the_agent_into_the_install_namespace_for_the_cluster() {
    let plugin = load("helloworld", HELLOWORLD, Limits::default()).await.unwrap();
    let objects = plugin
        .manifests(&cluster("cluster1"), &addon("helloworld"), &[])
        .await
        .unwrap();
    let objects = crate::common::json_objects(objects);

    let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment"
        ]
    );
    for o in &objects {
        assert!(
            o["apiVersion"].is_string() && o["metadata"]["name"].is_string(),
            "{o}"
        );
        if let Some(ns) = o["metadata"]["namespace"].as_str() {
            assert_eq!(ns, NS, "{o}");
        }
    }
    let deployment = &objects[3];
    assert_eq!(deployment["metadata"]["name"], "helloworld-agent");
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap();
    assert!(args.iter().any(|a| a == "--cluster-name=cluster1"), "{args:?}");
    assert_eq!(objects[2]["subjects"][0]["namespace"], NS);
}

#[tokio::test]
async fn hub_permissions_are_a_role_and_binding_in_the_cluster_namespace() {
    let plugin = load("helloworld", HELLOWORLD, Limits::default()).await.unwrap();
    let objects = plugin
        .hub_permissions(&cluster("cluster1"), &addon("helloworld"))
        .await
        .unwrap();
    let objects = crate::common::json_permissions(objects);
    let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(kinds, ["Role", "RoleBinding"]);
    assert!(objects.iter().all(|o| o["metadata"]["namespace"] == "cluster1"));
}

#[tokio::test]
async fn default_csr_rules_approve_the_agent_and_deny_a_wrong_request() {
    let plugin = load("helloworld", HELLOWORLD, Limits::default()).await.unwrap();
    let (c1, hello) = (cluster("cluster1"), addon("helloworld"));

    assert_eq!(
        plugin
            .approve_csr(&c1, &hello, &agent_csr("cluster1", "helloworld"))
            .await,
        CsrDecision::Approve
    );

    // Another cluster's identity, presented for cluster1.
    let foreign = agent_csr("cluster2", "helloworld");
    let CsrDecision::Deny(reason) = plugin.approve_csr(&c1, &hello, &foreign).await else {
        panic!("a CSR naming cluster2 was approved for cluster1");
    };
    assert!(reason.contains("common name"), "{reason}");

    // Right subject, but not filed by cluster1's registration agent.
    let mut stranger = agent_csr("cluster1", "helloworld");
    stranger.username = "system:serviceaccount:default:someone".to_owned();
    assert!(matches!(
        plugin.approve_csr(&c1, &hello, &stranger).await,
        CsrDecision::Deny(_)
    ));
}

#[tokio::test]
async fn probe_health_defers_to_the_lease() {
    let plugin = load("helloworld", HELLOWORLD, Limits::default()).await.unwrap();
    let health = plugin
        .probe_health(&cluster("cluster1"), &addon("helloworld"), &[])
        .await;
    assert_eq!(health.status, HealthStatus::Unknown);
    assert!(health.message.contains("lease"), "{}", health.message);
}

#[tokio::test]
async fn calls_are_counted_in_the_metrics_text() {
    let plugin = load("helloworld", HELLOWORLD, Limits::default()).await.unwrap();
    plugin
        .manifests(&cluster("cluster1"), &addon("helloworld"), &[])
        .await
        .unwrap();
    let text = common::runtime().render_metrics();
    assert!(
        text.contains("flotilla_plugin_call_duration_seconds_count{addon=\"helloworld\",hook=\"manifests\"}"),
        "{text}"
    );
    assert!(
        text.contains("flotilla_plugin_instantiation_duration_seconds"),
        "{text}"
    );
}
