//! Unit tests of the scores, on Nodes and Pods built by the chainable fixtures below.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{
        Container, Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodSpec, PodStatus, ResourceRequirements,
    },
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{ObjectMeta, Time},
    },
    jiff::Timestamp,
};

use super::*;

// === fixtures ===

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), Quantity((*value).to_owned())))
        .collect()
}

fn node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus::default()),
    }
}

trait NodeExt {
    fn allocatable(self, pairs: &[(&str, &str)]) -> Self;
    fn unschedulable(self) -> Self;
    fn not_ready(self) -> Self;
}

impl NodeExt for Node {
    fn allocatable(mut self, pairs: &[(&str, &str)]) -> Self {
        self.status.get_or_insert_default().allocatable = Some(quantities(pairs));
        self
    }

    fn unschedulable(mut self) -> Self {
        self.spec.get_or_insert_default().unschedulable = Some(true);
        self
    }

    fn not_ready(mut self) -> Self {
        self.status.get_or_insert_default().conditions = Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: "False".into(),
            ..NodeCondition::default()
        }]);
        self
    }
}

fn container(requests: &[(&str, &str)]) -> Container {
    Container {
        name: "c".into(),
        resources: Some(ResourceRequirements {
            requests: (!requests.is_empty()).then(|| quantities(requests)),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    }
}

/// A pending pod bound to `node` with one container requesting `requests`.
fn pod(node: &str, requests: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: (!node.is_empty()).then(|| node.to_owned()),
            containers: vec![container(requests)],
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Pending".into()),
            ..PodStatus::default()
        }),
    }
}

trait PodExt {
    fn phase(self, phase: &str) -> Self;
    fn deleting(self) -> Self;
    fn with_container(self, requests: &[(&str, &str)]) -> Self;
    fn init(self, requests: &[(&str, &str)]) -> Self;
    fn sidecar(self, requests: &[(&str, &str)]) -> Self;
    fn overhead(self, pairs: &[(&str, &str)]) -> Self;
    fn pod_level(self, pairs: &[(&str, &str)]) -> Self;
}

impl PodExt for Pod {
    fn phase(mut self, phase: &str) -> Self {
        self.status.get_or_insert_default().phase = Some(phase.to_owned());
        self
    }

    fn deleting(mut self) -> Self {
        self.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        self
    }

    fn with_container(mut self, requests: &[(&str, &str)]) -> Self {
        self.spec
            .get_or_insert_default()
            .containers
            .push(container(requests));
        self
    }

    fn init(mut self, requests: &[(&str, &str)]) -> Self {
        let spec = self.spec.get_or_insert_default();
        spec.init_containers
            .get_or_insert_default()
            .push(container(requests));
        self
    }

    fn sidecar(mut self, requests: &[(&str, &str)]) -> Self {
        let spec = self.spec.get_or_insert_default();
        spec.init_containers.get_or_insert_default().push(Container {
            restart_policy: Some("Always".into()),
            ..container(requests)
        });
        self
    }

    fn overhead(mut self, pairs: &[(&str, &str)]) -> Self {
        self.spec.get_or_insert_default().overhead = Some(quantities(pairs));
        self
    }

    fn pod_level(mut self, pairs: &[(&str, &str)]) -> Self {
        self.spec.get_or_insert_default().resources = Some(ResourceRequirements {
            requests: Some(quantities(pairs)),
            ..ResourceRequirements::default()
        });
        self
    }
}

fn scores_of(nodes: &[Node], pods: &[Pod]) -> BTreeMap<String, i32> {
    compute(nodes, pods)
        .scores
        .into_iter()
        .map(|s| (s.name, s.value))
        .collect()
}

