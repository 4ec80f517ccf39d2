//! Prints how the add-on manager scales; asserts nothing. On a fresh control plane with N
//! registered clusters (ManagedClusters and namespaces written directly, no agents; default
//! 1 000) and a Placement choosing all of them (PlacementDecisions written directly, 100 per
//! decision as the placement controller writes them):
//!
//! - enabling one add-on (the helloworld-config plugin, registered from a ConfigMap) through the
//!   Placement, rollout All: the time until every cluster has its ManifestWork, this process's
//!   CPU seconds and resident memory, and the plugin's share of that CPU (the plugin host's own
//!   call timings, `flotilla_plugin_call_duration_seconds_sum{hook="manifests"}`: wall time of
//!   the calls, so on a busy machine with calls in flight side by side it can exceed the CPU
//!   time, and the share is an upper bound), and the add-on status writes per add-on;
//! - in the same run, the time to create the same N ManifestWorks directly with the same kind of
//!   client and the same concurrency as the manager's bound on plugin calls: the physical limit;
//!   and the time to make directly the least any add-on manager must write before each work
//!   exists (its ManagedClusterAddOn, then the work owned by it): the highest rate an add-on
//!   manager can reach against that limit on this machine ([`floor`]);
//! - a config change (the add-on's AddOnDeploymentConfig) on all N clusters with rollout All:
//!   the time until every work carries the new config hash;
//! - four more add-ons on the same clusters: the time until all 5 × N works exist and the
//!   resident memory.
//!
//! The plugin host and the add-on manager run in this process on a runtime of their own, as
//! `flotilla hub` runs them; the CPU figure includes this process's own watches.
//!
//! `cargo run --release -p flotilla-tests --bin bench-addons -- [CLUSTERS]`

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use flotilla_api::work::consts::CONFIG_SPEC_HASH_ANNOTATION;
use flotilla_api::work::v1::ManifestWork;
use flotilla_testing::ControlPlane;
use flotilla_wasm::{PluginRegistry, Runtime, RuntimeConfig};
use futures::{StreamExt, TryStreamExt};
use kube::api::{DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

/// The allocator `flotilla hub` runs with, so the memory figures are the hub's.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Concurrency of the setup writes and of the direct work creation; also the add-on
/// manager's bound on plugin calls in flight.
const CONCURRENCY: usize = 16;
/// Chains of writes in flight at once in the floor: enough that the control planes' CPU, not
/// the round trips of one chain, bounds it, as it would bound the best implementation.
const FLOOR_CONCURRENCY: usize = 64;
/// Namespace of the Placement, the config and the plugin's ConfigMap.
const NS: &str = "bench";
/// Label naming an add-on's works.
const ADDON_LABEL: &str = "open-cluster-management.io/addon-name";

/// Server-side applies a JSON object of any kind.
async fn apply(client: &Client, object: Value) -> anyhow::Result<()> {
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let kind = object["kind"].as_str().context("object has a kind")?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk).await?;
    let name = object["metadata"]["name"].as_str().context("object has a name")?;
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(name, &PatchParams::apply("bench").force(), &Patch::Apply(&object))
        .await
        .with_context(|| format!("apply {kind} {name}"))?;
    Ok(())
}

/// Cluster names.
fn cluster_names(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("bench-{i:05}")).collect()
}

/// Registers `names` as accepted clusters with their namespaces, and a Placement choosing them.
async fn world(client: &Client, names: &[String]) -> anyhow::Result<()> {
    apply(
        client,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await?;
    flotilla_tests::hub_objects::accepted_clusters(client, names, None, true).await?;
    apply(
        client,
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
               "metadata": {"name": "all", "namespace": NS}, "spec": {}}),
    )
    .await?;
    let decisions: Api<flotilla_api::cluster::v1beta1::PlacementDecision> =
        Api::namespaced(client.clone(), NS);
    for (index, chunk) in names.chunks(100).enumerate() {
        let name = format!("all-decision-{}", index + 1);
        apply(
            client,
            json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "PlacementDecision",
                   "metadata": {"name": name, "namespace": NS, "labels": {
                       "cluster.open-cluster-management.io/placement": "all",
                       "cluster.open-cluster-management.io/decision-group-index": "0",
                       "cluster.open-cluster-management.io/decision-group-name": ""}}}),
        )
        .await?;
        let chosen: Vec<Value> = chunk
            .iter()
            .map(|c| json!({"clusterName": c, "reason": ""}))
            .collect();
        decisions
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"decisions": chosen}})),
            )
            .await?;
    }
    deployment_config(client, "1").await
}

