//! `flotilla up`: a whole local Flotilla under one state directory (default `.flotilla/`): a hub
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
//! Each step reuses what exists: control planes and the registry from `flotilla-localenv`, the
//! admin commands (`init`, `join`, `accept`, `plugin push|register`, `addon enable`)
//! by running this same binary, so `up` does what a person following the guide would. Every
//! started process gets a pid file (`flotilla_localenv::processes`) at once, so a failure or
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

use std::{
    io::IsTerminal as _,
    net::{Ipv4Addr, SocketAddr, TcpStream},
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use flotilla_api::{
    addon::{consts::ADDON_NAME_LABEL, v1alpha1::ManagedClusterAddOn},
    cluster::{consts::managed_cluster as mc, v1::ManagedCluster},
    plugins::{consts::condition as plugin_condition, v1alpha1::AddOnPlugin},
    work::{consts::manifest_work as mw, v1::ManifestWork},
};
use flotilla_core::conditions;
use flotilla_localenv::{
    ControlPlane,
    node::{self, Node},
    ports::Layout,
    processes,
    registry::Registry,
};
use indicatif::{ProgressBar, ProgressStyle};
use kube::{Api, Client, api::ListParams};
use serde::{Deserialize, Serialize};

pub use flotilla_registration::names::{
    AGENT_NAMESPACE as KLUSTERLET_NAMESPACE, HUB_DEPLOYMENT, HUB_NAMESPACE, KLUSTERLET_DEPLOYMENT,
};

use crate::cli::GlobalArgs;

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
const HUB_SA_USER: &str = "system:serviceaccount:open-cluster-management-hub:flotilla-hub";
const HUB_SA_GROUPS: &[&str] = &[
    "system:serviceaccounts",
    "system:serviceaccounts:open-cluster-management-hub",
];

#[derive(Debug, Args)]
pub struct UpArgs {
    /// How many managed clusters to start (named cluster1..N).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=20))]
    pub clusters: u16,
    /// Do not push, register and enable the helloworld add-on.
    #[arg(long)]
    pub no_addon: bool,
    /// First of the fixed loopback ports: hub base..base+4 (apiserver, etcd, etcd peer,
    /// registry, webhook), cluster i base+10i..base+10i+2.
    #[arg(long, default_value_t = 17400)]
    pub base_port: u16,
    /// Start no nodes: the hub, the klusterlets and stand-in add-on agents run as local
    /// processes (the fallback when the machine cannot run containers).
    #[arg(long)]
    pub no_nodes: bool,
    /// How long to wait for clusters, plugin and works to become ready.
    #[arg(long, default_value = "300s", value_parser = parse_seconds)]
    pub timeout: Duration,
}

/// `300s`, `5m` or a number of seconds.
fn parse_seconds(text: &str) -> Result<Duration, String> {
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let value: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 90s or 5m"))?;
    match unit {
        "" | "s" => Ok(Duration::from_secs(value)),
        "m" => Ok(Duration::from_secs(value * 60)),
        _ => Err(format!("{text:?} is not a duration like 90s or 5m")),
    }
}

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

/// Progress for people: a spinner with elapsed time per step on a terminal, plain lines
/// otherwise (logs, CI, tests).
struct Progress {
    started: Instant,
    terminal: bool,
}

/// One step in progress.
struct Step {
    name: String,
    started: Instant,
    bar: Option<ProgressBar>,
}

impl Progress {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            terminal: std::io::stderr().is_terminal(),
        }
    }

    fn start(&self, name: &str) -> Step {
        let bar = if self.terminal {
            let bar = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed:>3}] {msg}") {
                bar.set_style(style);
            }
            bar.set_message(name.to_owned());
            bar.enable_steady_tick(Duration::from_millis(120));
            Some(bar)
        } else {
            eprintln!("[{:>6.1}s] {name} …", self.started.elapsed().as_secs_f64());
            None
        };
        Step {
            name: name.to_owned(),
            started: Instant::now(),
            bar,
        }
    }

    fn done(&self, step: Step, detail: &str) {
        let line = format!(
            "✓ {}{} ({:.1}s)",
            step.name,
            if detail.is_empty() {
                String::new()
            } else {
                format!(": {detail}")
            },
            step.started.elapsed().as_secs_f64()
        );
        match step.bar {
            Some(bar) => bar.finish_with_message(line),
            None => eprintln!("[{:>6.1}s] {line}", self.started.elapsed().as_secs_f64()),
        }
    }

    fn failed(&self, step: &Step) {
        let line = format!(
            "✗ {} (after {:.1}s)",
            step.name,
            step.started.elapsed().as_secs_f64()
        );
        match &step.bar {
            Some(bar) => bar.abandon_with_message(line),
            None => eprintln!("[{:>6.1}s] {line}", self.started.elapsed().as_secs_f64()),
        }
    }
}

