//! Operating `flotilla hub`, as real processes on a real control plane: two replicas elect
//! one leader through a Lease and the other takes over when it dies, never both acting;
//! `/metrics` exposes the controller, client, leader and plugin-call series in Prometheus text;
//! a leader cut off by a partition (its connection open and silent) stops before the other
//! takes over; `/readyz` follows the hub apiserver going away and coming back; JSON logs carry
//! each reconcile's span.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flotilla_api::cluster::v1::{ManagedCluster, ManagedClusterSpec};
use flotilla_api::plugins::v1alpha1::{AddOnPlugin, AddOnPluginSpec, ConfigMapSource, PluginSource};
use flotilla_testing::ControlPlane;
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

/// Lease timing of the election test: short, so the takeover is quick.
const LEASE: Duration = Duration::from_secs(6);
const RENEW_DEADLINE: &str = "4s";
const RETRY: &str = "1s";

/// A `flotilla hub` process, killed when dropped, with its metrics and health address.
struct Hub {
    child: Child,
    ops: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Hub {
    /// Starts `flotilla hub ARGS` and waits for its metrics and health endpoint.
    fn start(kubeconfig: &std::path::Path, args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .arg("hub")
            .args(args)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .env("RUST_LOG", "info,flotilla_kube=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (found, ops) = std::sync::mpsc::channel();
        let lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Some(rest) = line.split("metrics and health at http://").nth(1) {
                    let _ = found.send(rest.split_whitespace().next().unwrap_or_default().to_owned());
                }
                kept.lock().unwrap().push(line);
            }
        });
        let ops = ops
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("no endpoint printed:\n{}", log.lock().unwrap().join("\n")));
        Self { child, ops, log }
    }

    /// GET `path` on the endpoint: status and body.
    async fn get(&self, path: &str) -> (u16, String) {
        let response = reqwest::get(format!("http://{}{path}", self.ops)).await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    /// The endpoint's `/metrics`, parsed by a Prometheus text parser.
    async fn metrics(&self) -> prometheus_parse::Scrape {
        let (status, text) = self.get("/metrics").await;
        assert_eq!(status, 200, "{text}");
        prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap()
    }

    /// Waits until `/readyz` answers `status`; returns its body.
    async fn wait_ready(&self, status: u16) -> String {
        for _ in 0..600 {
            if let Ok(response) = reqwest::get(format!("http://{}/readyz", self.ops)).await
                && response.status().as_u16() == status
            {
                return response.text().await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!(
            "/readyz never answered {status}:\n{}",
            self.log.lock().unwrap().join("\n")
        );
    }
}

/// The sum of `name`'s samples whose labels pass `keep`.
fn total(
    scrape: &prometheus_parse::Scrape,
    name: &str,
    keep: impl Fn(&prometheus_parse::Labels) -> bool,
) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name && keep(&s.labels))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => 0.0,
        })
        .sum()
}

/// API writes other than to Leases: what a follower must never make.
fn non_lease_writes(scrape: &prometheus_parse::Scrape) -> f64 {
    total(scrape, "flotilla_apiserver_requests_total", |labels| {
        matches!(labels.get("verb"), Some("create" | "update" | "patch" | "delete"))
            && labels.get("resource") != Some("leases")
    })
}

fn cluster(name: &str) -> ManagedCluster {
    ManagedCluster {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: ManagedClusterSpec {
            hub_accepts_client: true,
            ..ManagedClusterSpec::default()
        },
        status: None,
    }
}

/// Creates ManagedCluster `name` and waits until a hub controller acts on it (its finalizer).
async fn acted_on(client: &Client, name: &str) {
    let clusters: Api<ManagedCluster> = Api::all(client.clone());
    clusters
        .create(&PostParams::default(), &cluster(name))
        .await
        .unwrap();
    let has_finalizer = |c: Option<&ManagedCluster>| {
        c.is_some_and(|c| c.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty()))
    };
    tokio::time::timeout(
        Duration::from_secs(120),
        kube::runtime::wait::await_condition(clusters, name, has_finalizer),
    )
    .await
    .unwrap_or_else(|_| panic!("no hub controller acted on ManagedCluster {name}"))
    .unwrap();
}

