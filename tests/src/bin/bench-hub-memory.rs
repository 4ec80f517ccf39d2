//! Prints the memory and CPU of the whole `flotilla hub` beside the sum of OCM's hub processes
//! on the same objects; asserts nothing.
//!
//! Each runs on a fresh control plane holding: N accepted clusters (default 1 000) in a
//! cluster set bound to namespace `bench`; 1 000 placements there choosing ten clusters each
//! (OCM's benchmark placement); and five AddOnTemplate add-ons installed on every cluster
//! through Placement `all` (every cluster, rollout All). The hub then does all of it itself:
//! decisions, add-ons, deploy works.
//!
//! - Flotilla: `flotilla hub` (the binary beside this one, or `--flotilla PATH`), as deployed
//!   but with leader election off.
//! - With `--ocm-dir DIR`: OCM's four hub processes built from its source
//!   (`DIR/ocm-registration controller`, `ocm-placement controller`, `ocm-work manager`,
//!   `ocm-addon manager`). Their client rate limits are raised to `--ocm-qps N` (default
//!   500; OCM ships 50) so that the run ends in minutes. The add-on conversion webhook they
//!   read v1beta1 through is served by this process.
//!
//! When every placement has chosen and every add-on has its deploy work, and again
//! [`SETTLED`] later, it prints each process's resident memory (now and peak) and CPU, and
//! the sums; for Flotilla also where its effort went (reconciles and their time by
//! controller, requests by verb and resource, from its `/metrics`).
//!
//! ```text
//! git --git-dir=<mirror of open-cluster-management-io/ocm> archive HEAD | tar -x -C /tmp/ocm
//! cd /tmp/ocm && for c in registration placement work addon; do
//!   GOFLAGS=-mod=vendor GOTOOLCHAIN=local go build -o /tmp/ocm-$c ./cmd/$c; done
//! cargo build --release -p flotilla
//! cargo run --release -p flotilla-tests --bin bench-hub-memory -- [CLUSTERS] [--ocm-dir /tmp] [--ocm-qps N]
//! ```

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use flotilla_api::cluster::v1beta1::Placement;
use flotilla_api::work::v1::ManifestWork;
use flotilla_testing::ControlPlane;
use flotilla_tests::hub_objects::{self, ADDON_LABEL};
use flotilla_tests::{KillOnDrop, process_peak_usage, process_usage};
use kube::Api;
use kube::api::ListParams;
use serde_json::json;

/// The add-ons installed on every cluster.
const ADDONS: usize = 5;
/// Placements of OCM's benchmark shape.
const PLACEMENTS: usize = 1000;
const NS: &str = "bench";
const SET: &str = "bench-set";
/// How long after the last work appeared the memory is read again: resyncs and status
/// writes that follow have run by then.
const SETTLED: Duration = Duration::from_secs(30);
/// `flotilla hub`'s log, in the temp directory.
const FLOTILLA_LOG: &str = "bench-hub-memory-flotilla.log";
/// How long a hub gets to do all of it.
const DEADLINE: Duration = Duration::from_secs(1200);

/// Tolerates the taint both hubs put on a cluster whose agent never renewed its lease: no
/// agents run here.
fn tolerations() -> serde_json::Value {
    json!([{"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists"}])
}

/// OCM's benchmark placement, without its AddOn score (no score counts as zero).
fn placement(name: &str) -> serde_json::Value {
    json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
           "metadata": {"name": name, "namespace": NS},
           "spec": {"numberOfClusters": 10, "tolerations": tolerations(),
                    "prioritizerPolicy": {"mode": "Exact", "configurations": [
               {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "ResourceAllocatableCPU"}, "weight": 1},
               {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Balance"}, "weight": 1}]}}})
}

/// The objects both hubs start from.
async fn world(client: &kube::Client, count: usize) -> anyhow::Result<()> {
    hub_objects::apply(
        client,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await?;
    hub_objects::apply(
        client,
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet",
               "metadata": {"name": SET}, "spec": {}}),
    )
    .await?;
    hub_objects::apply(
        client,
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSetBinding",
               "metadata": {"name": SET, "namespace": NS}, "spec": {"clusterSet": SET}}),
    )
    .await?;
    hub_objects::accepted_clusters(client, &hub_objects::cluster_names(count), Some(SET), false).await?;
    let mut placements: Vec<_> = (0..PLACEMENTS).map(|i| placement(&format!("p{i:05}"))).collect();
    placements.push(
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
                           "metadata": {"name": "all", "namespace": NS}, "spec": {"tolerations": tolerations()}}),
    );
    hub_objects::apply_all(client, placements).await?;
    for i in 1..=ADDONS {
        hub_objects::template_addon(client, &format!("hello-template-{i}"), Some((NS, "all"))).await?;
    }
    Ok(())
}

