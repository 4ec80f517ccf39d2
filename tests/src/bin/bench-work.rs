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
//! created so far, so no phase pays for the previous one's backlog. The `steps` lines say
//! when the works were created, picked up by the agent (finalizer written), applied (their
//! Deployment exists on the managed cluster) and `Applied`: the last of each, and the p50 of
//! each step per work. Last, the `write costs` lines give the control-plane CPU per write of
//! each kind the agent causes, measured apart from the agent ([`write_costs`]). The `floor`
//! line under each row makes directly, in the same run, the least any work agent writes per
//! work ([`floor`]): its time over the raw time is the lowest total/raw an agent reaches here.
//!
//! With `--ocm-binary PATH`, OCM's work agent (`work agent`, built from its source) then runs
//! the largest count's works alone, on the same control planes for a cluster of its own, and
//! the two rows are printed side by side. It runs as shipped (client rate limits 50/100 on
//! each cluster) unless `--ocm-qps N` raises them.
//!
//! ```text
//! git --git-dir=<mirror of open-cluster-management-io/ocm> archive HEAD | tar -x -C /tmp/ocm
//! cd /tmp/ocm && GOFLAGS=-mod=vendor GOTOOLCHAIN=local go build -o /tmp/ocm-work ./cmd/work
//! cargo run --release -p flotilla-tests --bin bench-work -- [COUNTS] [--ocm-binary PATH] [--ocm-qps N]
//! ```
//! COUNTS defaults to `1,100,1000`; `BENCH_WORK_WORKERS=N` gives the agent N workers instead
//! of its default.

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
    api::{DynamicObject, ObjectMeta, Patch, PatchParams, PostParams},
    discovery::ApiResource,
    runtime::{WatchStreamExt, watcher},
};
use serde_json::{Value, json};

/// Requests in flight at once, for the raw creates and the work creates alike.
const CONCURRENCY: usize = 10;
/// Chains of writes in flight at once in the floor: enough that the control planes' CPU, not
/// the round trips of one chain, bounds it, as it would bound the best implementation.
const FLOOR_CONCURRENCY: usize = 64;

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

/// The spec of work `i` of `ns`: its [`objects`], named `o{i}`.
fn work_spec(ns: &str, i: usize) -> ManifestWorkSpec {
    ManifestWorkSpec {
        workload: ManifestsTemplate {
            manifests: objects(ns, &format!("o{i}")).into_iter().map(Manifest).collect(),
        },
        ..Default::default()
    }
}

/// Creates the [`objects`] named `name` straight on the managed cluster, one after the other.
async fn create_objects(managed: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    let resources = [
        ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
        ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
    ];
    for (object, resource) in objects(ns, name).into_iter().zip(resources) {
        let api: Api<DynamicObject> = Api::namespaced_with(managed.clone(), ns, &resource);
        api.create(&PostParams::default(), &serde_json::from_value(object)?)
            .await?;
    }
    Ok(())
}

