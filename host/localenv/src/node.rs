//! A real node for a local control plane: containerd with runc, a kubelet and the cluster's
//! kube-scheduler, so that pods run (the klusterlet, add-on agents, the workloads of works).
//!
//! ```text
//!   Node::start(&cluster, &registry)
//!     ├─ bridge flt<N>   10.244.N.1/24 (the kubelet's node IP), route_localnet, loopback guard
//!     ├─ routes          the cluster's `kubernetes` Service → its apiserver (crate::service_route)
//!     ├─ containerd      own root, state and socket under <dir>; runc, cgroupfs; CNI bridge +
//!     │                  host-local; sandbox image pushed to the local registry; plain HTTP pulls
//!     │                  from it, by its address or as `flotilla.local` (certs.d/<host>/hosts.toml)
//!     ├─ kubelet         user system:node:<name>; pods' logs under <dir>/pod-logs
//!     └─ kube-scheduler  user system:kube-scheduler
//! ```
//!
//! Several nodes share one host, each with its own bridge, subnet, address and directories, and
//! no kube-proxy: the only Service pods reach is `kubernetes` (and those of other clusters
//! routed with [`Node::route`]). Running containers needs root and Debian's containerd, runc,
//! containernetworking-plugins and iptables; [`prerequisites`] says what is missing.
//!
//! Dropping the node removes its containers (with their network namespaces and mounts), stops
//! its processes and deletes its bridge and rules.

use std::{
    fs,
    net::Ipv4Addr,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    process::Child,
    time::Duration,
};

use k8s_openapi::api::core::v1::Node as NodeObject;
use kube::Api;
use tempfile::TempDir;

use crate::{
    controlplane::ControlPlane,
    error::{Error, Result, io, kube as kube_err},
    image,
    processes::{self, Lifetime},
    registry::Registry,
    service_route::{self, BRIDGE_PREFIX, Rule, Rules},
    wait,
};

/// The file in a node's directory naming its bridge; its presence marks a node's directory.
pub(crate) const BRIDGE_FILE: &str = "bridge";
/// containerd's folder of the CRI namespace's tasks, below a node's directory.
const TASK_DIR: &str = "containerd/state/io.containerd.runtime.v2.task/k8s.io";
/// Where containerd's CNI binds pods' network namespaces.
const NETNS_DIR: &str = "/run/netns";
/// The file in a node's directory listing the iptables rules it added.
const RULES_FILE: &str = "rules.json";

/// Where Debian installs the CNI plugins.
pub const CNI_BIN_DIR: &str = "/usr/lib/cni";
/// The containerd namespace the CRI plugin keeps Kubernetes containers in.
const CRI_NAMESPACE: &str = "k8s.io";
/// How long a node may take to register and report Ready.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// The Debian packages nodes need (`setpriv` is util-linux's, which Debian always has).
pub const PACKAGES: &[&str] = &[
    "containerd",
    "runc",
    "containernetworking-plugins",
    "iptables",
    "iproute2",
];

