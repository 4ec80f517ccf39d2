//! The agent program against real control planes: a hub with Flotilla's CRDs and a managed
//! cluster holding hand-made Nodes and Pods bound to them by `spec.nodeName` (no kubelet, no
//! scheduler: only what the agent reads). The agent runs as a child process with the identities
//! the add-on gives it, each allowed only what the plugin renders (the hub Role for the agent's
//! group in the cluster namespace; the ClusterRole and lease Role for its service account), so
//! the test also shows that the rendered RBAC is enough.
//!
//! ```text
//!   managed: Nodes node1, node2, cordoned; Pods in default ─▶ resource-usage-agent (child)
//!   hub:     AddOnPlacementScore cluster1/resource-usage-score ◀─┘    └─▶ managed: Lease
//! ```
//!
//! Every wait watches the object it waits for; nothing sleeps a fixed time.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use flotilla_addon_sdk::{AddOn, Addon as _, Cluster, testing::csr_for};
use flotilla_api::cluster::v1alpha1::AddOnPlacementScore;
use flotilla_testing::ControlPlane;
use k8s_openapi::{
    api::{
        coordination::v1::Lease,
        core::v1::{Container, Namespace, Node, NodeSpec, NodeStatus, Pod, PodSpec, ResourceRequirements},
    },
    apimachinery::pkg::api::resource::Quantity,
    jiff::Timestamp,
};
use kube::{
    Api, Client, ResourceExt as _,
    api::{ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams, PostParams},
    runtime::wait::{Condition, await_condition},
};
use resource_usage::{ADDON_NAME, ResourceUsage, SERVICE_ACCOUNT};

const CLUSTER: &str = "cluster1";
const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
const SCORE: &str = "resource-usage-score";
/// How long any one change may take to show: a few periods of one second, with room for a
/// loaded machine.
const WAIT: Duration = Duration::from_secs(90);

// === the test ===

