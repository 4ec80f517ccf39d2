//! A Progressive config rollout end to end: a hub and four managed clusters, each on its own
//! control plane, the real `flotilla hub` (as deploy/hub's service account) and one real
//! `flotilla klusterlet` per cluster, helloworld-config pushed to a real OCI registry and
//! installed through a Placements install strategy with an AddOnDeploymentConfig and rollout
//! strategy Progressive (`maxConcurrency` 2, `maxFailures` 0).
//!
//! A config change is released batch by batch, with `flotilla hub` killed (SIGKILL) and started
//! again once the first add-on has it: watches on the ManagedClusterAddOns and on their
//! ManifestWorks, running across the restart, see every change the API server makes and never
//! more than `maxConcurrency`
//! clusters in flight (released and not yet applied; works not yet applied by the klusterlet), and
//! every cluster ends with the new value in the agent Deployment its klusterlet applied. Then
//! the klusterlets of cluster1 and cluster2 are stopped: their works never apply within
//! `progressDeadline`, the timeouts count toward `maxFailures`, the rollout stops before
//! cluster3 and cluster4, and the ClusterManagementAddOn's `installProgressions` say so.
//!
//! One managed control plane per cluster rather than several klusterlets sharing one: the
//! add-on's agent objects have fixed names, so klusterlets sharing a control plane would apply
//! the same Deployment, and the Deployment check would not tell the clusters apart.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::{
    collections::BTreeMap,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use common::{Klusterlets, Running, flotilla_at, hub_service_account, hub_token, join_local, ok, start_hub};
use flotilla_api::addon::consts::ADDON_NAME_LABEL;
use flotilla_api::addon::v1alpha1::{ClusterManagementAddOn, InstallProgression, ManagedClusterAddOn};
use flotilla_api::work::v1::ManifestWork;
use flotilla_test_plugins as plugins;
use flotilla_testing::{ControlPlane, registry::Registry, wait};
use futures::TryStreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, Client, ResourceExt as _,
    api::{Patch, PatchParams},
    runtime::{WatchStreamExt as _, watcher},
};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(120);
const ADDON: &str = "helloworld-config";
const CLUSTERS: [&str; 4] = ["cluster1", "cluster2", "cluster3", "cluster4"];
/// Namespace of the Placement and the AddOnDeploymentConfig.
const NAMESPACE: &str = "rollout";
const PLACEMENT: &str = "everywhere";
const CONFIG: &str = "agent-settings";
const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
/// The agent Deployment helloworld-config renders.
const AGENT: &str = "helloworld-agent";
const MAX_CONCURRENCY: usize = 2;

/// The hub, four managed clusters with their klusterlets, and the registry. Fields drop in
/// order: the processes stop before their control planes do.
struct Fleet {
    hub_process: Running,
    _klusterlets: Klusterlets,
    hub: ControlPlane,
    managed: Vec<ControlPlane>,
    registry: Registry,
    state: tempfile::TempDir,
}

impl Fleet {
    async fn start() -> Self {
        let (hub, registry, managed) = tokio::join!(
            ControlPlane::start("rollout-hub"),
            Registry::start(),
            futures::future::join_all(
                CLUSTERS
                    .iter()
                    .map(|c| ControlPlane::start(format!("rollout-{c}")))
            )
        );
        let (hub, registry) = (hub.unwrap(), registry.unwrap());
        let managed: Vec<ControlPlane> = managed.into_iter().map(Result::unwrap).collect();
        let state_dir = tempfile::tempdir().unwrap();
        let klusterlets = Klusterlets(state_dir.path().to_owned());
        let state = state_dir.path();
        let admin = hub.admin_kubeconfig();
        let token = hub_token(&ok(flotilla_at(state, admin, &["init"])));
        let identity = hub_service_account(&hub, state);
        let cache = state.join("plugin-artifacts");
        let hub_process = start_hub(
            &identity,
            &state.join("hub.log"),
            &["--plugin-cache-dir", cache.to_str().unwrap()],
        );
        for (name, cp) in CLUSTERS.iter().zip(&managed) {
            ok(join_local(
                state,
                cp.admin_kubeconfig(),
                hub.server(),
                &token,
                name,
                &[],
            ));
        }
        ok(flotilla_at(
            state,
            admin,
            &[
                "accept",
                "--wait",
                "--clusters",
                &CLUSTERS.join(","),
                "--timeout",
                "120s",
            ],
        ));
        Self {
            hub_process,
            _klusterlets: klusterlets,
            hub,
            managed,
            registry,
            state: state_dir,
        }
    }

