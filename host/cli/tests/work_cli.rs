//! `flotilla create work`, `get works` and `delete work` against a real hub control plane:
//! one work per named cluster from a directory of manifests, `--overwrite` to replace, a
//! placement's decisions choosing the clusters, `-o json` for scripts, and deletion.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::process::Command;

use flotilla_testing::ControlPlane;

fn flotilla(kubeconfig: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(args)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .output()
        .expect("run flotilla")
}

fn ok(output: &std::process::Output) -> String {
    assert!(
        output.status.success(),
        "flotilla failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn kubectl(hub: &ControlPlane, args: &[&str]) -> String {
    let output = hub.kubectl().args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn works_are_created_listed_overwritten_and_deleted_in_clusteradm_s_words() {
    let hub = ControlPlane::start("work-cli").await.unwrap();
    let config = hub.admin_kubeconfig().to_owned();
    for ns in ["c1", "c2", "c3", "apps"] {
        kubectl(&hub, &["create", "namespace", ns]);
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one, namespace: default}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: two, namespace: default}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("b.json"),
        r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"web"}}"#,
    )
    .unwrap();
    let dir_arg = dir.path().to_str().unwrap();

    ok(&flotilla(
        &config,
        &["create", "work", "web", "-f", dir_arg, "--clusters", "c1,c2"],
    ));
    let listed: serde_json::Value = serde_json::from_str(&ok(&flotilla(
        &config,
        &["get", "works", "--cluster", "c1", "-o", "json"],
    )))
    .unwrap();
    let manifests = &listed["items"][0]["spec"]["workload"]["manifests"];
    assert_eq!(manifests.as_array().unwrap().len(), 3);
    assert_eq!(manifests[2]["kind"], "Namespace");
    let table = ok(&flotilla(&config, &["get", "works"]));
    assert!(
        table.contains("CLUSTER") && table.contains("APPLIED") && table.contains("PROGRESSING"),
        "{table}"
    );
    assert_eq!(table.lines().filter(|l| l.contains("web")).count(), 2, "{table}");

    // Existing works are kept unless --overwrite.
    let again = flotilla(
        &config,
        &["create", "work", "web", "-f", dir_arg, "--clusters", "c1"],
    );
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--overwrite"));
    let single = dir.path().join("a.yaml");
    ok(&flotilla(
        &config,
        &[
            "create",
            "work",
            "web",
            "-f",
            single.to_str().unwrap(),
            "--clusters",
            "c1",
            "--overwrite",
        ],
    ));
    let count = kubectl(
        &hub,
        &[
            "get",
            "manifestwork",
            "web",
            "-n",
            "c1",
            "-o",
            "jsonpath={.spec.workload.manifests[*].kind}",
        ],
    );
    assert_eq!(count.split_whitespace().count(), 2, "{count}");

    // A placement's decisions choose the clusters.
    let decision = dir.path().join("decision.yaml");
    std::fs::write(
        &decision,
        "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: PlacementDecision\n\
         metadata: {name: p-decision-1, namespace: apps, labels: {cluster.open-cluster-management.io/placement: p}}\n",
    )
    .unwrap();
    kubectl(&hub, &["create", "-f", decision.to_str().unwrap()]);
    kubectl(
        &hub,
        &[
            "patch",
            "placementdecision",
            "p-decision-1",
            "-n",
            "apps",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"decisions":[{"clusterName":"c3","reason":""}]}}"#,
        ],
    );
    ok(&flotilla(
        &config,
        &["create", "work", "placed", "-f", dir_arg, "--placement", "apps/p"],
    ));
    kubectl(&hub, &["get", "manifestwork", "placed", "-n", "c3"]);

    ok(&flotilla(
        &config,
        &["delete", "work", "web", "--clusters", "c1,c2"],
    ));
    let left = kubectl(&hub, &["get", "manifestworks", "-A", "-o", "name"]);
    assert!(!left.contains("/web"), "{left}");
}
