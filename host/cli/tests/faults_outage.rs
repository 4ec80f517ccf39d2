//! Outages of a control plane under running `flotilla hub` and klusterlet processes: the hub's
//! kube-apiserver, the hub's etcd alone, and the managed cluster's kube-apiserver, each
//! stopped longer than the lease grace and brought back. After each the fleet must recover
//! without re-registering or re-applying, act on what changed, and end as a fault-free run of
//! the same scenario ends (compared object by object with a convergence snapshot).
//!
//! The scenario: a hub and `cluster1` (leases of 2 s, so the grace is 10 s), work `before`
//! applied and the helloworld add-on installed from a local OCI registry, the fault, work
//! `second` created (during a managed outage, after a hub outage), and both applied. Neither
//! `before` nor the add-on may be applied or rendered again. A hub outage marks no cluster Unknown (the lease grace runs from its end);
//! a managed outage makes the cluster unavailable, then available again. The fault-free run is
//! made once per test binary, beside the first faulted run, and shared.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use common::{
    Klusterlets, Running, flotilla_at, hub_service_account, hub_token, join_local, ok, ops_address,
    register_helloworld, start_hub,
};
use flotilla_testing::{
    ControlPlane,
    convergence::{Snapshot, assert_converged},
    registry::Registry,
    wait,
};
use k8s_openapi::api::{
    certificates::v1::CertificateSigningRequest,
    core::v1::{ConfigMap, Secret},
};
use kube::{
    Api, Client, ResourceExt as _,
    api::{ApiResource, DynamicObject, PostParams},
    core::GroupVersionKind,
};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

const CLUSTER: &str = "cluster1";
const ADDON: &str = "helloworld";
/// Longer than the lease grace (5 × 2 s).
const OUTAGE: Duration = Duration::from_secs(14);
const TIMEOUT: Duration = Duration::from_secs(120);

/// The fault-free run's end state, made beside the first faulted run.
static FAULT_FREE: OnceCell<Snapshot> = OnceCell::const_new();

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    None,
    HubApiserver,
    HubEtcd,
    ManagedApiserver,
}

/// A hub and one managed cluster with `flotilla hub` and a klusterlet running. Fields drop in
/// order: the processes stop before their control planes do.
struct Fleet {
    _hub_process: Running,
    _klusterlets: Klusterlets,
    hub: ControlPlane,
    managed: ControlPlane,
    _registry: Registry,
    state: tempfile::TempDir,
}

impl Fleet {
    async fn start(prefix: &str) -> Self {
        let (hub, managed, registry) = tokio::join!(
            ControlPlane::start(format!("{prefix}-hub")),
            ControlPlane::start(format!("{prefix}-{CLUSTER}")),
            Registry::start()
        );
        let (hub, managed, registry) = (hub.unwrap(), managed.unwrap(), registry.unwrap());
        let state_dir = tempfile::tempdir().unwrap();
        let klusterlets = Klusterlets(state_dir.path().to_owned());
        let state = state_dir.path();
        let token = hub_token(&ok(flotilla_at(state, hub.admin_kubeconfig(), &["init"])));
        let identity = hub_service_account(&hub, state);
        let cache = state.join("plugin-artifacts");
        let hub_args = ["--plugin-cache-dir", cache.to_str().unwrap()];
        let hub_process = start_hub(&identity, &state.join("hub.log"), &hub_args);
        ok(join_local(
            state,
            managed.admin_kubeconfig(),
            hub.server(),
            &token,
            CLUSTER,
            &["--lease-duration-seconds=2"],
        ));
        ok(flotilla_at(
            state,
            hub.admin_kubeconfig(),
            &["accept", "--wait", "--clusters", CLUSTER, "--timeout", "120s"],
        ));
        register_helloworld(state, hub.admin_kubeconfig(), &registry);
        Self {
            _hub_process: hub_process,
            _klusterlets: klusterlets,
            hub,
            managed,
            _registry: registry,
            state: state_dir,
        }
    }

    fn log(&self, name: &str) -> String {
        let path: &Path = self.state.path();
        let file = if name == "hub" {
            path.join("hub.log")
        } else {
            path.join("klusterlets").join(CLUSTER).join("klusterlet.log")
        };
        std::fs::read_to_string(file).unwrap_or_default()
    }