    fn state(&self) -> &Path {
        self.state.path()
    }

    fn admin(&self) -> &Path {
        self.hub.admin_kubeconfig()
    }

    /// The last lines of the hub's log and of `cluster`'s klusterlet log, for a failure message.
    fn logs(&self, cluster: &str) -> String {
        let tail = |path: &Path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(30)..].join("\n")
        };
        format!(
            "hub log:\n{}\n{cluster} klusterlet log:\n{}",
            tail(&self.state().join("hub.log")) + &tail(&self.state().join("hub-restarted.log")),
            tail(
                &self
                    .state()
                    .join("klusterlets")
                    .join(cluster)
                    .join("klusterlet.log")
            )
        )
    }
}

/// Server-side applies AddOnDeploymentConfig `rollout/agent-settings` with `LOG_LEVEL` = `level`.
async fn set_log_level(hub: &Client, level: &str) {
    let config: flotilla_api::addon::v1alpha1::AddOnDeploymentConfig = serde_json::from_value(json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnDeploymentConfig",
        "metadata": {"name": CONFIG, "namespace": NAMESPACE},
        "spec": {"customizedVariables": [{"name": "LOG_LEVEL", "value": level}]}
    }))
    .unwrap();
    Api::<flotilla_api::addon::v1alpha1::AddOnDeploymentConfig>::namespaced(hub.clone(), NAMESPACE)
        .patch(CONFIG, &PatchParams::apply("e2e").force(), &Patch::Apply(&config))
        .await
        .unwrap();
}

/// The `--v=` argument of the agent Deployment a klusterlet applied on a managed cluster.
async fn agent_log_level(managed: &Client) -> Option<String> {
    Api::<Deployment>::namespaced(managed.clone(), INSTALL_NAMESPACE)
        .get_opt(AGENT)
        .await
        .unwrap()
        .and_then(|d| d.spec)
        .and_then(|s| s.template.spec)
        .and_then(|p| p.containers.into_iter().next())
        .and_then(|c| c.args)
        .unwrap_or_default()
        .into_iter()
        .find_map(|a| a.strip_prefix("--v=").map(str::to_owned))
}

