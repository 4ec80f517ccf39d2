//! One managed cluster joined to two hubs at once, with the real `flotilla` binary and three
//! control planes (hub A, hub B, the managed cluster): one klusterlet per hub, each in its own
//! agent namespace with its own identity, lease and ManifestWorks. A ConfigMap both hubs apply
//! is owned by both AppliedManifestWorks and lives until the last work goes; one hub's objects
//! are never adopted or removed by the other's agent; unjoining one hub leaves the other's
//! klusterlet and objects alone; and join refuses to take over another hub's agent namespace.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::{path::Path, time::Duration};

use common::{Klusterlets, flotilla_at, hub_token, join_local, ok, start_hub};
use flotilla_api::{
    cluster::{consts::managed_cluster as mc, v1::ManagedCluster, v1alpha1::ClusterClaim},
    work::v1::AppliedManifestWork,
};
use flotilla_core::{
    conditions, registration::agent::join::suggested_namespace, work::agent::names::hub_hash,
};
use flotilla_testing::{ControlPlane, wait};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::{Api, ResourceExt as _};

/// The managed cluster's name on both hubs (one name, two registrations).
const CLUSTER: &str = "cluster1";
/// Hub A's agent namespace on the managed cluster.
const AGENT_A: &str = "agent-a";

fn available(c: &ManagedCluster) -> bool {
    let conditions = c.status.as_ref().and_then(|s| s.conditions.as_ref());
    [mc::CONDITION_JOINED, mc::CONDITION_AVAILABLE].iter().all(|t| {
        conditions
            .and_then(|cs| conditions::find(cs, t))
            .is_some_and(|c| c.status == "True")
    })
}

/// Waits until `check` holds for what `read` returns, printing the last value and `log` if
/// it never does.
async fn eventually<T: std::fmt::Debug>(
    what: &str,
    log: &Path,
    read: impl AsyncFn() -> T,
    check: impl Fn(&T) -> bool,
) -> T {
    let result = wait::until(what, Duration::from_secs(120), || async {
        let value = read().await;
        Ok::<_, String>(check(&value).then_some(value))
    })
    .await;
    match result {
        Ok(value) => value,
        Err(e) => panic!(
            "{e}; last seen: {:?}\nlog {}:\n{}",
            read().await,
            log.display(),
            std::fs::read_to_string(log).unwrap_or_default()
        ),
    }
}

/// The names of the AppliedManifestWorks owning `object` (empty when it is gone).
fn applied_owners(object: &Option<ConfigMap>) -> Vec<String> {
    let mut owners: Vec<String> = object
        .iter()
        .flat_map(|o| o.owner_references())
        .filter(|r| r.kind == "AppliedManifestWork")
        .map(|r| r.name.clone())
        .collect();
    owners.sort();
    owners
}

/// Writes a one-ConfigMap manifest file for `flotilla create work`.
fn configmap_manifest(dir: &Path, name: &str) -> String {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default}}\ndata: {{k: v}}\n"),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

