//! Flotilla as users install it, on real nodes. The Flotilla image (built here, pushed to the
//! local registry) runs the hub, installed with `kubectl apply -k deploy/crds` and `-k` of an
//! overlay of deploy/hub that names the image (two replicas electing a leader, the webhook
//! reached through its Service), and the klusterlet that `flotilla join` deploys without
//! `--local`, as a pod that reaches its own cluster through the `kubernetes` Service and the hub
//! through the hub's. A ManifestWork's Deployment then runs real pods, and its
//! `AvailableReplicas` feedback follows their readiness when a container is killed.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

mod common;

use std::{path::Path, time::Duration};

use common::{flotilla_at, hub_token, ok};
use flotilla_testing::{
    ControlPlane, Node, image, kubectl, pause_deployment, registry::Registry, until_ready_replicas, wait,
};
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

/// A kustomize overlay in `dir` of deploy/hub that runs `image` (`<name>@<digest>`), as an
/// operator points the base at their registry.
fn hub_overlay(dir: &Path, image: &str) -> std::path::PathBuf {
    let (name, digest) = image.split_once('@').unwrap();
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/hub");
    let overlay = dir.join("hub-overlay");
    std::fs::create_dir_all(&overlay).unwrap();
    // Kustomize takes relative paths only: up to the root, then down to the base.
    let overlay = overlay.canonicalize().unwrap();
    let base = base.canonicalize().unwrap();
    let up = "../".repeat(overlay.components().count() - 1);
    let relative = format!("{up}{}", base.strip_prefix("/").unwrap().display());
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {relative}\n\
             images:\n  - name: flotilla\n    newName: {name}\n    digest: {digest}\n"
        ),
    )
    .unwrap();
    overlay
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
        ControlPlane::builder("nodes-hub").install_crds(false).start(),
        ControlPlane::start("nodes-cluster1"),
        Registry::start()
    );
    let (hub, cluster, registry) = (hub.unwrap(), cluster.unwrap(), registry.unwrap());
    let (hub_node, cluster_node) =
        tokio::join!(Node::start(&hub, &registry), Node::start(&cluster, &registry));
    let (hub_node, mut node) = (hub_node.unwrap(), cluster_node.unwrap());
    node.route(&hub).unwrap();
    let flotilla_image = image::push_flotilla(&registry, env!("CARGO_BIN_EXE_flotilla").as_ref())
        .await
        .unwrap();
    let pause = image::push_pause(&registry).await.unwrap();
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();

    // The README's install, for real: the CRDs, then the hub's controllers from deploy/hub.
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    kubectl(&hub, &["apply", "-k", deploy.join("crds").to_str().unwrap()]);
    let overlay = hub_overlay(state, &flotilla_image);
    kubectl(&hub, &["apply", "-k", overlay.to_str().unwrap()]);
    let hub_admin = hub.admin_client().await.unwrap();
    let hub_deployments: Api<Deployment> = Api::namespaced(hub_admin.clone(), "open-cluster-management-hub");
    let replicas = until_ready_replicas(&hub_deployments, "flotilla-hub", 2, Duration::from_secs(120)).await;
    if let Err(e) = replicas {
        panic!(
            "{e}\nhub pods:\n{}\nkubelet:\n{}",
            hub_node.pod_log_tail("open-cluster-management-hub", "flotilla-hub", 20),
            hub_node.log_tail("kubelet", 20)
        );
    }
    let admin = hub.admin_kubeconfig();
    let token = hub_token(&ok(flotilla_at(state, admin, &["init"])));

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
    until_ready_replicas(&klusterlet, "klusterlet", 1, Duration::from_secs(60))
        .await
        .unwrap();

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
