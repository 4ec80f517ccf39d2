//! Prints how an AddOnTemplate add-on's deploy works appear on N accepted clusters (default
//! 1 000) when N ManagedClusterAddOns are created at once; asserts nothing.
//!
//! Each add-on manager runs as its own process on a fresh control plane holding the same
//! objects: N accepted ManagedClusters with their namespaces, the AddOnTemplate (the OCM
//! documentation's `hello-template` agent, without registrations) and its
//! ClusterManagementAddOn naming it as the default config. Once the manager has started, the
//! N add-ons are created (16 at a time) and the figures are taken when every deploy work
//! exists: the time from the first create, the manager's CPU seconds and peak resident
//! memory, and the writes of add-ons and works the apiserver counted (less the creates).
//!
//! - Flotilla: this binary's `manager` command, the plugin loader and add-on manager on a
//!   runtime of two threads, as `flotilla hub` runs them.
//! - With `--ocm-binary PATH`: OCM's add-on manager (`addon manager`), as shipped (client rate
//!   limit 50/100 unless `--ocm-qps N`). The add-on conversion webhook OCM reads v1beta1
//!   through is served by this process on both control planes.
//!
//! ```text
//! git --git-dir=<mirror of open-cluster-management-io/ocm> archive HEAD | tar -x -C /tmp/ocm
//! cd /tmp/ocm && GOFLAGS=-mod=vendor GOTOOLCHAIN=local go build -o /tmp/ocm-addon ./cmd/addon
//! cargo run --release -p flotilla-tests --bin bench-addon-template -- [CLUSTERS] [--ocm-binary PATH] [--ocm-qps N]
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use flotilla_testing::ControlPlane;
use flotilla_tests::hub_objects::{self, ADDON_LABEL, INSTALL_NAMESPACE};
use flotilla_tests::{KillOnDrop, process_peak_usage};
use flotilla_wasm::{PluginRegistry, Runtime, RuntimeConfig};
use futures::{StreamExt as _, TryStreamExt as _};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt as _};
use serde_json::json;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const ADDON: &str = "hello-template";
/// How long a started manager is left before the add-ons are created: enough for either to
/// list its caches on an idle control plane.
const SETTLE: Duration = Duration::from_secs(5);
/// The resources whose writes are counted.
const COUNTED: [&str; 2] = ["managedclusteraddons", "manifestworks"];

/// Watches the add-on's works until one exists in each of `count` namespaces.
async fn all_works(client: Client, count: usize) -> anyhow::Result<()> {
    let api: Api<flotilla_api::work::v1::ManifestWork> = Api::all(client);
    let config = watcher::Config::default().labels(&format!("{ADDON_LABEL}={ADDON}"));
    let mut events = watcher(api, config).boxed();
    let mut seen = BTreeSet::new();
    while let Some(event) = events.try_next().await? {
        if let watcher::Event::Apply(work) | watcher::Event::InitApply(work) = event {
            seen.insert(work.namespace().unwrap_or_default());
            if seen.len() >= count {
                return Ok(());
            }
        }
    }
    anyhow::bail!("the ManifestWork watch ended")
}

/// Creates an add-on in each cluster namespace.
async fn enable(client: &Client, names: &[String]) -> anyhow::Result<()> {
    let addons = names.iter().map(|name| {
        json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
               "metadata": {"name": ADDON, "namespace": name},
               "spec": {"installNamespace": INSTALL_NAMESPACE}})
    });
    hub_objects::apply_all(client, addons).await
}

/// What one manager's run measured.
struct Run {
    seconds: f64,
    cpu: f64,
    peak_mib: u64,
    writes: f64,
}

