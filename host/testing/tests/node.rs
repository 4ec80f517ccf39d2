//! A real node on a local control plane: the kubelet registers and reports Ready, the
//! scheduler places a Deployment's pod there, containerd runs it with runc from an image pushed
//! to the local registry, a killed container is restarted and its readiness follows, and
//! dropping the node leaves no mount, bridge or process behind.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::{process::Command, time::Duration};

use flotilla_testing::{ControlPlane, Node, image, pause_deployment, registry::Registry, wait};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
use kube::{
    Api,
    api::{ListParams, PostParams},
};

/// The readiness of the first pod labelled `app=<app>`: (ready, restarts).
async fn pod_state(pods: &Api<Pod>, app: &str) -> Option<(bool, i32)> {
    let list = pods
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .ok()?;
    let status = list.items.into_iter().next()?.status?;
    let container = status.container_statuses?.into_iter().next()?;
    Some((container.ready, container.restart_count))
}

#[tokio::test]
async fn a_pod_runs_restarts_and_leaves_nothing_behind() {
    let (cluster, registry) = tokio::join!(ControlPlane::start("node-cluster"), Registry::start());
    let (cluster, registry) = (cluster.unwrap(), registry.unwrap());
    let node = Node::start(&cluster, &registry).await.unwrap();
    let pause = image::push_pause(&registry).await.unwrap();

    let client = cluster.admin_client().await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let workload = pause_deployment("workload", "default", &pause, 1, 0);
    deployments
        .create(&PostParams::default(), &serde_json::from_value(workload).unwrap())
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let until_ready = |restarted: bool| {
        let pods = pods.clone();
        wait::until("the workload's pod ready", Duration::from_secs(90), move || {
            let pods = pods.clone();
            async move {
                let ready = pod_state(&pods, "workload")
                    .await
                    .filter(|(ready, restarts)| *ready && (*restarts > 0) == restarted);
                Ok::<_, String>(ready.map(|_| ()))
            }
        })
    };
    if let Err(e) = until_ready(false).await {
        panic!(
            "{e}\nkubelet:\n{}\ncontainerd:\n{}",
            node.log_tail("kubelet", 10),
            node.log_tail("containerd", 30)
        );
    }

    node.kill_container("pause").unwrap();
    until_ready(true).await.unwrap();

    let dir = node.dir().to_owned();
    let bridge_of_node = format!("{}", node.address());
    drop(node);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(dir.to_str().unwrap()),
        "mounts left below {}:\n{mounts}",
        dir.display()
    );
    let addresses = Command::new("ip").args(["-4", "addr"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&addresses.stdout).contains(&bridge_of_node),
        "the node's bridge ({bridge_of_node}) is still there"
    );
}
