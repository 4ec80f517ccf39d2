//! `flotilla hub` killed (SIGKILL) in the middle of its work and started again: while it
//! accepts 100 clusters, and while a Progressive ManifestWorkReplicaSet rolls out over them.
//! After each restart the hub must finish what it was doing, and the run must end as a
//! fault-free run of the same scenario ends (compared object by object with a convergence
//! snapshot): no cluster half accepted, no work lost or created twice. A watch on the works,
//! which runs across the restart, checks that the rollout never had more clusters in flight
//! than its limit.
//!
//! Acceptance is the hub's alone (namespace, RBAC, lease, taints, conditions), so the 100
//! clusters need no agents. The works' status is written by the test as the clusters' work
//! agents would write it (`Progressing` True when first seen, False half a second later): a
//! hundred klusterlets, each on its own control plane, do not fit this machine.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::{
    collections::BTreeMap,
    path::Path,
    pin::pin,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use common::{Running, flotilla_at, hub_service_account, ok, ops_address, start_hub};
use flotilla_api::work::consts::MANIFEST_WORK_REPLICA_SET_LABEL;
use flotilla_api::work::v1::ManifestWork;
use flotilla_testing::{
    ControlPlane,
    convergence::{Snapshot, assert_converged},
    wait,
};
use futures::StreamExt as _;
use kube::{
    Api, Client, ResourceExt as _,
    api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams},
    core::GroupVersionKind,
    runtime::{WatchStreamExt as _, watcher},
};
use serde_json::json;

const CLUSTERS: usize = 100;
/// The rollout's `maxConcurrency`.
const LIMIT: usize = 10;
/// The namespace of the Placement and the replica set.
const NAMESPACE: &str = "rollout";
const TIMEOUT: Duration = Duration::from_secs(300);
/// How long a work stays `Progressing` before the stand-in agent reports it done.
const CONVERGING: Duration = Duration::from_millis(500);

fn cluster_name(i: usize) -> String {
    format!("fleet-{i:03}")
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn managed_clusters(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &resource(
            "cluster.open-cluster-management.io",
            "v1",
            "ManagedCluster",
            "managedclusters",
        ),
    )
}

async fn create(client: &Client, resource: &ApiResource, namespace: Option<&str>, object: serde_json::Value) {
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create {}: {e}", object.name_any()),
    }
}

/// What an admin (or `flotilla accept`) writes: a cluster the hub accepts.
async fn create_cluster(client: &Client, name: &str) {
    let cluster = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": name},
        "spec": {"hubAcceptsClient": true},
    });
    let resource = resource(
        "cluster.open-cluster-management.io",
        "v1",
        "ManagedCluster",
        "managedclusters",
    );
    create(client, &resource, None, cluster).await;
}

/// How many clusters the hub shows accepted (`HubAcceptedManagedCluster` True).
async fn accepted(client: &Client) -> usize {
    let Ok(list) = managed_clusters(client).list(&Default::default()).await else {
        return 0;
    };
    list.items
        .iter()
        .filter(|c| {
            c.data
                .pointer("/status/conditions")
                .and_then(|c| c.as_array())
                .is_some_and(|conditions| {
                    conditions
                        .iter()
                        .any(|c| c["type"] == "HubAcceptedManagedCluster" && c["status"] == "True")
                })
        })
        .count()
}

async fn wait_accepted(client: &Client, at_least: usize, state: &Path) {
    let result = wait::until(&format!("{at_least} clusters accepted"), TIMEOUT, || async {
        Ok::<_, String>((accepted(client).await >= at_least).then_some(()))
    })
    .await;
    if let Err(e) = result {
        panic!("{e}\nhub logs:\n{}", hub_logs(state));
    }
}

