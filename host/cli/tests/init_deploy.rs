//! `flotilla init --dry-run` prints, for GitOps, what `init` would create on the hub without
//! contacting it, and a real apiserver accepts the printed stream as it is; `init --image`
//! installs deploy/hub's Deployment with that image (and plain `init` does not); every manifest
//! under deploy/ is accepted by `kubectl apply --dry-run=server`.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use common::{flotilla, hub_token, ok};
use flotilla_testing::ControlPlane;
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Namespace, Service},
    rbac::v1::ClusterRole,
};
use kube::Api;

const HUB_NAMESPACE: &str = "open-cluster-management-hub";

/// `kubectl ARGS` on `cp` with `input` on standard input.
fn kubectl(cp: &ControlPlane, args: &[&str], input: &str) -> Output {
    let mut child = cp
        .kubectl()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn succeeded(what: &str, output: &Output) {
    assert!(
        output.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// (kind, namespace, name) of each object of a JSON list.
fn identities(list: &serde_json::Value) -> Vec<(String, String, String)> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
            (
                text(&o["kind"]),
                text(&o["metadata"]["namespace"]),
                text(&o["metadata"]["name"]),
            )
        })
        .collect()
}

#[tokio::test]
async fn init_dry_run_prints_what_a_hub_accepts_and_init_image_installs_the_hub_deployment() {
    let hub = ControlPlane::start("init-deploy").await.unwrap();
    let client = hub.admin_client().await.unwrap();
    let state = tempfile::tempdir().unwrap();
    let ca_file = state.path().join("hub-ca.pem");
    std::fs::write(&ca_file, hub.ca_pem()).unwrap();

    let dry_run = |format: &str| {
        // No kubeconfig at all: the hub is not needed to print.
        let output = Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args(["init", "--dry-run", "-o", format])
            .args(["--hub-apiserver", hub.server()])
            .arg("--hub-ca-file")
            .arg(&ca_file)
            .args(["--image", "registry.example/flotilla:v1"])
            .env_remove("KUBECONFIG")
            .env("HOME", "/nonexistent")
            .output()
            .unwrap();
        ok(output)
    };
    let yaml = dry_run("yaml");
    let list: serde_json::Value = serde_json::from_str(&dry_run("json")).unwrap();
    let objects = identities(&list);
    let has = |kind: &str, namespace: &str, name: &str| {
        objects
            .iter()
            .any(|o| o.0 == kind && o.1 == namespace && o.2 == name)
    };
    for (kind, namespace, name) in [
        (
            "CustomResourceDefinition",
            "",
            "managedclusters.cluster.open-cluster-management.io",
        ),
        ("Namespace", "", HUB_NAMESPACE),
        ("ClusterRole", "", "open-cluster-management:bootstrap"),
        (
            "ServiceAccount",
            "open-cluster-management",
            "agent-registration-bootstrap",
        ),
        ("ConfigMap", "kube-public", "cluster-info"),
        (
            "ValidatingAdmissionPolicy",
            "",
            "flotilla.dev-managedcluster-validation",
        ),
        ("ManagedClusterSet", "", "default"),
        ("ManagedClusterSet", "", "global"),
        ("ServiceAccount", HUB_NAMESPACE, "flotilla-hub"),
        ("ClusterRole", "", "flotilla:hub"),
        ("Deployment", HUB_NAMESPACE, "flotilla-hub"),
        ("Service", HUB_NAMESPACE, "flotilla-hub-metrics"),
    ] {
        assert!(
            has(kind, namespace, name),
            "{kind} {namespace}/{name} missing: {objects:?}"
        );
    }
    assert!(
        objects
            .iter()
            .any(|o| o.0 == "Secret" && o.1 == "kube-system" && o.2.starts_with("bootstrap-token-"))
    );
    assert_eq!(yaml.matches("\n---\n").count() + 1, objects.len());
    assert!(yaml.contains("registry.example/flotilla:v1"));

    // The namespaces the stream creates do not exist yet, so a server-side dry run of the
    // namespaced objects would fail on them alone: create those first, then check the whole
    // stream (CRDs, RBAC, policies, cluster sets, the Deployment) without writing it.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    assert!(namespaces.get_opt(HUB_NAMESPACE).await.unwrap().is_none());
    for namespace in [HUB_NAMESPACE, "open-cluster-management"] {
        succeeded(
            "create namespace",
            &kubectl(&hub, &["create", "namespace", namespace], ""),
        );
    }
    succeeded(
        "kubectl apply --dry-run=server of init's output",
        &kubectl(&hub, &["apply", "--dry-run=server", "-f", "-"], &yaml),
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), HUB_NAMESPACE);
    assert!(deployments.get_opt("flotilla-hub").await.unwrap().is_none());
    let cluster_info: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-public");
    assert!(cluster_info.get_opt("cluster-info").await.unwrap().is_none());

    // Plain init: no Deployment (`flotilla hub` runs elsewhere).
    let token = hub_token(&ok(flotilla(hub.admin_kubeconfig(), &["init"])));
    assert!(cluster_info.get_opt("cluster-info").await.unwrap().is_some());
    assert!(deployments.get_opt("flotilla-hub").await.unwrap().is_none());
    let roles: Api<ClusterRole> = Api::all(client.clone());
    assert!(roles.get_opt("flotilla:hub").await.unwrap().is_none());

    // init --image: deploy/hub with that image; the same token as before.
    let again = ok(flotilla(
        hub.admin_kubeconfig(),
        &["init", "--image", "registry.example/flotilla:v2"],
    ));
    assert_eq!(
        hub_token(&again),
        token,
        "a second init keeps the bootstrap token"
    );
    let deployment = deployments.get("flotilla-hub").await.unwrap();
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    assert_eq!(
        pod.containers[0].image.as_deref(),
        Some("registry.example/flotilla:v2")
    );
    assert_eq!(pod.service_account_name.as_deref(), Some("flotilla-hub"));
    assert!(roles.get_opt("flotilla:hub").await.unwrap().is_some());
    let services: Api<Service> = Api::namespaced(client.clone(), HUB_NAMESPACE);
    assert!(services.get_opt("flotilla-hub-metrics").await.unwrap().is_some());

    // Every manifest under deploy/ as an operator applies it.
    let deploy = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");
    succeeded(
        "create the agent namespace",
        &kubectl(
            &hub,
            &["create", "namespace", "open-cluster-management-agent"],
            "",
        ),
    );
    for args in [
        ["apply", "--dry-run=server", "-k", &format!("{deploy}/crds")],
        ["apply", "--dry-run=server", "-k", &format!("{deploy}/hub")],
        ["apply", "--dry-run=server", "-k", &format!("{deploy}/klusterlet")],
    ] {
        succeeded(&args.join(" "), &kubectl(&hub, &args, ""));
    }
}