fn value(scores: &BTreeMap<String, i32>, name: &str) -> i32 {
    *scores
        .get(name)
        .unwrap_or_else(|| panic!("no score {name} in {scores:?}"))
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

// === normalization ===

#[test]
fn normalize_follows_ocms_table() {
    // addon-contrib calculate_test.go TestNormalizeValue, CPU, GPU and TPU columns.
    assert_eq!(normalize(0.0, 0.0, CPU.max), -100);
    assert_eq!(normalize(40.0, 0.0, CPU.max), -20);
    assert_eq!(normalize(2.0, 0.0, GPU.max), -80);
    assert_eq!(normalize(1.0, 0.0, TPU.max), -90);
    assert_eq!(normalize(-10.0, 0.0, CPU.max), -100);
}

#[test]
fn normalize_clamps_to_minus_100_and_100() {
    assert_eq!(normalize(100.0, 0.0, 100.0), 100);
    assert_eq!(normalize(100.5, 0.0, 100.0), 100);
    assert_eq!(normalize(1e300, 0.0, 100.0), 100);
    assert_eq!(normalize(-1e300, 0.0, 100.0), -100);
    assert_eq!(normalize(f64::INFINITY, 0.0, 100.0), 100);
    assert_eq!(normalize(f64::NEG_INFINITY, 0.0, 100.0), -100);
    assert_eq!(normalize(f64::NAN, 0.0, 100.0), -100);
}

#[test]
fn normalize_truncates_toward_zero_as_go_does() {
    // 200 × 0.001 / 100 − 100 = −99.998 → −99; 200 × 99.999 / 100 − 100 = 99.998 → 99.
    assert_eq!(normalize(0.001, 0.0, 100.0), -99);
    assert_eq!(normalize(99.999, 0.0, 100.0), 99);
    assert_eq!(normalize(50.0, 0.0, 100.0), 0);
}

#[test]
fn memory_is_scored_in_mib_up_to_one_tib() {
    // OCM's test gives 100 for 524 GiB free: its current code scores bytes against 1 MiB. In
    // MiB, as its constants were meant, 524 GiB is about half of 1 TiB.
    let free = 524.0 * GIB;
    assert_eq!(normalize(free / MEMORY.unit, 0.0, MEMORY.max), 2);
    assert_eq!(normalize(1024.0 * GIB / MEMORY.unit, 0.0, MEMORY.max), 100);
    assert_eq!(normalize(-GIB / MEMORY.unit, 0.0, MEMORY.max), -100);
}

// === whole clusters ===

#[test]
fn an_empty_cluster_scores_minus_100_everywhere() {
    let computed = compute(&[], &[]);
    assert_eq!(computed.available, [Available::default(); 4]);
    assert!(
        computed.scores.iter().all(|s| s.value == MIN_SCORE),
        "{:?}",
        computed.scores
    );
}

#[test]
fn scores_are_published_in_ocms_order_then_the_legacy_names() {
    let names: Vec<String> = compute(&[], &[]).scores.into_iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            "cpuNodeAvailable",
            "cpuClusterAvailable",
            "memNodeAvailable",
            "memClusterAvailable",
            "gpuNodeAvailable",
            "gpuClusterAvailable",
            "tpuNodeAvailable",
            "tpuClusterAvailable",
            "cpuAvailable",
            "memAvailable",
        ]
    );
}

#[test]
fn ocms_two_node_example_gives_its_figures() {
    // addon-contrib calculate_test.go TestCalculateClusterResources: 12 GPUs free in the
    // cluster, 6 at most on one node.
    let nodes = [
        node("node1").allocatable(&[("cpu", "16"), ("memory", "32Gi"), ("nvidia.com/gpu", "6")]),
        node("node2").allocatable(&[("cpu", "32"), ("memory", "64Gi"), ("nvidia.com/gpu", "8")]),
    ];
    let pods = [pod(
        "node2",
        &[("cpu", "4"), ("memory", "8Gi"), ("nvidia.com/gpu", "2")],
    )];
    let computed = compute(&nodes, &pods);
    let [cpu, memory, gpu, tpu] = computed.available;
    assert_eq!(
        gpu,
        Available {
            node: 6.0,
            cluster: 12.0
        }
    );
    assert_eq!(
        cpu,
        Available {
            node: 28.0,
            cluster: 44.0
        }
    );
    assert_eq!(
        memory,
        Available {
            node: 56.0 * GIB,
            cluster: 88.0 * GIB
        }
    );
    assert_eq!(tpu, Available::default());

    let scores = scores_of(&nodes, &pods);
    assert_eq!(value(&scores, "cpuNodeAvailable"), -44);
    assert_eq!(value(&scores, "cpuClusterAvailable"), -12);
    // 56 GiB = 57 344 MiB: 200 × 57 344 / 1 048 576 − 100 = −89.06.
    assert_eq!(value(&scores, "memNodeAvailable"), -89);
    // 88 GiB = 90 112 MiB: −82.81.
    assert_eq!(value(&scores, "memClusterAvailable"), -82);
    assert_eq!(value(&scores, "gpuNodeAvailable"), -40);
    assert_eq!(value(&scores, "gpuClusterAvailable"), 20);
    assert_eq!(value(&scores, "tpuNodeAvailable"), -100);
    assert_eq!(value(&scores, "tpuClusterAvailable"), -100);
    assert_eq!(value(&scores, "cpuAvailable"), -12);
    assert_eq!(value(&scores, "memAvailable"), -82);
}

