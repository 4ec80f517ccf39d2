//! `flotilla join --dry-run` prints, for GitOps, exactly what `join` would create on the managed
//! cluster (namespaces, the bootstrap kubeconfig Secret, deploy/klusterlet adjusted to the
//! cluster), without contacting the managed cluster; the printed YAML is accepted as it is by a
//! real apiserver, and the JSON form lists the same objects.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::io::Write as _;
use std::process::{Command, Stdio};

use common::{flotilla, hub_token, ok};
use flotilla_testing::ControlPlane;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;

#[tokio::test]
async fn join_dry_run_prints_manifests_a_managed_cluster_accepts_and_writes_nothing() {
    let (hub, managed) = tokio::join!(
        ControlPlane::start("dryrun-hub"),
        ControlPlane::start("dryrun-managed")
    );
    let (hub, managed) = (hub.unwrap(), managed.unwrap());
    let token = hub_token(&ok(flotilla(hub.admin_kubeconfig(), &["init"])));
    let join = |format: &str| {
        // No kubeconfig at all: the managed cluster is not needed to print.
        let output = Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args(["join", "--dry-run", "-o", format, "--cluster-name", "gitops-c1"])
            .args(["--hub-token", &token, "--hub-apiserver", hub.server()])
            .args(["--image", "registry.example/flotilla:v1"])
            .env_remove("KUBECONFIG")
            .env("HOME", "/nonexistent")
            .output()
            .unwrap();
        ok(output)
    };
    let yaml = join("yaml");
    let list: serde_json::Value = serde_json::from_str(&join("json")).unwrap();
    let kinds: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "Namespace",
            "Secret",
            "ServiceAccount",
            "ClusterRoleBinding",
            "Deployment"
        ]
    );
    assert_eq!(yaml.matches("\n---\n").count() + 1, kinds.len(), "{yaml}");
    assert!(yaml.contains("registry.example/flotilla:v1"), "{yaml}");
    assert!(yaml.contains("gitops-c1"), "{yaml}");

    // Nothing was written; applying the printed stream gives what join would have made.
    let client = managed.admin_client().await.unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    assert!(
        namespaces
            .get_opt("open-cluster-management-agent")
            .await
            .unwrap()
            .is_none()
    );
    let mut apply = managed
        .kubectl()
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    apply.stdin.take().unwrap().write_all(yaml.as_bytes()).unwrap();
    let applied = apply.wait_with_output().unwrap();
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let secret = Api::<Secret>::namespaced(client, "open-cluster-management-agent")
        .get("bootstrap-hub-kubeconfig")
        .await
        .unwrap();
    let kubeconfig = String::from_utf8(secret.data.unwrap()["kubeconfig"].0.clone()).unwrap();
    assert!(kubeconfig.contains(hub.server()), "{kubeconfig}");
    assert!(
        kubeconfig.contains(&token),
        "the bootstrap token is in the kubeconfig"
    );
}
