//! A real node on a local control plane: the kubelet registers and reports Ready, the
//! scheduler places a Deployment's pod there, containerd runs it with runc from an image pushed
//! to the local registry, a killed container is restarted and its readiness follows, and
//! dropping the node leaves no mount, bridge or process behind; nor does a harness killed
//! outright, once the next local environment starts. A hostile pod reaches its cluster's
//! apiserver through the `kubernetes` Service and nothing else listening on loopback, and a
//! registry exposed to one node only from that node's pods.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::{path::Path, process::Command, time::Duration};

use flotilla_testing::{ControlPlane, Node, image, pause_deployment, registry::Registry, wait};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
use kube::{
    Api,
    api::{ListParams, PostParams},
};

/// The readiness of the first pod labelled `app=<app>`: (ready, restarts).
async fn pod_state(pods: &Api<Pod>, app: &str) -> Option<(bool, i32)> {
    let list = pods
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .ok()?;
    let status = list.items.into_iter().next()?.status?;
    let container = status.container_statuses?.into_iter().next()?;
    Some((container.ready, container.restart_count))
}

/// Names the file where [`orphaned_node`] writes its node's directory; unset, it does nothing.
const ORPHAN_REPORT_ENV: &str = "FLOTILLA_TEST_ORPHAN_REPORT";

/// Processes whose command line names `dir` (the node's container shims do).
fn processes_naming(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cmdline.contains(&needle).then_some(cmdline)
        })
        .collect()
}

/// Processes in any of the cgroups `cgroups` (`/k8s.io/<container id>`).
fn processes_in(cgroups: &[String]) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse().ok()?;
            let lines = std::fs::read_to_string(entry.path().join("cgroup")).ok()?;
            lines
                .lines()
                .any(|line| cgroups.iter().any(|c| line.ends_with(c.as_str())))
                .then_some(pid)
        })
        .collect()
}

/// Held by each test that starts a node in this process, so that the namespaces and processes
/// a test sees are its own node's.
static NODES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The network namespaces bound under /run/netns.
fn network_namespaces() -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The helper of [`a_killed_harness_leaves_nothing_once_the_next_environment_starts`], run in a
/// child process: a node with a running pod, its directory reported, waiting to be killed.
#[tokio::test]
async fn orphaned_node() {
    let Some(report) = std::env::var_os(ORPHAN_REPORT_ENV) else {
        return;
    };
    let (cluster, registry) = tokio::join!(ControlPlane::start("orphan-cluster"), Registry::start());
    let (cluster, registry) = (cluster.unwrap(), registry.unwrap());
    let node = Node::start(&cluster, &registry).await.unwrap();
    let pause = image::push_pause(&registry).await.unwrap();
    let client = cluster.admin_client().await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let workload = pause_deployment("orphan", "default", &pause, 1, 0);
    deployments
        .create(&PostParams::default(), &serde_json::from_value(workload).unwrap())
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    wait::until("the orphan's pod ready", Duration::from_secs(90), || {
        let pods = pods.clone();
        async move {
            let ready = pod_state(&pods, "orphan").await.is_some_and(|(ready, _)| ready);
            Ok::<_, String>(ready.then_some(()))
        }
    })
    .await
    .unwrap();
    std::fs::write(report, node.dir().to_str().unwrap()).unwrap();
    std::future::pending::<()>().await;
}

#[tokio::test]
async fn a_killed_harness_leaves_nothing_once_the_next_environment_starts() {
    let _alone = NODES.lock().await;
    let namespaces_before = network_namespaces();
    let scratch = tempfile::tempdir().unwrap();
    let report = scratch.path().join("orphan-dir");
    let mut harness = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "node::orphaned_node", "--nocapture"])
        .env(ORPHAN_REPORT_ENV, &report)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let dir = wait::until("the orphan's node directory", Duration::from_secs(240), || {
        let dir = std::fs::read_to_string(&report).ok();
        async move { Ok::<_, String>(dir) }
    })
    .await
    .unwrap();
    let dir = Path::new(&dir).to_owned();
    let bridge = std::fs::read_to_string(dir.join("bridge")).unwrap();
    harness.kill().unwrap();
    harness.wait().unwrap();
    // No other node of this binary runs meanwhile (NODES), so the new ones are the orphan's.
    let orphan_namespaces: Vec<String> = network_namespaces()
        .into_iter()
        .filter(|ns| !namespaces_before.contains(ns))
        .collect();
    assert!(
        !orphan_namespaces.is_empty(),
        "the orphan's pod has a network namespace"
    );
    assert!(
        !processes_naming(&dir).is_empty(),
        "the killed harness left its node's container shims running"
    );

    let containers: Vec<String> =
        std::fs::read_dir(dir.join("containerd/state/io.containerd.runtime.v2.task/k8s.io"))
            .unwrap()
            .flatten()
            .map(|task| format!("/k8s.io/{}", task.file_name().to_string_lossy()))
            .collect();
    assert!(
        !processes_in(&containers).is_empty(),
        "the killed harness left its containers running"
    );

    // Any new scratch directory sweeps the orphans first.
    let _registry = Registry::start().await.unwrap();
    assert!(!dir.exists(), "{} is still there", dir.display());
    assert_eq!(processes_naming(&dir), Vec::<String>::new());
    wait::until("the orphan's containers gone", Duration::from_secs(10), || {
        let gone = processes_in(&containers).is_empty();
        async move { Ok::<_, String>(gone.then_some(())) }
    })
    .await
    .unwrap();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(dir.to_str().unwrap()), "mounts left:\n{mounts}");
    let link = Command::new("ip")
        .args(["link", "show", &bridge])
        .output()
        .unwrap();
    assert!(!link.status.success(), "bridge {bridge} is still there");
    let left: Vec<String> = network_namespaces()
        .into_iter()
        .filter(|ns| orphan_namespaces.contains(ns))
        .collect();
    assert_eq!(
        left,
        Vec::<String>::new(),
        "the orphan's pods' network namespaces are still bound"
    );
    let rules = Command::new("iptables").args(["-S", "INPUT"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&rules.stdout).contains(&format!("-i {bridge} ")),
        "the loopback guard of {bridge} is still there"
    );
}