/// Registers the helloworld plugin from a ConfigMap, so the plugin host loads and calls it.
async fn register_helloworld(client: &Client) {
    let namespace = "plugin-sources";
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(namespace.into());
    namespaces.create(&PostParams::default(), &ns).await.unwrap();
    let mut source = ConfigMap::default();
    source.metadata.name = Some("helloworld".into());
    source.binary_data = Some(BTreeMap::from([(
        "plugin.wasm".to_owned(),
        ByteString(std::fs::read(flotilla_test_plugins::HELLOWORLD).unwrap()),
    )]));
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &source)
        .await
        .unwrap();
    let plugin = AddOnPlugin::new(
        "helloworld",
        AddOnPluginSpec {
            source: PluginSource {
                config_map: Some(ConfigMapSource {
                    namespace: namespace.into(),
                    name: "helloworld".into(),
                    key: "plugin.wasm".into(),
                }),
                oci: None,
            },
            ..AddOnPluginSpec::default()
        },
    );
    Api::<AddOnPlugin>::all(client.clone())
        .create(&PostParams::default(), &plugin)
        .await
        .unwrap();
}

/// One observed version of the lease.
#[derive(Clone, Debug)]
struct Seen {
    holder: String,
    acquired: Option<Timestamp>,
    renewed: Option<Timestamp>,
    transitions: i32,
}

/// The arguments of a hub that competes for the lease as `identity`, with the short timing of
/// these tests.
fn election(identity: &'static str) -> [&'static str; 9] {
    [
        "--no-plugin-host",
        "--leader-election-identity",
        identity,
        "--leader-election-lease-duration",
        "6s",
        "--leader-election-renew-deadline",
        RENEW_DEADLINE,
        "--leader-election-retry-period",
        RETRY,
    ]
}

/// Every version of the hub's lease, as a watch delivers it, until the task is aborted.
fn record_lease(client: &Client) -> (Arc<Mutex<Vec<Seen>>>, tokio::task::JoinHandle<()>) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "open-cluster-management-hub");
    let history = Arc::new(Mutex::new(Vec::<Seen>::new()));
    let recorder = {
        let history = history.clone();
        tokio::spawn(async move {
            let config = watcher::Config::default().fields("metadata.name=flotilla-hub");
            let mut events = watcher(leases, config).applied_objects().boxed();
            while let Some(Ok(lease)) = events.next().await {
                let spec = lease.spec.unwrap_or_default();
                history.lock().unwrap().push(Seen {
                    holder: spec.holder_identity.unwrap_or_default(),
                    acquired: spec.acquire_time.map(|t| t.0),
                    renewed: spec.renew_time.map(|t| t.0),
                    transitions: spec.lease_transitions.unwrap_or_default(),
                });
            }
        })
    };
    (history, recorder)
}