fn hub_logs(state: &Path) -> String {
    ["hub-1.log", "hub-2.log", "hub-3.log"]
        .iter()
        .map(|log| std::fs::read_to_string(state.join(log)).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n--- restarted ---\n")
}

/// The Placement choosing every cluster (tolerating the taint of clusters whose agent never
/// reported) and the Progressive replica set over it.
async fn start_rollout(client: &Client) {
    create(
        client,
        &resource("", "v1", "Namespace", "namespaces"),
        None,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
    )
    .await;
    create(
        client,
        &resource(
            "cluster.open-cluster-management.io",
            "v1beta2",
            "ManagedClusterSetBinding",
            "managedclustersetbindings",
        ),
        Some(NAMESPACE),
        json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSetBinding",
            "metadata": {"name": "global", "namespace": NAMESPACE},
            "spec": {"clusterSet": "global"},
        }),
    )
    .await;
    create(
        client,
        &resource(
            "cluster.open-cluster-management.io",
            "v1beta1",
            "Placement",
            "placements",
        ),
        Some(NAMESPACE),
        json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
            "metadata": {"name": "all", "namespace": NAMESPACE},
            "spec": {"tolerations": [
                {"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists"},
            ]},
        }),
    )
    .await;
    create(
        client,
        &resource(
            "work.open-cluster-management.io",
            "v1alpha1",
            "ManifestWorkReplicaSet",
            "manifestworkreplicasets",
        ),
        Some(NAMESPACE),
        json!({
            "apiVersion": "work.open-cluster-management.io/v1alpha1", "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "app", "namespace": NAMESPACE},
            "spec": {
                "placementRefs": [{
                    "name": "all",
                    "rolloutStrategy": {"type": "Progressive", "progressive": {"maxConcurrency": LIMIT}},
                }],
                "manifestWorkTemplate": {"workload": {"manifests": [{
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "app", "namespace": "default"},
                    "data": {"version": "1"},
                }]}},
            },
        }),
    )
    .await;
}

/// Where a work of the rollout stands, as the replica set reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Created; no report of the agent yet.
    New,
    Progressing,
    Done,
}

fn stage(work: &ManifestWork) -> Stage {
    let progressing = work
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Progressing"));
    match progressing.map(|c| c.status.as_str()) {
        Some("False") => Stage::Done,
        Some(_) => Stage::Progressing,
        None => Stage::New,
    }
}

/// The rollout as a watch on the works shows it, across restarts of the hub.
#[derive(Debug, Default)]
struct Rollout {
    stages: BTreeMap<String, Stage>,
    most_in_flight: usize,
    /// Works seen per cluster namespace (more than one is a duplicate).
    works_per_cluster: BTreeMap<String, std::collections::BTreeSet<String>>,
}

impl Rollout {
    fn done(&self) -> usize {
        self.stages.values().filter(|s| **s == Stage::Done).count()
    }
}

/// Plays the clusters' work agents for the rollout's works and records the most clusters in
/// flight after every change, until dropped.
fn play_agents(client: Client) -> (Arc<Mutex<Rollout>>, tokio::task::JoinHandle<()>) {
    let rollout: Arc<Mutex<Rollout>> = Arc::default();
    let seen = Arc::clone(&rollout);
    let task = tokio::spawn(async move {
        let works: Api<ManifestWork> = Api::all(client.clone());
        let config = watcher::Config::default().labels(MANIFEST_WORK_REPLICA_SET_LABEL);
        let mut events = pin!(watcher(works, config).default_backoff().applied_objects());
        while let Some(event) = events.next().await {
            let Ok(work) = event else { continue };
            let cluster = work.namespace().unwrap_or_default();
            let now = stage(&work);
            {
                let mut rollout = seen.lock().unwrap();
                rollout
                    .works_per_cluster
                    .entry(cluster.clone())
                    .or_default()
                    .insert(work.name_any());
                rollout.stages.insert(cluster.clone(), now);
                let in_flight = rollout.stages.values().filter(|s| **s != Stage::Done).count();
                rollout.most_in_flight = rollout.most_in_flight.max(in_flight);
            }
            if now == Stage::New {
                let client = client.clone();
                tokio::spawn(async move {
                    report(&client, &work, "True").await;
                    tokio::time::sleep(CONVERGING).await;
                    report(&client, &work, "False").await;
                });
            }
        }
    });
    (rollout, task)
}

/// Writes the work's conditions at its generation, as its agent would: applied, available,
/// and `Progressing` as given.
async fn report(client: &Client, work: &ManifestWork, progressing: &str) {
    let generation = work.metadata.generation.unwrap_or_default();
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let condition = |type_: &str, status: &str| {
        json!({"type": type_, "status": status, "reason": "AsReported", "message": "",
               "observedGeneration": generation, "lastTransitionTime": now})
    };
    let status = json!({"status": {"conditions": [
        condition("Applied", "True"),
        condition("Available", "True"),
        condition("Progressing", progressing),
    ]}});
    let api: Api<ManifestWork> = Api::namespaced(client.clone(), &work.namespace().unwrap_or_default());
    // A work deleted meanwhile has nothing to report.
    let _ = api
        .patch_status(&work.name_any(), &PatchParams::default(), &Patch::Merge(&status))
        .await;
}

