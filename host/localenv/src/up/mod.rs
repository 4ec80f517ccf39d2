//! What `flotilla up` builds: a whole local Flotilla under one state directory (default `.flotilla/`): a hub
//! control plane and N managed-cluster control planes, each with a node (containerd, runc,
//! kubelet, kube-scheduler) where the machine allows, and an OCI registry, as background
//! processes; Flotilla installed on them as users install it (the Flotilla image built from this
//! binary, `init --image` deploying deploy/hub on the hub's node, `join --image` deploying each
//! klusterlet on its cluster's node); the clusters accepted; the helloworld plugin pushed,
//! registered and enabled on every cluster, its agent running as a pod on each node (its image
//! built here); and the end state printed with what to type next.
//!
//! Nodes need root and Debian's containerd, runc, containernetworking-plugins and iptables,
//! which `up` installs with apt when it runs as root. Without them (or with `--no-nodes`) the
//! clusters have no nodes: `flotilla hub` (as deploy/hub's service account) and one
//! `flotilla klusterlet` per cluster run as local processes, and `flotilla addon-agent`
//! processes stand in for the add-on's agents, renewing their leases with the credential the
//! klusterlet obtained.
//!
//! Each step reuses what exists: control planes and the registry from this crate, the admin
//! commands (`init`, `join`, `accept`, `plugin push|register`, `addon enable`) by running the
//! `flotilla` binary ([`Plan::exe`]), so `up` does what a person following the guide would. Every
//! started process gets a pid file ([`crate::processes`]) at once, so a failure or
//! an interrupt stops exactly what this `up` started, and `down` and `status` find it all.
//!
//! ```text
//!   .flotilla/
//!     env.json                 what was asked (base port, control planes, add-on), complete or not
//!     pids/<name>.json         one per background process: pid, executable, log, port, order
//!     controlplanes/<name>/    pki/ (admin.kubeconfig), etcd/, logs/  — hub, cluster1..N
//!     registry/                config, storage, registry.log
//!     klusterlets/<cluster>/   klusterlet.log (`join --local`'s record)
//!     nodes/<control plane>/   containerd root and state, kubelet, logs/, pod-logs/, rules.json
//!     hub-sa.kubeconfig        deploy/hub's service account, the identity of a local `flotilla hub`
//!     logs/hub.log, logs/up.log  the hub, and every admin command `up` ran with its output
//! ```

mod checks;
pub mod ecosystem;
mod progress;
mod start;
mod steps;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

pub use checks::{addon_works, deployment_unready, status_of};
pub use ecosystem::Ecosystem;
pub use flotilla_registration::names::{
    AGENT_NAMESPACE as KLUSTERLET_NAMESPACE, HUB_DEPLOYMENT, HUB_NAMESPACE, KLUSTERLET_DEPLOYMENT,
};
pub use progress::{Progress, StepFailed};

use crate::{node, ports::Layout};
use progress::step;

/// The add-on `up` installs.
pub const ADDON: &str = "helloworld";
/// The hub control plane's name.
pub const HUB: &str = "hub";
/// Where the nodes keep their state, one directory per cluster.
pub const NODES_DIR: &str = "nodes";
/// In the recorded names of node processes: `<cluster>-node-<component>`.
pub const NODE_PROCESS_INFIX: &str = "-node-";
/// The environment record inside the state directory.
pub const ENV_FILE: &str = "env.json";
/// deploy/hub's service account, whose identity `flotilla hub` runs with.
pub(crate) const HUB_SA_USER: &str = "system:serviceaccount:open-cluster-management-hub:flotilla-hub";
pub(crate) const HUB_SA_GROUPS: &[&str] = &[
    "system:serviceaccounts",
    "system:serviceaccounts:open-cluster-management-hub",
];

