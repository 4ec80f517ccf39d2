//! Prints how the placement controller scales; asserts nothing. For each case of P placements
//! over C clusters (OCM's benchmark cases 100×1, 1 000×1 000, 10 000×1 000, plus 1×5 000), on a
//! fresh control plane holding the objects of OCM's placement benchmark (cluster set, binding,
//! C clusters each with a namespace and an AddOnPlacementScore `demo`, P placements of OCM's
//! benchmark placement: 10 clusters, Exact with the AddOn score `demo/demo`,
//! ResourceAllocatableCPU and Balance):
//!
//! - the time from starting the controller until every placement has a PlacementDecision with
//!   decisions, and until it writes nothing more; its CPU seconds and peak resident memory; the
//!   apiserver writes it issued (Placements, PlacementDecisions, Events);
//! - in the same run, the time to write the same PlacementDecision objects directly with the
//!   same kind of client (create + status patch, the same concurrency): the physical limit;
//! - how many placements a re-label of one cluster re-decides, next to how many can see it
//!   (ten more placements in another namespace see another set and must not be touched);
//! - with `--ocm-binary PATH`, the same figures of OCM's own placement controller, started on
//!   a fresh control plane holding the same objects, in the same run.
//!
//! Both controllers run as child processes of this benchmark (ours is this binary with the
//! hidden `controller KUBECONFIG` command), so CPU and memory are theirs alone.
//!
//! ```text
//! cargo run --release -p flotilla-tests --bin bench-placement -- \
//!     [CASES] [--ocm-binary PATH] [--ocm-qps N]
//! ```
//!
//! CASES defaults to `100x1,1000x1000,1x5000,10000x1000`. `--ocm-qps` raises OCM's client rate
//! limit (`--kube-api-qps N --kube-api-burst 2N`; OCM ships 50/100). OCM's controller is built
//! from its own source with its vendored modules, outside this repository:
//!
//! ```text
//! git --git-dir=<mirror of open-cluster-management-io/ocm> archive HEAD | tar -x -C /tmp/ocm
//! cd /tmp/ocm && GOFLAGS=-mod=vendor GOTOOLCHAIN=local go build -o /tmp/ocm-placement ./cmd/placement
//! ```

use std::{
    collections::HashSet,
    io::BufRead,
    path::PathBuf,
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use flotilla_api::cluster::{
    v1::ManagedCluster,
    v1alpha1::AddOnPlacementScore,
    v1beta1::{Placement, PlacementDecision},
    v1beta2::{ManagedClusterSet, ManagedClusterSetBinding},
};
use flotilla_placement::PlacementOptions;
use flotilla_testing::ControlPlane;
use flotilla_tests::KillOnDrop;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::{Value, json};

/// Concurrency of both the controller and the direct writes.
const CONCURRENCY: u16 = 8;
/// Concurrency of the setup writes.
const SETUP_CONCURRENCY: usize = 16;
/// How long the writes must stay unchanged to count as quiet.
const QUIET: Duration = Duration::from_secs(2);
/// The API resources the placement controllers write.
const WRITTEN_RESOURCES: [&str; 3] = ["placements", "placementdecisions", "events"];

/// Sum of the apiserver's write requests (POST, PUT, PATCH, DELETE) so far on the resources a
/// placement controller writes.
async fn writes(client: &Client) -> anyhow::Result<f64> {
    flotilla_tests::hub_objects::writes(client, &WRITTEN_RESOURCES).await
}

async fn create<K>(api: &Api<K>, value: Value) -> anyhow::Result<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value)?;
    api.create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("create {}", object.name_any()))
}

