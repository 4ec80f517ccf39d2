//! Registration end to end, with the real `flotilla` binary and three separate control planes
//! (a hub and two managed clusters): init → hub → join → accept → Joined/Available, an agent
//! that stops and comes back, and kubectl/`flotilla get` showing it all.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::{path::Path, process::Output, time::Duration};

use common::{
    Klusterlets, flotilla_at, hub_service_account, hub_token, join_local, klusterlet_pid, ok, start_hub,
};

use flotilla_api::cluster::{
    consts::{TAINT_UNREACHABLE, managed_cluster as mc},
    v1::ManagedCluster,
};
use flotilla_core::conditions;
use flotilla_testing::{ControlPlane, wait};
use kube::Api;

fn flotilla(state: &Path, kubeconfig: &Path, args: &[&str]) -> Output {
    flotilla_at(state, kubeconfig, args)
}

fn condition(cluster: &ManagedCluster, type_: &str) -> Option<String> {
    let conditions = cluster.status.as_ref()?.conditions.as_ref()?;
    conditions::find(conditions, type_).map(|c| c.status.clone())
}

async fn await_cluster(
    clusters: &Api<ManagedCluster>,
    name: &str,
    what: &str,
    check: impl Fn(&ManagedCluster) -> bool,
) -> ManagedCluster {
    let result = wait::until(&format!("{name}: {what}"), Duration::from_secs(120), || {
        let clusters = clusters.clone();
        let check = &check;
        async move { Ok::<_, kube::Error>(clusters.get_opt(name).await?.filter(|c| check(c))) }
    })
    .await;
    match result {
        Ok(cluster) => cluster,
        Err(e) => {
            let last = clusters.get_opt(name).await.ok().flatten();
            panic!(
                "{e}; last seen: {}",
                serde_json::to_string_pretty(&last).unwrap_or_default()
            )
        }
    }
}

fn joined_and_available(c: &ManagedCluster) -> bool {
    condition(c, mc::CONDITION_HUB_ACCEPTED).as_deref() == Some("True")
        && condition(c, mc::CONDITION_JOINED).as_deref() == Some("True")
        && condition(c, mc::CONDITION_AVAILABLE).as_deref() == Some("True")
}

fn has_taint(c: &ManagedCluster, key: &str) -> bool {
    c.spec.taints.iter().any(|t| t.key == key)
}