/// The `Progressing` condition of a progression: (status, reason, message).
fn progressing(p: &InstallProgression) -> Option<(String, String, String)> {
    p.conditions
        .iter()
        .find(|c| c.type_ == "Progressing")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// The desired spec hash of the progression's one config.
fn desired_hash(p: &InstallProgression) -> Option<String> {
    p.config_references
        .first()
        .and_then(|r| r.desired_config.as_ref())
        .map(|c| c.spec_hash.clone())
}

/// The last known good spec hash of the progression's one config.
fn last_known_good(p: &InstallProgression) -> Option<String> {
    p.config_references
        .first()
        .and_then(|r| r.last_known_good_config.as_ref())
        .map(|c| c.spec_hash.clone())
}

/// Whether the progression completed with its desired config as the last known good one.
fn completed(p: &InstallProgression) -> bool {
    progressing(p).is_some_and(|(status, reason, _)| status == "False" && reason == "Completed")
        && desired_hash(p).is_some()
        && desired_hash(p) == last_known_good(p)
}

/// Whether the progression completed on all four clusters. The placement may decide on fewer
/// at first (clusters join its decisions one by one), and a progression completed on those
/// would let the test change the config while the last add-ons still install: each of those
/// counts as in flight beside the new batch (a config change makes it ToApply, as in OCM).
fn completed_everywhere(p: &InstallProgression) -> bool {
    completed(p)
        && progressing(p).is_some_and(|(_, _, m)| m.contains("selected clusters 4") && m.contains("4/4"))
}

/// Waits until the CMA's install progression of the placement satisfies `check`.
async fn await_progression(
    fleet: &Fleet,
    hub: &Client,
    what: &str,
    check: impl Fn(&InstallProgression) -> bool,
) -> InstallProgression {
    let api: Api<ClusterManagementAddOn> = Api::all(hub.clone());
    let found = wait::until(what, TIMEOUT, || {
        let api = api.clone();
        let check = &check;
        async move {
            let cma = api.get_opt(ADDON).await?;
            Ok::<_, kube::Error>(
                cma.and_then(|c| c.status)
                    .into_iter()
                    .flat_map(|s| s.install_progressions)
                    .find(|p| p.placement.name == PLACEMENT && check(p)),
            )
        }
    })
    .await;
    match found {
        Ok(p) => p,
        Err(e) => {
            let cma = Api::<ClusterManagementAddOn>::all(hub.clone())
                .get_opt(ADDON)
                .await
                .unwrap();
            panic!(
                "{e}\nCMA status: {:?}\n{}",
                cma.and_then(|c| c.status),
                fleet.logs("cluster1")
            )
        }
    }
}

/// Waits until every cluster's agent Deployment runs with `--v=<level>`.
async fn await_log_level_everywhere(fleet: &Fleet, clients: &[Client], level: &str) {
    for (cluster, client) in CLUSTERS.iter().zip(clients) {
        let result = wait::until(&format!("{cluster} agent with --v={level}"), TIMEOUT, || async {
            let found = agent_log_level(client).await;
            if found.as_deref() == Some(level) {
                Ok(Some(()))
            } else {
                Err(format!("--v={found:?}"))
            }
        })
        .await;
        if let Err(e) = result {
            panic!("{e}\n{}", fleet.logs(cluster));
        }
    }
}

/// Watches the add-on's ManagedClusterAddOns and records the most clusters in flight at once:
/// released a desired config (in `configReferences`) and not yet applied (`lastAppliedConfig`
/// differs). A watch sees every change the API server makes, in order; nothing is sampled.
fn watch_in_flight(hub: Client) -> Arc<AtomicUsize> {
    let most = Arc::new(AtomicUsize::new(0));
    let recorded = Arc::clone(&most);
    tokio::spawn(async move {
        let api: Api<ManagedClusterAddOn> = Api::all(hub);
        let config = watcher::Config::default().fields(&format!("metadata.name={ADDON}"));
        let mut events = std::pin::pin!(watcher(api, config).applied_objects());
        let mut in_flight: BTreeMap<String, bool> = BTreeMap::new();
        while let Ok(Some(mca)) = events.try_next().await {
            let flying = mca.status.as_ref().is_some_and(|s| {
                s.config_references
                    .iter()
                    .any(|r| r.desired_config.is_some() && r.last_applied_config != r.desired_config)
            });
            in_flight.insert(mca.namespace().unwrap_or_default(), flying);
            let now = in_flight.values().filter(|f| **f).count();
            recorded.fetch_max(now, Ordering::SeqCst);
        }
    });
    most
}

/// Watches the add-on's ManifestWorks and records the most clusters whose klusterlet had not yet
/// applied the work's current generation (`Applied` True at `metadata.generation`) at once.
fn watch_works_in_flight(hub: Client) -> Arc<AtomicUsize> {
    let most = Arc::new(AtomicUsize::new(0));
    let recorded = Arc::clone(&most);
    tokio::spawn(async move {
        let api: Api<ManifestWork> = Api::all(hub);
        let config = watcher::Config::default().labels(&format!("{ADDON_NAME_LABEL}={ADDON}"));
        let mut events = std::pin::pin!(watcher(api, config).applied_objects());
        let mut in_flight: BTreeMap<String, bool> = BTreeMap::new();
        while let Ok(Some(work)) = events.try_next().await {
            let generation = work.metadata.generation;
            let applied = work.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "Applied" && c.status == "True" && c.observed_generation == generation
                })
            });
            in_flight.insert(work.namespace().unwrap_or_default(), !applied);
            let now = in_flight.values().filter(|f| **f).count();
            recorded.fetch_max(now, Ordering::SeqCst);
        }
    });
    most
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progressive_config_rollout_through_real_klusterlets_keeps_to_max_concurrency_and_stops_at_max_failures()
 {
    let mut fleet = Fleet::start().await;
    let (state, admin) = (fleet.state().to_owned(), fleet.admin().to_owned());
    let (state, admin) = (state.as_path(), admin.as_path());
    let hub = fleet.hub.admin_client().await.unwrap();
    let mut clients = Vec::new();
    for cp in &fleet.managed {
        clients.push(cp.admin_client().await.unwrap());
    }

    // The plugin author publishes; the hub admin registers the pushed digest.
    let reference = fleet.registry.reference("addons/helloworld-config", "v1");
    let pushed = ok(flotilla_at(
        state,
        admin,
        &[
            "plugin",
            "push",
            plugins::HELLOWORLD_CONFIG,
            &reference,
            "--insecure",
        ],
    ));
    let digest = common::pushed_digest(&pushed);
    ok(flotilla_at(
        state,
        admin,
        &[
            "plugin",
            "register",
            ADDON,
            "--oci",
            &reference,
            "--digest",
            &digest,
            "--insecure",
        ],
    ));

    // A Placement selecting every cluster of the global set, and the first config.
    let placement = state.join("placement.yaml");
    std::fs::write(
        &placement,
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NAMESPACE}}}\n---\n\
             apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\n\
             metadata: {{name: {PLACEMENT}, namespace: {NAMESPACE}}}\nspec: {{}}\n"
        ),
    )
    .unwrap();
    let out = fleet
        .hub
        .kubectl()
        .args(["apply", "-f", placement.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    ok(flotilla_at(
        state,
        admin,
        &["clusterset", "bind", "global", "--namespace", NAMESPACE],
    ));
    set_log_level(&hub, "1").await;

    // The CMA the plugin's registration ensured gets a Placements install strategy with the
    // config and a Progressive rollout.
    let cmas: Api<ClusterManagementAddOn> = Api::all(hub.clone());
    wait::until("ClusterManagementAddOn ensured", TIMEOUT, || {
        let cmas = cmas.clone();
        async move { Ok::<_, kube::Error>(cmas.get_opt(ADDON).await?.map(|_| ())) }
    })
    .await
    .unwrap();
    cmas.patch(
        ADDON,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"installStrategy": {"type": "Placements", "placements": [{
            "namespace": NAMESPACE, "name": PLACEMENT,
            "configs": [{"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs",
                         "namespace": NAMESPACE, "name": CONFIG}],
            "rolloutStrategy": {"type": "Progressive", "progressive": {
                "maxConcurrency": MAX_CONCURRENCY, "maxFailures": 0, "progressDeadline": "10s"}}
        }]}}})),
    )
    .await
    .unwrap();
    let first = await_progression(
        &fleet,
        &hub,
        "first install completed on four clusters",
        completed_everywhere,
    )
    .await;
    let first_hash = desired_hash(&first).unwrap();
    await_log_level_everywhere(&fleet, &clients, "1").await;

    // A config change, watched while it rolls out. Once the first add-on is released it, the
    // hub is killed (SIGKILL) and started again: the rollout goes on from where it stood, and
    // the watches, which run across the restart, never see more than maxConcurrency in flight.
    let most = watch_in_flight(hub.clone());
    let most_works = watch_works_in_flight(hub.clone());
    set_log_level(&hub, "2").await;
    wait::until("the change released to a first add-on", TIMEOUT, || async {
        Ok::<_, String>((most.load(Ordering::SeqCst) > 0).then_some(()))
    })
    .await
    .unwrap();
    common::kill_and_restart_hub(&mut fleet.hub_process, state);
    let restarted = std::time::Instant::now();
    let second = await_progression(&fleet, &hub, "config change completed", |p| {
        desired_hash(p).is_some_and(|h| h != first_hash) && completed(p)
    })
    .await;
    let second_hash = desired_hash(&second).unwrap();
    let (_, _, message) = progressing(&second).unwrap();
    assert!(
        message.contains("selected clusters 4") && message.contains("4/4"),
        "{message}"
    );
    await_log_level_everywhere(&fleet, &clients, "2").await;
    let (most, most_works) = (most.load(Ordering::SeqCst), most_works.load(Ordering::SeqCst));
    println!(
        "rolled out {:?} after the hub's restart; most add-ons in flight at once: {most}; most works not \
         yet applied at once: {most_works}",
        restarted.elapsed()
    );
    let releases = || {
        let log = ["hub.log", "hub-restarted.log"]
            .iter()
            .map(|f| std::fs::read_to_string(fleet.state().join(f)).unwrap_or_default())
            .collect::<String>();
        let lines: Vec<&str> = log.lines().filter(|l| l.contains("released")).collect();
        lines.join("\n")
    };
    assert!(
        (1..=MAX_CONCURRENCY).contains(&most),
        "never more than maxConcurrency ({MAX_CONCURRENCY}) add-ons in flight, saw {most}; the hub's releases:\n{}",
        releases()
    );
    assert!(
        (1..=MAX_CONCURRENCY).contains(&most_works),
        "never more than maxConcurrency ({MAX_CONCURRENCY}) works awaiting their klusterlet, saw {most_works}"
    );

    // The klusterlets of cluster1 and cluster2 stop: their works never apply within
    // progressDeadline. The first batch (cluster1, cluster2 by name) times out, over maxFailures
    // 0: the rollout stops before cluster3 and cluster4.
    for cluster in ["cluster1", "cluster2"] {
        let pid = common::klusterlet_pid(state, cluster);
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
    }
    set_log_level(&hub, "3").await;
    let stopped = await_progression(&fleet, &hub, "cluster1 and cluster2 timed out", |p| {
        progressing(p).is_some_and(|(_, _, m)| m.contains("2 timeout"))
    })
    .await;
    let (status, reason, message) = progressing(&stopped).unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "Progressing"),
        "{message}"
    );
    assert!(message.contains("selected clusters 4"), "{message}");
    let third_hash = desired_hash(&stopped).unwrap();
    assert_ne!(third_hash, second_hash);
    assert_eq!(
        last_known_good(&stopped),
        Some(second_hash.clone()),
        "the last known good config is still the second one"
    );

    // The hub writes the add-ons of a rollout step before the CMA status that reports it, so
    // had the timeouts not stopped the rollout, cluster3 and cluster4 would show the release by
    // now. cluster1 and cluster2 were released the change (their klusterlets never applied it);
    // cluster3 and cluster4 never were and keep the second config, in the add-on status and in
    // the Deployment their klusterlets applied.
    for (index, cluster) in CLUSTERS.iter().enumerate() {
        let mca = Api::<ManagedClusterAddOn>::namespaced(hub.clone(), cluster)
            .get(ADDON)
            .await
            .unwrap();
        let status = mca.status.unwrap();
        let released: Vec<String> = status
            .config_references
            .iter()
            .filter_map(|r| r.desired_config.as_ref().map(|d| d.spec_hash.clone()))
            .collect();
        assert_eq!(
            agent_log_level(&clients[index]).await.as_deref(),
            Some("2"),
            "{cluster} runs the second config"
        );
        if index < 2 {
            assert_eq!(
                released,
                std::slice::from_ref(&third_hash),
                "{cluster} was released the change"
            );
            continue;
        }
        assert_eq!(
            released,
            std::slice::from_ref(&second_hash),
            "{cluster} was not released the change"
        );
        let configured = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Configured")
            .unwrap();
        assert_eq!(
            (configured.status.as_str(), configured.reason.as_str()),
            ("False", "ConfigurationsNotConfigured"),
            "{cluster}"
        );
    }
}