/// OCM's benchmark placement.
fn placement(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"numberOfClusters": 10, "prioritizerPolicy": {"mode": "Exact", "configurations": [
               {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": "demo", "scoreName": "demo"}}, "weight": 1},
               {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "ResourceAllocatableCPU"}, "weight": 1},
               {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Balance"}, "weight": 1}]}}})
}

/// Runs `count` setup steps with [`SETUP_CONCURRENCY`].
async fn each<F, Fut>(count: usize, step: F) -> anyhow::Result<()>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    futures::stream::iter(0..count)
        .map(step)
        .buffer_unordered(SETUP_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Creates set `set` with `count` clusters `<set>-<i>`, each with a namespace and an
/// AddOnPlacementScore `demo` (score `demo` = 80, valid for 1 000 minutes, as OCM's benchmark),
/// and binds the set into namespace `ns`.
async fn world(client: &Client, ns: &str, set: &str, count: usize) -> anyhow::Result<()> {
    create(
        &Api::<Namespace>::all(client.clone()),
        json!({"metadata": {"name": ns}}),
    )
    .await?;
    create(
        &Api::<ManagedClusterSet>::all(client.clone()),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet",
               "metadata": {"name": set}, "spec": {}}),
    )
    .await?;
    create(
        &Api::<ManagedClusterSetBinding>::namespaced(client.clone(), ns),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSetBinding",
               "metadata": {"name": set, "namespace": ns}, "spec": {"clusterSet": set}}),
    )
    .await?;
    let valid_until =
        k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_mins(1000);
    each(count, |i| async move {
        let name = format!("{set}-{i:05}");
        create(
            &Api::<ManagedCluster>::all(client.clone()),
            json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
                   "metadata": {"name": name, "labels": {"cluster.open-cluster-management.io/clusterset": set}},
                   "spec": {"hubAcceptsClient": true}}),
        )
        .await?;
        create(
            &Api::<Namespace>::all(client.clone()),
            json!({"metadata": {"name": name}}),
        )
        .await?;
        let scores = Api::<AddOnPlacementScore>::namespaced(client.clone(), &name);
        create(
            &scores,
            json!({"apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "AddOnPlacementScore",
                   "metadata": {"name": "demo", "namespace": name}}),
        )
        .await?;
        let status = json!({"status": {"scores": [{"name": "demo", "value": 80}],
                                       "validUntil": valid_until.to_string()}});
        scores
            .patch_status("demo", &PatchParams::default(), &Patch::Merge(&status))
            .await
            .context("score status")?;
        Ok(())
    })
    .await
}

async fn placements(client: &Client, ns: &str, count: usize) -> anyhow::Result<()> {
    let api = Api::<Placement>::namespaced(client.clone(), ns);
    each(count, |i| {
        let api = api.clone();
        async move {
            create(&api, placement(ns, &format!("p{i:05}"))).await?;
            Ok(())
        }
    })
    .await
}

/// The objects of one case: `placements` over `clusters` in namespace `bench`, and ten more
/// placements over one other cluster in namespace `other`.
async fn setup(client: &Client, placements_count: usize, clusters: usize) -> anyhow::Result<()> {
    let started = Instant::now();
    world(client, "bench", "bench-set", clusters).await?;
    world(client, "other", "other-set", 1).await?;
    placements(client, "bench", placements_count).await?;
    placements(client, "other", 10).await?;
    println!("  setup: {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Waits until `count` PlacementDecisions in `ns` hold decisions, following a watch.
async fn decided(client: &Client, ns: &str, count: usize) -> anyhow::Result<Vec<PlacementDecision>> {
    let api = Api::<PlacementDecision>::namespaced(client.clone(), ns);
    let mut full: HashSet<String> = HashSet::new();
    let mut objects = std::collections::HashMap::new();
    let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
    while let Some(event) = stream.try_next().await? {
        let (object, deleted) = match event {
            watcher::Event::Apply(d) | watcher::Event::InitApply(d) => (d, false),
            watcher::Event::Delete(d) => (d, true),
            watcher::Event::Init | watcher::Event::InitDone => continue,
        };
        let name = object.name_any();
        if !deleted && object.status.as_ref().is_some_and(|s| !s.decisions.is_empty()) {
            full.insert(name.clone());
            objects.insert(name, object);
        } else {
            full.remove(&name);
            objects.remove(&name);
        }
        if full.len() >= count {
            return Ok(objects.into_values().collect());
        }
    }
    anyhow::bail!("the PlacementDecision watch ended")
}

/// Waits until the writes stop changing for [`QUIET`] (and `passes`, if given); returns the
/// time the last change was seen.
async fn quiet(client: &Client, passes: Option<&AtomicU64>) -> anyhow::Result<Instant> {
    let mut last = (writes(client).await?, passes.map(|p| p.load(Ordering::Relaxed)));
    let mut changed = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = (writes(client).await?, passes.map(|p| p.load(Ordering::Relaxed)));
        if now != last {
            last = now;
            changed = Instant::now();
        } else if changed.elapsed() >= QUIET {
            return Ok(changed);
        }
    }
}

/// A controller under measurement: the child process, and its scheduling passes as it reports
/// them (ours only).
struct Child {
    process: KillOnDrop,
    passes: Arc<AtomicU64>,
    /// Milliseconds from the start until the first pass was reported (ours only; 0 before).
    first_pass_ms: Arc<AtomicU64>,
}

/// Starts our controller as a child: this binary's `controller` command.
fn start_ours(kubeconfig: &std::path::Path) -> anyhow::Result<Child> {
    let mut child = Command::new(std::env::current_exe()?)
        .arg("controller")
        .arg(kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("start the placement controller")?;
    let started = Instant::now();
    let passes = Arc::new(AtomicU64::new(0));
    let first_pass_ms = Arc::new(AtomicU64::new(0));
    let stdout = child.stdout.take().context("controller stdout")?;
    let (seen, first) = (Arc::clone(&passes), Arc::clone(&first_pass_ms));
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(n) = line.strip_prefix("passes ").and_then(|n| n.parse().ok())
                && seen.swap(n, Ordering::Relaxed) == 0
            {
                let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                first.store(ms, Ordering::Relaxed);
            }
        }
    });
    Ok(Child {
        process: KillOnDrop(child),
        passes,
        first_pass_ms,
    })
}