/// Waits until every placement has chosen and every add-on has a deploy work on each of
/// `count` clusters; returns how long that took.
async fn done(client: &kube::Client, count: usize) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let placements: Api<Placement> = Api::namespaced(client.clone(), NS);
    let works: Api<ManifestWork> = Api::all(client.clone());
    loop {
        anyhow::ensure!(started.elapsed() < DEADLINE, "not done within {DEADLINE:?}");
        let chosen = placements
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .is_some_and(|s| s.number_of_selected_clusters > 0)
            })
            .count();
        let deployed = works
            .list_metadata(&ListParams::default().labels(ADDON_LABEL))
            .await?
            .items
            .len();
        if chosen > PLACEMENTS && deployed >= ADDONS * count {
            return Ok(started.elapsed());
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// One hub's processes: (name, child).
type Hub = Vec<(&'static str, KillOnDrop)>;

/// Prints each process's figures and the sums; returns the sums of resident and peak memory.
fn report(who: &str, hub: &Hub) -> (u64, u64) {
    let (mut rss_sum, mut peak_sum, mut cpu_sum) = (0, 0, 0.0);
    for (name, child) in hub {
        let pid = child.0.id();
        let (cpu, rss) = process_usage(pid);
        let (_, peak) = process_peak_usage(pid);
        println!("    {who} {name}: RSS {rss} MiB, peak {peak} MiB, CPU {cpu:.1} s");
        rss_sum += rss;
        peak_sum += peak;
        cpu_sum += cpu;
    }
    println!("  {who}: RSS {rss_sum} MiB, peak {peak_sum} MiB, CPU {cpu_sum:.1} s (all processes)");
    (rss_sum, peak_sum)
}

/// `flotilla hub`'s metrics address, from the line it logs at start.
fn metrics_address(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    let line = text
        .lines()
        .find(|l| l.contains("metrics and health at http://"))?;
    let rest = line.split("http://").nth(1)?;
    Some(rest.split_whitespace().next()?.to_owned())
}

/// Where `flotilla hub`'s effort went: reconciles and their seconds by controller, and the
/// most frequent requests by verb and resource, read from its `/metrics`.
fn effort(log: &Path) -> anyhow::Result<()> {
    use std::collections::BTreeMap;
    use std::io::{Read as _, Write as _};
    let address = metrics_address(log).context("the hub's metrics address in its log")?;
    let mut stream = std::net::TcpStream::connect(&address)?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let label = |line: &str, name: &str| -> String {
        line.split(&format!("{name}=\""))
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("")
            .to_owned()
    };
    let value = |line: &str| {
        line.rsplit_once(' ')
            .and_then(|(_, v)| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let mut reconciles: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    let mut requests: BTreeMap<String, f64> = BTreeMap::new();
    for line in text.lines() {
        if line.starts_with("flotilla_controller_reconciles_total{") {
            reconciles.entry(label(line, "controller")).or_default().0 += value(line);
        } else if line.starts_with("flotilla_controller_reconcile_duration_seconds_sum{") {
            reconciles.entry(label(line, "controller")).or_default().1 += value(line);
        } else if line.starts_with("flotilla_apiserver_requests_total{") {
            *requests
                .entry(format!("{} {}", label(line, "verb"), label(line, "resource")))
                .or_default() += value(line);
        }
    }
    let mut reconciles: Vec<_> = reconciles.into_iter().collect();
    reconciles.sort_by(|a, b| b.1.1.total_cmp(&a.1.1));
    println!("    flotilla reconciles by controller (count, seconds in reconciles):");
    for (controller, (count, seconds)) in reconciles.iter().take(12) {
        println!("      {controller}: {count:.0}, {seconds:.1} s");
    }
    let mut requests: Vec<_> = requests.into_iter().collect();
    requests.sort_by(|a, b| b.1.total_cmp(&a.1));
    println!("    flotilla requests, most frequent:");
    for (request, count) in requests.iter().take(12) {
        println!("      {request}: {count:.0}");
    }
    Ok(())
}

/// On a fresh control plane with the objects of [`world`], starts a hub with `start`, waits
/// until it has done everything and prints its figures.
async fn measure(
    who: &str,
    count: usize,
    conversion: bool,
    start: impl FnOnce(&Path) -> anyhow::Result<Hub>,
) -> anyhow::Result<(u64, u64)> {
    let cp = ControlPlane::start(format!("bench-hub-memory-{who}")).await?;
    let client = cp.admin_client().await?;
    let _conversion = if conversion {
        Some(hub_objects::conversion(&client).await?)
    } else {
        None
    };
    let setup = Instant::now();
    world(&client, count).await?;
    println!("  {who}: setup {:.1} s", setup.elapsed().as_secs_f64());
    let hub = start(cp.admin_kubeconfig())?;
    let took = done(&client, count).await?;
    println!(
        "  {who}: every placement chosen and every deploy work made in {:.1} s",
        took.as_secs_f64()
    );
    report(who, &hub);
    if who == "flotilla" {
        effort(&std::env::temp_dir().join(FLOTILLA_LOG))?;
    }
    tokio::time::sleep(SETTLED).await;
    for (name, child) in &hub {
        anyhow::ensure!(
            process_usage(child.0.id()).1 > 0,
            "{who} {name} exited; see its log"
        );
    }
    println!("  {who}, {} s later:", SETTLED.as_secs());
    Ok(report(who, &hub))
}

fn start_flotilla(binary: &Path, kubeconfig: &Path) -> anyhow::Result<Hub> {
    let args = [
        "hub".to_owned(),
        "--disable-leader-election".to_owned(),
        "--kubeconfig".to_owned(),
        kubeconfig.display().to_string(),
    ];
    Ok(vec![(
        "hub",
        hub_objects::spawn(binary, &args, FLOTILLA_LOG, false)?,
    )])
}

fn start_ocm(dir: &Path, kubeconfig: &Path, qps: u32) -> anyhow::Result<Hub> {
    [
        ("registration", "controller"),
        ("placement", "controller"),
        ("work", "manager"),
        ("addon", "manager"),
    ]
    .into_iter()
    .map(|(binary, command)| {
        let args = [
            command.to_owned(),
            format!("--kubeconfig={}", kubeconfig.display()),
            "--disable-leader-election".to_owned(),
            "--namespace=default".to_owned(),
            format!("--kube-api-qps={qps}"),
            format!("--kube-api-burst={}", 2 * qps),
        ];
        let child = hub_objects::spawn(
            &dir.join(format!("ocm-{binary}")),
            &args,
            &format!("bench-hub-memory-ocm-{binary}.log"),
            true,
        )?;
        Ok((binary, child))
    })
    .collect()
}

struct Options {
    count: usize,
    flotilla: PathBuf,
    ocm_dir: Option<PathBuf>,
    ocm_qps: u32,
}

fn options(mut args: impl Iterator<Item = String>) -> anyhow::Result<Options> {
    let beside = std::env::current_exe()?.with_file_name("flotilla");
    let mut options = Options {
        count: 1000,
        flotilla: beside,
        ocm_dir: None,
        ocm_qps: 500,
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--flotilla" => options.flotilla = args.next().context("--flotilla PATH")?.into(),
            "--ocm-dir" => options.ocm_dir = Some(args.next().context("--ocm-dir DIR")?.into()),
            "--ocm-qps" => options.ocm_qps = args.next().context("--ocm-qps N")?.parse()?,
            count => options.count = count.parse().context("CLUSTERS")?,
        }
    }
    Ok(options)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let options = options(std::env::args().skip(1))?;
    let count = options.count;
    println!(
        "== the whole hub: {count} accepted clusters, {PLACEMENTS} placements, {ADDONS} template add-ons on every cluster"
    );
    let ours = measure("flotilla", count, false, |kubeconfig| {
        start_flotilla(&options.flotilla, kubeconfig)
    })
    .await?;
    if let Some(dir) = &options.ocm_dir {
        let ocm = measure("ocm", count, true, |kubeconfig| {
            start_ocm(dir, kubeconfig, options.ocm_qps)
        })
        .await?;
        println!(
            "  side by side, settled: RSS flotilla {} MiB / OCM {} MiB ({:.2}); peak {} / {} MiB ({:.2})",
            ours.0,
            ocm.0,
            ours.0 as f64 / ocm.0.max(1) as f64,
            ours.1,
            ocm.1,
            ours.1 as f64 / ocm.1.max(1) as f64,
        );
    }
    Ok(())
}