/// The hub, started (again) with its output in `hub-<n>.log`.
fn hub_process(identity: &Path, state: &Path, n: usize) -> Running {
    start_hub(identity, &state.join(format!("hub-{n}.log")), &[])
}

/// Waits until the `n`th hub process answers `/readyz` 200.
async fn wait_ready(state: &Path, n: usize) {
    let ops = ops_address(&state.join(format!("hub-{n}.log"))).await;
    let result = wait::until("hub /readyz 200", TIMEOUT, || async {
        let status = reqwest::get(format!("http://{ops}/readyz"))
            .await
            .map(|r| r.status().as_u16())
            .unwrap_or(0);
        Ok::<_, String>((status == 200).then_some(()))
    })
    .await;
    if let Err(e) = result {
        panic!("{e}\nhub logs:\n{}", hub_logs(state));
    }
}

/// SIGKILL: no shutdown, no lease released, whatever was in flight cut off.
fn kill(hub: &mut Running) {
    hub.0.kill().unwrap();
    hub.0.wait().unwrap();
}

/// What a run shows besides its end state.
#[derive(Debug)]
struct Outcome {
    snapshot: Snapshot,
    /// Clusters accepted when the hub was killed during acceptance.
    accepted_at_kill: Option<usize>,
    /// Clusters done when the hub was killed during the rollout.
    done_at_kill: Option<usize>,
    most_in_flight: usize,
    /// From the restart until every cluster was accepted / the rollout finished.
    accepted_in: Duration,
    rolled_out_in: Duration,
}