#[test]
fn pods_of_several_sizes_add_up_on_their_nodes() {
    let nodes = [
        node("a").allocatable(&[("cpu", "4"), ("memory", "8Gi")]),
        node("b").allocatable(&[("cpu", "8"), ("memory", "16Gi")]),
    ];
    let pods = [
        pod("a", &[("cpu", "500m"), ("memory", "1Gi")]),
        pod("a", &[("cpu", "1.5"), ("memory", "512Mi")]),
        pod("b", &[("cpu", "250m"), ("memory", "1.5Gi")]).with_container(&[("cpu", "1")]),
        // Requests nothing: counts nothing.
        pod("b", &[]),
    ];
    let [cpu, memory, ..] = available(&nodes, &pods);
    assert_eq!(
        cpu,
        Available {
            node: 6.75,
            cluster: 8.75
        }
    );
    assert_eq!(
        memory,
        Available {
            node: 14.5 * GIB,
            cluster: 21.0 * GIB
        }
    );
    let scores = scores_of(&nodes, &pods);
    // 200 × 6.75 / 100 − 100 = −86.5; 200 × 8.75 / 100 − 100 = −82.5.
    assert_eq!(value(&scores, "cpuNodeAvailable"), -86);
    assert_eq!(value(&scores, "cpuClusterAvailable"), -82);
}

#[test]
fn a_new_pod_lowers_the_score() {
    let nodes = [node("a").allocatable(&[("cpu", "64")])];
    let before = scores_of(&nodes, &[pod("a", &[("cpu", "4")])]);
    let after = scores_of(&nodes, &[pod("a", &[("cpu", "4")]), pod("a", &[("cpu", "10")])]);
    assert_eq!(value(&before, "cpuClusterAvailable"), 20);
    assert_eq!(value(&after, "cpuClusterAvailable"), 0);
}

#[test]
fn terminated_and_deleted_pods_are_not_counted() {
    let nodes = [node("a").allocatable(&[("cpu", "10")])];
    let pods = [
        pod("a", &[("cpu", "1")]),
        pod("a", &[("cpu", "1")]).phase("Running"),
        pod("a", &[("cpu", "100")]).phase("Succeeded"),
        pod("a", &[("cpu", "100")]).phase("Failed"),
        pod("a", &[("cpu", "100")]).phase("Running").deleting(),
    ];
    let [cpu, ..] = available(&nodes, &pods);
    assert_eq!(
        cpu,
        Available {
            node: 8.0,
            cluster: 8.0
        }
    );
}

#[test]
fn pods_not_bound_to_a_known_node_are_not_counted() {
    let nodes = [node("a").allocatable(&[("cpu", "10")])];
    let pods = [pod("", &[("cpu", "3")]), pod("elsewhere", &[("cpu", "3")])];
    let [cpu, ..] = available(&nodes, &pods);
    assert_eq!(
        cpu,
        Available {
            node: 10.0,
            cluster: 10.0
        }
    );
}