/// What `up` built, written to `<state>/env.json` before the first process starts and marked
/// complete at the end: `status`, `down` and a second `up` read it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Environment {
    /// `--base-port`.
    pub base_port: u16,
    /// Control planes (hub first) and their admin kubeconfigs.
    pub control_planes: Vec<(String, PathBuf)>,
    /// Whether the helloworld add-on was asked for.
    pub addon: bool,
    /// Whether each managed cluster has a node.
    #[serde(default)]
    pub nodes: bool,
    /// The ecosystem add-ons installed.
    #[serde(default)]
    pub ecosystem: Vec<Ecosystem>,
    /// Whether every step finished.
    pub complete: bool,
}

impl Environment {
    /// The managed clusters' names.
    pub fn clusters(&self) -> Vec<String> {
        self.control_planes
            .iter()
            .filter(|(name, _)| name != HUB)
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The hub's admin kubeconfig.
    pub fn hub_kubeconfig(&self) -> Option<&Path> {
        self.control_planes
            .iter()
            .find(|(name, _)| name == HUB)
            .map(|(_, path)| path.as_path())
    }
}

/// Reads the environment record, if there is one.
pub fn read_env(state: &Path) -> anyhow::Result<Option<Environment>> {
    let path = state.join(ENV_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is not an environment record; delete it or run `flotilla down`",
                path.display()
            )
        })?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("read {}", path.display())),
    }
}

/// Writes the environment record.
fn write_env(state: &Path, env: &Environment) -> anyhow::Result<()> {
    let path = state.join(ENV_FILE);
    std::fs::write(&path, serde_json::to_string_pretty(env)?)
        .with_context(|| format!("write {}", path.display()))
}

/// What a state directory holds, decided from its records alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// Nothing recorded: start from scratch.
    Nothing,
    /// A complete environment whose every process runs: reuse it (if healthy).
    Running,
    /// Records of an environment that is incomplete or has dead processes: clean up first.
    Stale(String),
}

/// Classifies a state directory from whether its environment record is complete and which of
/// its recorded processes run (`(name, running)`).
pub fn assess(complete: Option<bool>, processes: &[(String, bool)]) -> Found {
    let dead: Vec<&str> = processes
        .iter()
        .filter(|(_, running)| !running)
        .map(|(name, _)| name.as_str())
        .collect();
    match complete {
        None if processes.is_empty() => Found::Nothing,
        None => Found::Stale(format!(
            "{} process record(s) without an environment record",
            processes.len()
        )),
        Some(_) if !dead.is_empty() => Found::Stale(format!("not running: {}", dead.join(", "))),
        Some(false) => Found::Stale("an earlier `flotilla up` did not finish".into()),
        Some(true) if processes.is_empty() => Found::Stale("no process recorded".into()),
        Some(true) => Found::Running,
    }
}

/// What to build, and where: everything the steps share.
pub struct Plan {
    /// The state directory (absolute).
    pub state: PathBuf,
    /// The `flotilla` binary the admin commands and local processes run.
    pub exe: PathBuf,
    /// The fixed loopback ports.
    pub layout: Layout,
    /// The managed clusters' names.
    pub clusters: Vec<String>,
    /// How long to wait for clusters, plugin and works to become ready.
    pub timeout: Duration,
    /// Whether to install the helloworld add-on.
    pub addon: bool,
    /// Whether each control plane gets a node.
    pub nodes: bool,
    /// The ecosystem add-ons to install (their agents need nodes).
    pub ecosystem: Vec<Ecosystem>,
}

impl Plan {
    fn logs(&self) -> PathBuf {
        self.state.join("logs")
    }

    fn cp_dir(&self, name: &str) -> PathBuf {
        self.state.join("controlplanes").join(name)
    }

    fn node_dir(&self, cluster: &str) -> PathBuf {
        self.state.join(NODES_DIR).join(cluster)
    }

    fn admin_kubeconfig(&self, name: &str) -> PathBuf {
        self.cp_dir(name).join("pki").join("admin.kubeconfig")
    }

