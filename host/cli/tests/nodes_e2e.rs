//! Flotilla as users install it, on a real node: the Flotilla image (built here, pushed to the
//! local registry) runs the klusterlet that `flotilla join` deploys without `--local`, as a pod
//! that reaches its own cluster through the `kubernetes` Service and the hub through the hub's;
//! a ManifestWork's Deployment then runs real pods, and its `AvailableReplicas` feedback
//! follows their readiness when a container is killed.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

mod common;

use std::time::Duration;

use common::{flotilla_at, hub_token, ok, start_hub};
use flotilla_testing::{ControlPlane, Node, image, pause_deployment, registry::Registry, wait};
use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api,
    api::{DynamicObject, PostParams},
    core::GroupVersionKind,
    discovery::ApiResource,
};

/// The `AvailableReplicas` the work agent reported for the work's Deployment.
fn available_replicas(work: &DynamicObject) -> Option<i64> {
    work.data
        .pointer("/status/resourceStatus/manifests/0/statusFeedback/values")?
        .as_array()?
        .iter()
        .find(|v| v["name"] == "AvailableReplicas")?
        .pointer("/fieldValue/integer")?
        .as_i64()
}

async fn until_available(works: &Api<DynamicObject>, replicas: i64) {
    wait::until(
        &format!("AvailableReplicas {replicas} in the work's feedback"),
        Duration::from_secs(120),
        || {
            let works = works.clone();
            async move {
                let work = works.get("workload").await.map_err(|e| e.to_string())?;
                Ok::<_, String>((available_replicas(&work) == Some(replicas)).then_some(()))
            }
        },
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn klusterlet_pod_from_the_flotilla_image_runs_a_work_whose_feedback_follows_pods() {
    let (hub, cluster, registry) = tokio::join!(
        ControlPlane::start("nodes-hub"),
        ControlPlane::start("nodes-cluster1"),
        Registry::start()
    );
    let (hub, cluster, registry) = (hub.unwrap(), cluster.unwrap(), registry.unwrap());
    let mut node = Node::start(&cluster, &registry).await.unwrap();
    node.route(&hub).unwrap();
    let flotilla_image = image::push_flotilla(&registry, env!("CARGO_BIN_EXE_flotilla").as_ref())
        .await
        .unwrap();
    let pause = image::push_pause(&registry).await.unwrap();

    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();
    let admin = hub.admin_kubeconfig();
    let token = hub_token(&ok(flotilla_at(state, admin, &["init"])));
    let _hub = start_hub(
        admin,
        &state.join("hub.log"),
        &["--plugin-cache-dir", state.join("cache").to_str().unwrap()],
    );

    // The hub as pods see it: its `kubernetes` Service, which its certificate names.
    let hub_service = format!("https://{}:443", hub.service_address());
    ok(flotilla_at(
        state,
        cluster.admin_kubeconfig(),
        &[
            "join",
            "--hub-token",
            &token,
            "--hub-apiserver",
            &hub_service,
            "--cluster-name",
            "cluster1",
            "--image",
            &flotilla_image,
        ],
    ));
    let accepted = flotilla_at(
        state,
        admin,
        &["accept", "--wait", "--clusters", "cluster1", "--timeout", "180s"],
    );
    assert!(
        accepted.status.success(),
        "accept failed: {}\nklusterlet pod:\n{}\nkubelet:\n{}",
        String::from_utf8_lossy(&accepted.stderr),
        node.pod_log_tail("open-cluster-management-agent", "klusterlet", 30),
        node.log_tail("kubelet", 20)
    );
    let managed = cluster.admin_client().await.unwrap();
    let klusterlet: Api<Deployment> = Api::namespaced(managed.clone(), "open-cluster-management-agent");
    let ready = klusterlet
        .get("klusterlet")
        .await
        .unwrap()
        .status
        .and_then(|s| s.ready_replicas);
    assert_eq!(ready, Some(1), "the klusterlet runs as a ready pod");

    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "work.open-cluster-management.io",
        "v1",
        "ManifestWork",
    ));
    let works: Api<DynamicObject> =
        Api::namespaced_with(hub.admin_client().await.unwrap(), "cluster1", &resource);
    let work = serde_json::json!({
        "apiVersion": "work.open-cluster-management.io/v1",
        "kind": "ManifestWork",
        "metadata": { "name": "workload", "namespace": "cluster1" },
        "spec": {
            "workload": { "manifests": [pause_deployment("workload", "default", &pause, 2, 25)] },
            "manifestConfigs": [{
                "resourceIdentifier": {
                    "group": "apps", "resource": "deployments", "name": "workload", "namespace": "default"
                },
                "feedbackRules": [{ "type": "WellKnownStatus" }],
            }],
        },
    });
    works
        .create(&PostParams::default(), &serde_json::from_value(work).unwrap())
        .await
        .unwrap();
    until_available(&works, 2).await;

    node.kill_container("pause").unwrap();
    until_available(&works, 1).await;
    until_available(&works, 2).await;
}