#[test]
fn unschedulable_nodes_and_their_pods_are_left_out() {
    let nodes = [
        node("a").allocatable(&[("cpu", "10")]),
        node("cordoned").allocatable(&[("cpu", "90")]).unschedulable(),
    ];
    let pods = [pod("cordoned", &[("cpu", "1")]), pod("a", &[("cpu", "2")])];
    let [cpu, ..] = available(&nodes, &pods);
    assert_eq!(
        cpu,
        Available {
            node: 8.0,
            cluster: 8.0
        }
    );
}

#[test]
fn not_ready_nodes_still_count_as_ocm_counts_them() {
    let nodes = [
        node("a").allocatable(&[("cpu", "10")]),
        node("down").allocatable(&[("cpu", "30")]).not_ready(),
    ];
    let [cpu, ..] = available(&nodes, &[]);
    assert_eq!(
        cpu,
        Available {
            node: 30.0,
            cluster: 40.0
        }
    );
}

#[test]
fn a_node_without_the_resource_is_skipped_but_its_pods_requests_count_against_the_cluster() {
    let nodes = [
        node("gpu").allocatable(&[("nvidia.com/gpu", "4")]),
        node("plain").allocatable(&[("cpu", "8")]),
    ];
    let pods = [pod("plain", &[("nvidia.com/gpu", "1")])];
    let [_, _, gpu, _] = available(&nodes, &pods);
    assert_eq!(
        gpu,
        Available {
            node: 4.0,
            cluster: 3.0
        }
    );
}

#[test]
fn an_overcommitted_node_counts_as_nothing_free_in_node_scope() {
    let nodes = [node("a").allocatable(&[("cpu", "1")])];
    let pods = [pod("a", &[("cpu", "3")])];
    let [cpu, ..] = available(&nodes, &pods);
    assert_eq!(
        cpu,
        Available {
            node: 0.0,
            cluster: -2.0
        }
    );
    let scores = scores_of(&nodes, &pods);
    assert_eq!(value(&scores, "cpuNodeAvailable"), -100);
    assert_eq!(value(&scores, "cpuClusterAvailable"), -100);
}

#[test]
fn unparseable_quantities_count_as_absent() {
    let nodes = [node("a").allocatable(&[("cpu", "lots"), ("memory", "1Gi")])];
    let pods = [pod("a", &[("memory", "many")])];
    let [cpu, memory, ..] = available(&nodes, &pods);
    assert_eq!(cpu, Available::default());
    assert_eq!(
        memory,
        Available {
            node: GIB,
            cluster: GIB
        }
    );
}

#[test]
fn huge_quantities_saturate_instead_of_overflowing() {
    let nodes = [
        node("a").allocatable(&[("cpu", "1e308"), ("memory", "8Ei")]),
        node("b").allocatable(&[("cpu", "1e308"), ("memory", "8Ei")]),
    ];
    let scores = scores_of(&nodes, &[]);
    assert_eq!(value(&scores, "cpuClusterAvailable"), 100);
    assert_eq!(value(&scores, "memClusterAvailable"), 100);

    // Requests adding up past f64 on node a: nothing free there; b is still free. The cluster's
    // infinite allocatable less its infinite requests is no figure at all: nothing free.
    let pods = [pod("a", &[("cpu", "1e308")]), pod("a", &[("cpu", "1e308")])];
    let [cpu, ..] = available(&nodes, &pods);
    assert!(cpu.node > 1e307, "{cpu:?}");
    assert!(cpu.cluster.is_nan());
    let scores = scores_of(&nodes, &pods);
    assert_eq!(value(&scores, "cpuNodeAvailable"), 100);
    assert_eq!(value(&scores, "cpuClusterAvailable"), -100);
    let scores = scores_of(&nodes[..1], &pods);
    assert_eq!(value(&scores, "cpuNodeAvailable"), -100);
}

// === one pod's request ===

#[test]
fn an_init_container_counts_only_when_it_needs_more_than_the_containers() {
    let small_init = pod("a", &[("cpu", "2")]).init(&[("cpu", "1")]);
    assert_eq!(pod_request(&small_init, "cpu"), 2.0);
    let big_init = pod("a", &[("cpu", "2")])
        .init(&[("cpu", "3")])
        .init(&[("cpu", "500m")]);
    assert_eq!(pod_request(&big_init, "cpu"), 3.0);
}