#[tokio::test]
async fn a_pod_runs_restarts_and_leaves_nothing_behind() {
    let _alone = NODES.lock().await;
    let (cluster, registry) = tokio::join!(ControlPlane::start("node-cluster"), Registry::start());
    let (cluster, registry) = (cluster.unwrap(), registry.unwrap());
    let node = Node::start(&cluster, &registry).await.unwrap();
    let pause = image::push_pause(&registry).await.unwrap();

    let client = cluster.admin_client().await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let workload = pause_deployment("workload", "default", &pause, 1, 0);
    deployments
        .create(&PostParams::default(), &serde_json::from_value(workload).unwrap())
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let until_ready = |restarted: bool| {
        let pods = pods.clone();
        wait::until("the workload's pod ready", Duration::from_secs(90), move || {
            let pods = pods.clone();
            async move {
                let ready = pod_state(&pods, "workload")
                    .await
                    .filter(|(ready, restarts)| *ready && (*restarts > 0) == restarted);
                Ok::<_, String>(ready.map(|_| ()))
            }
        })
    };
    if let Err(e) = until_ready(false).await {
        panic!(
            "{e}\nkubelet:\n{}\ncontainerd:\n{}",
            node.log_tail("kubelet", 10),
            node.log_tail("containerd", 30)
        );
    }

    node.kill_container("pause").unwrap();
    until_ready(true).await.unwrap();

    let dir = node.dir().to_owned();
    let bridge_of_node = format!("{}", node.address());
    drop(node);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(dir.to_str().unwrap()),
        "mounts left below {}:\n{mounts}",
        dir.display()
    );
    let addresses = Command::new("ip").args(["-4", "addr"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&addresses.stdout).contains(&bridge_of_node),
        "the node's bridge ({bridge_of_node}) is still there"
    );
}

/// A network namespace on a node's bridge standing in for a hostile pod with CAP_NET_ADMIN: its
/// loopback is down and 127.0.0.0/8 is routed through the node's gateway, so its packets to
/// 127.0.0.1 arrive at the host, where `route_localnet` (which the Service routing needs) would
/// deliver them to whatever listens on loopback.
struct HostilePod {
    namespace: String,
}

impl HostilePod {
    /// A pod on `node`'s bridge; `tag` tells apart several pods of one test process.
    fn attach(node: &Node, tag: u8) -> Self {
        let ip = |args: &[&str]| {
            let output = Command::new("ip").args(args).output().unwrap();
            assert!(
                output.status.success(),
                "ip {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        };
        let namespace = format!("flt-hostile-{}-{tag}", std::process::id());
        let veth = format!("flth{}{tag}", std::process::id() % 100_000);
        let [a, b, c, _] = node.address().octets();
        let address = format!("{a}.{b}.{c}.{}/24", 250 - u16::from(tag % 4));
        let gateway = node.address().to_string();
        ip(&["netns", "add", &namespace]);
        let pod = Self { namespace };
        let ns = pod.namespace.as_str();
        ip(&[
            "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", ns,
        ]);
        ip(&["link", "set", &veth, "master", node.bridge(), "up"]);
        ip(&["-n", ns, "addr", "add", &address, "dev", "eth0"]);
        ip(&["-n", ns, "link", "set", "eth0", "up"]);
        let sysctl = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                "net.ipv4.conf.eth0.route_localnet=1",
            ])
            .status()
            .unwrap();
        assert!(sysctl.success());
        ip(&[
            "-n",
            ns,
            "route",
            "add",
            "127.0.0.0/8",
            "via",
            &gateway,
            "dev",
            "eth0",
        ]);
        ip(&[
            "-n", ns, "route", "add", "default", "via", &gateway, "dev", "eth0",
        ]);
        pod
    }