/// On a fresh control plane with the objects of [`world`], starts a manager with `start`,
/// enables the add-on on every cluster and measures until every deploy work exists.
async fn measure(
    who: &str,
    count: usize,
    start: impl FnOnce(&Path) -> anyhow::Result<KillOnDrop>,
) -> anyhow::Result<Run> {
    let cp = ControlPlane::start(format!("bench-addon-template-{who}")).await?;
    let client = cp.admin_client().await?;
    let _conversion = hub_objects::conversion(&client).await?;
    let names = hub_objects::cluster_names(count);
    let setup = Instant::now();
    hub_objects::accepted_clusters(&client, &names, None, true).await?;
    hub_objects::template_addon(&client, ADDON, None).await?;
    println!("  {who}: setup {:.1} s", setup.elapsed().as_secs_f64());
    let manager = start(cp.admin_kubeconfig())?;
    let pid = manager.0.id();
    tokio::time::sleep(SETTLE).await;
    let (cpu_before, _) = process_peak_usage(pid);
    let writes_before = hub_objects::writes(&client, &COUNTED).await?;
    let started = Instant::now();
    let works = tokio::spawn(all_works(client.clone(), count));
    enable(&client, &names).await?;
    let created = started.elapsed();
    works.await??;
    let seconds = started.elapsed().as_secs_f64();
    let (cpu, peak_mib) = process_peak_usage(pid);
    anyhow::ensure!(peak_mib > 0, "{who}'s manager exited; see its log");
    let run = Run {
        seconds,
        cpu: cpu - cpu_before,
        peak_mib,
        writes: hub_objects::writes(&client, &COUNTED).await? - writes_before - count as f64,
    };
    println!(
        "  {who}: {count} add-ons created in {:.2} s; every deploy work in {seconds:.2} s; CPU {:.1} s, peak RSS {peak_mib} MiB, writes {:.0} ({:.2} per add-on)",
        created.as_secs_f64(),
        run.cpu,
        run.writes,
        run.writes / count.max(1) as f64,
    );
    Ok(run)
}

/// Starts this binary's `manager` command as a child.
fn start_flotilla(kubeconfig: &Path) -> anyhow::Result<KillOnDrop> {
    let args = ["manager".to_owned(), kubeconfig.display().to_string()];
    hub_objects::spawn(
        &std::env::current_exe()?,
        &args,
        "bench-addon-template-flotilla.log",
        false,
    )
}

/// Starts OCM's add-on manager from `binary` as a child.
fn start_ocm(binary: &Path, kubeconfig: &Path, qps: Option<u32>) -> anyhow::Result<KillOnDrop> {
    let mut args = vec![
        "manager".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--disable-leader-election".to_owned(),
        "--namespace=default".to_owned(),
    ];
    if let Some(qps) = qps {
        args.extend([
            format!("--kube-api-qps={qps}"),
            format!("--kube-api-burst={}", 2 * qps),
        ]);
    }
    hub_objects::spawn(binary, &args, "bench-addon-template-ocm.log", true)
}

/// The `manager` command: the plugin loader and the add-on manager against `kubeconfig`, on
/// two worker threads as `flotilla hub` runs them, until killed.
fn manager(kubeconfig: &Path) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
        let client = Client::try_from(config)?;
        let registry = Arc::new(PluginRegistry::new(Runtime::new(RuntimeConfig::default())?));
        flotilla_tests::run_addon_manager(client, registry, Default::default()).await;
        Ok(())
    })
}

struct Options {
    count: usize,
    ocm_binary: Option<PathBuf>,
    ocm_qps: Option<u32>,
}

fn options(mut args: impl Iterator<Item = String>) -> anyhow::Result<Options> {
    let mut options = Options {
        count: 1000,
        ocm_binary: None,
        ocm_qps: None,
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--ocm-binary" => {
                options.ocm_binary = Some(PathBuf::from(args.next().context("--ocm-binary PATH")?));
            }
            "--ocm-qps" => options.ocm_qps = Some(args.next().context("--ocm-qps N")?.parse()?),
            count => options.count = count.parse().context("CLUSTERS")?,
        }
    }
    Ok(options)
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("manager") {
        let kubeconfig = args.nth(1).context("manager KUBECONFIG")?;
        return manager(Path::new(&kubeconfig));
    }
    let options = options(args)?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let count = options.count;
            println!("== an AddOnTemplate add-on on {count} clusters, the add-ons created at once");
            let ours = measure("flotilla", count, start_flotilla).await?;
            if let Some(binary) = &options.ocm_binary {
                let ocm = measure("ocm", count, |kubeconfig| {
                    start_ocm(binary, kubeconfig, options.ocm_qps)
                })
                .await?;
                println!(
                    "  side by side: every deploy work flotilla {:.2} s / OCM {:.2} s ({:.1}x faster); CPU {:.1} / {:.1} s; peak RSS {} / {} MiB; writes {:.0} / {:.0}",
                    ours.seconds,
                    ocm.seconds,
                    ocm.seconds / ours.seconds.max(f64::EPSILON),
                    ours.cpu,
                    ocm.cpu,
                    ours.peak_mib,
                    ocm.peak_mib,
                    ours.writes,
                    ocm.writes,
                );
            }
            Ok(())
        })
}