#[test]
fn init_containers_of_other_pods_do_not_mask_each_other() {
    // OCM compares an init container with the running total of every pod on the node: the
    // second pod's 3-core init container would vanish behind the first pod's 4 cores.
    let nodes = [node("a").allocatable(&[("cpu", "10")])];
    let pods = [
        pod("a", &[("cpu", "4")]),
        pod("a", &[("cpu", "1")]).init(&[("cpu", "3")]),
    ];
    let [cpu, ..] = available(&nodes, &pods);
    assert_eq!(cpu.cluster, 3.0);
}

#[test]
fn sidecars_add_to_the_containers_and_to_later_init_containers() {
    let with_sidecar = pod("a", &[("cpu", "1")])
        .sidecar(&[("cpu", "500m")])
        .init(&[("cpu", "1200m")]);
    // Steady state 1 + 0.5; the init container runs beside the sidecar: 0.5 + 1.2.
    assert!((pod_request(&with_sidecar, "cpu") - 1.7).abs() < 1e-9);
    let small_init = pod("a", &[("cpu", "1")])
        .sidecar(&[("cpu", "500m")])
        .init(&[("cpu", "100m")]);
    assert_eq!(pod_request(&small_init, "cpu"), 1.5);
}

#[test]
fn overhead_is_added_and_pod_level_requests_replace_the_containers() {
    let with_overhead = pod("a", &[("memory", "1Gi")]).overhead(&[("memory", "128Mi")]);
    assert_eq!(pod_request(&with_overhead, "memory"), 1.125 * GIB);
    let pod_level = pod("a", &[("cpu", "1")])
        .with_container(&[("cpu", "1")])
        .pod_level(&[("cpu", "1500m")])
        .overhead(&[("cpu", "100m")]);
    assert!((pod_request(&pod_level, "cpu") - 1.6).abs() < 1e-9);
    // Pod-level resources cover CPU and memory only.
    let gpu = pod("a", &[("nvidia.com/gpu", "1")]).pod_level(&[("nvidia.com/gpu", "4")]);
    assert_eq!(pod_request(&gpu, "nvidia.com/gpu"), 1.0);
}

#[test]
fn a_pod_without_a_spec_requests_nothing() {
    let bare = Pod::default();
    assert_eq!(pod_request(&bare, "cpu"), 0.0);
}

// === quantities at the edges ===

/// The API server takes decimal quantities of any size, and OCM reads those past f64 as
/// infinite: a node claiming that much is all free, until a pod claims as much (infinity less
/// infinity is no figure, so nothing free). Before, both read as nothing, so the node was left
/// out and the pod counted as requesting 0.
#[test]
fn an_infinite_allocatable_is_all_free_until_an_infinite_request_lands_on_it() {
    let huge = node("a").allocatable(&[("cpu", "1e400")]);
    let scores = scores_of(std::slice::from_ref(&huge), &[pod("a", &[("cpu", "8")])]);
    assert_eq!(value(&scores, "cpuNodeAvailable"), MAX_SCORE);
    assert_eq!(value(&scores, "cpuClusterAvailable"), MAX_SCORE);

    let full = scores_of(&[huge], &[pod("a", &[("cpu", "1e400")])]);
    assert_eq!(value(&full, "cpuNodeAvailable"), MIN_SCORE);
    assert_eq!(value(&full, "cpuClusterAvailable"), MIN_SCORE);
    assert_eq!(value(&full, CPU_AVAILABLE), MIN_SCORE);
}

/// A request far below one nano-unit still requests something, as in apimachinery: a node
/// with exactly 100 cores and such a pod has less than 100 free (before, the request read as 0
/// and the node scored 100).
#[test]
fn a_request_below_one_nano_unit_still_counts() {
    let scores = scores_of(
        &[node("a").allocatable(&[("cpu", "100")])],
        &[pod("a", &[("cpu", "1e-400")])],
    );
    assert_eq!(value(&scores, "cpuNodeAvailable"), 99);
}