    /// The log of the admin commands `up` runs.
    fn steps_log(&self) -> PathBuf {
        self.logs().join("up.log")
    }
}

/// Whether this machine can run nodes, installing the Debian packages they need first when
/// `up` runs as root; when it cannot, says why and what runs instead.
pub async fn nodes_possible(progress: &Progress) -> bool {
    if node::prerequisites().is_none() {
        return true;
    }
    if node::is_root() {
        let installed = step(progress, "install the Debian packages nodes need", None, async {
            tokio::task::spawn_blocking(node::install_packages).await??;
            Ok(((), node::PACKAGES.join(" ")))
        })
        .await;
        if let Err(error) = installed {
            eprintln!("{error:#}");
        }
    }
    match node::prerequisites() {
        None => true,
        Some(missing) => {
            eprintln!(
                "note: starting the clusters without nodes: a node needs {missing}. The add-on's \
                 agents run as local `flotilla addon-agent` processes instead of pods (run `up` \
                 as root with apt, or install the packages, for real nodes)"
            );
            false
        }
    }
}

/// Builds everything `plan` asks for, recording it in the state directory as it goes, and
/// waits until it runs. On failure, what started stays recorded for `down` to stop.
pub async fn run(plan: &Plan, progress: &Progress) -> anyhow::Result<Environment> {
    let mut control_planes = vec![(HUB.to_owned(), plan.admin_kubeconfig(HUB))];
    for cluster in &plan.clusters {
        control_planes.push((cluster.clone(), plan.admin_kubeconfig(cluster)));
    }
    let mut env = Environment {
        base_port: plan.layout.hub().apiserver,
        control_planes,
        addon: plan.addon,
        nodes: plan.nodes,
        ecosystem: plan.ecosystem.clone(),
        complete: false,
    };
    write_env(&plan.state, &env)?;
    let built = steps::build(plan, progress).await?;
    let ecosystem_plugins = ecosystem::build(plan, progress).await?;
    let infrastructure = steps::infrastructure(plan, progress, built.agent).await?;
    let image = infrastructure.flotilla_image.as_deref();
    let token = steps::install_hub(plan, progress, image).await?;
    steps::join_clusters(plan, progress, &token, image).await?;
    steps::accept(plan, progress).await?;
    if let Some(plugin) = &built.plugin {
        steps::enable_addon(plan, progress, plugin, &infrastructure.registry_address).await?;
    }
    ecosystem::enable(
        plan,
        progress,
        &ecosystem_plugins,
        &infrastructure.registry_address,
        infrastructure.tunnel.as_ref(),
    )
    .await?;
    steps::await_running(plan, progress).await?;
    ecosystem::await_running(plan, progress).await?;
    env.complete = true;
    write_env(&plan.state, &env)?;
    Ok(env)
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn procs(list: &[(&str, bool)]) -> Vec<(String, bool)> {
        list.iter().map(|(n, r)| ((*n).to_owned(), *r)).collect()
    }

    #[rstest]
    #[case::empty_directory(None, &[], Found::Nothing)]
    #[case::everything_runs(Some(true), &[("hub", true), ("registry", true)], Found::Running)]
    #[case::a_process_died(Some(true), &[("hub", false), ("registry", true)], Found::Stale("not running: hub".into()))]
    #[case::interrupted_up(Some(false), &[("hub-etcd", true)], Found::Stale("an earlier `flotilla up` did not finish".into()))]
    #[case::pid_files_without_record(None, &[("hub-etcd", false)], Found::Stale("1 process record(s) without an environment record".into()))]
    #[case::record_without_processes(Some(true), &[], Found::Stale("no process recorded".into()))]
    fn a_state_directory_is_reused_only_when_complete_and_every_process_runs(
        #[case] complete: Option<bool>,
        #[case] running: &[(&str, bool)],
        #[case] expected: Found,
    ) {
        assert_eq!(assess(complete, &procs(running)), expected);
    }
}