#[tokio::test]
async fn the_agent_publishes_its_clusters_free_resources_and_follows_new_and_finished_pods() {
    let (hub, managed) = tokio::join!(
        ControlPlane::start("usage-hub"),
        ControlPlane::start("usage-managed")
    );
    let (hub, managed) = (hub.unwrap(), managed.unwrap());
    let (hub_admin, managed_admin) = (
        hub.admin_client().await.unwrap(),
        managed.admin_client().await.unwrap(),
    );
    let cluster = Cluster::new(CLUSTER);
    let addon = AddOn::new(ADDON_NAME, INSTALL_NAMESPACE);

    // Both sides allow the agent exactly what the plugin renders.
    create_namespace(&hub_admin, CLUSTER).await;
    for manifest in ResourceUsage::hub_permissions(&cluster, &addon).unwrap() {
        apply(&hub_admin, &manifest).await;
    }
    create_namespace(&managed_admin, INSTALL_NAMESPACE).await;
    for manifest in ResourceUsage::manifests(&cluster, &addon, &[]).unwrap() {
        if manifest["kind"] != "Deployment" {
            apply(&managed_admin, &manifest).await;
        }
    }

    // The OCM example (addon-contrib calculate_test.go) plus a cordoned node whose pod is left
    // out: cpu 16 + 32, memory 32 + 64 GiB, GPUs 6 + 8, less 4 CPUs, 8 GiB and 2 GPUs on node2.
    let nodes: Api<Node> = Api::all(managed_admin.clone());
    for node in [
        node(
            "node1",
            &[("cpu", "16"), ("memory", "32Gi"), ("nvidia.com/gpu", "6")],
            false,
        ),
        node(
            "node2",
            &[("cpu", "32"), ("memory", "64Gi"), ("nvidia.com/gpu", "8")],
            false,
        ),
        node("cordoned", &[("cpu", "64"), ("memory", "64Gi")], true),
    ] {
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(managed_admin.clone(), "default");
    for pod in [
        pod(
            "p1",
            "node2",
            &[("cpu", "4"), ("memory", "8Gi"), ("nvidia.com/gpu", "2")],
        ),
        pod("on-cordoned", "cordoned", &[("cpu", "10"), ("memory", "1Gi")]),
    ] {
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }

    let files = tempfile::tempdir().unwrap();
    let agent = Agent::start(&hub, &managed, &cluster, &addon, files.path());
    let scores: Api<AddOnPlacementScore> = Api::namespaced(hub_admin.clone(), CLUSTER);

    // node2 has 28 CPUs and 56 GiB free, the cluster 44 and 88 GiB; GPUs 6 at most on one
    // node (node1), 12 in all.
    let initial = expected(&[
        ("cpuNodeAvailable", -44),
        ("cpuClusterAvailable", -12),
        ("memNodeAvailable", -89),
        ("memClusterAvailable", -82),
        ("gpuNodeAvailable", -40),
        ("gpuClusterAvailable", 20),
        ("tpuNodeAvailable", -100),
        ("tpuClusterAvailable", -100),
        ("cpuAvailable", -12),
        ("memAvailable", -82),
    ]);
    let published = until(&scores, SCORE, &agent, "the initial scores", has_scores(&initial)).await;
    let status = published.status.as_ref().unwrap();
    assert_eq!(status.scores.len(), initial.len(), "{:?}", status.scores);
    let valid_until = status.valid_until.as_ref().expect("an expiry").0;
    let left = valid_until.as_second() - Timestamp::now().as_second();
    assert!(
        (300..=600).contains(&left),
        "validUntil {valid_until} is {left}s away"
    );

    // Its lease renews every second; three renewals later the unchanged scores have not been
    // written again.
    let version = published.resource_version();
    let leases: Api<Lease> = Api::namespaced(managed_admin.clone(), INSTALL_NAMESPACE);
    let since = Timestamp::now();
    until(
        &leases,
        ADDON_NAME,
        &agent,
        "three lease renewals",
        move |lease: Option<&Lease>| {
            lease
                .and_then(|l| l.spec.as_ref()?.renew_time.as_ref())
                .is_some_and(|t| t.0.as_second() >= since.as_second() + 3)
        },
    )
    .await;
    let again = scores.get(SCORE).await.unwrap();
    assert_eq!(
        again.resource_version(),
        version,
        "unchanged scores were written again"
    );

    // A new pod on node2 takes 6 more CPUs: 22 free there, 38 in the cluster.
    pods.create(&PostParams::default(), &pod("p2", "node2", &[("cpu", "6")]))
        .await
        .unwrap();
    let busier = with(
        &initial,
        &[
            ("cpuNodeAvailable", -56),
            ("cpuClusterAvailable", -24),
            ("cpuAvailable", -24),
        ],
    );
    until(&scores, SCORE, &agent, "the scores with p2", has_scores(&busier)).await;

    // Once it has Succeeded it holds nothing: back to the first figures.
    pods.patch_status(
        "p2",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .unwrap();
    until(
        &scores,
        SCORE,
        &agent,
        "the scores after p2 succeeded",
        has_scores(&initial),
    )
    .await;
    drop(agent);
}

// === the agent as a child process ===

/// The running agent; killed when dropped.
struct Agent {
    child: Child,
    log: PathBuf,
}

impl Agent {
    /// Starts the agent with the add-on's hub identity (default subject, as the klusterlet's
    /// CSR gets it) and its service account's identity on the managed cluster, scoring every
    /// second and renewing its lease every second.
    fn start(
        hub: &ControlPlane,
        managed: &ControlPlane,
        cluster: &Cluster,
        addon: &AddOn,
        dir: &Path,
    ) -> Self {
        let csr = csr_for(cluster, addon);
        let groups: Vec<&str> = csr.organizations.iter().map(String::as_str).collect();
        let hub_dir = dir.join("hub");
        std::fs::create_dir_all(&hub_dir).unwrap();
        let hub_kubeconfig = hub_dir.join("kubeconfig");
        std::fs::write(
            &hub_kubeconfig,
            hub.kubeconfig_for(&csr.common_name, &groups).unwrap(),
        )
        .unwrap();

        let account = format!("system:serviceaccount:{INSTALL_NAMESPACE}:{SERVICE_ACCOUNT}");
        let account_groups = [
            "system:serviceaccounts",
            &format!("system:serviceaccounts:{INSTALL_NAMESPACE}"),
            "system:authenticated",
        ];
        let managed_kubeconfig = dir.join("managed-kubeconfig");
        std::fs::write(
            &managed_kubeconfig,
            managed.kubeconfig_for(&account, &account_groups).unwrap(),
        )
        .unwrap();

        let log = dir.join("agent.log");
        let output = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_resource-usage-agent"))
            .arg(format!("--hub-kubeconfig={}", hub_kubeconfig.display()))
            .arg(format!("--kubeconfig={}", managed_kubeconfig.display()))
            .arg(format!("--cluster-name={}", cluster.name))
            .arg(format!("--addon-namespace={INSTALL_NAMESPACE}"))
            .arg(format!("--addon-name={}", addon.name))
            .args(["--period=1", "--lease-seconds=1"])
            .stdin(Stdio::null())
            .stdout(output.try_clone().unwrap())
            .stderr(output)
            .spawn()
            .expect("start resource-usage-agent");
        Self { child, log }
    }

    /// What the agent has said so far.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// === waiting ===

/// Waits, watching, until `name` satisfies `condition`; panics after [`WAIT`] with the object
/// as last seen and the agent's log.
async fn until<K>(api: &Api<K>, name: &str, agent: &Agent, what: &str, condition: impl Condition<K>) -> K
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Send
        + 'static,
{
    match tokio::time::timeout(WAIT, await_condition(api.clone(), name, condition)).await {
        Ok(Ok(Some(object))) => object,
        outcome => {
            let last = api.get_opt(name).await.ok().flatten();
            panic!(
                "{what}: {outcome:?} within {WAIT:?}; {} {name} last seen:\n{}\nagent log:\n{}",
                K::kind(&()),
                serde_json::to_string_pretty(&last).unwrap_or_default(),
                agent.log()
            )
        }
    }
}

fn has_scores(expected: &BTreeMap<String, i32>) -> impl Condition<AddOnPlacementScore> + use<> {
    let expected = expected.clone();
    move |score: Option<&AddOnPlacementScore>| {
        score.and_then(|s| s.status.as_ref()).is_some_and(|status| {
            expected.iter().all(|(name, value)| {
                status
                    .scores
                    .iter()
                    .rev()
                    .find(|s| &s.name == name)
                    .is_some_and(|s| s.value == *value)
            })
        })
    }
}

fn expected(pairs: &[(&str, i32)]) -> BTreeMap<String, i32> {
    pairs.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect()
}

fn with(base: &BTreeMap<String, i32>, changes: &[(&str, i32)]) -> BTreeMap<String, i32> {
    let mut changed = base.clone();
    changed.extend(expected(changes));
    changed
}

// === objects ===

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(n, v)| ((*n).to_owned(), Quantity((*v).to_owned())))
        .collect()
}

fn node(name: &str, allocatable: &[(&str, &str)], unschedulable: bool) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            unschedulable: Some(unschedulable),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(quantities(allocatable)),
            allocatable: Some(quantities(allocatable)),
            ..NodeStatus::default()
        }),
    }
}

/// A pod bound to `node` by name, requesting `requests` (extended resources need equal limits).
fn pod(name: &str, node: &str, requests: &[(&str, &str)]) -> Pod {
    let limits: Vec<(&str, &str)> = requests
        .iter()
        .copied()
        .filter(|(resource, _)| resource.contains('/'))
        .collect();
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_owned()),
            containers: vec![Container {
                name: "work".into(),
                image: Some("flotilla.local/none:0".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(quantities(requests)),
                    limits: (!limits.is_empty()).then(|| quantities(&limits)),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

async fn create_namespace(client: &Client, name: &str) {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
}

/// Applies a rendered manifest (RBAC kinds and ServiceAccounts) server-side.
async fn apply(client: &Client, manifest: &serde_json::Value) {
    let api_version = manifest["apiVersion"].as_str().unwrap();
    let kind = manifest["kind"].as_str().unwrap();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        &format!("{}s", kind.to_lowercase()),
    );
    let name = manifest["metadata"]["name"].as_str().unwrap();
    let api: Api<DynamicObject> = match manifest["metadata"]["namespace"].as_str() {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(name, &PatchParams::apply("test"), &Patch::Apply(manifest))
        .await
        .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
}