/// The add-ons' AddOnDeploymentConfig, with LOG_LEVEL `level`.
async fn deployment_config(client: &Client, level: &str) -> anyhow::Result<()> {
    apply(
        client,
        json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnDeploymentConfig",
               "metadata": {"name": "tuning", "namespace": NS},
               "spec": {"customizedVariables": [{"name": "LOG_LEVEL", "value": level}]}}),
    )
    .await
}

/// Registers plugin `name` from the helloworld-config component (ConfigMap `NS/plugin`).
async fn register(client: &Client, name: &str) -> anyhow::Result<()> {
    apply(
        client,
        json!({"apiVersion": "plugins.flotilla.dev/v1alpha1", "kind": "AddOnPlugin", "metadata": {"name": name},
               "spec": {"source": {"configMap": {"namespace": NS, "name": "plugin", "key": "plugin.wasm"}}}}),
    )
    .await
}

/// Installs add-on `name` through the Placement with the config, rollout All, once its
/// ClusterManagementAddOn exists.
async fn install(client: &Client, name: &str) -> anyhow::Result<()> {
    let api: Api<flotilla_api::addon::v1alpha1::ClusterManagementAddOn> = Api::all(client.clone());
    while api.get_opt(name).await?.is_none() {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let strategy = json!({"spec": {"installStrategy": {"type": "Placements", "placements": [{
        "namespace": NS, "name": "all", "rolloutStrategy": {"type": "All"},
        "configs": [{"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs",
                     "namespace": NS, "name": "tuning"}]}]}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&strategy))
        .await?;
    Ok(())
}

/// Watches the deploy works of the add-ons matching `selector` until `done` holds for the
/// config hash annotation of each (add-on, cluster) work seen so far.
async fn await_works(
    client: &Client,
    selector: &str,
    done: impl Fn(&BTreeMap<(String, String), String>) -> bool,
) -> anyhow::Result<()> {
    let api: Api<ManifestWork> = Api::all(client.clone());
    let mut events =
        std::pin::pin!(watcher(api, watcher::Config::default().labels(selector)).applied_objects());
    let mut seen: BTreeMap<(String, String), String> = BTreeMap::new();
    while let Some(work) = events.try_next().await? {
        if !work.name_any().ends_with("-deploy-0") {
            continue;
        }
        let addon = work.labels().get(ADDON_LABEL).cloned().unwrap_or_default();
        let hash = work
            .annotations()
            .get(CONFIG_SPEC_HASH_ANNOTATION)
            .cloned()
            .unwrap_or_default();
        seen.insert((addon, work.namespace().unwrap_or_default()), hash);
        if done(&seen) {
            return Ok(());
        }
    }
    anyhow::bail!("the work watch ended")
}

/// With `BENCH_TIMELINE` set, prints every second how far the add-ons of `addon` got: created,
/// configs released (`configReferences`), plugin revision released, works: where the time
/// goes. Off by default, as its watches add to this process's CPU figure.
fn start_timeline(client: &Client, addon: &'static str) {
    use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
    use flotilla_core::addon::revision::AddonRevisions;
    use kube::runtime::reflector;
    if std::env::var_os("BENCH_TIMELINE").is_none() {
        return;
    }
    let (addons, writer) = reflector::store();
    let events = watcher(
        Api::<ManagedClusterAddOn>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(writer)
    .for_each(|_| async {});
    let (works, writer) = reflector::store();
    let selector = format!("{ADDON_LABEL}={addon}");
    let work_events = watcher(
        Api::<ManifestWork>::all(client.clone()),
        watcher::Config::default().labels(&selector),
    )
    .reflect(writer)
    .for_each(|_| async {});
    tokio::spawn(events);
    tokio::spawn(work_events);
    tokio::spawn(async move {
        let started = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let state: Vec<_> = addons
                .state()
                .into_iter()
                .filter(|a| a.name_any() == addon)
                .collect();
            let released = state
                .iter()
                .filter(|a| a.status.as_ref().is_some_and(|s| !s.config_references.is_empty()))
                .count();
            let revision = state
                .iter()
                .filter(|a| {
                    AddonRevisions::from_annotations(a.metadata.annotations.as_ref())
                        .released
                        .is_some()
                })
                .count();
            println!(
                "  {:>5.1} s: add-ons {}, configs released {released}, revision released {revision}, works {}",
                started.elapsed().as_secs_f64(),
                state.len(),
                works.state().len()
            );
        }
    });
}

/// Seconds spent in plugin `manifests()` calls so far, from the plugin host's metrics.
fn plugin_seconds(registry: &PluginRegistry) -> f64 {
    registry
        .runtime()
        .render_metrics()
        .lines()
        .filter(|l| {
            l.starts_with("flotilla_plugin_call_duration_seconds_sum{") && l.contains("hook=\"manifests\"")
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// Runs the plugin host and the add-on manager on their own thread and runtime, as `flotilla
/// hub` does, until the process ends.
fn start_hub(kubeconfig: String, registry: Arc<PluginRegistry>) {
    std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async move {
            // The hub's requests are counted, as `flotilla hub` counts them, for the summary.
            let Ok(kubeconfig) = kube::config::Kubeconfig::from_yaml(&kubeconfig) else {
                return;
            };
            let Ok(config) = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await
            else {
                return;
            };
            let Ok(builder) = kube::client::ClientBuilder::try_from(config) else {
                return;
            };
            let client = builder
                .with_layer(&flotilla_kube::metrics::CountRequestsLayer)
                .build();
            let options = flotilla_addon_manager::Options {
                max_concurrent_renders: CONCURRENCY,
                // A knob for finding the best bound; the default is what `flotilla hub` runs.
                max_concurrent_reconciles: std::env::var("BENCH_ADDON_RECONCILES")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(flotilla_addon_manager::Options::default().max_concurrent_reconciles),
                ..Default::default()
            };
            flotilla_tests::run_addon_manager(client, registry, options).await;
        });
    });
}

/// Where the hub's effort went so far: reconciles per controller and outcome, and its API
/// requests by verb, resource and response code (the counters of `flotilla hub`'s `/metrics`).
fn effort_summary() -> String {
    let mut registry = prometheus_client::registry::Registry::default();
    flotilla_kube::metrics::global().register(&mut registry);
    let mut text = String::new();
    if prometheus_client::encoding::text::encode(&mut text, &registry).is_err() {
        return String::new();
    }
    text.lines()
        .filter(|l| {
            l.starts_with("flotilla_controller_reconciles_total{")
                || l.starts_with("flotilla_controller_reconcile_duration_seconds_sum{")
                || l.starts_with("flotilla_apiserver_requests_total{")
        })
        .map(|l| format!("  {l}\n"))
        .collect()
}

/// The hub's writes of ManagedClusterAddOn status in `effort` ([`effort_summary`]): those
/// that landed, and those refused with a conflict.
fn status_writes(effort: &str) -> (u64, u64) {
    let mut counts = (0, 0);
    for line in effort.lines().map(str::trim) {
        if !line.contains("resource=\"managedclusteraddons/status\"") {
            continue;
        }
        let Some(value) = line.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()) else {
            continue;
        };
        if line.contains("code=\"409\"") {
            counts.1 += value as u64;
        } else if line.contains("code=\"200\"") {
            counts.0 += value as u64;
        }
    }
    counts
}

/// The hub's caches by kind, largest first: objects, their size as JSON, and the heap they
/// take (what copying them allocates, as jemalloc counts this thread's allocations).
fn print_cache_footprints() {
    let allocated = || tikv_jemalloc_ctl::thread::allocatedp::read().map_or(0, |counter| counter.get());
    let mut footprints = flotilla_kube::feed::footprints(&allocated);
    footprints.sort_by_key(|f| std::cmp::Reverse(f.heap_bytes));
    println!("hub caches (one per kind):");
    for f in footprints {
        println!(
            "  {:<24} {:>6} objects {:>8.1} MiB as JSON {:>8.1} MiB of heap",
            f.kind,
            f.objects,
            f.json_bytes as f64 / 1_048_576.0,
            f.heap_bytes as f64 / 1_048_576.0
        );
    }
}

/// A phase's figures: wall time, CPU seconds, plugin seconds, resident MiB.
struct Usage {
    started: Instant,
    cpu: f64,
    plugin: f64,
}

impl Usage {
    fn start(registry: &PluginRegistry) -> Self {
        Self {
            started: Instant::now(),
            cpu: flotilla_tests::process_usage(std::process::id()).0,
            plugin: plugin_seconds(registry),
        }
    }

    /// Prints the phase and returns its wall time.
    fn report(&self, what: &str, registry: &PluginRegistry) -> Duration {
        let elapsed = self.started.elapsed();
        let (cpu, rss) = flotilla_tests::process_usage(std::process::id());
        let (cpu, plugin) = (cpu - self.cpu, plugin_seconds(registry) - self.plugin);
        println!(
            "{what}: {:.2} s, hub CPU {cpu:.1} s, RSS {rss} MiB (live heap {} MiB), plugin calls {plugin:.1} s wall ({:.0} % of hub CPU)",
            elapsed.as_secs_f64(),
            live_heap_mib(),
            100.0 * plugin / cpu.max(f64::EPSILON)
        );
        elapsed
    }
}

/// The bytes this process's allocations hold now, in MiB (jemalloc's `stats.allocated`): the
/// resident memory that is data, as against code, stacks, mappings and pages kept for reuse.
fn live_heap_mib() -> u64 {
    // The statistics are a snapshot refreshed by advancing the epoch.
    if tikv_jemalloc_ctl::epoch::advance().is_err() {
        return 0;
    }
    tikv_jemalloc_ctl::stats::allocated::read().map_or(0, |bytes| bytes as u64 / 1_048_576)
}

/// The least any add-on manager must write before a cluster's work exists, made directly with
/// the same client as the direct creation ([`FLOOR_CONCURRENCY`] clusters at once): per
/// cluster, a ManagedClusterAddOn (a copy of the enabled add-on's spec, under a name no
/// ClusterManagementAddOn has, so the manager leaves it be), then its work with that add-on as
/// controller owner (OCM's ownerRef, which needs the add-on's uid), a copy of its work among
/// `works`. Printed as a rate against `direct`: the highest rate an add-on manager can reach
/// on this machine. The copies are deleted afterwards, untimed.
async fn floor(
    client: &Client,
    count: usize,
    works: &[ManifestWork],
    direct: Duration,
) -> anyhow::Result<()> {
    use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
    use kube::Resource as _;
    const NAME: &str = "bench-floor";
    let addons: Vec<ManagedClusterAddOn> = Api::<ManagedClusterAddOn>::all(client.clone())
        .list(&kube::api::ListParams::default().fields("metadata.name=hello-1"))
        .await?
        .items;
    let works: BTreeMap<String, &ManifestWork> = works
        .iter()
        .filter(|w| w.name_any().ends_with("-deploy-0"))
        .map(|w| (w.namespace().unwrap_or_default(), w))
        .collect();
    let started = Instant::now();
    futures::stream::iter(addons)
        .map(|addon| {
            let client = client.clone();
            let namespace = addon.namespace().unwrap_or_default();
            let work = works.get(&namespace).map(|w| (*w).clone());
            async move {
                let work = work.with_context(|| format!("the work of {namespace}"))?;
                let mut copy = ManagedClusterAddOn::new(NAME, addon.spec);
                copy.metadata.namespace = Some(namespace.clone());
                let created = Api::<ManagedClusterAddOn>::namespaced(client.clone(), &namespace)
                    .create(&PostParams::default(), &copy)
                    .await?;
                let mut owned = ManifestWork::new("bench-floor-deploy-0", work.spec);
                owned.metadata.annotations = work.metadata.annotations;
                owned.metadata.owner_references = Some(vec![
                    created.controller_owner_ref(&()).context("owner reference")?,
                ]);
                Api::<ManifestWork>::namespaced(client, &namespace)
                    .create(&PostParams::default(), &owned)
                    .await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(FLOOR_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    let least = started.elapsed();
    println!(
        "least an add-on manager writes (per cluster an add-on, then its work), made directly: {:.2} s; its rate / direct rate = {:.0} % (the most any add-on manager reaches here)",
        least.as_secs_f64(),
        100.0 * direct.as_secs_f64() / least.as_secs_f64().max(f64::EPSILON)
    );
    futures::stream::iter(cluster_names(count))
        .map(|namespace| {
            let api = Api::<ManagedClusterAddOn>::namespaced(client.clone(), &namespace);
            async move { api.delete(NAME, &Default::default()).await.map(|_| ()) }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let count: usize = std::env::args().nth(1).map_or(Ok(1000), |a| a.parse())?;
    // The hub's logs, when asked for (`RUST_LOG`): where a slow run spent its time.
    if std::env::var_os("RUST_LOG").is_some() {
        flotilla_testing::init_tracing();
    }
    let cp = ControlPlane::start("bench-addons").await?;
    let client = cp.admin_client().await?;
    println!("== one add-on on {count} clusters");
    let setup = Instant::now();
    let names = cluster_names(count);
    world(&client, &names).await?;
    let component = std::fs::read(flotilla_test_plugins::HELLOWORLD_CONFIG).context("plugin was built")?;
    let cm = k8s_openapi::api::core::v1::ConfigMap {
        metadata: ObjectMeta {
            name: Some("plugin".into()),
            ..Default::default()
        },
        binary_data: Some(BTreeMap::from([(
            "plugin.wasm".to_owned(),
            k8s_openapi::ByteString(component),
        )])),
        ..Default::default()
    };
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &cm)
        .await?;
    println!("setup: {:.1} s", setup.elapsed().as_secs_f64());

    let registry = Arc::new(PluginRegistry::new(Runtime::new(RuntimeConfig::default())?));
    start_hub(
        std::fs::read_to_string(cp.admin_kubeconfig())?,
        Arc::clone(&registry),
    );
    register(&client, "hello-1").await?;
    while registry.get("hello-1").is_none() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    start_timeline(&client, "hello-1");
    let usage = Usage::start(&registry);
    install(&client, "hello-1").await?;
    await_works(&client, &format!("{ADDON_LABEL}=hello-1"), |seen| {
        seen.len() >= count
    })
    .await?;
    let enabled = usage.report("enable through the Placement: every work exists", &registry);
    let effort = effort_summary();
    print!("hub effort so far:\n{effort}");
    let (written, conflicts) = status_writes(&effort);
    println!(
        "add-on status writes: {:.2} per add-on, {conflicts} conflicts (one writer per add-on: the fewest is 1)",
        written as f64 / count.max(1) as f64
    );

    // The physical limit: the same works, created directly, same concurrency.
    let works: Vec<ManifestWork> = Api::<ManifestWork>::all(client.clone())
        .list(&kube::api::ListParams::default().labels(&format!("{ADDON_LABEL}=hello-1")))
        .await?
        .items;
    let copies = works.clone();
    let started = Instant::now();
    futures::stream::iter(copies)
        .map(|work| {
            let client = client.clone();
            async move {
                let namespace = work.namespace().unwrap_or_default();
                let mut copy = ManifestWork::new("bench-direct", work.spec);
                copy.metadata.annotations = work.metadata.annotations;
                Api::<ManifestWork>::namespaced(client, &namespace)
                    .create(&PostParams::default(), &copy)
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    let limit = started.elapsed();
    println!(
        "direct creation of the same {count} works: {:.2} s; add-on manager rate / direct rate = {:.0} %",
        limit.as_secs_f64(),
        100.0 * limit.as_secs_f64() / enabled.as_secs_f64().max(f64::EPSILON)
    );

    floor(&client, count, &works, limit).await?;
    // Whole works held here would count as the hub's memory in the figures below.
    drop(works);

    // A config change, rollout All.
    let old = Api::<ManifestWork>::namespaced(client.clone(), &names[0])
        .get("addon-hello-1-deploy-0")
        .await?
        .annotations()
        .get(CONFIG_SPEC_HASH_ANNOTATION)
        .cloned()
        .unwrap_or_default();
    let usage = Usage::start(&registry);
    deployment_config(&client, "2").await?;
    await_works(&client, &format!("{ADDON_LABEL}=hello-1"), |seen| {
        seen.len() >= count && seen.values().all(|hash| !hash.is_empty() && *hash != old)
    })
    .await?;
    let changed = usage.report("config change, rollout All: every work re-rendered", &registry);
    println!(
        "config change vs direct creation: {:.0} %",
        100.0 * limit.as_secs_f64() / changed.as_secs_f64().max(f64::EPSILON)
    );

    // Five add-ons on the same clusters.
    let usage = Usage::start(&registry);
    let more = ["hello-2", "hello-3", "hello-4", "hello-5"];
    for name in more {
        register(&client, name).await?;
    }
    for name in more {
        install(&client, name).await?;
    }
    await_works(
        &client,
        &format!("{ADDON_LABEL} in (hello-1,hello-2,hello-3,hello-4,hello-5)"),
        |seen| seen.len() >= 5 * count,
    )
    .await?;
    usage.report(
        &format!("five add-ons on {count} clusters: every work exists"),
        &registry,
    );

    // Before the caches are measured: copying them makes the process grow for a while.
    let (_, before) = flotilla_tests::process_usage(std::process::id());
    print_cache_footprints();
    // All of them deleted: the caches keyed by add-ons let go of them (pruned within 30 s).
    let cmas: Api<flotilla_api::addon::v1alpha1::ClusterManagementAddOn> = Api::all(client.clone());
    let manual = json!({"spec": {"installStrategy": {"type": "Manual", "placements": null}}});
    for name in ["hello-1", "hello-2", "hello-3", "hello-4", "hello-5"] {
        cmas.patch(name, &PatchParams::default(), &Patch::Merge(&manual))
            .await?;
    }
    for cluster in &names {
        Api::<flotilla_api::addon::v1alpha1::ManagedClusterAddOn>::namespaced(client.clone(), cluster)
            .delete_collection(&Default::default(), &kube::api::ListParams::default())
            .await?;
    }
    let addons: Api<flotilla_api::addon::v1alpha1::ManagedClusterAddOn> = Api::all(client.clone());
    let deleting = Instant::now();
    while !addons.list_metadata(&Default::default()).await?.items.is_empty() {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    println!(
        "{} add-ons deleted in {:.1} s",
        5 * count,
        deleting.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(35)).await;
    let (_, after) = flotilla_tests::process_usage(std::process::id());
    println!(
        "hub RSS with {} add-ons: {before} MiB; after deleting them and a prune: {after} MiB (live heap {} MiB)",
        5 * count,
        live_heap_mib()
    );
    Ok(())
}