    async fn hub_ready(&self) -> u16 {
        let ops = ops_address(&self.state.path().join("hub.log")).await;
        match reqwest::get(format!("http://{ops}/readyz")).await {
            Ok(response) => response.status().as_u16(),
            Err(_) => 0,
        }
    }

    /// How many times the hub has called helloworld's `manifests` hook: each call is a render.
    async fn renders(&self) -> f64 {
        let ops = ops_address(&self.state.path().join("hub.log")).await;
        let scrape = common::scrape_metrics(&ops).await;
        scrape
            .samples
            .iter()
            .filter(|s| {
                s.metric == "flotilla_plugin_call_duration_seconds_count"
                    && s.labels.get("addon") == Some(ADDON)
                    && s.labels.get("hook") == Some("manifests")
            })
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
                _ => 0.0,
            })
            .sum()
    }

    /// Waits until the hub's `/readyz` answers `status`.
    async fn wait_hub_ready(&self, status: u16) {
        let result = wait::until(&format!("hub /readyz {status}"), TIMEOUT, || async {
            Ok::<_, String>((self.hub_ready().await == status).then_some(()))
        })
        .await;
        if let Err(e) = result {
            panic!("{e}\nhub log:\n{}", self.log("hub"));
        }
    }
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn works(hub: &Client) -> Api<DynamicObject> {
    let resource = resource(
        "work.open-cluster-management.io",
        "v1",
        "ManifestWork",
        "manifestworks",
    );
    Api::namespaced_with(hub.clone(), CLUSTER, &resource)
}

fn clusters(hub: &Client) -> Api<DynamicObject> {
    let resource = resource(
        "cluster.open-cluster-management.io",
        "v1",
        "ManagedCluster",
        "managedclusters",
    );
    Api::all_with(hub.clone(), &resource)
}

/// A work applying ConfigMap `default/<name>`.
async fn create_work(hub: &Client, name: &str) {
    let work: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": CLUSTER},
        "spec": {"workload": {"manifests": [{
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"from": name},
        }]}},
    }))
    .unwrap();
    // Retried: right after an outage the webhook or storage may still refuse once.
    wait::until(&format!("create work {name}"), TIMEOUT, || async {
        match works(hub).create(&PostParams::default(), &work).await {
            Ok(_) => Ok(Some(())),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Some(())),
            Err(e) => Err(e),
        }
    })
    .await
    .unwrap();
}

fn condition(object: &Value, type_: &str) -> Option<String> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str())
        .map(str::to_owned)
}

/// The cluster's `ManagedClusterConditionAvailable` status, if readable.
async fn available(hub: &Client) -> Option<String> {
    let cluster = clusters(hub).get_opt(CLUSTER).await.ok()??;
    condition(
        &serde_json::to_value(cluster).ok()?,
        "ManagedClusterConditionAvailable",
    )
}

/// Waits until the work is applied on the managed cluster and its status on the hub says
/// Applied and Available.
async fn wait_applied(fleet: &Fleet, name: &str) -> ConfigMap {
    let hub = fleet.hub.admin_client().await.unwrap();
    let managed: Api<ConfigMap> = Api::namespaced(fleet.managed.admin_client().await.unwrap(), "default");
    let result = wait::until(&format!("work {name} applied and reported"), TIMEOUT, || async {
        let Some(applied) = managed.get_opt(name).await? else {
            return Ok(None);
        };
        let work = serde_json::to_value(works(&hub).get(name).await?).unwrap_or_default();
        let reported = condition(&work, "Applied").as_deref() == Some("True")
            && condition(&work, "Available").as_deref() == Some("True");
        Ok::<_, kube::Error>(reported.then_some(applied))
    })
    .await;
    result.unwrap_or_else(|e| panic!("{e}\nklusterlet log:\n{}", fleet.log("klusterlet")))
}

async fn wait_available(fleet: &Fleet, status: &str) {
    let hub = fleet.hub.admin_client().await.unwrap();
    let result = wait::until(&format!("{CLUSTER} Available {status}"), TIMEOUT, || async {
        Ok::<_, String>((available(&hub).await.as_deref() == Some(status)).then_some(()))
    })
    .await;
    if let Err(e) = result {
        panic!(
            "{e}\nhub log:\n{}\nklusterlet log:\n{}",
            fleet.log("hub"),
            fleet.log("klusterlet")
        );
    }
}

