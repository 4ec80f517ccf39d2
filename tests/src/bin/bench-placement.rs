//! Prints how the placement controller scales; asserts nothing. For each case of P placements
//! over C clusters (OCM's benchmark cases 100×1, 1 000×1 000, 10 000×1 000, plus 1×5 000), on a
//! fresh control plane:
//!
//! - the time from starting the controller until every placement has its decisions, the
//!   process's CPU seconds and resident memory, and the apiserver writes issued;
//! - in the same run, the time to write the same PlacementDecision objects directly with the
//!   same kind of client (create + status patch, the same concurrency): the physical limit;
//! - how many placements a re-label of one cluster re-decides, next to how many can see it
//!   (ten more placements in another namespace see another set and must not be touched).
//!
//! The placement is OCM's benchmark placement: 10 clusters, Exact with an AddOn score,
//! ResourceAllocatableCPU and Balance. The controller runs in this process on its own runtime;
//! the CPU figure includes this process's own polling.
//!
//! `cargo run --release -p flotilla-tests --bin bench-placement -- [CASES]` (default
//! `100x1,1000x1000,1x5000,10000x1000`).

use std::time::{Duration, Instant};

use anyhow::Context as _;
use flotilla_api::cluster::v1beta1::PlacementDecision;
use flotilla_placement::PlacementOptions;
use flotilla_testing::ControlPlane;
use futures::{StreamExt, TryStreamExt};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

/// Concurrency of both the controller and the direct writes.
const CONCURRENCY: u16 = 8;