async fn run(prefix: &str, killed: bool) -> Outcome {
    let hub = ControlPlane::start(format!("{prefix}-hub")).await.unwrap();
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();
    ok(flotilla_at(state, hub.admin_kubeconfig(), &["init"]));
    let identity = hub_service_account(&hub, state);
    let admin = hub.admin_client().await.unwrap();
    let mut process = hub_process(&identity, state, 1);
    wait_ready(state, 1).await;
    let mut restarts = 1;

    // Accepting 100 clusters: the first 60 written before, the last 40 while the hub dies.
    for i in 0..60 {
        create_cluster(&admin, &cluster_name(i)).await;
    }
    let mut accepted_at_kill = None;
    if killed {
        wait_accepted(&admin, 10, state).await;
        accepted_at_kill = Some(accepted(&admin).await);
        kill(&mut process);
    }
    for i in 60..CLUSTERS {
        create_cluster(&admin, &cluster_name(i)).await;
    }
    let restarted = Instant::now();
    if killed {
        restarts += 1;
        process = hub_process(&identity, state, restarts);
    }
    wait_accepted(&admin, CLUSTERS, state).await;
    let accepted_in = restarted.elapsed();

    // A Progressive rollout over them, with the hub killed once a third is done.
    let (rollout, agents) = play_agents(admin.clone());
    start_rollout(&admin).await;
    let mut done_at_kill = None;
    if killed {
        let result = wait::until("a third of the rollout done", TIMEOUT, || async {
            Ok::<_, String>((rollout.lock().unwrap().done() >= CLUSTERS / 3).then_some(()))
        })
        .await;
        result.unwrap_or_else(|e| panic!("{e}\nhub logs:\n{}", hub_logs(state)));
        done_at_kill = Some(rollout.lock().unwrap().done());
        kill(&mut process);
        restarts += 1;
        process = hub_process(&identity, state, restarts);
    }
    let restarted = Instant::now();
    let result = wait::until("every cluster's work done", TIMEOUT, || async {
        Ok::<_, String>((rollout.lock().unwrap().done() == CLUSTERS).then_some(()))
    })
    .await;
    result.unwrap_or_else(|e| panic!("{e}\nhub logs:\n{}", hub_logs(state)));
    let sets: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        NAMESPACE,
        &resource(
            "work.open-cluster-management.io",
            "v1alpha1",
            "ManifestWorkReplicaSet",
            "manifestworkreplicasets",
        ),
    );
    let result = wait::until(
        "the replica set reports the rollout complete",
        TIMEOUT,
        || async {
            let set = sets.get("app").await?;
            let complete = set
                .data
                .pointer("/status/conditions")
                .and_then(|c| c.as_array())
                .is_some_and(|conditions| {
                    conditions
                        .iter()
                        .any(|c| c["type"] == "PlacementRolledOut" && c["status"] == "True")
                });
            Ok::<_, kube::Error>(complete.then_some(()))
        },
    )
    .await;
    result.unwrap_or_else(|e| panic!("{e}\nhub logs:\n{}", hub_logs(state)));
    let rolled_out_in = restarted.elapsed();
    agents.abort();

    let (most_in_flight, duplicates) = {
        let rollout = rollout.lock().unwrap();
        let duplicates: Vec<_> = rollout
            .works_per_cluster
            .iter()
            .filter(|(_, works)| works.len() > 1)
            .map(|(cluster, works)| format!("{cluster}: {works:?}"))
            .collect();
        (rollout.most_in_flight, duplicates)
    };
    assert!(duplicates.is_empty(), "works created twice: {duplicates:?}");
    let mut snapshot = Snapshot::default();
    snapshot.read_hub("hub", &admin).await.unwrap();
    drop(process);
    Outcome {
        snapshot,
        accepted_at_kill,
        done_at_kill,
        most_in_flight,
        accepted_in,
        rolled_out_in,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_killed_while_accepting_clusters_and_rolling_out_ends_as_a_fault_free_run() {
    let fault_free = run("restartfree", false).await;
    let faulted = run("restartkill", true).await;
    eprintln!(
        "killed with {:?}/{CLUSTERS} accepted: all accepted {:?} after the restart; killed with \
         {:?}/{CLUSTERS} works done: rolled out {:?} after the restart; most in flight {} \
         (fault-free {}), limit {LIMIT}; {} objects compared",
        faulted.accepted_at_kill,
        faulted.accepted_in,
        faulted.done_at_kill,
        faulted.rolled_out_in,
        faulted.most_in_flight,
        fault_free.most_in_flight,
        faulted.snapshot.len(),
    );
    // The kills landed in the middle of the work.
    assert!(faulted.accepted_at_kill.is_some_and(|n| n < CLUSTERS));
    assert!(faulted.done_at_kill.is_some_and(|n| n < CLUSTERS));
    assert!(
        faulted.most_in_flight <= LIMIT && fault_free.most_in_flight <= LIMIT,
        "more than {LIMIT} clusters in flight: {} with the kill, {} without",
        faulted.most_in_flight,
        fault_free.most_in_flight
    );
    assert_converged(&faulted.snapshot, &fault_free.snapshot);
}

/// The add-on CSR a cluster's klusterlet files for helloworld's hub credential.
const ADDON_CSRS: &str = "open-cluster-management.io/addon-name=helloworld";
const ADDON_SECRET: &str = "helloworld-hub-kubeconfig";
const ADDON_NAMESPACE: &str = "open-cluster-management-agent-addon";

/// The hub's objects of helloworld on `cluster` (add-on, works, RBAC), keyed and written as if
/// they were `cluster1`'s, to compare one cluster's outcome with another's.
fn addon_objects(snapshot: &Snapshot, cluster: &str) -> BTreeMap<String, Vec<serde_json::Value>> {
    const KINDS: &[&str] = &["ManagedClusterAddOn", "ManifestWork", "Role", "RoleBinding"];
    snapshot
        .objects
        .iter()
        .filter(|(key, _)| {
            let parts: Vec<&str> = key.splitn(4, '/').collect();
            parts.len() == 4 && KINDS.contains(&parts[1]) && parts[2] == cluster
        })
        .map(|(key, objects)| {
            let rename = |text: String| text.replace(cluster, "cluster1");
            let objects = objects
                .iter()
                .map(|o| {
                    let mut o: serde_json::Value = serde_json::from_str(&rename(o.to_string())).unwrap();
                    // A hash of the work's spec, which names the cluster (compared renamed).
                    if let Some(annotations) = o.get_mut("annotations").and_then(|a| a.as_object_mut()) {
                        annotations.remove("flotilla.dev/applied-spec-hash");
                    }
                    o
                })
                .collect();
            (rename(key.clone()), objects)
        })
        .collect()
}

/// How many `Approved` and `Denied` conditions each of helloworld's CSRs of `cluster` holds.
async fn addon_csr_verdicts(hub: &Client, cluster: &str) -> BTreeMap<String, (usize, usize)> {
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    let selector = format!("{ADDON_CSRS},open-cluster-management.io/cluster-name={cluster}");
    Api::<CertificateSigningRequest>::all(hub.clone())
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|csr| {
            let conditions = csr.status.and_then(|s| s.conditions).unwrap_or_default();
            let count = |type_: &str| conditions.iter().filter(|c| c.type_ == type_).count();
            (
                csr.metadata.name.unwrap_or_default(),
                (count("Approved"), count("Denied")),
            )
        })
        .collect()
}