/// Starts OCM's placement controller from `binary` as a child.
fn start_ocm(
    binary: &std::path::Path,
    kubeconfig: &std::path::Path,
    qps: Option<u32>,
) -> anyhow::Result<Child> {
    let log = std::fs::File::create(std::env::temp_dir().join("bench-placement-ocm.log"))?;
    // Its metrics endpoint needs a port of its own.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let mut command = Command::new(binary);
    command
        .arg("controller")
        .arg(format!("--listen=127.0.0.1:{port}"))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--disable-leader-election")
        .arg("--namespace=default")
        .stdout(log.try_clone()?)
        .stderr(log);
    if let Some(qps) = qps {
        command
            .arg(format!("--kube-api-qps={qps}"))
            .arg(format!("--kube-api-burst={}", 2 * qps));
    }
    let child = command.spawn().context("start OCM's placement controller")?;
    Ok(Child {
        process: KillOnDrop(child),
        passes: Arc::new(AtomicU64::new(0)),
        first_pass_ms: Arc::new(AtomicU64::new(0)),
    })
}

/// What one controller run measured.
struct Run {
    decided: Duration,
    cpu: f64,
    peak_mib: u64,
    writes: f64,
}

/// Starts a controller with `start`, waits for every decision and for quiet, prints the
/// figures and returns the controller (still running) with its decisions.
async fn measure(
    client: &Client,
    who: &str,
    placements_count: usize,
    start: impl FnOnce() -> anyhow::Result<Child>,
) -> anyhow::Result<(Child, Run, Vec<PlacementDecision>)> {
    let writes_before = writes(client).await?;
    let started = Instant::now();
    let child = start()?;
    let pid = child.process.0.id();
    let decisions = decided(client, "bench", placements_count).await?;
    let elapsed = started.elapsed();
    let (cpu, peak_mib) = flotilla_tests::process_peak_usage(pid);
    let decision_writes = writes(client).await? - writes_before;
    println!(
        "  {who}: all decisions in {:.2} s; CPU {cpu:.1} s, peak RSS {peak_mib} MiB, writes {decision_writes:.0}",
        elapsed.as_secs_f64(),
    );
    let passes = (who == "flotilla").then_some(child.passes.as_ref());
    if passes.is_some() {
        println!(
            "  {who}: first scheduling pass reported after {:.2} s (caches listed)",
            child.first_pass_ms.load(Ordering::Relaxed) as f64 / 1000.0
        );
    }
    let last = quiet(client, passes).await?;
    let (cpu_quiet, peak_quiet) = flotilla_tests::process_peak_usage(pid);
    println!(
        "  {who}: quiet after {:.2} s; CPU {cpu_quiet:.1} s, peak RSS {peak_quiet} MiB, writes {:.0}, scheduling passes {}",
        last.duration_since(started).as_secs_f64(),
        writes(client).await? - writes_before,
        if passes.is_some() {
            child.passes.load(Ordering::Relaxed).to_string()
        } else {
            "n/a".into()
        },
    );
    let run = Run {
        decided: elapsed,
        cpu,
        peak_mib,
        writes: decision_writes,
    };
    Ok((child, run, decisions))
}

/// Writes `decisions` directly into namespace `limit` with [`CONCURRENCY`]; returns the time.
async fn direct_writes(client: &Client, decisions: Vec<PlacementDecision>) -> anyhow::Result<Duration> {
    create(
        &Api::<Namespace>::all(client.clone()),
        json!({"metadata": {"name": "limit"}}),
    )
    .await?;
    let api = Api::<PlacementDecision>::namespaced(client.clone(), "limit");
    let started = Instant::now();
    futures::stream::iter(decisions)
        .map(|d| {
            let api = api.clone();
            async move {
                let name = d.name_any();
                let object = PlacementDecision {
                    metadata: kube::api::ObjectMeta {
                        name: Some(name.clone()),
                        labels: d.metadata.labels.clone(),
                        ..Default::default()
                    },
                    spec: Default::default(),
                    status: None,
                };
                api.create(&PostParams::default(), &object).await?;
                let status = json!({"status": d.status});
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                    .await?;
                Ok::<_, kube::Error>(())
            }
        })
        .buffer_unordered(usize::from(CONCURRENCY))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(started.elapsed())
}