/// The add-on's works on the hub by name, with their `metadata.generation`: a re-render that
/// changed anything would raise one.
async fn addon_works(hub: &Client) -> BTreeMap<String, i64> {
    let selector = format!("open-cluster-management.io/addon-name={ADDON}");
    works(hub)
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|w| (w.name_any(), w.metadata.generation.unwrap_or_default()))
        .collect()
}

/// Enables helloworld on the cluster and waits until each of its works is Applied.
async fn install_addon(fleet: &Fleet) -> BTreeMap<String, i64> {
    let hub = fleet.hub.admin_client().await.unwrap();
    ok(flotilla_at(
        fleet.state.path(),
        fleet.hub.admin_kubeconfig(),
        &["addon", "enable", "--names", ADDON, "--clusters", CLUSTER],
    ));
    let result = wait::until("helloworld's works applied", TIMEOUT, || async {
        let selector = format!("open-cluster-management.io/addon-name={ADDON}");
        let listed = works(&hub)
            .list(&kube::api::ListParams::default().labels(&selector))
            .await?
            .items;
        let applied = !listed.is_empty()
            && listed.iter().all(|w| {
                condition(&serde_json::to_value(w).unwrap_or_default(), "Applied").as_deref() == Some("True")
            });
        Ok::<_, kube::Error>(applied.then_some(()))
    })
    .await;
    if let Err(e) = result {
        panic!("{e}\nhub log:\n{}", fleet.log("hub"));
    }
    // The klusterlet files the add-on's CSR on its own time: the CSRs compared later must
    // include it.
    let secrets: Api<Secret> = Api::namespaced(
        fleet.managed.admin_client().await.unwrap(),
        "open-cluster-management-agent-addon",
    );
    let result = wait::until("helloworld's hub credential on the cluster", TIMEOUT, || async {
        secrets
            .get_opt("helloworld-hub-kubeconfig")
            .await
            .map(|s| s.map(drop))
    })
    .await;
    if let Err(e) = result {
        panic!("{e}\nklusterlet log:\n{}", fleet.log("klusterlet"));
    }
    addon_works(&hub).await
}

/// Names of the hub's CSRs: a re-registration would add one.
async fn csrs(hub: &Client) -> BTreeSet<String> {
    let api: Api<CertificateSigningRequest> = Api::all(hub.clone());
    api.list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|c| c.name_any())
        .collect()
}

