//! Prints how the work agent scales: for 1, 100 and 1 000 ManifestWorks (each a ConfigMap and
//! a Deployment) on one managed cluster, the time from create to `Applied` (p50, p99) and in
//! total, the agent's CPU and resident memory — beside, in the same run, the time to create
//! the same objects straight on the managed apiserver with the same client and concurrency
//! (the physical limit). Asserts nothing.
//!
//! The agent runs as a child process (this binary with `--agent`), so its CPU and memory are
//! its own; hub and managed cluster are separate real control planes.
//!
//! Where the time goes is printed under each row: the requests per work each apiserver
//! served (from its `apiserver_request_total`, for the kinds the agent touches; the
//! managed cluster's controller manager adds its Deployment status writes), and the CPU
//! seconds the agent and each control plane spent in the phase. Between phases the
//! benchmark waits, untimed, until the controller manager has processed every Deployment
//! created so far, so no phase pays for the previous one's backlog.
//!
//! `cargo run --release -p flotilla-tests --bin bench-work -- [COUNTS]` (default `1,100,1000`).

use std::{
    collections::BTreeMap,
    process::{Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use flotilla_api::work::v1::{Manifest, ManifestWork, ManifestWorkSpec, ManifestsTemplate};
use flotilla_registration::{hub::rbac, names};
use flotilla_testing::ControlPlane;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::{
    ByteString,
    api::{
        core::v1::{Namespace, Secret},
        rbac::v1::{ClusterRole, RoleBinding},
    },
};
use kube::{
    Api, Client, ResourceExt,
    api::{DynamicObject, ObjectMeta, PostParams},
    discovery::ApiResource,
    runtime::{WatchStreamExt, watcher},
};
use serde_json::{Value, json};

/// Requests in flight at once, for the raw creates and the work creates alike.
const CONCURRENCY: usize = 10;

/// The resources whose requests are counted: what the agent and the benchmark touch.
const COUNTED: &[&str] = &[
    "manifestworks",
    "appliedmanifestworks",
    "configmaps",
    "deployments",
    "subjectaccessreviews",
];

/// `apiserver_request_total` of the apiserver behind `client`, summed per `VERB
/// resource[/subresource]` for the [`COUNTED`] resources (watches left out: they are
/// long-lived, not per work). The exposition format is read line by line, as the other
/// benchmarks do: one metric family, no parser crate needed for it.
async fn requests(client: &Client) -> anyhow::Result<BTreeMap<String, f64>> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await.context("read /metrics")?;
    let mut totals = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|l| l.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"').to_owned())
                .unwrap_or_default()
        };
        let (verb, resource, subresource) = (label("verb"), label("resource"), label("subresource"));
        if verb == "WATCH" || !COUNTED.contains(&resource.as_str()) {
            continue;
        }
        let key = if subresource.is_empty() {
            format!("{verb} {resource}")
        } else {
            format!("{verb} {resource}/{subresource}")
        };
        if let Ok(value) = value.trim().parse::<f64>() {
            *totals.entry(key).or_insert(0.0) += value;
        }
    }
    Ok(totals)
}

/// `after - before` per request kind, divided by `count`, as one line (largest first).
fn per_work(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>, count: usize) -> String {
    let mut rows: Vec<(String, f64)> = after
        .iter()
        .map(|(key, value)| {
            let delta = value - before.get(key).copied().unwrap_or_default();
            (key.clone(), delta / count.max(1) as f64)
        })
        .filter(|(_, per)| *per >= 0.005)
        .collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total: f64 = rows.iter().map(|(_, per)| per).sum();
    let parts: Vec<String> = rows.iter().map(|(key, per)| format!("{key} {per:.2}")).collect();
    format!("{total:.2} = {}", parts.join(", "))
}

/// CPU seconds of all `pids` together.
fn cpu_of(pids: &[u32]) -> f64 {
    pids.iter().map(|pid| flotilla_tests::process_usage(*pid).0).sum()
}

/// What one phase cost: requests on each apiserver and CPU of each process group.
struct Meter<'a> {
    hub: &'a Client,
    managed: &'a Client,
    pids: [(&'static str, Vec<u32>); 3],
}

/// A [`Meter`] reading, taken before and after a phase.
struct Reading {
    hub: BTreeMap<String, f64>,
    managed: BTreeMap<String, f64>,
    cpu: Vec<f64>,
}

impl Meter<'_> {
    async fn read(&self) -> anyhow::Result<Reading> {
        Ok(Reading {
            hub: requests(self.hub).await?,
            managed: requests(self.managed).await?,
            cpu: self.pids.iter().map(|(_, pids)| cpu_of(pids)).collect(),
        })
    }

    /// Prints what happened between `before` and `after` for `count` works (or object pairs).
    fn print(&self, what: &str, before: &Reading, after: &Reading, count: usize) {
        let cpu: Vec<String> = self
            .pids
            .iter()
            .zip(after.cpu.iter().zip(&before.cpu))
            .map(|((name, _), (a, b))| format!("{name} {:.1}s", a - b))
            .collect();
        println!("    {what}: CPU {}", cpu.join(", "));
        println!(
            "      hub requests per work:     {}",
            per_work(&before.hub, &after.hub, count)
        );
        println!(
            "      managed requests per work: {}",
            per_work(&before.managed, &after.managed, count)
        );
    }
}