#[tokio::test]
async fn two_hubs_elect_one_leader_and_the_other_takes_over_when_it_dies() {
    let hub = ControlPlane::start("ops-leader").await.unwrap();
    let client = hub.admin_client().await.unwrap();
    let (history, recorder) = record_lease(&client);
    let holder_is = |name: &'static str| {
        let history = history.clone();
        async move {
            for _ in 0..1200 {
                if history.lock().unwrap().last().is_some_and(|s| s.holder == name) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!("{name} never held the lease: {:?}", history.lock().unwrap());
        }
    };

    let a = Hub::start(hub.admin_kubeconfig(), &election("hub-a"));
    holder_is("hub-a").await;
    let b = Hub::start(hub.admin_kubeconfig(), &election("hub-b"));
    acted_on(&client, "before-takeover").await;
    // b follows: it has read the lease in a few rounds and done nothing else.
    let lease_reads = |m: &prometheus_parse::Scrape| {
        total(m, "flotilla_apiserver_requests_total", |l| {
            l.get("verb") == Some("get") && l.get("resource") == Some("leases")
        })
    };
    while lease_reads(&b.metrics().await) < 3.0 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (a_metrics, b_metrics) = (a.metrics().await, b.metrics().await);
    let leader = |m: &prometheus_parse::Scrape| total(m, "flotilla_leader_election_is_leader", |_| true);
    assert_eq!((leader(&a_metrics), leader(&b_metrics)), (1.0, 0.0));
    assert!(non_lease_writes(&a_metrics) > 0.0, "the leader writes");
    assert_eq!(
        non_lease_writes(&b_metrics),
        0.0,
        "the follower must not write: {:?}",
        b_metrics
            .samples
            .iter()
            .filter(|s| s.metric == "flotilla_apiserver_requests_total")
            .collect::<Vec<_>>()
    );

    // The leader dies without releasing the lease.
    drop(a);
    holder_is("hub-b").await;
    acted_on(&client, "after-takeover").await;
    let b_metrics = b.metrics().await;
    assert_eq!(leader(&b_metrics), 1.0);
    assert!(non_lease_writes(&b_metrics) > 0.0, "the new leader acts");
    recorder.abort();

    // Never two leaders: b acquired no earlier than a lease duration after a's last renewal,
    // and took over within the lease duration of it plus its retry rounds.
    let history = history.lock().unwrap().clone();
    let last_of_a = history.iter().rev().find(|s| s.holder == "hub-a").unwrap();
    let first_of_b = history.iter().find(|s| s.holder == "hub-b").unwrap();
    let gap = first_of_b
        .acquired
        .unwrap()
        .duration_since(last_of_a.renewed.unwrap());
    let gap = Duration::try_from(gap).unwrap();
    println!("takeover {gap:?} after the dead leader's last renewal (lease {LEASE:?})");
    assert!(
        gap >= LEASE,
        "b acquired {gap:?} after a's last renewal: two leaders"
    );
    assert!(gap < LEASE * 2, "b took {gap:?} to take over a {LEASE:?} lease");
    assert_eq!(first_of_b.transitions, last_of_a.transitions + 1);
    let holders: Vec<&str> = history.iter().map(|s| s.holder.as_str()).collect();
    let changes = holders.windows(2).filter(|w| w[0] != w[1]).count();
    assert_eq!(changes, 1, "the lease changed hands once: {holders:?}");
}