    /// Whether a TCP connection to `host:port` opens within three seconds.
    fn connects(&self, host: &str, port: u16) -> bool {
        Command::new("ip")
            .args(["netns", "exec", &self.namespace, "timeout", "3", "bash", "-c"])
            .arg(format!("exec 3<>/dev/tcp/{host}/{port}"))
            .status()
            .unwrap()
            .success()
    }
}

impl Drop for HostilePod {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.namespace])
            .status();
    }
}

/// The iptables arguments of the node's loopback guard (`-A INPUT … -j DROP`).
fn loopback_guard(bridge: &str) -> Vec<String> {
    let rules = Command::new("iptables").args(["-S", "INPUT"]).output().unwrap();
    let rules = String::from_utf8_lossy(&rules.stdout).into_owned();
    let line = rules
        .lines()
        .find(|line| line.contains(&format!("-i {bridge} ")) && line.ends_with("-j DROP"))
        .unwrap_or_else(|| panic!("no loopback guard for {bridge}:\n{rules}"));
    // `-S` quotes the comment; unquote it for the argument list.
    let (head, comment) = line.split_once("--comment ").unwrap();
    let (comment, tail) = comment.trim_start_matches('"').split_once('"').unwrap();
    let mut args: Vec<String> = head.split_whitespace().map(String::from).collect();
    args.extend(["--comment".to_owned(), comment.to_owned()]);
    args.extend(tail.split_whitespace().map(String::from));
    args
}

#[tokio::test]
async fn a_pod_reaches_its_apiserver_and_no_other_loopback_listener() {
    let _alone = NODES.lock().await;
    let (cluster, registry) = tokio::join!(ControlPlane::start("guard-cluster"), Registry::start());
    let (cluster, registry) = (cluster.unwrap(), registry.unwrap());
    let node = Node::start(&cluster, &registry).await.unwrap();
    let pod = HostilePod::attach(&node, 0);

    // The `kubernetes` Service: DNAT to the apiserver on loopback, let through.
    assert!(pod.connects(&cluster.service_address().to_string(), 443));
    // The registry (and every other cluster's etcd and apiserver) listens on loopback too.
    assert!(
        !pod.connects("127.0.0.1", registry.port()),
        "the guard let a pod reach loopback"
    );

    // Without the guard the same packets reach the registry: the guard is what refuses them.
    let guard = loopback_guard(node.bridge());
    let toggle = |action: &str| {
        let mut args = guard.clone();
        args[0] = action.to_owned();
        assert!(Command::new("iptables").args(&args).status().unwrap().success());
    };
    toggle("-D");
    let reached = pod.connects("127.0.0.1", registry.port());
    toggle("-I");
    assert!(
        reached,
        "without the guard the hostile pod should reach the registry"
    );
    assert!(!pod.connects("127.0.0.1", registry.port()));
}

/// The route `Node::expose_registry` gives the hub's node reaches the registry from that node's
/// pods only: a pod on another node, dialling the same address and port, is refused, and would
/// get through if the rule did not match the exposing node's bridge alone.
#[tokio::test]
async fn a_registry_exposed_to_one_node_is_out_of_reach_of_another_nodes_pods() {
    let _alone = NODES.lock().await;
    let (hub, other, registry) = tokio::join!(
        ControlPlane::start("expose-hub"),
        ControlPlane::start("expose-other"),
        Registry::start()
    );
    let (hub, other, registry) = (hub.unwrap(), other.unwrap(), registry.unwrap());
    let (hub_node, other_node) = tokio::join!(Node::start(&hub, &registry), Node::start(&other, &registry));
    let (mut hub_node, other_node) = (hub_node.unwrap(), other_node.unwrap());
    let exposed = hub_node.expose_registry(&registry).unwrap();
    let (host, port) = exposed.split_once(':').unwrap();
    let port: u16 = port.parse().unwrap();

    let insider = HostilePod::attach(&hub_node, 1);
    let outsider = HostilePod::attach(&other_node, 2);
    assert!(insider.connects(host, port), "the hub's pod reaches the registry");
    assert!(
        !outsider.connects(host, port),
        "another node's pod reached the registry exposed to the hub's node"
    );

    // The same DNAT for the other node's bridge lets it through: the bridge match refuses it.
    let rule = [
        "PREROUTING",
        "-i",
        other_node.bridge(),
        "-d",
        &format!("{host}/32"),
        "-p",
        "tcp",
        "--dport",
        &port.to_string(),
        "-j",
        "DNAT",
        "--to-destination",
        &format!("127.0.0.1:{port}"),
    ];
    let nat = |action: &str| {
        let status = Command::new("iptables")
            .args(["-t", "nat", action])
            .args(rule)
            .status()
            .unwrap();
        assert!(status.success(), "iptables {action} {rule:?}");
    };
    nat("-I");
    let reached = outsider.connects(host, port);
    nat("-D");
    assert!(
        reached,
        "with the rule widened the other node's pod should reach the registry"
    );
    assert!(!outsider.connects(host, port));
}