async fn wait_addon_secret(managed: &Client, state: &Path) {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(managed.clone(), ADDON_NAMESPACE);
    let result = wait::until("helloworld's hub credential on the cluster", TIMEOUT, || async {
        secrets.get_opt(ADDON_SECRET).await.map(|s| s.map(drop))
    })
    .await;
    if let Err(e) = result {
        panic!(
            "{e}\nhub logs:\n{}\n{}",
            std::fs::read_to_string(state.join("hub.log")).unwrap_or_default(),
            std::fs::read_to_string(state.join("hub-restarted.log")).unwrap_or_default()
        );
    }
}

/// helloworld's credential is renewed on `cluster1` (its secret deleted, so the klusterlet
/// files a new CSR) while the hub is stopped (SIGSTOP); the hub is then killed (SIGKILL) with
/// the CSR awaiting approval, and started again. The new hub approves it once, the credential
/// comes back, and cluster1's add-on objects on the hub equal those of `cluster2`, whose
/// add-on was enabled without a fault.
#[tokio::test]
async fn a_hub_killed_with_an_addon_csr_awaiting_approval_approves_it_once_after_the_restart() {
    use nix::sys::signal::{Signal, kill as signal};
    use nix::unistd::Pid;
    let mut fleet = common::Fleet::start("restartcsr", &[]).await;
    let (state, admin) = (fleet.state().to_owned(), fleet.admin().to_owned());
    let hub = fleet.hub.admin_client().await.unwrap();
    let one = fleet.one.admin_client().await.unwrap();
    let two = fleet.two.admin_client().await.unwrap();
    ok(flotilla_at(
        &state,
        &admin,
        &[
            "addon",
            "enable",
            "--names",
            "helloworld",
            "--clusters",
            "cluster1,cluster2",
        ],
    ));
    wait_addon_secret(&one, &state).await;
    wait_addon_secret(&two, &state).await;
    let before = addon_csr_verdicts(&hub, "cluster1").await;

    let pid = Pid::from_raw(i32::try_from(fleet.hub_process.0.id()).unwrap());
    signal(pid, Signal::SIGSTOP).unwrap();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(one.clone(), ADDON_NAMESPACE);
    secrets.delete(ADDON_SECRET, &Default::default()).await.unwrap();
    let result = wait::until("a new add-on CSR of cluster1", TIMEOUT, || async {
        let now = addon_csr_verdicts(&hub, "cluster1").await;
        Ok::<_, String>((now.len() > before.len()).then_some(now))
    })
    .await;
    let pending = result.unwrap_or_else(|e| panic!("{e}"));
    let new: Vec<_> = pending
        .keys()
        .filter(|name| !before.contains_key(*name))
        .cloned()
        .collect();
    assert!(
        new.iter().all(|name| pending[name] == (0, 0)),
        "the stopped hub decided on {new:?}: {pending:?}"
    );
    common::kill_and_restart_hub(&mut fleet.hub_process, &state);

    let restarted = Instant::now();
    wait_addon_secret(&one, &state).await;
    let approved_in = restarted.elapsed();
    let verdicts = addon_csr_verdicts(&hub, "cluster1").await;
    assert!(
        verdicts.values().all(|v| *v == (1, 0)),
        "every CSR approved exactly once, none denied: {verdicts:?}"
    );
    let mut snapshot = Snapshot::default();
    snapshot.read_hub("hub", &hub).await.unwrap();
    let (faulted, fault_free) = (
        addon_objects(&snapshot, "cluster1"),
        addon_objects(&snapshot, "cluster2"),
    );
    eprintln!(
        "CSR {new:?} approved {approved_in:?} after the restart; {} add-on objects compared",
        faulted.len()
    );
    assert!(!fault_free.is_empty());
    assert_eq!(
        faulted, fault_free,
        "cluster1's add-on after the kill vs cluster2's without"
    );
}
