//! Starting things and running the admin commands: control planes, nodes, the hub, stand-in
//! add-on agents, and `flotilla` itself (the binary of [`Plan::exe`]) with its output logged.

use std::{
    net::{Ipv4Addr, SocketAddr, TcpStream},
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use super::{
    ADDON, HUB, HUB_DEPLOYMENT, HUB_NAMESPACE, HUB_SA_GROUPS, HUB_SA_USER, NODE_PROCESS_INFIX, Plan,
    checks::{await_ready, deployment_unready},
};
use crate::{ControlPlane, node::Node, processes, registry::Registry};

/// Starts the hub and every managed cluster's control plane at once on their fixed ports
/// (hub first). If one fails, the handles of the others are dropped, which stops them.
pub(super) async fn start_control_planes(plan: &Plan) -> anyhow::Result<(Vec<ControlPlane>, String)> {
    let mut starts = vec![
        ControlPlane::builder(HUB)
            .state_dir(plan.cp_dir(HUB))
            .ports(plan.layout.hub())
            .detached(true)
            .start(),
    ];
    for (i, cluster) in plan.clusters.iter().enumerate() {
        let index = u16::try_from(i + 1).context("too many clusters")?;
        starts.push(
            ControlPlane::builder(cluster.clone())
                .state_dir(plan.cp_dir(cluster))
                .ports(plan.layout.cluster(index))
                .detached(true)
                .start(),
        );
    }
    let started = futures::future::try_join_all(starts).await?;
    // The hub's service-account identity is issued by its CA while the handle holds it.
    let identity = started[0].kubeconfig_for(HUB_SA_USER, HUB_SA_GROUPS)?;
    let path = plan.state.join("hub-sa.kubeconfig");
    std::fs::write(&path, identity).with_context(|| format!("write {}", path.display()))?;
    Ok((
        started,
        format!("hub at https://127.0.0.1:{}", plan.layout.hub().apiserver),
    ))
}

/// Detaches the control planes and records their processes.
pub(super) fn record_control_planes(plan: &Plan, started: Vec<ControlPlane>) -> anyhow::Result<()> {
    for cp in started {
        let name = cp.name().to_owned();
        let dir = cp.dir().to_path_buf();
        let port = cp.port();
        let etcd_port = if name == HUB {
            plan.layout.hub().etcd
        } else {
            let index = plan.clusters.iter().position(|c| *c == name).unwrap_or_default() + 1;
            plan.layout.cluster(u16::try_from(index).unwrap_or_default()).etcd
        };
        let state = cp.detach()?;
        for (component, pid) in &state.pids {
            let log = dir.join("logs").join(format!("{component}.log"));
            let port = match component.as_str() {
                "kube-apiserver" => Some(port),
                "etcd" => Some(etcd_port),
                _ => None,
            };
            processes::record(
                &plan.state,
                &format!("{name}-{component}"),
                *pid,
                &state.binary,
                &log,
                port,
            )?;
        }
    }
    Ok(())
}

/// Starts a node for every control plane, each managed cluster's routing the hub's
/// `kubernetes` Service so that its pods (klusterlet, agents) reach the hub, and the hub's
/// exposing the registry to the hub's pods (plugin pulls); then detaches and records their
/// processes (`<control plane>-node-<component>`). A failed node drops the others, which stops
/// them. Returns where the registry is reachable from the hub's pods and from this host, and
/// the hub node's address (this host's, as every node's pods reach it).
pub(super) async fn start_nodes(
    plan: &Plan,
    control_planes: &[ControlPlane],
    registry: &Registry,
) -> anyhow::Result<((String, Ipv4Addr), String)> {
    let hub = control_planes.first().context("no hub control plane")?;
    let starts = control_planes.iter().map(|cp| async move {
        let dir = plan.node_dir(cp.name());
        let mut node = Node::start_detached(cp, registry, &dir).await?;
        if cp.name() != HUB {
            node.route(hub)?;
        }
        Ok::<_, anyhow::Error>((cp.name().to_owned(), node))
    });
    let mut nodes = futures::future::try_join_all(starts).await?;
    let hub_node = &mut nodes
        .iter_mut()
        .find(|(name, _)| name == HUB)
        .context("no hub node")?
        .1;
    let hub_address = hub_node.address();
    let registry_address = hub_node.expose_registry(registry)?;
    let mut started = Vec::new();
    for (name, node) in nodes {
        let logs: Vec<(&str, PathBuf)> = ["containerd", "kubelet", "kube-scheduler"]
            .into_iter()
            .map(|c| (c, node.log_path(c)))
            .collect();
        let address = node.address();
        for (component, pid) in node.detach() {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
                .with_context(|| format!("find the executable of {name}'s {component}"))?;
            let log = logs
                .iter()
                .find(|(c, _)| *c == component)
                .map(|(_, path)| path.clone())
                .unwrap_or_default();
            let record = format!("{name}{NODE_PROCESS_INFIX}{component}");
            processes::record(&plan.state, &record, pid, &exe, &log, None)?;
        }
        started.push(format!("{name}-node at {address}"));
    }
    Ok(((registry_address, hub_address), started.join(", ")))
}

/// Waits until deploy/hub's Deployment, installed by `flotilla init --image`, has its two
/// replicas ready (one of them leads).
pub(super) async fn hub_pods_ready(plan: &Plan) -> anyhow::Result<((), String)> {
    let client = crate::kubeconfig::client_from_yaml(
        &std::fs::read_to_string(plan.admin_kubeconfig(HUB)).context("read the hub admin kubeconfig")?,
    )
    .await?;
    await_ready(&client, plan.timeout, |c| async move {
        deployment_unready(&c, HUB_NAMESPACE, HUB_DEPLOYMENT).await
    })
    .await?;
    Ok(((), format!("Deployment {HUB_NAMESPACE}/{HUB_DEPLOYMENT}")))
}

/// Applies deploy/hub (namespace, service account, least-privilege RBAC) and starts
/// `flotilla hub` in the background as that service account; waits until its webhook server
/// listens.
pub(super) async fn start_hub(plan: &Plan, log: &Path) -> anyhow::Result<((), String)> {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/hub");
    let hub_admin = plan.admin_kubeconfig(HUB);
    let kubectl = crate::binary::controlplane_binary()?;
    let applied = tokio::process::Command::new(&kubectl)
        .arg("kubectl")
        .arg(format!("--kubeconfig={}", hub_admin.display()))
        .args(["apply", "--server-side", "-k"])
        .arg(&deploy)
        .kill_on_drop(true)
        .output()
        .await
        .context("run kubectl apply")?;
    append_log(
        &plan.steps_log(),
        &format!("kubectl apply -k {}", deploy.display()),
        &applied,
    );
    if !applied.status.success() {
        bail!(
            "apply {} to the hub: {}",
            deploy.display(),
            String::from_utf8_lossy(&applied.stderr).trim()
        );
    }

    let webhook = plan.layout.webhook();
    let mut hub = std::process::Command::new(&plan.exe);
    hub.arg("hub")
        .arg("--kubeconfig")
        .arg(plan.state.join("hub-sa.kubeconfig"))
        .arg("--webhook-bind")
        .arg(format!("127.0.0.1:{webhook}"))
        .arg("--ops-bind")
        .arg(format!("127.0.0.1:{}", plan.layout.hub_ops()))
        // One stable identity: a hub restarted after a crash renews its own lease at once
        // instead of waiting for it to expire.
        .arg("--leader-election-identity")
        .arg("flotilla-up-hub");
    let child = spawn_in_background(hub, log).context("start flotilla hub")?;
    let record = processes::record(
        &plan.state,
        "hub",
        child.id(),
        &plan.exe,
        log,
        Some(plan.layout.hub_ops()),
    )?;
    // Not waited for: it outlives `up`, and init reaps it then.
    drop(child);
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, webhook));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if !processes::is_running(&record) {
            bail!("flotilla hub exited:\n{}", tail(log, 15));
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(((), format!("process {}, as {HUB_SA_USER}", record.pid)));
        }
        if Instant::now() > deadline {
            bail!(
                "flotilla hub did not open its webhook port {webhook} within 60s:\n{}",
                tail(log, 15)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts the stand-in agents of the enabled add-on, one per cluster: `flotilla addon-agent`
/// processes that read the add-on's `<addon>-hub-kubeconfig` secret on their cluster (what the
/// klusterlet writes once the hub approved the add-on's CSR) and renew Lease `<addon>` on the
/// hub with only that credential, so the add-on becomes `Available` through the real lease path.
pub(super) async fn start_addon_agents(plan: &Plan) -> anyhow::Result<((), String)> {
    let mut started = Vec::new();
    for cluster in &plan.clusters {
        let name = format!("addon-agent-{cluster}");
        let log = plan.logs().join(format!("{name}.log"));
        let mut agent = std::process::Command::new(&plan.exe);
        agent
            .args(["addon-agent", "--addon", ADDON, "--hub-kubeconfig-secret"])
            .args(["--lease-seconds", &ADDON_AGENT_RENEW_SECONDS.to_string()])
            .arg("--kubeconfig")
            .arg(plan.admin_kubeconfig(cluster));
        let child = spawn_in_background(agent, &log)
            .with_context(|| format!("start the {ADDON} agent of {cluster}"))?;
        processes::record(&plan.state, &name, child.id(), &plan.exe, &log, None)?;
        started.push(format!("{cluster}: process {}", child.id()));
        drop(child);
    }
    Ok(((), started.join(", ")))
}

/// Starts `command` (this environment's own kubeconfigs only) with its output in `log`, in a
/// process group of its own, so that a terminal's hang-up or Ctrl-C does not reach it.
pub(super) fn spawn_in_background(
    mut command: std::process::Command,
    log: &Path,
) -> anyhow::Result<std::process::Child> {
    let out = std::fs::File::create(log).with_context(|| format!("create {}", log.display()))?;
    let err = out.try_clone().context("clone log handle")?;
    Ok(command
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()?)
}

/// How often the stand-in add-on agents renew their leases.
pub(super) const ADDON_AGENT_RENEW_SECONDS: u64 = 10;

/// Runs `flotilla ARGS --kubeconfig KUBECONFIG` (this binary) with this environment's state
/// directory; its output goes to the steps log, its standard output is returned.
pub(super) async fn flotilla(plan: &Plan, kubeconfig: &Path, args: &[&str]) -> anyhow::Result<String> {
    let output = tokio::process::Command::new(&plan.exe)
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("FLOTILLA_STATE_DIR", &plan.state)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("run flotilla {}", args.join(" ")))?;
    append_log(
        &plan.steps_log(),
        &format!("flotilla {}", args.join(" ")),
        &output,
    );
    if !output.status.success() {
        bail!(
            "`flotilla {}` failed: {}",
            args.iter()
                .take_while(|a| !a.starts_with('-'))
                .take(2)
                .copied()
                .collect::<Vec<_>>()
                .join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

pub(super) fn append_log(path: &Path, what: &str, output: &std::process::Output) {
    use std::io::Write as _;
    if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = writeln!(
            file,
            "$ {what}\n{}{}[{}]\n",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            output.status
        );
    }
}

/// The last `lines` lines of a file.
pub(super) fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