/// Records each distinct Available status of the cluster, polling the hub until dropped.
struct Watch {
    seen: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Watch {
    fn start(hub: Client) -> Self {
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let kept = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                if let Some(status) = available(&hub).await {
                    let mut seen = kept.lock().unwrap();
                    if seen.last() != Some(&status) {
                        seen.push(status);
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Self { seen, task }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a run shows besides its end state.
#[derive(Debug)]
struct Outcome {
    snapshot: Snapshot,
    /// Available statuses the hub showed from the fault on.
    statuses: Vec<String>,
    /// From the end of the fault until the cluster was Available again.
    available_in: Duration,
    /// From the end of the fault until the fleet converged.
    converged_in: Duration,
}

/// Runs the scenario with `fault` and checks what every outage must leave intact.
async fn run(prefix: &str, fault: Fault) -> Outcome {
    let mut fleet = Fleet::start(prefix).await;
    let hub = fleet.hub.admin_client().await.unwrap();
    wait_available(&fleet, "True").await;
    create_work(&hub, "before").await;
    let before = wait_applied(&fleet, "before").await;
    let addon_generations = install_addon(&fleet).await;
    let registered = csrs(&hub).await;
    fleet.wait_hub_ready(200).await;
    let renders = fleet.renders().await;
    assert!(renders >= 1.0, "the hub's metrics show no render of {ADDON}");

    let watch = Watch::start(hub.clone());
    match fault {
        Fault::None => create_work(&hub, "second").await,
        Fault::HubApiserver | Fault::HubEtcd => {
            if fault == Fault::HubApiserver {
                fleet.hub.stop_apiserver().unwrap();
            } else {
                fleet.hub.stop_etcd().unwrap();
            }
            fleet.wait_hub_ready(503).await;
            tokio::time::sleep(OUTAGE).await;
            if fault == Fault::HubApiserver {
                fleet.hub.start_apiserver().await.unwrap();
            } else {
                fleet.hub.start_etcd().await.unwrap();
            }
        }
        Fault::ManagedApiserver => {
            fleet.managed.stop_apiserver().unwrap();
            create_work(&hub, "second").await;
            // The agent reports the managed apiserver unavailable after 20 s of failures.
            wait_available(&fleet, "False").await;
            fleet.managed.start_apiserver().await.unwrap();
        }
    }
    let recovered = Instant::now();
    fleet.wait_hub_ready(200).await;
    if matches!(fault, Fault::HubApiserver | Fault::HubEtcd) {
        create_work(&hub, "second").await;
    }
    wait_available(&fleet, "True").await;
    let available_in = recovered.elapsed();
    wait_applied(&fleet, "second").await;
    let converged_in = recovered.elapsed();

    // No re-registration, no needless re-apply.
    assert_eq!(
        csrs(&hub).await,
        registered,
        "a CSR was made: the cluster registered again"
    );
    let managed: Api<ConfigMap> = Api::namespaced(fleet.managed.admin_client().await.unwrap(), "default");
    let after = managed.get("before").await.unwrap();
    assert_eq!(
        after.resource_version(),
        before.resource_version(),
        "work `before` was re-applied"
    );
    assert_eq!(after.uid(), before.uid());
    assert_eq!(
        addon_works(&hub).await,
        addon_generations,
        "the add-on's works changed"
    );
    assert_eq!(fleet.renders().await, renders, "the add-on was rendered again");

    let mut snapshot = Snapshot::default();
    snapshot.read_hub("hub", &hub).await.unwrap();
    snapshot
        .read_managed(CLUSTER, &fleet.managed.admin_client().await.unwrap())
        .await
        .unwrap();
    let statuses = watch.seen();
    Outcome {
        snapshot,
        statuses,
        available_in,
        converged_in,
    }
}

/// Runs the scenario with `fault` and the fault-free one, and compares their end states.
async fn faulted(prefix: &str, fault: Fault) -> Outcome {
    let (fault_free, outcome) = tokio::join!(
        FAULT_FREE.get_or_init(|| async { run("faultfree", Fault::None).await.snapshot }),
        run(prefix, fault)
    );
    eprintln!(
        "{fault:?}: Available {:?} and converged {:?} after the fault; Available went {:?}; {} \
         objects vs {} fault-free",
        outcome.available_in,
        outcome.converged_in,
        outcome.statuses,
        outcome.snapshot.len(),
        fault_free.len()
    );
    assert_converged(&outcome.snapshot, fault_free);
    outcome
}

/// The agent could not renew its lease while the hub's apiserver was down, so the hub gives it
/// a grace from the end of the outage (`lease::Sight`): the cluster is never marked Unknown —
/// and tainted out of its placements — for the hub's own outage.
#[tokio::test]
async fn a_hub_apiserver_outage_longer_than_the_grace_recovers_without_registering_again() {
    let outcome = faulted("hubapi", Fault::HubApiserver).await;
    assert_eq!(
        outcome.statuses,
        ["True"],
        "Available went {:?}",
        outcome.statuses
    );
}

#[tokio::test]
async fn a_hub_etcd_outage_recovers_without_registering_again() {
    let outcome = faulted("hubetcd", Fault::HubEtcd).await;
    assert_eq!(
        outcome.statuses,
        ["True"],
        "Available went {:?}",
        outcome.statuses
    );
}

#[tokio::test]
async fn a_work_created_while_the_managed_apiserver_is_down_is_applied_once_it_is_back() {
    let outcome = faulted("mgdapi", Fault::ManagedApiserver).await;
    assert!(
        outcome.statuses.iter().any(|s| s == "False"),
        "{:?}",
        outcome.statuses
    );
    assert_eq!(outcome.statuses.last().map(String::as_str), Some("True"));
    // The agent probes an unavailable apiserver every 5 s, not once a status interval (60 s).
    assert!(
        outcome.available_in < Duration::from_secs(30),
        "Available {:?} after the managed apiserver came back",
        outcome.available_in
    );
}