// Multi-threaded: the black hole's tasks run while `Hub::start` blocks this thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_leader_stops_acting_before_the_follower_takes_over() {
    // A partition leaves the leader's connection open and silent. Its renewal then neither
    // succeeds nor fails; unless every round is bounded by the renew deadline, the leader goes
    // on acting (for the client's read timeout, minutes) after the follower has taken the
    // lease: two leaders.
    let hub = ControlPlane::start("ops-partition").await.unwrap();
    let client = hub.admin_client().await.unwrap();
    let hole = flotilla_testing::blackhole::Blackhole::start(std::net::SocketAddr::from((
        [127, 0, 0, 1],
        hub.port(),
    )))
    .await
    .unwrap();
    let through_hole = tempfile::NamedTempFile::new().unwrap();
    let admin = std::fs::read_to_string(hub.admin_kubeconfig()).unwrap();
    std::fs::write(through_hole.path(), admin.replace(hub.server(), &hole.url())).unwrap();
    let (history, recorder) = record_lease(&client);
    let first_of = |name: &'static str| {
        let history = history.clone();
        async move {
            for _ in 0..1200 {
                if let Some(seen) = history.lock().unwrap().iter().find(|s| s.holder == name) {
                    return seen.clone();
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!("{name} never held the lease: {:?}", history.lock().unwrap());
        }
    };

    let mut a = Hub::start(through_hole.path(), &election("hub-a"));
    first_of("hub-a").await;
    let b = Hub::start(hub.admin_kubeconfig(), &election("hub-b"));
    acted_on(&client, "before-partition").await;

    hole.blackhole();
    let cut = std::time::Instant::now();
    let a_stopped = loop {
        if let Some(status) = a.child.try_wait().unwrap() {
            break (status, Timestamp::now(), cut.elapsed());
        }
        assert!(
            cut.elapsed() < LEASE * 4,
            "the partitioned leader still runs {:?} after the cut:\n{}",
            cut.elapsed(),
            a.log.lock().unwrap().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let b_took = first_of("hub-b").await;
    let b_acquired = b_took.acquired.unwrap();
    println!(
        "partitioned leader stopped {:?} after the cut; the follower acquired {:?} after that",
        a_stopped.2,
        Duration::try_from(b_acquired.duration_since(a_stopped.1)).unwrap_or_default()
    );
    assert!(
        !a_stopped.0.success(),
        "a leader that lost its lease exits with an error"
    );
    assert!(
        a.log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("lost leadership")),
        "{}",
        a.log.lock().unwrap().join("\n")
    );
    assert!(
        a_stopped.1 < b_acquired,
        "the old leader stopped at {} after the new one acquired at {b_acquired}: two leaders",
        a_stopped.1
    );
    hole.restore();
    acted_on(&client, "after-partition").await;
    assert_eq!(
        total(&b.metrics().await, "flotilla_leader_election_is_leader", |_| true),
        1.0
    );
    recorder.abort();
}

#[tokio::test]
async fn metrics_are_prometheus_text_and_readyz_follows_the_hub_apiserver() {
    let mut hub = ControlPlane::start("ops-ready").await.unwrap();
    let client = hub.admin_client().await.unwrap();
    let process = Hub::start(
        hub.admin_kubeconfig(),
        &["--disable-leader-election", "--log-format", "json"],
    );
    process.wait_ready(200).await;
    assert_eq!(process.get("/healthz").await.0, 200);
    acted_on(&client, "measured").await;

    register_helloworld(&client).await;
    let mut scrape = process.metrics().await;
    for _ in 0..600 {
        if scrape
            .samples
            .iter()
            .any(|s| s.metric == "flotilla_plugin_call_duration_seconds_count")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        scrape = process.metrics().await;
    }
    let per_controller: BTreeMap<&str, f64> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "flotilla_controller_reconciles_total")
        .filter_map(|s| Some((s.labels.get("controller")?, 1.0)))
        .collect();
    assert!(
        per_controller.len() >= 3,
        "reconciles of several controllers: {per_controller:?}"
    );
    for series in [
        "flotilla_controller_reconcile_duration_seconds_count",
        "flotilla_controller_queue_depth",
        "flotilla_controller_cache_synced",
        "flotilla_apiserver_requests_total",
    ] {
        assert!(
            scrape.samples.iter().any(|s| s.metric == series),
            "{series} missing"
        );
    }
    for series in [
        "flotilla_plugin_call_duration_seconds_count",
        "flotilla_plugin_instantiation_duration_seconds_count",
        "flotilla_plugin_loads_total",
    ] {
        assert!(
            scrape.samples.iter().any(|s| s.metric == series),
            "{series} missing after a plugin load"
        );
    }
    assert!(
        total(&scrape, "flotilla_apiserver_requests_total", |l| l.get("verb")
            == Some("watch"))
            > 0.0,
        "watches are counted"
    );

    // Structured logs: each reconcile's lines are JSON objects inside its span.
    let reconciles: Vec<serde_json::Value> = process
        .log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|entry| entry["span"]["name"] == "reconcile")
        .collect();
    assert!(
        reconciles
            .iter()
            .any(|e| e["span"]["controller"].is_string() && e["span"]["object"].is_string()),
        "no reconcile span in the JSON logs: {:?}",
        reconciles.first()
    );

    hub.stop_apiserver().unwrap();
    let why = process.wait_ready(503).await;
    assert!(why.contains("apiserver unreachable"), "{why}");
    assert_eq!(process.get("/healthz").await.0, 200, "alive while not ready");
    hub.start_apiserver().await.unwrap();
    process.wait_ready(200).await;
}
