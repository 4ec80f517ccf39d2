//! Every manifest under `deploy/` is accepted by a real kube-apiserver: `deploy/crds` is applied
//! for real with `kubectl apply -k`, then each other kustomize base is built with kubectl's
//! kustomize and applied with `kubectl apply --dry-run=server`, so schema, admission and RBAC
//! validation run on the server while nothing is changed — what an operator would see on a
//! first `kubectl apply -k`.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::path::{Path, PathBuf};

use flotilla_testing::{ControlPlane, kubectl};

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

#[tokio::test]
async fn every_deploy_manifest_passes_a_server_side_dry_run() {
    // No CRDs preinstalled: deploy/crds brings its own.
    let cp = ControlPlane::builder("deploy")
        .install_crds(false)
        .start()
        .await
        .unwrap();
    let deploy = deploy_dir();
    let bases: Vec<PathBuf> = std::fs::read_dir(&deploy)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("kustomization.yaml").exists())
        .collect();
    assert!(bases.len() >= 3, "crds, hub and klusterlet bases: {bases:?}");

    // The CRDs first, for real and as the README says (`kubectl apply -k deploy/crds`): the
    // other bases hold no custom resources today, but a dry run cannot see types that a dry
    // run "created".
    kubectl(&cp, &["apply", "-k", deploy.join("crds").to_str().unwrap()]);
    let established = kubectl(&cp, &["get", "crd", "-o", "name"]);
    assert_eq!(
        established.lines().count(),
        flotilla_api::crds::crds().len(),
        "every CRD applied: {established}"
    );

    for base in bases.iter().filter(|base| !base.ends_with("crds")) {
        let built = kubectl(&cp, &["kustomize", base.to_str().unwrap()]);
        let documents = built.matches("\nkind: ").count() + usize::from(built.starts_with("kind: "));
        assert!(documents > 0, "{} builds to nothing", base.display());
        // A dry run does not create namespaces for the objects inside them; create those alone.
        for line in built.lines() {
            if let Some(ns) = line.strip_prefix("  namespace: ") {
                let _ = cp.kubectl().args(["create", "namespace", ns.trim()]).output();
            }
        }
        let applied = kubectl(&cp, &["apply", "--dry-run=server", "-k", base.to_str().unwrap()]);
        let accepted = applied
            .lines()
            .filter(|l| l.ends_with("(server dry run)"))
            .count();
        assert_eq!(
            accepted,
            documents,
            "every object of {} accepted:\n{applied}",
            base.display()
        );
    }
}