/// Everything the steps share.
struct Ctx {
    state: PathBuf,
    exe: PathBuf,
    layout: Layout,
    clusters: Vec<String>,
    args_timeout: Duration,
    addon: bool,
    nodes: bool,
}

impl Ctx {
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

/// A failed step: which, why, and where to look.
#[derive(Debug, thiserror::Error)]
#[error("step {step:?} failed: {}{}", crate::report::line(cause), log.as_ref().map(|l| format!("\n  log: {}", l.display())).unwrap_or_default())]
struct StepFailed {
    step: String,
    log: Option<PathBuf>,
    cause: anyhow::Error,
}

/// Runs `flotilla up`.
pub async fn up(global: &GlobalArgs, args: &UpArgs) -> anyhow::Result<()> {
    // Listen for interrupts before anything starts, so none of them kills `up` before it has
    // stopped what it started.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listen for SIGTERM")?;
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("listen for Ctrl-C")?;

    let state = std::path::absolute(&global.state_dir)
        .with_context(|| format!("resolve {}", global.state_dir.display()))?;
    let clusters: Vec<String> = (1..=args.clusters).map(|i| format!("cluster{i}")).collect();
    let layout = Layout::new(args.base_port, args.clusters)?;

    let _lock = crate::down::lock(&state)?;
    let env = read_env(&state)?;
    let records = processes::read_all(&state)?;
    let running: Vec<(String, bool)> = records
        .iter()
        .map(|r| (r.name.clone(), processes::is_running(r)))
        .collect();
    match assess(env.as_ref().map(|e| e.complete), &running) {
        Found::Nothing => {}
        Found::Running => {
            let env = env.ok_or_else(|| anyhow!("environment record vanished"))?;
            let unhealthy = crate::status::unhealthy(&state, &env).await;
            if unhealthy.is_empty() {
                eprintln!(
                    "Flotilla is already up under {} ({} processes running); reusing it",
                    state.display(),
                    records.len()
                );
                let asked = (clusters.len(), !args.no_addon, args.base_port);
                let running = (env.clusters().len(), env.addon, env.base_port);
                if asked != running {
                    eprintln!(
                        "note: it runs {} cluster(s), add-on {}, base port {}, not what was asked; \
                         `flotilla down` first to change that",
                        running.0,
                        if running.1 { "on" } else { "off" },
                        running.2
                    );
                }
                let client = hub_client(&env).await?;
                print_end_state(&client, &env).await?;
                print_next_steps(&env, &state);
                return Ok(());
            }
            eprintln!(
                "Flotilla under {} runs but is not healthy ({}); stopping it and starting again",
                state.display(),
                unhealthy.join("; ")
            );
            crate::down::teardown(&state)?;
        }
        Found::Stale(why) => {
            eprintln!(
                "found a stale state directory {} ({why}); stopping what it recorded and starting again",
                state.display()
            );
            crate::down::teardown(&state)?;
        }
    }

    // Every port must be free before anything starts: a clash found later would leave a
    // half-built environment to take down again.
    let busy = flotilla_localenv::ports::busy(&layout.all());
    if !busy.is_empty() {
        let list: Vec<String> = busy
            .iter()
            .map(|(what, port)| format!("{port} ({what})"))
            .collect();
        bail!(
            "port(s) needed by `flotilla up` already in use: {}. Another program listens there \
             (perhaps a `flotilla up` with another --state-dir); stop it, or choose other ports \
             with --base-port",
            list.join(", ")
        );
    }

    // A control plane of `flotilla controlplane up` under the same names would have its
    // directory cleared under its feet.
    for name in std::iter::once(HUB).chain(clusters.iter().map(String::as_str)) {
        let dir = state.join("controlplanes").join(name);
        if let Ok(cp) = flotilla_localenv::controlplane::read_state(&dir)
            && cp.pids.iter().any(|(_, pid)| processes::runs(*pid, &cp.binary))
        {
            bail!(
                "a control plane named {name:?} already runs under {} (from `flotilla controlplane up`); \
                 stop it with `flotilla controlplane down --name {name}`, or choose another --state-dir",
                state.display()
            );
        }
    }

    std::fs::create_dir_all(state.join("logs")).with_context(|| format!("create {}", state.display()))?;
    let exe = std::env::current_exe().context("find the flotilla binary")?;
    let progress = Progress::new();
    let nodes = !args.no_nodes && nodes_possible(&progress).await;
    let ctx = Ctx {
        state: state.clone(),
        exe,
        layout,
        clusters,
        args_timeout: args.timeout,
        addon: !args.no_addon,
        nodes,
    };
    let outcome = tokio::select! {
        result = run_steps(&ctx, &progress) => result,
        _ = terminate.recv() => Err(anyhow!("interrupted by SIGTERM")),
        _ = interrupt.recv() => Err(anyhow!("interrupted (Ctrl-C)")),
    };
    match outcome {
        Ok(env) => {
            eprintln!(
                "\nFlotilla is up after {:.1}s (state and logs in {})\n",
                progress.started.elapsed().as_secs_f64(),
                state.display()
            );
            let client = hub_client(&env).await?;
            print_end_state(&client, &env).await?;
            print_next_steps(&env, &state);
            Ok(())
        }
        Err(error) => {
            eprintln!("{}", crate::report::render(&error, global.verbose));
            eprintln!("stopping what this `flotilla up` started …");
            match crate::down::teardown(&state) {
                Ok(stopped) => eprintln!("stopped {} process(es); nothing is left running", stopped.len()),
                Err(e) => eprintln!("could not stop everything: {e:#}; run `flotilla down`"),
            }
            Err(anyhow!("`flotilla up` did not finish; see the error above"))
        }
    }
}

/// Whether this machine can run nodes, installing the Debian packages they need first when
/// `up` runs as root; when it cannot, says why and what runs instead.
async fn nodes_possible(progress: &Progress) -> bool {
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
            eprintln!("{}", crate::report::line(&error));
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

/// Runs `body` as the step `name`: progress, and on failure the step, the cause and `log`.
async fn step<T>(
    progress: &Progress,
    name: &str,
    log: Option<PathBuf>,
    body: impl Future<Output = anyhow::Result<(T, String)>>,
) -> anyhow::Result<T> {
    let step = progress.start(name);
    match body.await {
        Ok((value, detail)) => {
            progress.done(step, &detail);
            Ok(value)
        }
        Err(cause) => {
            progress.failed(&step);
            Err(StepFailed {
                step: name.to_owned(),
                log,
                cause,
            }
            .into())
        }
    }
}

async fn run_steps(ctx: &Ctx, progress: &Progress) -> anyhow::Result<Environment> {
    let mut control_planes = vec![(HUB.to_owned(), ctx.admin_kubeconfig(HUB))];
    for cluster in &ctx.clusters {
        control_planes.push((cluster.clone(), ctx.admin_kubeconfig(cluster)));
    }
    let mut env = Environment {
        base_port: ctx.layout.hub().apiserver,
        control_planes,
        addon: ctx.addon,
        nodes: ctx.nodes,
        complete: false,
    };
    write_env(&ctx.state, &env)?;

    step(progress, "build the control-plane binary", None, async {
        let path = tokio::task::spawn_blocking(flotilla_localenv::binary::controlplane_binary).await??;
        Ok(((), path.display().to_string()))
    })
    .await?;
    step(progress, "build the OCI registry", None, async {
        let path = tokio::task::spawn_blocking(flotilla_localenv::registry::registry_binary).await??;
        Ok(((), path.display().to_string()))
    })
    .await?;
    let wasm = if ctx.addon {
        Some(
            step(progress, "build the helloworld plugin", None, async {
                let path = tokio::task::spawn_blocking(flotilla_localenv::plugins::helloworld).await??;
                Ok((path.clone(), path.display().to_string()))
            })
            .await?,
        )
    } else {
        None
    };

    let agent = if ctx.addon && ctx.nodes {
        Some(
            step(progress, "build the helloworld agent", None, async {
                let path =
                    tokio::task::spawn_blocking(flotilla_localenv::plugins::helloworld_agent).await??;
                Ok((path.clone(), path.display().to_string()))
            })
            .await?,
        )
    } else {
        None
    };

    let registry_log = ctx.state.join("registry").join("registry.log");
    let registry = step(progress, "start the OCI registry", Some(registry_log), async {
        let registry = Registry::builder()
            .state_dir(ctx.state.join("registry"))
            .port(ctx.layout.registry())
            .detached(true)
            .start()
            .await?;
        Ok((registry, format!("127.0.0.1:{}", ctx.layout.registry())))
    })
    .await?;

    let names: Vec<String> = std::iter::once(HUB.to_owned())
        .chain(ctx.clusters.iter().cloned())
        .collect();
    let control_planes = step(
        progress,
        &format!("start {} control planes ({})", names.len(), names.join(", ")),
        Some(ctx.state.join("controlplanes")),
        start_control_planes(ctx),
    )
    .await?;
    // With nodes, where the hub's pods and this host reach the registry.
    let mut registry_address = format!("127.0.0.1:{}", ctx.layout.registry());
    let mut flotilla_image = None;
    if ctx.nodes {
        registry_address = step(
            progress,
            &format!("start a node per control plane ({})", names.join(", ")),
            Some(ctx.state.join(NODES_DIR)),
            start_nodes(ctx, &control_planes, &registry),
        )
        .await?;
        flotilla_image = Some(
            step(
                progress,
                "push the Flotilla image",
                Some(ctx.state.join("registry").join("registry.log")),
                async {
                    let pushed = flotilla_localenv::image::push_flotilla(&registry, &ctx.exe).await?;
                    Ok((pushed.clone(), pushed))
                },
            )
            .await?,
        );
    }
    if let Some(agent) = agent {
        step(
            progress,
            "push the helloworld agent image",
            Some(ctx.state.join("registry").join("registry.log")),
            async {
                let pushed =
                    flotilla_localenv::image::push_helloworld_agent_binary(&registry, &agent).await?;
                Ok(((), pushed))
            },
        )
        .await?;
    }
    record_control_planes(ctx, control_planes)?;
    let (binary, log) = (registry.binary().to_path_buf(), registry.log_path());
    let pid = registry.detach()?;
    processes::record(
        &ctx.state,
        "registry",
        pid,
        &binary,
        &log,
        Some(ctx.layout.registry()),
    )?;

    let hub_admin = ctx.admin_kubeconfig(HUB);
    let token = step(
        progress,
        "prepare the hub (flotilla init)",
        Some(ctx.steps_log()),
        async {
            let mut init = vec!["init"];
            if let Some(image) = &flotilla_image {
                init.extend(["--image", image.as_str()]);
            }
            let out = flotilla(ctx, &hub_admin, &init).await?;
            let token = out
                .split_whitespace()
                .skip_while(|w| *w != "--hub-token")
                .nth(1)
                .map(str::to_owned)
                .ok_or_else(|| anyhow!("`flotilla init` printed no join command: {out}"))?;
            Ok((token, String::new()))
        },
    )
    .await?;

    let hub_log = ctx.logs().join("hub.log");
    if ctx.nodes {
        step(
            progress,
            "wait for flotilla hub's pods (deploy/hub: two replicas)",
            Some(ctx.node_dir(HUB).join("pod-logs")),
            hub_pods_ready(ctx),
        )
        .await?;
    } else {
        step(
            progress,
            "start flotilla hub",
            Some(hub_log.clone()),
            start_hub(ctx, &hub_log),
        )
        .await?;
    }

    // With nodes, the hub as the add-on agents' pods reach it (and the host, through the same
    // route): the klusterlets hand their hub address on to the agents' kubeconfigs.
    let hub_server = if ctx.nodes {
        let address = flotilla_localenv::controlplane::kubernetes_service_address(ctx.layout.hub().apiserver);
        format!("https://{address}:443")
    } else {
        format!("https://127.0.0.1:{}", ctx.layout.hub().apiserver)
    };
    for cluster in &ctx.clusters {
        if let Some(image) = &flotilla_image {
            step(
                progress,
                &format!("join {cluster} (flotilla join: a klusterlet pod on its node)"),
                Some(ctx.node_dir(cluster).join("pod-logs")),
                async {
                    let managed = ctx.admin_kubeconfig(cluster);
                    let mut args = join_args(&token, &hub_server, cluster);
                    args.extend(["--image", image]);
                    flotilla(ctx, &managed, &args).await?;
                    Ok((
                        (),
                        format!("Deployment {KLUSTERLET_NAMESPACE}/{KLUSTERLET_DEPLOYMENT}"),
                    ))
                },
            )
            .await?;
            continue;
        }
        let log = ctx.state.join("klusterlets").join(cluster).join("klusterlet.log");
        step(
            progress,
            &format!("join {cluster} (flotilla join --local)"),
            Some(log),
            async {
                let managed = ctx.admin_kubeconfig(cluster);
                let mut args = join_args(&token, &hub_server, cluster);
                args.push("--local");
                flotilla(ctx, &managed, &args).await?;
                let klusterlet = crate::local::read(&ctx.state, cluster)
                    .ok_or_else(|| anyhow!("`flotilla join --local` recorded no klusterlet"))?;
                processes::record(
                    &ctx.state,
                    &format!("klusterlet-{cluster}"),
                    klusterlet.pid,
                    &klusterlet.exe,
                    &klusterlet.log,
                    None,
                )?;
                Ok(((), format!("klusterlet process {}", klusterlet.pid)))
            },
        )
        .await?;
    }

    let list = ctx.clusters.join(",");
    step(
        progress,
        "accept the clusters (flotilla accept)",
        Some(ctx.steps_log()),
        async {
            let timeout = format!("{}s", ctx.args_timeout.as_secs());
            flotilla(
                ctx,
                &hub_admin,
                &["accept", "--wait", "--clusters", &list, "--timeout", &timeout],
            )
            .await?;
            Ok(((), list.clone()))
        },
    )
    .await?;

    if let Some(wasm) = wasm {
        let reference = format!("{registry_address}/addons/{ADDON}:v1");
        let wasm_path = wasm.display().to_string();
        let digest = step(
            progress,
            "push helloworld to the registry",
            Some(ctx.steps_log()),
            async {
                let out = flotilla(
                    ctx,
                    &hub_admin,
                    &["plugin", "push", &wasm_path, &reference, "--insecure"],
                )
                .await?;
                let digest = out
                    .lines()
                    .find_map(|l| l.strip_prefix("digest:"))
                    .and_then(|rest| rest.split_whitespace().next())
                    .map(str::to_owned)
                    .ok_or_else(|| anyhow!("`flotilla plugin push` printed no digest: {out}"))?;
                Ok((digest, reference.clone()))
            },
        )
        .await?;
        step(
            progress,
            "register the helloworld AddOnPlugin",
            Some(ctx.steps_log()),
            async {
                flotilla(
                    ctx,
                    &hub_admin,
                    &[
                        "plugin",
                        "register",
                        ADDON,
                        "--oci",
                        &reference,
                        "--digest",
                        &digest,
                        "--insecure",
                    ],
                )
                .await?;
                Ok(((), digest.clone()))
            },
        )
        .await?;
        step(
            progress,
            "enable helloworld on every cluster",
            Some(ctx.steps_log()),
            async {
                flotilla(
                    ctx,
                    &hub_admin,
                    &["addon", "enable", "--names", ADDON, "--clusters", &list],
                )
                .await?;
                Ok(((), list.clone()))
            },
        )
        .await?;
        if !ctx.nodes {
            step(
                progress,
                "start the stand-in add-on agents (no nodes)",
                None,
                start_addon_agents(ctx),
            )
            .await?;
        }
    }

    let client = flotilla_localenv::kubeconfig::client_from_yaml(
        &std::fs::read_to_string(&hub_admin).context("read the hub admin kubeconfig")?,
    )
    .await?;
    step(
        progress,
        "wait until the clusters are Available",
        Some(ctx.logs().join("hub.log")),
        async {
            await_ready(&client, ctx.args_timeout, |c| {
                clusters_available(c, &ctx.clusters)
            })
            .await?;
            Ok(((), String::new()))
        },
    )
    .await?;
    if ctx.addon {
        step(
            progress,
            "wait until the helloworld plugin is loaded",
            Some(ctx.logs().join("hub.log")),
            async {
                await_ready(&client, ctx.args_timeout, plugin_ready).await?;
                Ok(((), String::new()))
            },
        )
        .await?;
        step(
            progress,
            "wait until each cluster's helloworld work is Applied",
            Some(ctx.state.join("klusterlets")),
            async {
                await_ready(&client, ctx.args_timeout, |c| works_applied(c, &ctx.clusters)).await?;
                Ok(((), String::new()))
            },
        )
        .await?;
        step(
            progress,
            if ctx.nodes {
                "wait until helloworld is Available on every cluster (its agent pods' leases)"
            } else {
                "wait until helloworld is Available on every cluster (its agents' leases)"
            },
            Some(ctx.logs()),
            async {
                await_ready(&client, ctx.args_timeout, |c| addons_available(c, &ctx.clusters)).await?;
                Ok(((), String::new()))
            },
        )
        .await?;
    }
    env.complete = true;
    write_env(&ctx.state, &env)?;
    Ok(env)
}

/// `flotilla join` with the token, the hub's address and the cluster's name.
fn join_args<'a>(token: &'a str, hub_server: &'a str, cluster: &'a str) -> Vec<&'a str> {
    vec![
        "join",
        "--hub-token",
        token,
        "--hub-apiserver",
        hub_server,
        "--cluster-name",
        cluster,
    ]
}

