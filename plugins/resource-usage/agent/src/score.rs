//! The scores: from the managed cluster's Nodes and Pods to the named values of
//! AddOnPlacementScore `resource-usage-score`, as OCM's resource-usage-collect agent computes
//! them (addon-contrib `resource-usage-collect-addon/pkg/addon/agent/calculate.go`). Pure: no
//! client, no clock.
//!
//! ```text
//!   Nodes (spec.unschedulable = false)      Pods (spec.nodeName = such a node, not Succeeded,
//!     status.allocatable[r]                   not Failed, not being deleted)
//!            │                                  requests[r] of each pod
//!            ▼                                        ▼
//!   node:    max over nodes that have r of (allocatable − requested on it), at least 0
//!   cluster: Σ allocatable − Σ requested
//!            │
//!            ▼  normalize(value, 0, max_r) ∈ −100..=100
//!   <r>NodeAvailable, <r>ClusterAvailable       r ∈ cpu (cores, max 100), mem (MiB, max 1 TiB),
//!   cpuAvailable, memAvailable (= cluster)        gpu (nvidia.com/gpu, 20), tpu (google.com/tpu, 20)
//! ```
//!
//! Where this differs from OCM's code, on purpose:
//! - Memory is scored in MiB, the unit OCM's constant was chosen for (`1024 * 1024` is "1TB"
//!   beside a "MB" conversion). OCM's current agent divides and multiplies by 1024
//!   (`mem / 1024 * 1024`), a no-op, so it compares bytes with 1 MiB and every cluster with more
//!   than 1 MiB free scores 100; its first version (2022–2024) divided by 1024 × 1024 as here.
//! - A pod's request is counted as the kube-scheduler counts it: the larger of its containers'
//!   sum and its largest init container (sidecars, restartable init containers, add to both),
//!   pod-level requests where set, plus overhead. OCM compares each init container with the
//!   running total of all pods on the node, so its figure depends on the order of its list.
//! - `cpuAvailable` and `memAvailable`, the names of OCM's first version and of OCM's
//!   documentation, are published too, with the cluster-wide values.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, Node, Pod};

use crate::quantity;

/// Upper bound of a score (OCM sdk-go `MaxScore`).
pub const MAX_SCORE: i32 = 100;
/// Lower bound of a score (OCM sdk-go `MinScore`).
pub const MIN_SCORE: i32 = -100;

/// Bytes in a MiB: memory is scored in MiB.
const MIB: f64 = 1024.0 * 1024.0;

/// A resource the agent scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resource {
    /// The Kubernetes resource name in `allocatable` and `requests`.
    pub name: &'static str,
    /// Base units (cores, bytes, devices) per scored unit.
    pub unit: f64,
    /// Free scored units at and above which the score is [`MAX_SCORE`]; none or fewer score
    /// [`MIN_SCORE`] (the lower bound is 0).
    pub max: f64,
    /// Name of the node-scope score.
    pub node_score: &'static str,
    /// Name of the cluster-scope score.
    pub cluster_score: &'static str,
}

/// CPU, in cores; 100 free cores or more score 100 (OCM `MAXCPUCOUNT`).
pub const CPU: Resource = Resource {
    name: "cpu",
    unit: 1.0,
    max: 100.0,
    node_score: "cpuNodeAvailable",
    cluster_score: "cpuClusterAvailable",
};
/// Memory, in MiB; 1 TiB free or more scores 100 (OCM `MAXMEMCOUNT`, 1024 × 1024).
pub const MEMORY: Resource = Resource {
    name: "memory",
    unit: MIB,
    max: 1024.0 * 1024.0,
    node_score: "memNodeAvailable",
    cluster_score: "memClusterAvailable",
};
/// NVIDIA GPUs; 20 free or more score 100 (OCM `MAXGPUCOUNT`).
pub const GPU: Resource = Resource {
    name: "nvidia.com/gpu",
    unit: 1.0,
    max: 20.0,
    node_score: "gpuNodeAvailable",
    cluster_score: "gpuClusterAvailable",
};
/// Google TPUs; 20 free or more score 100 (OCM `MAXTPUCOUNT`).
pub const TPU: Resource = Resource {
    name: "google.com/tpu",
    unit: 1.0,
    max: 20.0,
    node_score: "tpuNodeAvailable",
    cluster_score: "tpuClusterAvailable",
};
/// Every scored resource, in the order OCM publishes their scores.
pub const RESOURCES: [Resource; 4] = [CPU, MEMORY, GPU, TPU];

/// OCM's first name for the cluster-wide CPU score, still the one its documentation uses.
pub const CPU_AVAILABLE: &str = "cpuAvailable";
/// OCM's first name for the cluster-wide memory score, still the one its documentation uses.
pub const MEM_AVAILABLE: &str = "memAvailable";

/// One named score, as in `status.scores` of an AddOnPlacementScore.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Score {
    /// What placements name in `scoreCoordinate.addOn.scoreName`.
    pub name: String,
    /// In [`MIN_SCORE`]..=[`MAX_SCORE`].
    pub value: i32,
}

/// Free amounts of one resource, in base units, before normalization.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Available {
    /// The most any one schedulable node has free; 0 when no node has the resource or none has
    /// any free.
    pub node: f64,
    /// All schedulable nodes' allocatable less all requests on them; negative when
    /// overcommitted.
    pub cluster: f64,
}

/// What one pass computed: the free amounts (for the log) and the scores to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct Computed {
    /// Free amounts, one per entry of [`RESOURCES`].
    pub available: [Available; 4],
    /// The scores, node and cluster scope for each resource in order, then the legacy names.
    pub scores: Vec<Score>,
}