/// Whether this process runs as root, which containers need.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Installs [`PACKAGES`] with apt-get (as root), refreshing the package lists once if the
/// first attempt fails.
pub fn install_packages() -> Result<()> {
    let apt = |args: &[&str]| {
        std::process::Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| Error::Prerequisite(format!("run apt-get: {e}")))
    };
    let mut install = vec!["install", "-y", "--no-install-recommends"];
    install.extend_from_slice(PACKAGES);
    if apt(&install)?.status.success() {
        return Ok(());
    }
    apt(&["update"])?;
    let output = apt(&install)?;
    if output.status.success() {
        Ok(())
    } else {
        Err(Error::Prerequisite(format!(
            "apt-get install {} failed: {}",
            PACKAGES.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

/// What is missing on this machine for nodes to run, or `None` when nothing is.
pub fn prerequisites() -> Option<String> {
    let mut missing = Vec::new();
    if !is_root() {
        missing.push("root (containers are run by containerd and runc as root)".to_owned());
    }
    for (program, package) in [
        ("containerd", "containerd"),
        ("runc", "runc"),
        ("ctr", "containerd"),
        ("iptables", "iptables"),
        ("ip", "iproute2"),
        ("setpriv", "util-linux"),
    ] {
        if !on_path(program) {
            missing.push(format!("`{program}` (Debian package {package})"));
        }
    }
    for plugin in ["bridge", "host-local", "loopback"] {
        if !Path::new(CNI_BIN_DIR).join(plugin).is_file() {
            missing.push(format!(
                "CNI plugin {CNI_BIN_DIR}/{plugin} (Debian package containernetworking-plugins)"
            ));
        }
    }
    (!missing.is_empty()).then(|| missing.join(", "))
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

/// A running node. Dropping it removes its pods' containers and stops its processes.
pub struct Node {
    name: String,
    dir: PathBuf,
    bridge: String,
    gateway: Ipv4Addr,
    processes: Vec<(&'static str, Child)>,
    // Dropped after the containers and the bridge are gone (see `Drop`).
    routes: Vec<Rules>,
    // Set by `detach`: the node outlives this handle.
    detached: bool,
    _temp: Option<TempDir>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("name", &self.name)
            .field("bridge", &self.bridge)
            .field("dir", &self.dir)
            .finish()
    }
}

impl Node {
    /// Starts a node for `cluster` whose images come from `registry` (the sandbox image is
    /// pushed there first), and waits until the node is Ready. It lives in a scratch directory
    /// and dies with this process.
    pub async fn start(cluster: &ControlPlane, registry: &Registry) -> Result<Node> {
        let name = format!("{}-node", cluster.name());
        let temp = crate::scratch::create(&name)?;
        let dir = temp.path().to_path_buf();
        Self::start_in(cluster, registry, name, dir, Some(temp)).await
    }

    /// [`Node::start`] in `dir`, with processes that outlive this one: for `flotilla up`, which
    /// records them with [`Node::detach`] and ends them with [`release`] after stopping them.
    pub async fn start_detached(cluster: &ControlPlane, registry: &Registry, dir: &Path) -> Result<Node> {
        let name = format!("{}-node", cluster.name());
        // A node that ran here before starts afresh: its containers are gone with its
        // processes, and containerd and the kubelet would otherwise look for them.
        if dir.exists() {
            release(dir);
            fs::remove_dir_all(dir).map_err(io(format!("remove {}", dir.display())))?;
        }
        fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
        Self::start_in(cluster, registry, name, dir.to_path_buf(), None).await
    }

    async fn start_in(
        cluster: &ControlPlane,
        registry: &Registry,
        name: String,
        dir: PathBuf,
        temp: Option<TempDir>,
    ) -> Result<Node> {
        if let Some(missing) = prerequisites() {
            return Err(Error::Prerequisite(format!("a node needs {missing}")));
        }
        let sandbox_image = image::push_pause(registry).await?;
        let detached = temp.is_none();
        let (tied, tied_by_kernel) = if detached {
            (Lifetime::Detached, Lifetime::Detached)
        } else {
            (Lifetime::Tied, Lifetime::TiedByKernel)
        };
        let (bridge, subnet) = claim_bridge()?;
        // Recorded at once, so that the bridge of a process killed from here on is found.
        fs::write(dir.join(BRIDGE_FILE), &bridge).map_err(io("record the node's bridge"))?;
        let gateway = Ipv4Addr::new(10, 244, subnet, 1);
        let mut node = Node {
            name: name.clone(),
            dir: dir.clone(),
            bridge: bridge.clone(),
            gateway,
            processes: Vec::new(),
            routes: Vec::new(),
            detached: false,
            _temp: temp,
        };
        node.prepare_bridge(subnet)?;
        node.route(cluster)?;

        for sub in ["logs", "cni", "pod-logs", "kubelet"] {
            fs::create_dir_all(dir.join(sub)).map_err(io(format!("create {}/{sub}", dir.display())))?;
        }
        // The registry by its address, and by the name manifests use for images built here.
        for host in [registry.host(), crate::image::LOCAL_IMAGE_HOST.to_owned()] {
            let registry_hosts = dir.join("certs.d").join(&host);
            fs::create_dir_all(&registry_hosts).map_err(io("create containerd's registry hosts"))?;
            fs::write(
                registry_hosts.join("hosts.toml"),
                registry_hosts_toml(&registry.host()),
            )
            .map_err(io("write containerd's registry hosts"))?;
        }
        fs::write(
            dir.join("cni/10-flotilla.conflist"),
            cni_config(&name, &bridge, subnet, &dir.join("cni-ipam")),
        )
        .map_err(io("write the CNI configuration"))?;
        fs::write(
            dir.join("containerd.toml"),
            containerd_config(&dir, &sandbox_image),
        )
        .map_err(io("write containerd's configuration"))?;
        node.spawn(
            "containerd",
            Path::new("containerd"),
            &[format!("--config={}", dir.join("containerd.toml").display())],
            tied_by_kernel,
        )?;
        let socket = dir.join("containerd.sock");
        wait::until("containerd's socket", Duration::from_secs(30), || {
            let ready = socket.exists();
            async move { Ok::<_, Error>(ready.then_some(())) }
        })
        .await?;

        let admin = cluster.admin_client().await?;
        let binary = cluster.state().binary.clone();
        let write = |file: &str, text: &str| -> Result<PathBuf> {
            let path = dir.join(file);
            fs::write(&path, text).map_err(io(format!("write {}", path.display())))?;
            Ok(path)
        };
        let ca = write("ca.crt", cluster.ca_pem())?;
        let kubelet_kubeconfig = write(
            "kubelet.kubeconfig",
            &cluster.kubeconfig_for(&format!("system:node:{name}"), &["system:nodes"])?,
        )?;
        let kubelet_config = write("kubelet.yaml", &kubelet_config(&dir, gateway, &ca))?;
        node.spawn(
            "kubelet",
            &binary,
            &[
                "kubelet".into(),
                format!("--config={}", kubelet_config.display()),
                format!("--kubeconfig={}", kubelet_kubeconfig.display()),
                format!("--root-dir={}", dir.join("kubelet").display()),
                format!("--cert-dir={}", dir.join("kubelet/pki").display()),
                format!("--hostname-override={name}"),
                format!("--node-ip={gateway}"),
                "--v=1".into(),
            ],
            tied,
        )?;
        let scheduler_kubeconfig = write(
            "kube-scheduler.kubeconfig",
            &cluster.kubeconfig_for("system:kube-scheduler", &[])?,
        )?;
        node.spawn(
            "kube-scheduler",
            &binary,
            &[
                "kube-scheduler".into(),
                format!("--kubeconfig={}", scheduler_kubeconfig.display()),
                format!("--authentication-kubeconfig={}", scheduler_kubeconfig.display()),
                format!("--authorization-kubeconfig={}", scheduler_kubeconfig.display()),
                "--leader-elect=false".into(),
                "--secure-port=0".into(),
                "--v=0".into(),
            ],
            tied,
        )?;

        let nodes: Api<NodeObject> = Api::all(admin);
        let ready = wait::until(&format!("node {name} Ready"), READY_TIMEOUT, || {
            let nodes = nodes.clone();
            let name = name.clone();
            async move {
                let node = nodes
                    .get_opt(&name)
                    .await
                    .map_err(kube_err(format!("read node {name}")))?;
                Ok::<_, Error>(node.filter(is_ready).map(|_| ()))
            }
        })
        .await;
        if let Err(e) = ready {
            return Err(Error::Node(format!(
                "{e}; kubelet log tail:\n{}\ncontainerd log tail:\n{}",
                node.log_tail("kubelet", 20),
                node.log_tail("containerd", 10)
            )));
        }
        Ok(node)
    }

    /// Makes `cluster`'s `kubernetes` Service reach its apiserver from this node's pods too (a
    /// klusterlet's pods dial their hub this way).
    pub fn route(&mut self, cluster: &ControlPlane) -> Result<()> {
        self.routes
            .push(service_route::route_kubernetes_service(cluster)?);
        self.record_rules()
    }

    /// Makes `registry` reachable from this node's pods (only), at this node's address and the
    /// registry's port; returns that `host:port`, which processes on this host reach too. The
    /// hub's pods pull plugins this way.
    pub fn expose_registry(&mut self, registry: &Registry) -> Result<String> {
        let port = registry.port();
        self.routes.push(service_route::route_loopback_port(
            &self.bridge,
            self.gateway,
            port,
        )?);
        self.record_rules()?;
        Ok(format!("{}:{port}", self.gateway))
    }

    /// Writes every rule this node added to `<dir>/rules.json`, for [`release`].
    fn record_rules(&self) -> Result<()> {
        let rules: Vec<&Rule> = self.routes.iter().flat_map(Rules::rules).collect();
        let text = serde_json::to_string(&rules).map_err(|e| Error::Node(format!("encode rules: {e}")))?;
        fs::write(self.dir.join(RULES_FILE), text).map_err(io("record the node's iptables rules"))
    }

    fn prepare_bridge(&mut self, subnet: u8) -> Result<()> {
        let bridge = self.bridge.clone();
        ip(&["addr", "add", &format!("10.244.{subnet}.1/24"), "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        // The guard goes in before route_localnet opens loopback to this bridge.
        self.routes.push(service_route::loopback_guard(&bridge)?);
        self.record_rules()?;
        let sysctl = format!("/proc/sys/net/ipv4/conf/{bridge}/route_localnet");
        fs::write(&sysctl, "1").map_err(io(format!("write {sysctl}")))?;
        Ok(())
    }

    fn spawn(
        &mut self,
        component: &'static str,
        program: &Path,
        args: &[String],
        lifetime: Lifetime,
    ) -> Result<()> {
        let child = processes::spawn_logged(
            program,
            args,
            component,
            &self.log_path(component),
            lifetime,
            |_| {},
        )?;
        self.processes.push((component, child));
        Ok(())
    }

    /// Lets the node outlive this handle (started with [`Node::start_detached`]): returns its
    /// processes (component, pid) in the order they started; its rules stay, recorded in its
    /// directory for [`release`].
    pub fn detach(mut self) -> Vec<(&'static str, u32)> {
        self.detached = true;
        let pids = self
            .processes
            .iter()
            .map(|(name, child)| (*name, child.id()))
            .collect();
        self.processes.clear();
        for rules in self.routes.drain(..) {
            rules.keep();
        }
        pids
    }

    /// The node's name (`<cluster>-node`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node's address (its bridge's gateway), where its kubelet listens.
    pub fn address(&self) -> Ipv4Addr {
        self.gateway
    }

    /// The node's bridge, which its pods' interfaces are attached to.
    pub fn bridge(&self) -> &str {
        &self.bridge
    }

    /// The directory holding the node's configuration, state and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The log of `component` (`containerd`, `kubelet`, `kube-scheduler`).
    pub fn log_path(&self, component: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{component}.log"))
    }

    /// The last `lines` lines of a component's log.
    pub fn log_tail(&self, component: &str, lines: usize) -> String {
        processes::log_tail(&self.log_path(component), lines)
    }

    /// Process ids of the node's processes.
    pub fn pids(&self) -> Vec<(&'static str, u32)> {
        self.processes
            .iter()
            .map(|(name, child)| (*name, child.id()))
            .collect()
    }

    /// The last `lines` lines of the logs of the containers of pods in `namespace` whose name
    /// starts with `pod_prefix`, each headed by its file: what a failing test shows.
    pub fn pod_log_tail(&self, namespace: &str, pod_prefix: &str, lines: usize) -> String {
        let mut out = String::new();
        let Ok(pods) = fs::read_dir(self.dir.join("pod-logs")) else {
            return out;
        };
        // kubelet names each pod's folder <namespace>_<pod>_<uid>.
        let prefix = format!("{namespace}_{pod_prefix}");
        for pod in pods
            .flatten()
            .filter(|p| p.file_name().to_string_lossy().starts_with(&prefix))
        {
            for container in fs::read_dir(pod.path()).into_iter().flatten().flatten() {
                for log in fs::read_dir(container.path()).into_iter().flatten().flatten() {
                    out.push_str(&format!("== {}\n", log.path().display()));
                    out.push_str(&processes::log_tail(&log.path(), lines));
                    out.push('\n');
                }
            }
        }
        out
    }

    /// Kills (SIGKILL) one running container named `container` (the name in the pod spec), as
    /// a crash does; the kubelet restarts it. Returns the container's id.
    pub fn kill_container(&self, container: &str) -> Result<String> {
        let filter = format!("labels.\"io.kubernetes.container.name\"=={container}");
        let ids = self.ctr(&["containers", "list", "--quiet", &filter])?;
        for id in ids.lines().filter(|l| !l.is_empty()) {
            // A container that exited earlier has no running task; the next one may.
            if self.ctr(&["tasks", "kill", "--signal", "SIGKILL", id]).is_ok() {
                return Ok(id.to_owned());
            }
        }
        Err(Error::Node(format!(
            "no running container named {container} on {}",
            self.name
        )))
    }

    /// Runs `ctr` against this node's containerd, in the CRI namespace; returns its output.
    fn ctr(&self, args: &[&str]) -> Result<String> {
        let address = format!("--address={}", self.dir.join("containerd.sock").display());
        let mut full = vec![address.as_str(), "--namespace", CRI_NAMESPACE];
        full.extend_from_slice(args);
        processes::run_tool("ctr", "containerd", &full).map_err(Error::Node)
    }

    /// Removes every container with its task, and the network namespaces of the pods, while
    /// containerd still runs; what cannot be removed is left for the mount sweep.
    fn remove_containers(&self) {
        let Ok(ids) = self.ctr(&["containers", "list", "--quiet"]) else {
            return;
        };
        let mut namespaces = Vec::new();
        for id in ids.lines().filter(|l| !l.is_empty()) {
            if let Ok(info) = self.ctr(&["containers", "info", id]) {
                namespaces.extend(network_namespace(&info));
            }
            let _ = self.ctr(&["tasks", "delete", "--force", id]);
            let _ = self.ctr(&["containers", "delete", id]);
        }
        for path in namespaces {
            let _ = nix::mount::umount2(path.as_path(), nix::mount::MntFlags::MNT_DETACH);
            let _ = fs::remove_file(&path);
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.detached {
            return;
        }
        // The kubelet first, so that it restarts nothing; then the containers while containerd
        // can still remove them; then containerd and the scheduler.
        for name in ["kubelet", "kube-scheduler"] {
            if let Some((_, child)) = self.processes.iter_mut().find(|(n, _)| *n == name) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        self.remove_containers();
        for (_, child) in &mut self.processes {
            let _ = child.kill();
            let _ = child.wait();
        }
        unmount_below(&self.dir);
        let _ = ip(&["link", "delete", &self.bridge]);
        self.routes.clear();
    }
}

/// Releases what the node in `dir` held when its process was killed before it could drop the
/// node: the container shims (whose command line names `dir`) and the containers' processes,
/// the pods' network namespaces, the mounts below `dir`, its bridge and its iptables rules. Called by the scratch
/// sweep for directories whose owner has exited.
pub fn release(dir: &Path) {
    let needle = dir.to_string_lossy().into_owned();
    // Container processes are in cgroup `/k8s.io/<container id>` (the kubelet gives no parent
    // without per-QoS cgroups); the ids are the task folders containerd left in the state.
    let suffixes: Vec<String> = fs::read_dir(dir.join(TASK_DIR))
        .into_iter()
        .flatten()
        .flatten()
        .map(|task| format!("/{CRI_NAMESPACE}/{}", task.file_name().to_string_lossy()))
        .collect();
    let ours = |pid: &str| {
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cgroups = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        String::from_utf8_lossy(&cmdline).contains(&needle)
            || cgroups
                .lines()
                .any(|line| suffixes.iter().any(|suffix| line.ends_with(suffix.as_str())))
    };
    let pids: Vec<i32> = fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str().map(str::to_owned))
        .filter(|name| name.chars().all(|c| c.is_ascii_digit()) && ours(name))
        .filter_map(|name| name.parse().ok())
        .collect();
    // The pods' network namespaces are bound under /run/netns; find them by the namespace of
    // the containers before those die.
    let namespaces: Vec<(u64, u64)> = pids
        .iter()
        .filter_map(|pid| fs::metadata(format!("/proc/{pid}/ns/net")).ok())
        .map(|ns| (ns.dev(), ns.ino()))
        .collect();
    for pid in &pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    // Their sockets close as they exit; the bridge must still be there for the FINs to reach
    // the apiservers they watched, or those wait on half-open connections when they shut down.
    let exited = |pid: &i32| {
        fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z'))
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !pids.iter().all(exited) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for entry in fs::read_dir(NETNS_DIR).into_iter().flatten().flatten() {
        let bound = fs::metadata(entry.path()).is_ok_and(|ns| namespaces.contains(&(ns.dev(), ns.ino())));
        if bound {
            let _ = nix::mount::umount2(entry.path().as_path(), nix::mount::MntFlags::MNT_DETACH);
            let _ = fs::remove_file(entry.path());
        }
    }
    unmount_below(dir);
    if let Ok(bridge) = fs::read_to_string(dir.join(BRIDGE_FILE)) {
        let _ = ip(&["link", "delete", bridge.trim()]);
    }
    let rules: Vec<Rule> = fs::read_to_string(dir.join(RULES_FILE))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    drop(Rules::adopt(rules));
    // Released once: the bridge's name may go to another node, and the rules are gone.
    let _ = fs::remove_file(dir.join(BRIDGE_FILE));
    let _ = fs::remove_file(dir.join(RULES_FILE));
}

/// Whether the node reports `Ready=True`.
fn is_ready(node: &NodeObject) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

/// Creates the first free bridge `flt<N>` (N in 1..=254) and returns its name and N. Creating
/// the link is the claim: it fails when another node, in any process, holds that name.
fn claim_bridge() -> Result<(String, u8)> {
    for subnet in 1..=254u8 {
        let name = format!("{BRIDGE_PREFIX}{subnet}");
        if ip(&["link", "add", &name, "type", "bridge"]).is_ok() {
            return Ok((name, subnet));
        }
    }
    Err(Error::Node(format!(
        "no free bridge name {BRIDGE_PREFIX}1..{BRIDGE_PREFIX}254 (`ip link show type bridge` lists them)"
    )))
}

fn ip(args: &[&str]) -> Result<()> {
    processes::run_tool("ip", "iproute2", args)
        .map(drop)
        .map_err(Error::Node)
}

/// The network namespace file of a pod sandbox, from `ctr containers info` output.
fn network_namespace(info: &str) -> Option<PathBuf> {
    let info: serde_json::Value = serde_json::from_str(info).ok()?;
    info.pointer("/Spec/linux/namespaces")?
        .as_array()?
        .iter()
        .find(|ns| ns["type"] == "network")
        .and_then(|ns| ns["path"].as_str())
        .filter(|path| !path.is_empty() && !path.starts_with("/proc/"))
        .map(PathBuf::from)
}

/// Unmounts (lazily) every mount below `dir`, deepest first: pods' volumes, container root
/// filesystems, containerd's shm mounts.
fn unmount_below(dir: &Path) {
    let Ok(mountinfo) = fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let mut mounts: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|point| PathBuf::from(point.replace("\\040", " ")))
        .filter(|point| point.starts_with(dir))
        .collect();
    mounts.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for point in mounts {
        let _ = nix::mount::umount2(point.as_path(), nix::mount::MntFlags::MNT_DETACH);
    }
}

/// containerd's configuration: everything under `dir`, runc with cgroupfs, the CRI plugin
/// with the node's CNI folder and the local sandbox image.
fn containerd_config(dir: &Path, sandbox_image: &str) -> String {
    let d = dir.display();
    format!(
        r#"version = 2
root = "{d}/containerd/root"
state = "{d}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{d}/containerd.sock"

[ttrpc]
  address = "{d}/containerd.sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  disable_apparmor = true
  # Lowering a process's OOM score needs CAP_SYS_RESOURCE, which root may lack here (in a
  # container or VM sandbox); runc then fails to start the sandbox. Never go below containerd's.
  restrict_oom_score_adj = true
  enable_selinux = false
  # The kubelet's exec and logs streams: a free port on loopback, so several nodes coexist.
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{d}/cni"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{d}/certs.d"
"#
    )
}

/// Plain-HTTP pulls from the local registry at `host` (`127.0.0.1:<port>`).
fn registry_hosts_toml(host: &str) -> String {
    format!(
        "server = \"http://{host}\"\n\n[host.\"http://{host}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
    )
}

/// The CNI network of a node: its bridge as every pod's default gateway, addresses from
/// 10.244.<subnet>.0/24 recorded under `ipam_dir`.
fn cni_config(name: &str, bridge: &str, subnet: u8, ipam_dir: &Path) -> String {
    serde_json::json!({
        "cniVersion": "0.4.0",
        "name": name,
        "plugins": [{
            "type": "bridge",
            "bridge": bridge,
            "isGateway": true,
            "isDefaultGateway": true,
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{
                    "subnet": format!("10.244.{subnet}.0/24"),
                    "gateway": format!("10.244.{subnet}.1"),
                }]],
                "dataDir": ipam_dir,
            },
        }],
    })
    .to_string()
}

/// The kubelet's configuration: listens on the node's address only, trusts client certificates
/// of the cluster's CA, cgroupfs without per-QoS cgroups (several kubelets share this host's
/// cgroup tree), eviction only when nearly full, and no changes to the host's iptables.
fn kubelet_config(dir: &Path, address: Ipv4Addr, ca: &Path) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: "{address}"
port: 10250
readOnlyPort: 0
healthzPort: 0
containerRuntimeEndpoint: "unix://{socket}"
podLogsDir: "{logs}"
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: "{ca}"
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
makeIPTablesUtilChains: false
localStorageCapacityIsolation: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
resolvConf: /etc/resolv.conf
"#,
        socket = dir.join("containerd.sock").display(),
        logs = dir.join("pod-logs").display(),
        ca = ca.display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_namespace_is_read_from_the_sandbox_spec() {
        let info = r#"{"Spec":{"linux":{"namespaces":[{"type":"pid"},{"type":"network","path":"/var/run/netns/cni-1"}]}}}"#;
        assert_eq!(
            network_namespace(info),
            Some(PathBuf::from("/var/run/netns/cni-1"))
        );
        // A container joining its sandbox's namespace names it through /proc: not ours to remove.
        let joined = r#"{"Spec":{"linux":{"namespaces":[{"type":"network","path":"/proc/12/ns/net"}]}}}"#;
        assert_eq!(network_namespace(joined), None);
        assert_eq!(network_namespace("not json"), None);
    }

    #[test]
    fn registry_hosts_pull_over_plain_http() {
        let toml = registry_hosts_toml("127.0.0.1:5000");
        assert!(toml.starts_with("server = \"http://127.0.0.1:5000\""));
        assert!(toml.contains("[host.\"http://127.0.0.1:5000\"]"));
    }
}