/// Starts the hub and every managed cluster's control plane at once on their fixed ports
/// (hub first). If one fails, the handles of the others are dropped, which stops them.
async fn start_control_planes(ctx: &Ctx) -> anyhow::Result<(Vec<ControlPlane>, String)> {
    let mut starts = vec![
        ControlPlane::builder(HUB)
            .state_dir(ctx.cp_dir(HUB))
            .ports(ctx.layout.hub())
            .detached(true)
            .start(),
    ];
    for (i, cluster) in ctx.clusters.iter().enumerate() {
        let index = u16::try_from(i + 1).context("too many clusters")?;
        starts.push(
            ControlPlane::builder(cluster.clone())
                .state_dir(ctx.cp_dir(cluster))
                .ports(ctx.layout.cluster(index))
                .detached(true)
                .start(),
        );
    }
    let started = futures::future::try_join_all(starts).await?;
    // The hub's service-account identity is issued by its CA while the handle holds it.
    let identity = started[0].kubeconfig_for(HUB_SA_USER, HUB_SA_GROUPS)?;
    let path = ctx.state.join("hub-sa.kubeconfig");
    std::fs::write(&path, identity).with_context(|| format!("write {}", path.display()))?;
    Ok((
        started,
        format!("hub at https://127.0.0.1:{}", ctx.layout.hub().apiserver),
    ))
}