/// The scores of a cluster with these nodes and pods.
pub fn compute<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    pods: impl IntoIterator<Item = &'a Pod>,
) -> Computed {
    let available = available(nodes, pods);
    let mut scores = Vec::with_capacity(2 * RESOURCES.len() + 2);
    for (resource, free) in RESOURCES.iter().zip(&available) {
        scores.push(score(resource.node_score, free.node, resource));
        scores.push(score(resource.cluster_score, free.cluster, resource));
    }
    let [cpu, memory, ..] = &available;
    scores.push(score(CPU_AVAILABLE, cpu.cluster, &CPU));
    scores.push(score(MEM_AVAILABLE, memory.cluster, &MEMORY));
    Computed { available, scores }
}

fn score(name: &str, free: f64, resource: &Resource) -> Score {
    Score {
        name: name.to_owned(),
        value: normalize(free / resource.unit, 0.0, resource.max),
    }
}

/// `value` mapped linearly from `min..max` onto −100..100 (OCM sdk-go `ScoreNormalizer`):
/// above `max` is 100, at or below `min` is −100, in between is truncated toward zero. A NaN
/// (no figure at all) counts as nothing free.
pub fn normalize(value: f64, min: f64, max: f64) -> i32 {
    if value > max {
        MAX_SCORE
    } else if value <= min || value.is_nan() {
        MIN_SCORE
    } else {
        let span = f64::from(MAX_SCORE - MIN_SCORE);
        // In (−100, 100] here; `as` truncates toward zero as Go's conversion does.
        ((span * (value - min) / (max - min) + f64::from(MIN_SCORE)) as i32).clamp(MIN_SCORE, MAX_SCORE)
    }
}

/// Free amounts of every resource in [`RESOURCES`].
pub fn available<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    pods: impl IntoIterator<Item = &'a Pod>,
) -> [Available; 4] {
    let schedulable: Vec<&Node> = nodes.into_iter().filter(|n| is_schedulable(n)).collect();
    let mut requested: HashMap<&str, [f64; 4]> = schedulable
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .map(|name| (name, [0.0; 4]))
        .collect();
    for pod in pods.into_iter().filter(|p| holds_resources(p)) {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        // Pods on nodes that are unschedulable, unknown or not chosen yet count nowhere.
        if let Some(sums) = node.and_then(|n| requested.get_mut(n)) {
            for (sum, resource) in sums.iter_mut().zip(&RESOURCES) {
                *sum += pod_request(pod, resource.name);
            }
        }
    }

    let mut free = [Available::default(); 4];
    let mut allocatable_sum = [0.0; 4];
    let mut requested_sum = [0.0; 4];
    for node in &schedulable {
        let on_node = node
            .metadata
            .name
            .as_deref()
            .and_then(|name| requested.get(name))
            .copied()
            .unwrap_or_default();
        let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        for (i, resource) in RESOURCES.iter().enumerate() {
            requested_sum[i] += on_node[i];
            // A node without the resource counts toward neither its total nor the node scope
            // (OCM skips it there); what pods on it request still counts against the cluster.
            let Some(amount) = allocatable
                .and_then(|a| a.get(resource.name))
                .and_then(quantity::to_f64)
            else {
                continue;
            };
            allocatable_sum[i] += amount;
            free[i].node = free[i].node.max(amount - on_node[i]);
        }
    }
    for i in 0..free.len() {
        free[i].cluster = allocatable_sum[i] - requested_sum[i];
    }
    free
}

/// Whether pods can land on `node`: OCM skips `spec.unschedulable` nodes (cordoned ones) and
/// nothing else; a NotReady node still counts, as it does in OCM.
pub fn is_schedulable(node: &Node) -> bool {
    !node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)
}

/// Whether `pod` holds what it requested: not once it has Succeeded or Failed, nor once it is
/// being deleted (OCM's filter). Pending pods bound to a node count.
pub fn holds_resources(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded" | "Failed")) && pod.metadata.deletion_timestamp.is_none()
}

/// What `pod` requests of `resource`, in base units, as the kube-scheduler counts it: the
/// containers' sum (restartable init containers, sidecars, included), or the most any
/// one-shot init container needs beside the sidecars started before it if that is more;
/// pod-level requests of CPU and memory replace both where set; overhead is added. An unset
/// request is 0 (OCM counts requests as set, with no defaults).
pub fn pod_request(pod: &Pod, resource: &str) -> f64 {
    let Some(spec) = &pod.spec else {
        return 0.0;
    };
    let mut containers: f64 = spec.containers.iter().map(|c| request(c, resource)).sum();
    let mut sidecars = 0.0;
    let mut init_peak: f64 = 0.0;
    for init in spec.init_containers.iter().flatten() {
        let amount = request(init, resource);
        if init.restart_policy.as_deref() == Some("Always") {
            containers += amount;
            sidecars += amount;
            init_peak = init_peak.max(sidecars);
        } else {
            init_peak = init_peak.max(sidecars + amount);
        }
    }
    let mut total = containers.max(init_peak);
    if matches!(resource, "cpu" | "memory")
        && let Some(pod_level) = spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get(resource))
            .and_then(quantity::to_f64)
    {
        total = pod_level;
    }
    let overhead = spec
        .overhead
        .as_ref()
        .and_then(|o| o.get(resource))
        .and_then(quantity::to_f64)
        .unwrap_or(0.0);
    total + overhead
}

/// A container's request of `resource`; 0 when unset.
fn request(container: &Container, resource: &str) -> f64 {
    container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get(resource))
        .and_then(quantity::to_f64)
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests;