/// Re-labels one cluster of the bench set and counts the scheduling passes that follow.
async fn relabel(client: &Client, child: &Child, placements_count: usize) -> anyhow::Result<()> {
    let before = child.passes.load(Ordering::Relaxed);
    let writes_before = writes(client).await?;
    let patch = json!({"metadata": {"labels": {"bench.flotilla.dev/touched": "true"}}});
    Api::<ManagedCluster>::all(client.clone())
        .patch("bench-set-00000", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    while child.passes.load(Ordering::Relaxed) == before {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    quiet(client, Some(&child.passes)).await?;
    println!(
        "  re-label of one cluster: {} placements re-decided ({placements_count} see it, 10 do not), writes {:.0}",
        child.passes.load(Ordering::Relaxed) - before,
        writes(client).await? - writes_before,
    );
    Ok(())
}

struct Options {
    cases: Vec<(usize, usize)>,
    ocm_binary: Option<PathBuf>,
    ocm_qps: Option<u32>,
}

fn options(args: &[String]) -> anyhow::Result<Options> {
    let mut cases = "100x1,1000x1000,1x5000,10000x1000".to_owned();
    let mut ocm_binary = None;
    let mut ocm_qps = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--ocm-binary" => ocm_binary = Some(PathBuf::from(args.next().context("--ocm-binary PATH")?)),
            "--ocm-qps" => ocm_qps = Some(args.next().context("--ocm-qps N")?.parse()?),
            other => cases = other.to_owned(),
        }
    }
    let cases = cases
        .split(',')
        .map(|spec| {
            let (p, c) = spec.split_once('x').context("a case is PxC, e.g. 1000x1000")?;
            Ok((p.parse()?, c.parse()?))
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(Options {
        cases,
        ocm_binary,
        ocm_qps,
    })
}

async fn case(
    index: usize,
    placements_count: usize,
    clusters: usize,
    options: &Options,
) -> anyhow::Result<()> {
    println!("== {placements_count} placements x {clusters} clusters");
    let ours = {
        let cp = ControlPlane::start(format!("bench-placement-{index}")).await?;
        let client = cp.admin_client().await?;
        setup(&client, placements_count, clusters).await?;
        let (child, run, decisions) = measure(&client, "flotilla", placements_count, || {
            start_ours(cp.admin_kubeconfig())
        })
        .await?;
        relabel(&client, &child, placements_count).await?;
        drop(child);
        let writes_before = writes(&client).await?;
        let limit = direct_writes(&client, decisions).await?;
        println!(
            "  direct writes of the same decisions: {:.2} s, writes {:.0}; flotilla / limit = {:.2}",
            limit.as_secs_f64(),
            writes(&client).await? - writes_before,
            run.decided.as_secs_f64() / limit.as_secs_f64().max(f64::EPSILON)
        );
        run
    };
    if let Some(binary) = &options.ocm_binary {
        let cp = ControlPlane::start(format!("bench-placement-ocm-{index}")).await?;
        let client = cp.admin_client().await?;
        setup(&client, placements_count, clusters).await?;
        let (child, ocm, _) = measure(&client, "ocm", placements_count, || {
            start_ocm(binary, cp.admin_kubeconfig(), options.ocm_qps)
        })
        .await?;
        drop(child);
        println!(
            "  side by side: all decisions flotilla {:.2} s / OCM {:.2} s ({:.1}x faster); peak RSS {} / {} MiB; CPU {:.1} / {:.1} s; writes {:.0} / {:.0}",
            ours.decided.as_secs_f64(),
            ocm.decided.as_secs_f64(),
            ocm.decided.as_secs_f64() / ours.decided.as_secs_f64().max(f64::EPSILON),
            ours.peak_mib,
            ocm.peak_mib,
            ours.cpu,
            ocm.cpu,
            ours.writes,
            ocm.writes,
        );
    }
    Ok(())
}

/// The hidden `controller KUBECONFIG` command: runs the placement controller alone and prints
/// `passes <n>` whenever its count of scheduling passes changes.
fn controller(kubeconfig: &str) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let yaml = std::fs::read_to_string(kubeconfig)?;
        let client = flotilla_testing::kubeconfig::client_from_yaml(&yaml).await?;
        let options = PlacementOptions {
            concurrency: CONCURRENCY,
            ..Default::default()
        };
        tokio::spawn(async {
            let mut printed = 0;
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let passes = flotilla_placement::scheduling_passes();
                if passes != printed {
                    println!("passes {passes}");
                    printed = passes;
                }
            }
        });
        flotilla_placement::run(client, options).await;
        Ok(())
    })
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("controller") {
        return controller(args.get(1).context("controller KUBECONFIG")?);
    }
    let options = options(&args)?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        for (index, (p, c)) in options.cases.iter().enumerate() {
            case(index, *p, *c, &options).await?;
        }
        Ok(())
    })
}