/// Detaches the control planes and records their processes.
fn record_control_planes(ctx: &Ctx, started: Vec<ControlPlane>) -> anyhow::Result<()> {
    for cp in started {
        let name = cp.name().to_owned();
        let dir = cp.dir().to_path_buf();
        let port = cp.port();
        let etcd_port = if name == HUB {
            ctx.layout.hub().etcd
        } else {
            let index = ctx.clusters.iter().position(|c| *c == name).unwrap_or_default() + 1;
            ctx.layout.cluster(u16::try_from(index).unwrap_or_default()).etcd
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
                &ctx.state,
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
/// them. Returns where the registry is reachable from the hub's pods and from this host.
async fn start_nodes(
    ctx: &Ctx,
    control_planes: &[ControlPlane],
    registry: &Registry,
) -> anyhow::Result<(String, String)> {
    let hub = control_planes.first().context("no hub control plane")?;
    let starts = control_planes.iter().map(|cp| async move {
        let dir = ctx.node_dir(cp.name());
        let mut node = Node::start_detached(cp, registry, &dir).await?;
        if cp.name() != HUB {
            node.route(hub)?;
        }
        Ok::<_, anyhow::Error>((cp.name().to_owned(), node))
    });
    let mut nodes = futures::future::try_join_all(starts).await?;
    let registry_address = nodes
        .iter_mut()
        .find(|(name, _)| name == HUB)
        .context("no hub node")?
        .1
        .expose_registry(registry)?;
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
            processes::record(&ctx.state, &record, pid, &exe, &log, None)?;
        }
        started.push(format!("{name}-node at {address}"));
    }
    Ok((registry_address, started.join(", ")))
}

/// Waits until deploy/hub's Deployment, installed by `flotilla init --image`, has its two
/// replicas ready (one of them leads).
async fn hub_pods_ready(ctx: &Ctx) -> anyhow::Result<((), String)> {
    let client = flotilla_localenv::kubeconfig::client_from_yaml(
        &std::fs::read_to_string(ctx.admin_kubeconfig(HUB)).context("read the hub admin kubeconfig")?,
    )
    .await?;
    await_ready(&client, ctx.args_timeout, |c| async move {
        deployment_unready(&c, HUB_NAMESPACE, HUB_DEPLOYMENT).await
    })
    .await?;
    Ok(((), format!("Deployment {HUB_NAMESPACE}/{HUB_DEPLOYMENT}")))
}

/// `None` when Deployment `namespace/name` has all its replicas ready; else what it has.
pub async fn deployment_unready(
    client: &Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Option<String>> {
    let deployment = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await?;
    let Some(deployment) = deployment else {
        return Ok(Some(format!("no Deployment {namespace}/{name}")));
    };
    let wanted = deployment.spec.and_then(|s| s.replicas).unwrap_or(1);
    let ready = deployment.status.and_then(|s| s.ready_replicas).unwrap_or(0);
    Ok((ready < wanted).then(|| format!("Deployment {namespace}/{name}: {ready}/{wanted} ready")))
}

/// Applies deploy/hub (namespace, service account, least-privilege RBAC) and starts
/// `flotilla hub` in the background as that service account; waits until its webhook server
/// listens.
async fn start_hub(ctx: &Ctx, log: &Path) -> anyhow::Result<((), String)> {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/hub");
    let hub_admin = ctx.admin_kubeconfig(HUB);
    let kubectl = flotilla_localenv::binary::controlplane_binary()?;
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
        &ctx.steps_log(),
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

    let out = std::fs::File::create(log).with_context(|| format!("create {}", log.display()))?;
    let err = out.try_clone().context("clone log handle")?;
    let webhook = ctx.layout.webhook();
    let child = std::process::Command::new(&ctx.exe)
        .arg("hub")
        .arg("--kubeconfig")
        .arg(ctx.state.join("hub-sa.kubeconfig"))
        .arg("--webhook-bind")
        .arg(format!("127.0.0.1:{webhook}"))
        .arg("--ops-bind")
        .arg(format!("127.0.0.1:{}", ctx.layout.hub_ops()))
        // One stable identity: a hub restarted after a crash renews its own lease at once
        // instead of waiting for it to expire.
        .arg("--leader-election-identity")
        .arg("flotilla-up-hub")
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        // Own process group: a terminal's hang-up or Ctrl-C does not reach it.
        .process_group(0)
        .spawn()
        .context("start flotilla hub")?;
    let record = processes::record(
        &ctx.state,
        "hub",
        child.id(),
        &ctx.exe,
        log,
        Some(ctx.layout.hub_ops()),
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
async fn start_addon_agents(ctx: &Ctx) -> anyhow::Result<((), String)> {
    let mut started = Vec::new();
    for cluster in &ctx.clusters {
        let name = format!("addon-agent-{cluster}");
        let log = ctx.logs().join(format!("{name}.log"));
        let out = std::fs::File::create(&log).with_context(|| format!("create {}", log.display()))?;
        let err = out.try_clone().context("clone log handle")?;
        let child = std::process::Command::new(&ctx.exe)
            .args(["addon-agent", "--addon", ADDON, "--hub-kubeconfig-secret"])
            .args(["--lease-seconds", &ADDON_AGENT_RENEW_SECONDS.to_string()])
            .arg("--kubeconfig")
            .arg(ctx.admin_kubeconfig(cluster))
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .with_context(|| format!("start the {ADDON} agent of {cluster}"))?;
        processes::record(&ctx.state, &name, child.id(), &ctx.exe, &log, None)?;
        started.push(format!("{cluster}: process {}", child.id()));
        drop(child);
    }
    Ok(((), started.join(", ")))
}

/// How often the stand-in add-on agents renew their leases.
const ADDON_AGENT_RENEW_SECONDS: u64 = 10;

/// Whether the add-on is `Available` on every cluster; else what is not yet.
async fn addons_available(client: Client, clusters: &[String]) -> anyhow::Result<Option<String>> {
    let mut missing = Vec::new();
    for cluster in clusters {
        let addon = Api::<ManagedClusterAddOn>::namespaced(client.clone(), cluster)
            .get_opt(ADDON)
            .await?;
        let available = addon
            .and_then(|a| a.status)
            .map(|s| status_of(&s.conditions, "Available"))
            .unwrap_or_else(|| "Unknown".into());
        if available != conditions::TRUE {
            missing.push(format!("{cluster}: {ADDON} Available={available}"));
        }
    }
    Ok((!missing.is_empty()).then(|| missing.join(", ")))
}

/// Runs `flotilla ARGS --kubeconfig KUBECONFIG` (this binary) with this environment's state
/// directory; its output goes to the steps log, its standard output is returned.
async fn flotilla(ctx: &Ctx, kubeconfig: &Path, args: &[&str]) -> anyhow::Result<String> {
    let output = tokio::process::Command::new(&ctx.exe)
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("FLOTILLA_STATE_DIR", &ctx.state)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("run flotilla {}", args.join(" ")))?;
    append_log(&ctx.steps_log(), &format!("flotilla {}", args.join(" ")), &output);
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

fn append_log(path: &Path, what: &str, output: &std::process::Output) {
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
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Polls `check` until it says ready (`Ok(None)`), failing after `timeout` with its last
/// answer (`Ok(Some(what is missing))`).
async fn await_ready<F, Fut>(client: &Client, timeout: Duration, check: F) -> anyhow::Result<()>
where
    F: Fn(Client) -> Fut,
    Fut: Future<Output = anyhow::Result<Option<String>>>,
{
    flotilla_localenv::wait::until("it", timeout, || async {
        match check(client.clone()).await {
            Ok(None) => Ok(Some(())),
            Ok(Some(missing)) => Err(missing),
            Err(e) => Err(crate::report::line(&e)),
        }
    })
    .await
    .map_err(|e| match e {
        flotilla_localenv::Error::NotReady { message, .. } => anyhow!("{message}"),
        other => other.into(),
    })
}

fn status_of(list: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition], type_: &str) -> String {
    conditions::find(list, type_).map_or_else(|| "Unknown".to_owned(), |c| c.status.clone())
}

async fn clusters_available(client: Client, clusters: &[String]) -> anyhow::Result<Option<String>> {
    let api = Api::<ManagedCluster>::all(client);
    let mut missing = Vec::new();
    for name in clusters {
        let available = api.get_opt(name).await?.and_then(|c| c.status).map(|s| {
            status_of(
                s.conditions.as_deref().unwrap_or_default(),
                mc::CONDITION_AVAILABLE,
            )
        });
        if available.as_deref() != Some(conditions::TRUE) {
            missing.push(format!(
                "{name} Available={}",
                available.unwrap_or_else(|| "absent".into())
            ));
        }
    }
    Ok((!missing.is_empty()).then(|| missing.join(", ")))
}

async fn plugin_ready(client: Client) -> anyhow::Result<Option<String>> {
    let plugin = Api::<AddOnPlugin>::all(client).get_opt(ADDON).await?;
    let ready = plugin
        .and_then(|p| p.status)
        .and_then(|s| conditions::find(&s.conditions, plugin_condition::READY).cloned());
    Ok(match ready {
        Some(c) if c.status == conditions::TRUE => None,
        Some(c) => Some(format!(
            "AddOnPlugin {ADDON} Ready={} ({}: {})",
            c.status, c.reason, c.message
        )),
        None => Some(format!("AddOnPlugin {ADDON} has no Ready condition yet")),
    })
}

async fn addon_works(client: &Client, cluster: &str) -> anyhow::Result<Vec<ManifestWork>> {
    Ok(Api::<ManifestWork>::namespaced(client.clone(), cluster)
        .list(&ListParams::default().labels(&format!("{ADDON_NAME_LABEL}={ADDON}")))
        .await?
        .items)
}

async fn works_applied(client: Client, clusters: &[String]) -> anyhow::Result<Option<String>> {
    let mut missing = Vec::new();
    for cluster in clusters {
        let works = addon_works(&client, cluster).await?;
        if works.is_empty() {
            missing.push(format!("{cluster}: no {ADDON} work yet"));
        }
        for work in works {
            let applied = work
                .status
                .as_ref()
                .map(|s| status_of(&s.conditions, mw::CONDITION_APPLIED))
                .unwrap_or_else(|| "Unknown".into());
            if applied != conditions::TRUE {
                missing.push(format!(
                    "{cluster}/{} Applied={applied}",
                    work.metadata.name.unwrap_or_default()
                ));
            }
        }
    }
    Ok((!missing.is_empty()).then(|| missing.join(", ")))
}

async fn hub_client(env: &Environment) -> anyhow::Result<Client> {
    let path = env
        .hub_kubeconfig()
        .ok_or_else(|| anyhow!("the environment record names no hub"))?;
    let yaml = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    Ok(flotilla_localenv::kubeconfig::client_from_yaml(&yaml).await?)
}

/// Prints clusters, add-ons and works with their conditions, read from the hub.
pub async fn print_end_state(client: &Client, env: &Environment) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut table = tabwriter::TabWriter::new(Vec::new()).padding(3);
    writeln!(table, "CLUSTER\tJOINED\tAVAILABLE")?;
    let clusters = Api::<ManagedCluster>::all(client.clone());
    for name in env.clusters() {
        let conds = clusters
            .get_opt(&name)
            .await?
            .and_then(|c| c.status)
            .and_then(|s| s.conditions)
            .unwrap_or_default();
        writeln!(
            table,
            "{name}\t{}\t{}",
            status_of(&conds, mc::CONDITION_JOINED),
            status_of(&conds, mc::CONDITION_AVAILABLE)
        )?;
    }
    if env.addon {
        writeln!(table, "\nADD-ON\tCLUSTER\tMANIFESTAPPLIED\tAVAILABLE")?;
        for cluster in env.clusters() {
            let addon = Api::<ManagedClusterAddOn>::namespaced(client.clone(), &cluster)
                .get_opt(ADDON)
                .await?;
            let conds = addon
                .and_then(|a| a.status)
                .map(|s| s.conditions)
                .unwrap_or_default();
            writeln!(
                table,
                "{ADDON}\t{cluster}\t{}\t{}",
                status_of(&conds, "ManifestApplied"),
                status_of(&conds, "Available")
            )?;
        }
        writeln!(table, "\nWORK\tCLUSTER\tAPPLIED\tAVAILABLE")?;
        for cluster in env.clusters() {
            for work in addon_works(client, &cluster).await? {
                let conds = work.status.map(|s| s.conditions).unwrap_or_default();
                writeln!(
                    table,
                    "{}\t{cluster}\t{}\t{}",
                    work.metadata.name.unwrap_or_default(),
                    status_of(&conds, mw::CONDITION_APPLIED),
                    status_of(&conds, mw::CONDITION_AVAILABLE)
                )?;
            }
        }
    }
    table.flush()?;
    let text = String::from_utf8(table.into_inner()?)?;
    print!("{text}");
    Ok(())
}

fn print_next_steps(env: &Environment, state: &Path) {
    let kubeconfig = env
        .hub_kubeconfig()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let state_flag = if state == std::path::absolute(".flotilla").unwrap_or_default() {
        String::new()
    } else {
        format!(" --state-dir {}", state.display())
    };
    println!("\nNext, talk to the hub:");
    println!("  export KUBECONFIG={kubeconfig}");
    println!("  kubectl get managedclusters");
    // The control-plane binary carries a kubectl of the same version, for machines without one.
    if let Ok(hub) = flotilla_localenv::controlplane::read_state(&state.join("controlplanes").join(HUB)) {
        println!(
            "  # no kubectl? {} kubectl get managedclusters",
            hub.binary.display()
        );
    }
    println!("  flotilla get addons");
    println!("What runs, and stopping it:");
    println!("  flotilla status{state_flag}");
    println!("  flotilla down{state_flag}");
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

    #[rstest]
    #[case("300s", 300)]
    #[case("5m", 300)]
    #[case("42", 42)]
    fn timeouts_read_seconds_or_minutes(#[case] text: &str, #[case] seconds: u64) {
        assert_eq!(parse_seconds(text), Ok(Duration::from_secs(seconds)));
    }
}