/// Creates `count` ConfigMap + Deployment pairs straight on the managed cluster.
async fn raw(managed: &Client, ns: &str, count: usize) -> anyhow::Result<Duration> {
    namespace(managed, ns).await?;
    let start = Instant::now();
    stream::iter(0..count)
        .map(|i| async move { create_objects(managed, ns, &format!("o{i}")).await })
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

/// When each work (by name) reached a step.
type Times = Arc<Mutex<BTreeMap<String, Instant>>>;

/// Records `now` as the time `name` reached the step of `times`, unless it did before.
fn reached(times: &Times, name: String) {
    times
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(name)
        .or_insert_with(Instant::now);
}

/// What one run of works measured: per work, when it was created, picked up by the agent
/// (its finalizer written), applied (its Deployment exists on the managed cluster) and
/// `Applied`; and when the run started.
struct Steps {
    start: Instant,
    created: BTreeMap<String, Instant>,
    picked: BTreeMap<String, Instant>,
    landed: BTreeMap<String, Instant>,
    applied: BTreeMap<String, Instant>,
}

impl Steps {
    /// Per-work latencies from step `from` to step `to`, sorted.
    fn between(from: &BTreeMap<String, Instant>, to: &BTreeMap<String, Instant>) -> Vec<Duration> {
        let mut latencies: Vec<Duration> = to
            .iter()
            .filter_map(|(name, done)| Some(done.saturating_duration_since(*from.get(name)?)))
            .collect();
        latencies.sort();
        latencies
    }

    /// Time from the start until the last work reached `step`.
    fn last(&self, step: &BTreeMap<String, Instant>) -> f64 {
        step.values().max().map_or(0.0, |last| {
            last.saturating_duration_since(self.start).as_secs_f64()
        })
    }

    /// Where each work's time went, step by step (p50 and the time the last work got there).
    fn print(&self) {
        let p50 = |from, to| percentile(&Self::between(from, to), 0.5).as_secs_f64();
        println!(
            "    steps: all created {:.2}s, all picked up by the agent {:.2}s, all Deployments on the managed cluster {:.2}s, all Applied {:.2}s",
            self.last(&self.created),
            self.last(&self.picked),
            self.last(&self.landed),
            self.last(&self.applied),
        );
        println!(
            "      per work p50: create→picked up {:.3}s, picked up→Deployment created {:.3}s, Deployment created→Applied {:.3}s",
            p50(&self.created, &self.picked),
            p50(&self.picked, &self.landed),
            p50(&self.landed, &self.applied),
        );
    }
}

/// Creates `count` works and waits until each is Applied; returns the latencies and total.
async fn works(
    hub: &Client,
    managed: &Client,
    cluster: &str,
    ns: &str,
    count: usize,
) -> anyhow::Result<(Vec<Duration>, Duration, Steps)> {
    use flotilla_api::work::consts::MANIFEST_WORK_FINALIZER;
    use k8s_openapi::api::apps::v1::Deployment;
    namespace(managed, ns).await?;
    let api: Api<ManifestWork> = Api::namespaced(hub.clone(), cluster);
    let applied: Times = Arc::default();
    let picked: Times = Arc::default();
    let landed: Times = Arc::default();
    let (seen, seen_picked) = (applied.clone(), picked.clone());
    let watch_api = api.clone();
    let prefix = format!("{ns}-");
    let watch = tokio::spawn(async move {
        let mut events = watcher(watch_api, watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(Ok(work)) = events.next().await {
            if !work.name_any().starts_with(&prefix) {
                continue;
            }
            if work.finalizers().iter().any(|f| f == MANIFEST_WORK_FINALIZER) {
                reached(&seen_picked, work.name_any());
            }
            let done = work
                .status
                .as_ref()
                .is_some_and(|s| flotilla_core::conditions::is_true(&s.conditions, "Applied"));
            if done {
                reached(&seen, work.name_any());
            }
        }
    });
    // The Deployment `o{i}` belongs to the work `{ns}-w{i}`.
    let seen_landed = landed.clone();
    // Metadata only: the cheapest watch the managed apiserver can serve beside the agent.
    let deployments: Api<kube::core::PartialObjectMeta<Deployment>> = Api::namespaced(managed.clone(), ns);
    let work_prefix = format!("{ns}-w");
    let landing = tokio::spawn(async move {
        let mut events = watcher(deployments, watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(Ok(deployment)) = events.next().await {
            if let Some(i) = deployment.name_any().strip_prefix('o') {
                reached(&seen_landed, format!("{work_prefix}{i}"));
            }
        }
    });
    let created: Times = Arc::default();
    let start = Instant::now();
    stream::iter(0..count)
        .map(|i| {
            let (api, created) = (api.clone(), created.clone());
            async move {
                let name = format!("{ns}-w{i}");
                let work = ManifestWork::new(&name, work_spec(ns, i));
                reached(&created, name);
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
    landing.abort();
    let take = |times: &Times| times.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let steps = Steps {
        start,
        created: take(&created),
        picked: take(&picked),
        landed: take(&landed),
        applied: take(&applied),
    };
    let latencies = Steps::between(&steps.created, &steps.applied);
    let total = Duration::from_secs_f64(steps.last(&steps.applied));
    Ok((latencies, total, steps))
}

/// Runs `write` for each of `indices` at [`CONCURRENCY`]; returns what the writes returned (in
/// order), the CPU milliseconds per write that the control plane `plane` (index into
/// [`Meter::pids`]) spent meanwhile, and the wall time.
async fn cost<T, F, Fut>(
    meter: &Meter<'_>,
    plane: usize,
    indices: std::ops::Range<usize>,
    write: F,
) -> anyhow::Result<(Vec<T>, String)>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let count = indices.len();
    let before = cpu_of(&meter.pids[plane].1);
    let start = Instant::now();
    let written = stream::iter(indices)
        .map(write)
        .buffered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await?;
    let wall = start.elapsed().as_secs_f64();
    let ms = (cpu_of(&meter.pids[plane].1) - before) * 1000.0 / count.max(1) as f64;
    Ok((written, format!("{ms:.2} ms ({count} in {wall:.2}s)")))
}

/// The work `sample` of the agent's cluster and its AppliedManifestWork, as the agent wrote them.
async fn read_sample(
    hub: &Client,
    managed: &Client,
    cluster: &str,
    sample: &str,
) -> anyhow::Result<(ManifestWork, flotilla_api::work::v1::AppliedManifestWork)> {
    let work = Api::<ManifestWork>::namespaced(hub.clone(), cluster)
        .get(sample)
        .await
        .context("read the sample work")?;
    let applied = Api::<flotilla_api::work::v1::AppliedManifestWork>::all(managed.clone())
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .find(|a| a.spec.manifest_work_name == sample)
        .context("the sample work's AppliedManifestWork")?;
    Ok((work, applied))
}

/// What each kind of write the agent causes costs its apiserver alone, measured apart from
/// the agent, as a merge patch (what the agent sends) and as a whole-object update (PUT):
/// `count` works created, then half of them written one way and half the other, at the same
/// concurrency, in a hub namespace and under names the agent does not act on. The writes
/// copy what the agent wrote for `sample` (a work of the last run, and its
/// AppliedManifestWork), so sizes are the real ones. CPU is of the whole control plane
/// (apiserver, etcd, controller manager) while the writes run. The finalizer writes run the
/// merge patches first, the status writes the PUTs first, so that neither way always pays for
/// the tail of the step before.
async fn write_costs(meter: &Meter<'_>, cluster: &str, sample: &str, count: usize) -> anyhow::Result<()> {
    use flotilla_api::work::v1::AppliedManifestWork;
    let (hub, managed) = (meter.hub, meter.managed);
    let ns = "write-cost";
    let half = count / 2;
    namespace(hub, ns).await?;
    let (sample_work, sample_applied) = read_sample(hub, managed, cluster, sample).await?;
    let applied_api: Api<AppliedManifestWork> = Api::all(managed.clone());
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), ns);
    let name = |i: usize| format!("cost-{i}");
    let (post, merge) = (&PostParams::default(), &PatchParams::default());

    let (created, create) = cost(meter, 1, 0..count, |i| {
        let (works, spec) = (works.clone(), sample_work.spec.clone());
        async move {
            Ok(works
                .create(&PostParams::default(), &ManifestWork::new(&name(i), spec))
                .await?)
        }
    })
    .await?;
    let finalizers = json!({ "metadata": { "finalizers": sample_work.metadata.finalizers } });
    let (mut finalized, patch) = cost(meter, 1, 0..half, |i| {
        let (works, patch) = (works.clone(), finalizers.clone());
        async move { Ok(works.patch(&name(i), merge, &Patch::Merge(&patch)).await?) }
    })
    .await?;
    let (put_finalized, put) = cost(meter, 1, half..count, |i| {
        let works = works.clone();
        let mut work = created[i].clone();
        work.metadata
            .finalizers
            .clone_from(&sample_work.metadata.finalizers);
        async move { Ok(works.replace(&name(i), post, &work).await?) }
    })
    .await?;
    finalized.extend(put_finalized);
    println!(
        "    write costs, CPU of the plane per write: hub POST manifestworks {create}; finalizer: merge PATCH {patch}, PUT {put}"
    );
    let status = json!({ "status": sample_work.status });
    let (_, put) = cost(meter, 1, half..count, |i| {
        let works = works.clone();
        let mut work = finalized[i].clone();
        work.status.clone_from(&sample_work.status);
        async move { Ok(works.replace_status(&name(i), post, &work).await?) }
    })
    .await?;
    let (_, patch) = cost(meter, 1, 0..half, |i| {
        let (works, patch) = (works.clone(), status.clone());
        async move { Ok(works.patch_status(&name(i), merge, &Patch::Merge(&patch)).await?) }
    })
    .await?;
    println!("      status: merge PATCH manifestworks/status {patch}, PUT {put}");

    let (created, create) = cost(meter, 2, 0..count, |i| {
        let applied_api = applied_api.clone();
        let mut applied = AppliedManifestWork::new(&format!("{ns}-{i}"), sample_applied.spec.clone());
        applied
            .metadata
            .finalizers
            .clone_from(&sample_applied.metadata.finalizers);
        async move { Ok(applied_api.create(post, &applied).await?) }
    })
    .await?;
    let status = json!({ "status": sample_applied.status });
    let (_, put) = cost(meter, 2, half..count, |i| {
        let applied_api = applied_api.clone();
        let mut applied = created[i].clone();
        applied.status.clone_from(&sample_applied.status);
        async move {
            Ok(applied_api
                .replace_status(&format!("{ns}-{i}"), post, &applied)
                .await?)
        }
    })
    .await?;
    let (_, patch) = cost(meter, 2, 0..half, |i| {
        let (applied_api, patch) = (applied_api.clone(), status.clone());
        async move {
            Ok(applied_api
                .patch_status(&format!("{ns}-{i}"), merge, &Patch::Merge(&patch))
                .await?)
        }
    })
    .await?;
    println!(
        "      managed POST appliedmanifestworks {create}; status: merge PATCH appliedmanifestworks/status {patch}, PUT {put}"
    );
    // Leave nothing the agent's AppliedManifestWork controller keeps reconciling.
    delete_records(managed, (0..count).map(|i| format!("{ns}-{i}"))).await
}

/// The least any OCM work agent writes per work, made directly in the order the agent needs
/// them, with the same client as [`raw`] (each work's writes one after the other,
/// [`FLOOR_CONCURRENCY`] works at once): on the hub the work's create (the benchmark's own)
/// and its cleanup finalizer; on the managed cluster the AppliedManifestWork (created with its
/// finalizer), the ConfigMap and the Deployment, and the AppliedManifestWork's status listing
/// them; last the work's status. Statuses are copies of what the agent wrote for `sample`, so
/// sizes are the real ones. Hub objects go to a namespace the agent does not watch, and the
/// records name another hub, so the agent leaves both alone. The time over [`raw`]'s is the
/// lowest total/raw any agent reaches on this machine.
async fn floor(
    hub: &Client,
    managed: &Client,
    cluster: &str,
    sample: &str,
    ns: &str,
    count: usize,
) -> anyhow::Result<Duration> {
    use flotilla_api::work::consts::{APPLIED_MANIFEST_WORK_FINALIZER, MANIFEST_WORK_FINALIZER};
    use flotilla_api::work::v1::{AppliedManifestWork, AppliedManifestWorkSpec};
    namespace(hub, ns).await?;
    namespace(managed, ns).await?;
    let (sample_work, sample_applied) = read_sample(hub, managed, cluster, sample).await?;
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), ns);
    let records: Api<AppliedManifestWork> = Api::all(managed.clone());
    let (post, merge) = (&PostParams::default(), &PatchParams::default());
    let finalizer = json!({ "metadata": { "finalizers": [MANIFEST_WORK_FINALIZER] } });
    let start = Instant::now();
    stream::iter(0..count)
        .map(|i| {
            let (works, records, finalizer) = (works.clone(), records.clone(), &finalizer);
            let (sample_work, sample_applied) = (&sample_work, &sample_applied);
            async move {
                let name = format!("{ns}-w{i}");
                works
                    .create(post, &ManifestWork::new(&name, work_spec(ns, i)))
                    .await?;
                let mut work = works.patch(&name, merge, &Patch::Merge(finalizer)).await?;
                let mut record = AppliedManifestWork::new(
                    &name,
                    AppliedManifestWorkSpec {
                        hub_hash: "floor".into(),
                        agent_id: "floor".into(),
                        manifest_work_name: name.clone(),
                    },
                );
                record.metadata.finalizers = Some(vec![APPLIED_MANIFEST_WORK_FINALIZER.to_owned()]);
                let mut record = records.create(post, &record).await?;
                create_objects(managed, ns, &format!("o{i}")).await?;
                record.status.clone_from(&sample_applied.status);
                records.replace_status(&name, post, &record).await?;
                work.status.clone_from(&sample_work.status);
                works.replace_status(&name, post, &work).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(FLOOR_CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(start.elapsed())
}

/// Deletes the AppliedManifestWorks `names`, releasing their finalizers first: they name no
/// work of the agent's, so nothing else would.
async fn delete_records(managed: &Client, names: impl Iterator<Item = String>) -> anyhow::Result<()> {
    use flotilla_api::work::v1::AppliedManifestWork;
    let records: Api<AppliedManifestWork> = Api::all(managed.clone());
    let clear = json!({ "metadata": { "finalizers": null } });
    stream::iter(names)
        .map(|name| {
            let (records, clear) = (records.clone(), &clear);
            async move {
                records
                    .patch(&name, &PatchParams::default(), &Patch::Merge(clear))
                    .await?;
                records.delete(&name, &Default::default()).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

async fn agent_mode(kubeconfig: &str, agent_namespace: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&text)?,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    let managed = Client::try_from(config)?;
    let mut options = flotilla_work::agent::AgentOptions {
        agent_namespace: agent_namespace.to_owned(),
        ..Default::default()
    };
    // `BENCH_WORK_WORKERS=N` runs the agent with N workers instead of the default, to compare.
    if let Some(workers) = std::env::var("BENCH_WORK_WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
    {
        options.workers = workers;
    }
    flotilla_work::agent::run(managed, options).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--agent") {
        return agent_mode(&args[2], &args[3]).await;
    }
    let options = options(args.into_iter().skip(1))?;
    let counts = options.counts.clone();

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
    let hub_kubeconfig = |cluster: &str| {
        hub_plane.kubeconfig_for(
            &names::agent_user(cluster, "agent"),
            &[&names::cluster_group(cluster), names::MANAGED_CLUSTERS_GROUP],
        )
    };
    let kubeconfig = hub_kubeconfig(cluster)?;
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
    let mut last = None;
    let mut last_row = None;
    for count in counts {
        let raw_before = meter.read().await?;
        let raw_time = raw(&managed, &format!("raw-{count}"), count).await?;
        let raw_after = meter.read().await?;
        settle(&managed, &format!("raw-{count}"), count).await?;
        let (cpu_before, _) = flotilla_tests::process_usage(pid);
        let works_before = meter.read().await?;
        let (latencies, total, steps) =
            works(&hub, &managed, cluster, &format!("works-{count}"), count).await?;
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
        steps.print();
        last_row = Some(Row {
            count,
            total,
            p50: percentile(&latencies, 0.5),
            cpu: cpu_after - cpu_before,
            rss,
        });
        let sample = format!("works-{count}-w0");
        let floor_ns = format!("floor-{count}");
        let floor_before = meter.read().await?;
        let least = floor(&hub, &managed, cluster, &sample, &floor_ns, count).await?;
        let floor_after = meter.read().await?;
        settle(&managed, &floor_ns, count).await?;
        delete_records(&managed, (0..count).map(|i| format!("{floor_ns}-w{i}"))).await?;
        println!(
            "    floor: the least any work agent writes, made directly: {:.2}s = {:.2}x raw (the lowest total/raw any agent reaches here)",
            least.as_secs_f64(),
            least.as_secs_f64() / raw_time.as_secs_f64().max(1e-9),
        );
        meter.print("floor", &floor_before, &floor_after, count);
        last = Some((sample, count));
    }
    if let Some((sample, count)) = last {
        write_costs(&meter, cluster, &sample, count).await?;
    }
    if let (Some(binary), Some(ours)) = (&options.ocm_binary, last_row) {
        // Ours stops first: OCM's phase is its own.
        drop(agent);
        let cluster = "bench-ocm";
        namespace(&hub, cluster).await?;
        let binding = rbac::work_role_binding(cluster);
        flotilla_kube::apply::apply(&Api::<RoleBinding>::namespaced(hub.clone(), cluster), &binding).await?;
        // Where OCM's agent looks for its hub credential, as its klusterlet mounts it.
        let credential = tempfile::tempdir()?;
        std::fs::write(credential.path().join("kubeconfig"), hub_kubeconfig(cluster)?)?;
        let ocm = start_ocm_agent(
            binary,
            managed_plane.admin_kubeconfig(),
            credential.path(),
            cluster,
            options.ocm_qps,
        )?;
        let pid = ocm.0.id();
        // Its informers list before the first work arrives, as ours had.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let count = ours.count;
        let (cpu_before, _) = flotilla_tests::process_usage(pid);
        let (latencies, total, steps) =
            works(&hub, &managed, cluster, &format!("ocm-works-{count}"), count).await?;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let (cpu_after, rss) = flotilla_tests::process_usage(pid);
        anyhow::ensure!(rss > 0, "OCM's work agent exited; see its log");
        let p50 = percentile(&latencies, 0.5);
        println!(
            "ocm {count}: create→Applied p50 {:.2}s p99 {:.2}s, total {:.2}s, agent CPU {:.1}s, RSS {rss} MiB",
            p50.as_secs_f64(),
            percentile(&latencies, 0.99).as_secs_f64(),
            total.as_secs_f64(),
            cpu_after - cpu_before,
        );
        steps.print();
        println!(
            "side by side at {count} works: total flotilla {:.2}s / OCM {:.2}s ({:.1}x faster); p50 {:.2}s / {:.2}s; agent CPU {:.1}s / {:.1}s; RSS {} / {rss} MiB",
            ours.total.as_secs_f64(),
            total.as_secs_f64(),
            total.as_secs_f64() / ours.total.as_secs_f64().max(1e-9),
            ours.p50.as_secs_f64(),
            p50.as_secs_f64(),
            ours.cpu,
            cpu_after - cpu_before,
            ours.rss,
        );
    }
    Ok(())
}

/// Our agent's figures at the largest count, for the side-by-side line.
struct Row {
    count: usize,
    total: Duration,
    p50: Duration,
    cpu: f64,
    rss: u64,
}

struct Options {
    counts: Vec<usize>,
    ocm_binary: Option<std::path::PathBuf>,
    ocm_qps: Option<u32>,
}

fn options(mut args: impl Iterator<Item = String>) -> anyhow::Result<Options> {
    let mut options = Options {
        counts: vec![1, 100, 1000],
        ocm_binary: None,
        ocm_qps: None,
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--ocm-binary" => options.ocm_binary = Some(args.next().context("--ocm-binary PATH")?.into()),
            "--ocm-qps" => options.ocm_qps = Some(args.next().context("--ocm-qps N")?.parse()?),
            counts => {
                options.counts = counts
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()
                    .context("COUNTS: comma-separated numbers")?;
            }
        }
    }
    Ok(options)
}

/// Starts OCM's work agent from `binary` for `cluster`, with the hub credential in
/// `hub_kubeconfig_dir` (file `kubeconfig`).
fn start_ocm_agent(
    binary: &std::path::Path,
    managed_kubeconfig: &std::path::Path,
    hub_kubeconfig_dir: &std::path::Path,
    cluster: &str,
    qps: Option<u32>,
) -> anyhow::Result<flotilla_tests::KillOnDrop> {
    let log = std::fs::File::create(std::env::temp_dir().join("bench-work-ocm.log"))?;
    // Its metrics endpoint needs a port of its own.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let credential = hub_kubeconfig_dir.join("kubeconfig");
    let mut command = Command::new(binary);
    command
        .arg("agent")
        .arg(format!("--spoke-cluster-name={cluster}"))
        .arg(format!("--hub-kubeconfig-dir={}", hub_kubeconfig_dir.display()))
        .arg(format!("--hub-kubeconfig={}", credential.display()))
        .arg(format!("--workload-source-config={}", credential.display()))
        .arg(format!("--kubeconfig={}", managed_kubeconfig.display()))
        .arg(format!("--listen=127.0.0.1:{port}"))
        .arg("--disable-leader-election")
        .arg("--namespace=bench-agent")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    if let Some(qps) = qps {
        command
            .arg(format!("--kube-api-qps={qps}"))
            .arg(format!("--kube-api-burst={}", 2 * qps))
            .arg(format!("--hub-kube-api-qps={qps}"))
            .arg(format!("--hub-kube-api-burst={}", 2 * qps));
    }
    Ok(flotilla_tests::KillOnDrop(
        command.spawn().context("start OCM's work agent")?,
    ))
}