#[tokio::test]
async fn clusters_join_get_accepted_become_available_and_recover_after_an_agent_outage() {
    let (hub, one, two) = tokio::join!(
        ControlPlane::start("hub"),
        ControlPlane::start("cluster1"),
        ControlPlane::start("cluster2")
    );
    let (hub, one, two) = (hub.unwrap(), one.unwrap(), two.unwrap());
    let state = tempfile::tempdir().unwrap();
    let _klusterlets = Klusterlets(state.path().to_owned());
    let state = state.path();

    let join_line = ok(flotilla(state, hub.admin_kubeconfig(), &["init"]));
    let token = hub_token(&join_line);
    assert!(
        join_line.contains(&format!("--hub-apiserver {}", hub.server())),
        "{join_line}"
    );
    // `get token` prints the same command again.
    assert_eq!(
        ok(flotilla(state, hub.admin_kubeconfig(), &["get", "token"])).trim(),
        join_line.trim()
    );

    // The hub runs as the service account of deploy/hub, proving its ClusterRole suffices.
    let hub_identity = hub_service_account(&hub, state);
    let _hub_process = start_hub(&hub_identity, &state.join("hub.log"), &[]);

    for (name, cp) in [("cluster1", &one), ("cluster2", &two)] {
        let accept_line = ok(join_local(
            state,
            cp.admin_kubeconfig(),
            hub.server(),
            &token,
            name,
            &["--lease-duration-seconds=2"],
        ));
        assert_eq!(accept_line.trim(), format!("flotilla accept --clusters {name}"));
    }
    ok(flotilla(
        state,
        hub.admin_kubeconfig(),
        &[
            "accept",
            "--wait",
            "--clusters",
            "cluster1,cluster2",
            "--timeout",
            "90s",
        ],
    ));

    // Leases of 2 s (set at join) make an outage show within seconds: grace is 5 × 2 s.
    let clusters: Api<ManagedCluster> = Api::all(hub.admin_client().await.unwrap());
    for name in ["cluster1", "cluster2"] {
        await_cluster(
            &clusters,
            name,
            "accepted, joined and available",
            joined_and_available,
        )
        .await;
    }

    let listed = hub.kubectl().args(["get", "managedclusters"]).output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    for name in ["cluster1", "cluster2"] {
        let row = listed
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing:\n{listed}"));
        let columns: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&columns[..2], [name, "true"], "{row}");
        assert!(columns.contains(&"True"), "{row}");
    }
    // Set status follows cluster changes asynchronously, so wait for both sets to count.
    let both_sets_count_two = |sets: &str| {
        ["default", "global"].iter().all(|set| {
            sets.lines()
                .any(|l| l.starts_with(set) && l.contains("2 ManagedClusters selected"))
        })
    };
    let counted = wait::until(
        "both cluster sets count 2 clusters",
        Duration::from_secs(60),
        || async {
            let sets = ok(flotilla(state, hub.admin_kubeconfig(), &["get", "clustersets"]));
            Ok::<_, String>(both_sets_count_two(&sets).then_some(()))
        },
    )
    .await;
    if let Err(e) = counted {
        let sets = ok(flotilla(state, hub.admin_kubeconfig(), &["get", "clustersets"]));
        let log = std::fs::read_to_string(state.join("hub.log")).unwrap_or_default();
        panic!("{e}\n{sets}\nhub log:\n{log}");
    }
    let table = ok(flotilla(state, hub.admin_kubeconfig(), &["get", "clusters"]));
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("cluster1") && l.contains("true") && l.contains("True")),
        "{table}"
    );

    // The klusterlet's work agent applies a work with the credential the registration agent
    // wrote; the hub's admission webhook (registered by `flotilla hub`) lets it through.
    let manifest = state.join("work.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-the-hub, namespace: default}\ndata: {k: v}\n",
    )
    .unwrap();
    ok(flotilla(
        state,
        hub.admin_kubeconfig(),
        &[
            "create",
            "work",
            "e2e-work",
            "-f",
            manifest.to_str().unwrap(),
            "--clusters",
            "cluster1",
        ],
    ));
    let applied = wait::until(
        "the work applied on cluster1",
        Duration::from_secs(90),
        || async {
            let works = ok(flotilla(
                state,
                hub.admin_kubeconfig(),
                &["get", "works", "--cluster", "cluster1"],
            ));
            let row = works
                .lines()
                .find(|l| l.contains("e2e-work"))
                .unwrap_or_default()
                .to_owned();
            let columns: Vec<&str> = row.split_whitespace().collect();
            Ok::<_, String>((columns.get(3) == Some(&"True")).then_some(()))
        },
    )
    .await;
    if let Err(e) = applied {
        let log = std::fs::read_to_string(state.join("klusterlets").join("cluster1").join("klusterlet.log"))
            .unwrap_or_default();
        panic!("{e}\nklusterlet log:\n{log}");
    }
    let cm = one
        .kubectl()
        .args([
            "get",
            "configmap",
            "from-the-hub",
            "-n",
            "default",
            "-o",
            "jsonpath={.data.k}",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&cm.stdout), "v");

    let pid = klusterlet_pid(state, "cluster1");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let down = await_cluster(&clusters, "cluster1", "Unknown with the unreachable taint", |c| {
        condition(c, mc::CONDITION_AVAILABLE).as_deref() == Some("Unknown") && has_taint(c, TAINT_UNREACHABLE)
    })
    .await;
    let taint = down
        .spec
        .taints
        .iter()
        .find(|t| t.key == TAINT_UNREACHABLE)
        .unwrap();
    assert!(taint.time_added.is_some(), "the hub stamps timeAdded");
    let other = clusters.get("cluster2").await.unwrap();
    assert!(
        joined_and_available(&other) && !has_taint(&other, TAINT_UNREACHABLE),
        "cluster2 must be unaffected"
    );

    // The agent comes back (joining again restarts it with the stored identity).
    ok(join_local(
        state,
        one.admin_kubeconfig(),
        hub.server(),
        &token,
        "cluster1",
        &["--lease-duration-seconds=2"],
    ));
    await_cluster(&clusters, "cluster1", "available again without the taint", |c| {
        joined_and_available(c) && !has_taint(c, TAINT_UNREACHABLE)
    })
    .await;

    for (name, cp) in [("cluster1", &one), ("cluster2", &two)] {
        ok(flotilla(
            state,
            cp.admin_kubeconfig(),
            &["unjoin", "--cluster-name", name],
        ));
    }
}

#[tokio::test]
async fn join_refuses_a_wrong_token_and_a_bad_cluster_name_with_a_reason() {
    let (hub, managed) = tokio::join!(ControlPlane::start("hub-bad"), ControlPlane::start("managed-bad"));
    let (hub, managed) = (hub.unwrap(), managed.unwrap());
    let state = tempfile::tempdir().unwrap();
    let join_line = ok(flotilla(state.path(), hub.admin_kubeconfig(), &["init"]));
    let token = hub_token(&join_line);

    let (id, _) = token.split_once('.').unwrap();
    let forged = format!("{id}.0000000000000000");
    let output = join_local(
        state.path(),
        managed.admin_kubeconfig(),
        hub.server(),
        &forged,
        "c1",
        &[],
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cluster-info"), "{stderr}");

    let output = join_local(
        state.path(),
        managed.admin_kubeconfig(),
        hub.server(),
        &token,
        "Not.Valid",
        &[],
    );
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a valid namespace name"));

    let output = join_local(
        state.path(),
        managed.admin_kubeconfig(),
        hub.server(),
        "nonsense",
        "c1",
        &[],
    );
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--hub-token must look like"));
}