#[tokio::test]
async fn one_cluster_serves_two_hubs_through_two_klusterlets_that_never_touch_each_others_objects() {
    let (hub_a, hub_b, managed) = tokio::join!(
        ControlPlane::start("multihub-a"),
        ControlPlane::start("multihub-b"),
        ControlPlane::start("multihub-managed")
    );
    let (hub_a, hub_b, managed) = (hub_a.unwrap(), hub_b.unwrap(), managed.unwrap());
    let state_dir = tempfile::tempdir().unwrap();
    let _klusterlets = Klusterlets(state_dir.path().to_owned());
    let state = state_dir.path();
    let (admin_a, admin_b, admin_m) = (
        hub_a.admin_kubeconfig(),
        hub_b.admin_kubeconfig(),
        managed.admin_kubeconfig(),
    );
    let token_a = hub_token(&ok(flotilla_at(state, admin_a, &["init"])));
    let token_b = hub_token(&ok(flotilla_at(state, admin_b, &["init"])));
    let _hub_a = start_hub(admin_a, &state.join("hub-a.log"), &["--no-plugin-host"]);
    let _hub_b = start_hub(admin_b, &state.join("hub-b.log"), &["--no-plugin-host"]);
    let agent_b = suggested_namespace(AGENT_A, hub_b.server());
    let log_a = state
        .join("klusterlets")
        .join(format!("{CLUSTER}@{AGENT_A}"))
        .join("klusterlet.log");
    let log_b = state
        .join("klusterlets")
        .join(format!("{CLUSTER}@{agent_b}"))
        .join("klusterlet.log");

    ok(join_local(
        state,
        admin_m,
        hub_a.server(),
        &token_a,
        CLUSTER,
        &["--agent-namespace", AGENT_A],
    ));

    // Hub B into hub A's agent namespace: refused, naming the flag that works; nothing changed.
    let refused = join_local(
        state,
        admin_m,
        hub_b.server(),
        &token_b,
        CLUSTER,
        &["--agent-namespace", AGENT_A],
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("--agent-namespace {agent_b}")) && stderr.contains(hub_a.server()),
        "{stderr}"
    );
    let m = managed.admin_client().await.unwrap();
    let bootstrap = Api::<Secret>::namespaced(m.clone(), AGENT_A)
        .get("bootstrap-hub-kubeconfig")
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&bootstrap.data.unwrap()["kubeconfig"].0).into_owned();
    assert!(
        text.contains(hub_a.server()) && !text.contains(hub_b.server()),
        "{text}"
    );

    // Hub B follows the advice.
    ok(join_local(
        state,
        admin_m,
        hub_b.server(),
        &token_b,
        CLUSTER,
        &["--agent-namespace", &agent_b, "--lease-duration-seconds=2"],
    ));
    for admin in [admin_a, admin_b] {
        ok(flotilla_at(
            state,
            admin,
            &["accept", "--wait", "--clusters", CLUSTER, "--timeout", "120s"],
        ));
    }
    let clusters_a: Api<ManagedCluster> = Api::all(hub_a.admin_client().await.unwrap());
    let clusters_b: Api<ManagedCluster> = Api::all(hub_b.admin_client().await.unwrap());
    for (clusters, log) in [(&clusters_a, &log_a), (&clusters_b, &log_b)] {
        eventually(
            "joined and available",
            log,
            async || clusters.get_opt(CLUSTER).await.unwrap(),
            |c| c.as_ref().is_some_and(available),
        )
        .await;
    }
    // Joining the same hub again through the same namespace is fine: the restarted klusterlet
    // keeps its identity. (Before acceptance it would make a new request, which `accept` may
    // not have seen yet.)
    ok(join_local(
        state,
        admin_m,
        hub_a.server(),
        &token_a,
        CLUSTER,
        &["--agent-namespace", AGENT_A],
    ));
    eventually(
        "still joined and available after joining hub A again",
        &log_a,
        async || clusters_a.get_opt(CLUSTER).await.unwrap(),
        |c| c.as_ref().is_some_and(available),
    )
    .await;
    // A claim on the managed cluster, which neither klusterlet may remove.
    let claims: Api<ClusterClaim> = Api::all(m.clone());
    let claim: ClusterClaim = serde_json::from_value(serde_json::json!({
        "apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "ClusterClaim",
        "metadata": { "name": "region.example.com" }, "spec": { "value": "north" },
    }))
    .unwrap();
    claims.create(&Default::default(), &claim).await.unwrap();

    // The same ConfigMap from both hubs, and one object of each hub alone.
    let manifests = tempfile::tempdir().unwrap();
    let shared = configmap_manifest(manifests.path(), "shared");
    for (admin, work, file) in [
        (admin_a, "shared", shared.clone()),
        (admin_b, "shared", shared.clone()),
        (admin_a, "only-a", configmap_manifest(manifests.path(), "a-only")),
        (admin_b, "only-b", configmap_manifest(manifests.path(), "b-only")),
    ] {
        ok(flotilla_at(
            state,
            admin,
            &["create", "work", work, "-f", &file, "--clusters", CLUSTER],
        ));
    }
    let (hash_a, hash_b) = (hub_hash(hub_a.server()), hub_hash(hub_b.server()));
    let configmaps: Api<ConfigMap> = Api::namespaced(m.clone(), "default");
    let both = {
        let mut both = vec![format!("{hash_a}-shared"), format!("{hash_b}-shared")];
        both.sort();
        both
    };
    eventually(
        "the shared ConfigMap owned by both AppliedManifestWorks",
        &log_b,
        async || configmaps.get_opt("shared").await.unwrap(),
        |cm| applied_owners(cm) == both,
    )
    .await;
    for (name, owner, log) in [
        ("a-only", format!("{hash_a}-only-a"), &log_a),
        ("b-only", format!("{hash_b}-only-b"), &log_b),
    ] {
        eventually(
            &format!("{name} owned by its own hub's AppliedManifestWork alone"),
            log,
            async || configmaps.get_opt(name).await.unwrap(),
            |cm| applied_owners(cm) == [owner.clone()],
        )
        .await;
    }

    // Deleting one hub's work leaves the object to the other; deleting the last removes it.
    let applied: Api<AppliedManifestWork> = Api::all(m.clone());
    ok(flotilla_at(
        state,
        admin_a,
        &["delete", "work", "shared", "--clusters", CLUSTER],
    ));
    eventually(
        "hub A's record gone, the ConfigMap kept for hub B",
        &log_a,
        async || {
            (
                applied
                    .get_opt(&format!("{hash_a}-shared"))
                    .await
                    .unwrap()
                    .is_some(),
                configmaps.get_opt("shared").await.unwrap(),
            )
        },
        |(record, cm)| !record && applied_owners(cm) == [format!("{hash_b}-shared")],
    )
    .await;
    ok(flotilla_at(
        state,
        admin_b,
        &["delete", "work", "shared", "--clusters", CLUSTER],
    ));
    eventually(
        "the ConfigMap gone with the last work",
        &log_b,
        async || configmaps.get_opt("shared").await.unwrap(),
        Option::is_none,
    )
    .await;

    // Unjoining hub A's klusterlet removes its namespace only.
    ok(flotilla_at(
        state,
        admin_m,
        &["unjoin", "--cluster-name", CLUSTER, "--agent-namespace", AGENT_A],
    ));
    let namespaces: Api<Namespace> = Api::all(m.clone());
    eventually(
        "hub A's agent namespace gone",
        &log_b,
        async || namespaces.get_opt(AGENT_A).await.unwrap(),
        Option::is_none,
    )
    .await;
    // Hub B's klusterlet still runs: it applies a work made after the unjoin.
    ok(flotilla_at(
        state,
        admin_b,
        &[
            "create",
            "work",
            "after-unjoin",
            "-f",
            &configmap_manifest(manifests.path(), "after-unjoin"),
            "--clusters",
            CLUSTER,
        ],
    ));
    eventually(
        "hub B's work made after the unjoin applied",
        &log_b,
        async || configmaps.get_opt("after-unjoin").await.unwrap(),
        |cm| applied_owners(cm) == [format!("{hash_b}-after-unjoin")],
    )
    .await;
    let cluster_b = clusters_b.get(CLUSTER).await.unwrap();
    assert!(available(&cluster_b), "{cluster_b:?}");
    let secrets: Api<Secret> = Api::namespaced(m.clone(), &agent_b);
    for name in ["bootstrap-hub-kubeconfig", "hub-kubeconfig-secret"] {
        assert!(secrets.get_opt(name).await.unwrap().is_some(), "{name}");
    }
    assert!(
        namespaces
            .get_opt("open-cluster-management-agent-addon")
            .await
            .unwrap()
            .is_some(),
        "the add-on namespace serves hub B's add-ons still"
    );
    assert!(claims.get_opt("region.example.com").await.unwrap().is_some());
    // Neither klusterlet removed or adopted the other hub's objects: hub A's record and its
    // object stay (unjoin stops the agent, it does not uninstall what the hub asked for).
    assert!(
        applied
            .get_opt(&format!("{hash_a}-only-a"))
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        applied_owners(&configmaps.get_opt("a-only").await.unwrap()),
        [format!("{hash_a}-only-a")]
    );
    assert_eq!(
        applied_owners(&configmaps.get_opt("b-only").await.unwrap()),
        [format!("{hash_b}-only-b")]
    );

    // Hub B's garbage collection still works after the unjoin, and reaches only its own.
    ok(flotilla_at(
        state,
        admin_b,
        &["delete", "work", "only-b", "--clusters", CLUSTER],
    ));
    eventually(
        "hub B's object and record gone with its work",
        &log_b,
        async || {
            (
                applied
                    .get_opt(&format!("{hash_b}-only-b"))
                    .await
                    .unwrap()
                    .is_some(),
                configmaps.get_opt("b-only").await.unwrap().is_some(),
            )
        },
        |gone| *gone == (false, false),
    )
    .await;
    assert!(configmaps.get_opt("a-only").await.unwrap().is_some());
}