/// Sum of the apiserver's write requests (POST, PUT, PATCH, DELETE) so far.
async fn writes(client: &Client) -> anyhow::Result<f64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await.context("read /metrics")?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| {
            ["POST", "PUT", "PATCH", "DELETE"]
                .iter()
                .any(|v| l.contains(&format!("verb=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum())
}

async fn create(client: &Client, path_kind: &str, ns: Option<&str>, value: Value) -> anyhow::Result<()> {
    let result = match path_kind {
        "ManagedCluster" => Api::<flotilla_api::cluster::v1::ManagedCluster>::all(client.clone())
            .create(&PostParams::default(), &serde_json::from_value(value)?)
            .await
            .map(|_| ()),
        "ManagedClusterSet" => Api::<flotilla_api::cluster::v1beta2::ManagedClusterSet>::all(client.clone())
            .create(&PostParams::default(), &serde_json::from_value(value)?)
            .await
            .map(|_| ()),
        "ManagedClusterSetBinding" => {
            Api::<flotilla_api::cluster::v1beta2::ManagedClusterSetBinding>::namespaced(
                client.clone(),
                ns.unwrap_or_default(),
            )
            .create(&PostParams::default(), &serde_json::from_value(value)?)
            .await
            .map(|_| ())
        }
        "Placement" => Api::<flotilla_api::cluster::v1beta1::Placement>::namespaced(
            client.clone(),
            ns.unwrap_or_default(),
        )
        .create(&PostParams::default(), &serde_json::from_value(value)?)
        .await
        .map(|_| ()),
        _ => Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
            .create(&PostParams::default(), &serde_json::from_value(value)?)
            .await
            .map(|_| ()),
    };
    result.with_context(|| format!("create {path_kind}"))
}

fn placement(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"numberOfClusters": 10, "prioritizerPolicy": {"mode": "Exact", "configurations": [
               {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": "default", "scoreName": "cpuratio"}}, "weight": 1},
               {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "ResourceAllocatableCPU"}, "weight": 1},
               {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Balance"}, "weight": 1}]}}})
}

/// Creates set `set` with `count` clusters `<set>-<i>` and binds it into namespace `ns`.
async fn world(client: &Client, ns: &str, set: &str, count: usize) -> anyhow::Result<()> {
    create(client, "Namespace", None, json!({"metadata": {"name": ns}})).await?;
    create(
        client,
        "ManagedClusterSet",
        None,
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet",
               "metadata": {"name": set}, "spec": {}}),
    )
    .await?;
    create(
        client,
        "ManagedClusterSetBinding",
        Some(ns),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSetBinding",
               "metadata": {"name": set, "namespace": ns}, "spec": {"clusterSet": set}}),
    )
    .await?;
    futures::stream::iter(0..count)
        .map(|i| {
            let value = json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
                "metadata": {"name": format!("{set}-{i:05}"), "labels": {"cluster.open-cluster-management.io/clusterset": set}},
                "spec": {"hubAcceptsClient": true}});
            async move { create(client, "ManagedCluster", None, value).await }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

async fn placements(client: &Client, ns: &str, count: usize) -> anyhow::Result<()> {
    futures::stream::iter(0..count)
        .map(|i| async move { create(client, "Placement", Some(ns), placement(ns, &format!("p{i:05}"))).await })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Waits until `count` PlacementDecisions in `ns` hold decisions.
async fn decided(client: &Client, ns: &str, count: usize) -> anyhow::Result<Vec<PlacementDecision>> {
    let api = Api::<PlacementDecision>::namespaced(client.clone(), ns);
    loop {
        let list = api.list(&ListParams::default()).await?.items;
        let full = list
            .iter()
            .filter(|d| d.status.as_ref().is_some_and(|s| !s.decisions.is_empty()))
            .count();
        if full >= count {
            return Ok(list);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Runs the placement controller on its own thread and runtime until `stop` fires.
fn start_controller(kubeconfig: String) -> tokio::sync::oneshot::Sender<()> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async move {
            let Ok(client) = flotilla_testing::kubeconfig::client_from_yaml(&kubeconfig).await else {
                return;
            };
            let options = PlacementOptions {
                concurrency: CONCURRENCY,
                ..Default::default()
            };
            tokio::select! {
                () = flotilla_placement::run(client, options) => {}
                _ = stopped => {}
            }
        });
    });
    stop
}

async fn case(index: usize, placements_count: usize, clusters: usize) -> anyhow::Result<()> {
    let cp = ControlPlane::start(format!("bench-placement-{index}")).await?;
    let client = cp.admin_client().await?;
    println!("== {placements_count} placements x {clusters} clusters");
    let setup = Instant::now();
    world(&client, "bench", "bench-set", clusters).await?;
    world(&client, "other", "other-set", 1).await?;
    placements(&client, "bench", placements_count).await?;
    placements(&client, "other", 10).await?;
    println!("setup: {:.1} s", setup.elapsed().as_secs_f64());

    let writes_before = writes(&client).await?;
    let (cpu_before, _) = flotilla_tests::process_usage(std::process::id());
    let started = Instant::now();
    let stop = start_controller(std::fs::read_to_string(cp.admin_kubeconfig())?);
    let decisions = decided(&client, "bench", placements_count).await?;
    let elapsed = started.elapsed();
    let (cpu_after, rss) = flotilla_tests::process_usage(std::process::id());
    let controller_writes = writes(&client).await? - writes_before;
    println!(
        "controller: all decisions in {:.2} s, CPU {:.1} s, RSS {rss} MiB, apiserver writes {controller_writes:.0}",
        elapsed.as_secs_f64(),
        cpu_after - cpu_before
    );

    // Re-label one cluster of the bench set: only the placements that can see it re-decide.
    let before = flotilla_placement::scheduling_passes();
    let patch = json!({"metadata": {"labels": {"bench.flotilla.dev/touched": "true"}}});
    Api::<flotilla_api::cluster::v1::ManagedCluster>::all(client.clone())
        .patch("bench-set-00000", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    // Wait for quiet: no new scheduling pass for two seconds.
    let mut last = flotilla_placement::scheduling_passes();
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = flotilla_placement::scheduling_passes();
        if now == last && now > before {
            break;
        }
        last = now;
    }
    println!(
        "re-label of one cluster: {} scheduling passes ({placements_count} placements see it, 10 do not)",
        flotilla_placement::scheduling_passes() - before
    );
    let _ = stop.send(());

    // The physical limit: the same PlacementDecisions written directly, same concurrency.
    create(&client, "Namespace", None, json!({"metadata": {"name": "limit"}})).await?;
    let api = Api::<PlacementDecision>::namespaced(client.clone(), "limit");
    let writes_before = writes(&client).await?;
    let started = Instant::now();
    futures::stream::iter(decisions)
        .map(|d| {
            let api = api.clone();
            async move {
                let name = d.metadata.name.clone().unwrap_or_default();
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
    let limit = started.elapsed();
    println!(
        "direct writes of the same decisions: {:.2} s, apiserver writes {:.0}; controller / limit = {:.2}",
        limit.as_secs_f64(),
        writes(&client).await? - writes_before,
        elapsed.as_secs_f64() / limit.as_secs_f64().max(f64::EPSILON)
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cases = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "100x1,1000x1000,1x5000,10000x1000".to_owned());
    for (index, spec) in cases.split(',').enumerate() {
        let (p, c) = spec.split_once('x').context("a case is PxC, e.g. 1000x1000")?;
        case(index, p.parse()?, c.parse()?).await?;
    }
    Ok(())
}