fn objects(namespace: &str, name: &str) -> Vec<Value> {
    vec![
        json!({ "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": name, "namespace": namespace }, "data": { "key": name } }),
        json!({ "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": { "name": name, "namespace": namespace },
                "spec": { "replicas": 0, "selector": { "matchLabels": { "app": name } },
                          "template": { "metadata": { "labels": { "app": name } },
                                        "spec": { "containers": [{ "name": "c", "image": "registry.invalid/c:1" }] } } } }),
    ]
}

async fn namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e).context("create namespace"),
    }
}

/// Creates `count` ConfigMap + Deployment pairs straight on the managed cluster.
async fn raw(managed: &Client, ns: &str, count: usize) -> anyhow::Result<Duration> {
    namespace(managed, ns).await?;
    let cm = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
    let deploy = ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&());
    let start = Instant::now();
    stream::iter(0..count)
        .map(|i| {
            let (cm, deploy) = (cm.clone(), deploy.clone());
            async move {
                for (object, resource) in objects(ns, &format!("o{i}")).into_iter().zip([cm, deploy]) {
                    let api: Api<DynamicObject> = Api::namespaced_with(managed.clone(), ns, &resource);
                    api.create(&PostParams::default(), &serde_json::from_value(object)?)
                        .await?;
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(start.elapsed())
}

/// Waits (untimed) until the managed cluster's controller manager has processed each of the
/// `count` Deployments of `ns` (`status.observedGeneration` caught up), so that one phase's
/// backlog of ReplicaSets and status writes does not run into the next phase's time.
async fn settle(managed: &Client, ns: &str, count: usize) -> anyhow::Result<()> {
    use k8s_openapi::api::apps::v1::Deployment;
    let api: Api<Deployment> = Api::namespaced(managed.clone(), ns);
    let mut seen = std::collections::BTreeSet::new();
    let mut events = watcher(api, watcher::Config::default()).applied_objects().boxed();
    let deadline = tokio::time::sleep(Duration::from_secs(600));
    tokio::pin!(deadline);
    while seen.len() < count {
        tokio::select! {
            () = &mut deadline => anyhow::bail!("Deployments of {ns} not processed within 10 minutes"),
            event = events.next() => {
                let Some(deployment) = event.transpose()? else { anyhow::bail!("watch of {ns} ended") };
                let observed = deployment.status.as_ref().and_then(|s| s.observed_generation);
                if observed.is_some() && observed == deployment.metadata.generation {
                    seen.insert(deployment.name_any());
                }
            }
        }
    }
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

/// Creates `count` works and waits until each is Applied; returns the latencies and total.
async fn works(
    hub: &Client,
    managed: &Client,
    cluster: &str,
    ns: &str,
    count: usize,
) -> anyhow::Result<(Vec<Duration>, Duration)> {
    namespace(managed, ns).await?;
    let api: Api<ManifestWork> = Api::namespaced(hub.clone(), cluster);
    let applied: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
    let seen = applied.clone();
    let watch_api = api.clone();
    let prefix = format!("{ns}-");
    let watch = tokio::spawn(async move {
        let mut events = watcher(watch_api, watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(Ok(work)) = events.next().await {
            let done = work
                .status
                .as_ref()
                .is_some_and(|s| flotilla_core::conditions::is_true(&s.conditions, "Applied"));
            if done && work.name_any().starts_with(&prefix) {
                seen.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(work.name_any())
                    .or_insert_with(Instant::now);
            }
        }
    });
    let created: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
    let start = Instant::now();
    stream::iter(0..count)
        .map(|i| {
            let (api, created) = (api.clone(), created.clone());
            async move {
                let name = format!("{ns}-w{i}");
                let work = ManifestWork::new(
                    &name,
                    ManifestWorkSpec {
                        workload: ManifestsTemplate {
                            manifests: objects(ns, &format!("o{i}")).into_iter().map(Manifest).collect(),
                        },
                        ..Default::default()
                    },
                );
                created
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(name, Instant::now());
                api.create(&PostParams::default(), &work).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await?;
    let deadline = Instant::now() + Duration::from_secs(1800);
    while applied.lock().unwrap_or_else(|p| p.into_inner()).len() < count {
        anyhow::ensure!(Instant::now() < deadline, "works not applied within 30 minutes");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    watch.abort();
    let applied = applied.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let created = created.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut latencies: Vec<Duration> = applied
        .iter()
        .filter_map(|(name, done)| Some(done.saturating_duration_since(*created.get(name)?)))
        .collect();
    latencies.sort();
    let total = applied
        .values()
        .max()
        .map(|last| last.saturating_duration_since(start))
        .unwrap_or_default();
    Ok((latencies, total))
}

async fn agent_mode(kubeconfig: &str, agent_namespace: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&text)?,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    let managed = Client::try_from(config)?;
    let options = flotilla_work::agent::AgentOptions {
        agent_namespace: agent_namespace.to_owned(),
        ..Default::default()
    };
    flotilla_work::agent::run(managed, options).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--agent") {
        return agent_mode(&args[2], &args[3]).await;
    }
    let counts: Vec<usize> = args
        .get(1)
        .map_or("1,100,1000", String::as_str)
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .context("COUNTS: comma-separated numbers")?;

    let hub_plane = ControlPlane::start("bench-work-hub").await?;
    let managed_plane = ControlPlane::start("bench-work-managed").await?;
    let hub = hub_plane.admin_client().await?;
    let managed = managed_plane.admin_client().await?;
    let cluster = "bench";
    let agent_namespace = "bench-agent";
    namespace(&hub, cluster).await?;
    flotilla_kube::apply::apply(&Api::<ClusterRole>::all(hub.clone()), &rbac::work_cluster_role()).await?;
    let binding = rbac::work_role_binding(cluster);
    flotilla_kube::apply::apply(&Api::<RoleBinding>::namespaced(hub.clone(), cluster), &binding).await?;
    namespace(&managed, agent_namespace).await?;
    let kubeconfig = hub_plane.kubeconfig_for(
        &names::agent_user(cluster, "agent"),
        &[&names::cluster_group(cluster), names::MANAGED_CLUSTERS_GROUP],
    )?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(names::HUB_KUBECONFIG_SECRET.to_owned()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            (
                names::KUBECONFIG_KEY.to_owned(),
                ByteString(kubeconfig.into_bytes()),
            ),
            (
                names::CLUSTER_NAME_KEY.to_owned(),
                ByteString(cluster.as_bytes().to_vec()),
            ),
        ])),
        ..Default::default()
    };
    Api::<Secret>::namespaced(managed.clone(), agent_namespace)
        .create(&PostParams::default(), &secret)
        .await?;
    let agent = flotilla_tests::KillOnDrop(
        Command::new(std::env::current_exe()?)
            .args([
                "--agent",
                &managed_plane.admin_kubeconfig().display().to_string(),
                agent_namespace,
            ])
            .stdin(Stdio::null())
            .spawn()
            .context("start the agent process")?,
    );
    let pid = agent.0.id();
    let meter = Meter {
        hub: &hub,
        managed: &managed,
        pids: [
            ("agent", vec![pid]),
            ("hub plane", hub_plane.pids()),
            ("managed plane", managed_plane.pids()),
        ],
    };

    println!("(hub requests include the benchmark's own POST manifestworks, one per work)");
    println!("works  raw-create  create→Applied p50  p99     total    total/raw  agent-CPU  agent-RSS");
    for count in counts {
        let raw_before = meter.read().await?;
        let raw_time = raw(&managed, &format!("raw-{count}"), count).await?;
        let raw_after = meter.read().await?;
        settle(&managed, &format!("raw-{count}"), count).await?;
        let (cpu_before, _) = flotilla_tests::process_usage(pid);
        let works_before = meter.read().await?;
        let (latencies, total) = works(&hub, &managed, cluster, &format!("works-{count}"), count).await?;
        // Let requests that follow the last Applied (a reconcile woken by the agent's own
        // writes) land in this phase's counts, not in the next phase's.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let works_after = meter.read().await?;
        let (cpu_after, rss) = flotilla_tests::process_usage(pid);
        settle(&managed, &format!("works-{count}"), count).await?;
        println!(
            "{count:<6} {:>9.2}s  {:>17.2}s  {:>6.2}s  {:>7.2}s  {:>8.2}x  {:>8.1}s  {:>6} MiB",
            raw_time.as_secs_f64(),
            percentile(&latencies, 0.5).as_secs_f64(),
            percentile(&latencies, 0.99).as_secs_f64(),
            total.as_secs_f64(),
            total.as_secs_f64() / raw_time.as_secs_f64().max(1e-9),
            cpu_after - cpu_before,
            rss,
        );
        meter.print("raw", &raw_before, &raw_after, count);
        meter.print("works", &works_before, &works_after, count);
    }
    Ok(())
}
