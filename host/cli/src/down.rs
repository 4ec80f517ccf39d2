//! `flotilla down`: stops everything a `flotilla up` state directory records — klusterlets,
//! hub, registry, control planes, in reverse start order; SIGTERM, then SIGKILL after a grace
//! period — removes the pid files, and checks that no recorded port still accepts connections.
//! `--purge` also deletes the state directory (control-plane data, logs, keys).

use std::{
    net::{Ipv4Addr, SocketAddr, TcpStream},
    path::Path,
    time::Duration,
};

use anyhow::{Context as _, bail};
use clap::Args;
use flotilla_localenv::{
    ports::Layout,
    processes::{self, Stopped},
};

use flotilla_localenv::{klusterlets, up};

use crate::cli::GlobalArgs;

/// How long a process may take to exit after SIGTERM before it is killed.
const GRACE: Duration = Duration::from_secs(10);

#[derive(Debug, Args)]
pub struct DownArgs {
    /// Also delete the state directory: control-plane data, keys and logs.
    #[arg(long)]
    pub purge: bool,
}

/// Runs `flotilla down`.
pub async fn down(global: &GlobalArgs, args: &DownArgs) -> anyhow::Result<()> {
    let state = std::path::absolute(&global.state_dir)
        .with_context(|| format!("resolve {}", global.state_dir.display()))?;
    if !state.exists() {
        eprintln!("nothing to stop: {} does not exist", state.display());
        return Ok(());
    }
    let _lock = lock(&state)?;
    // Every port of the environment's layout must be free afterwards, not only the recorded ones.
    let mut ports: Vec<u16> = processes::read_all(&state)?
        .iter()
        .filter_map(|r| r.port)
        .collect();
    if let Some(env) = up::read_env(&state)?
        && let Ok(layout) = Layout::new(env.base_port, u16::try_from(env.clusters().len()).unwrap_or(0))
    {
        ports.extend(layout.all().into_iter().map(|(_, port)| port));
    }
    ports.sort_unstable();
    ports.dedup();
    let stopped = tokio::task::spawn_blocking({
        let state = state.clone();
        move || teardown(&state)
    })
    .await??;
    if stopped.is_empty() {
        eprintln!("nothing was running under {}", state.display());
    }
    for (name, how) in &stopped {
        let how = match how {
            Stopped::NotRunning => "was not running",
            Stopped::Terminated => "stopped",
            Stopped::Killed => "killed after ignoring SIGTERM",
        };
        eprintln!("{name}: {how}");
    }
    let open: Vec<String> = ports
        .iter()
        .filter(|port| {
            TcpStream::connect_timeout(
                &SocketAddr::from((Ipv4Addr::LOCALHOST, **port)),
                Duration::from_millis(200),
            )
            .is_ok()
        })
        .map(u16::to_string)
        .collect();
    if !open.is_empty() {
        bail!(
            "everything recorded was stopped, but port(s) {} still accept connections: another program listens there",
            open.join(", ")
        );
    }
    if args.purge {
        std::fs::remove_dir_all(&state).with_context(|| format!("remove {}", state.display()))?;
        eprintln!("removed {}", state.display());
    }
    Ok(())
}

/// Takes the state directory's lock for as long as the returned file lives, so that two `up`
/// or `down` never work on one environment at once.
pub fn lock(state: &Path) -> anyhow::Result<std::fs::File> {
    std::fs::create_dir_all(state).with_context(|| format!("create {}", state.display()))?;
    let path = state.join(".lock");
    let file = std::fs::File::create(&path).with_context(|| format!("create {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "another `flotilla up` or `flotilla down` is working on {} right now; wait for it to end",
            state.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => Err(e).with_context(|| format!("lock {}", path.display())),
    }
}

/// Stops every process the state directory records, releases what its nodes held, and removes
/// the pid files and the environment record; returns what happened to each process. Also stops a klusterlet that
/// `flotilla join --local` started but `up` had no time to record.
pub fn teardown(state: &Path) -> anyhow::Result<Vec<(String, Stopped)>> {
    let records = processes::read_all(state)?;
    // The nodes first, and their containers with them (what they held: network namespaces,
    // mounts, bridges, iptables rules): an agent pod left running would keep its watches on the
    // hub open while the hub's apiserver shuts down, and that waits for them.
    let (node_records, others): (Vec<_>, Vec<_>) = records
        .iter()
        .cloned()
        .partition(|r| r.name.contains(up::NODE_PROCESS_INFIX));
    let mut outcome = processes::stop(&node_records, GRACE);
    if let Ok(entries) = std::fs::read_dir(state.join(up::NODES_DIR)) {
        for entry in entries.flatten() {
            flotilla_localenv::node::release(&entry.path());
        }
    }
    outcome.extend(processes::stop(&others, GRACE));
    for record in &records {
        processes::remove(state, &record.name)?;
    }
    // Their directories stay: the klusterlet logs are what a person reads after a failure.
    if let Ok(entries) = std::fs::read_dir(state.join("klusterlets")) {
        for entry in entries.flatten() {
            let cluster = entry.file_name().to_string_lossy().into_owned();
            if let Some(klusterlet) = klusterlets::read(state, &cluster)
                && !records.iter().any(|r| r.pid == klusterlet.pid)
                && processes::runs(klusterlet.pid, &klusterlet.exe)
            {
                klusterlets::stop_process(klusterlet.pid, &klusterlet.exe);
                outcome.push((format!("klusterlet-{cluster}"), Stopped::Terminated));
            }
        }
    }
    let env = state.join(up::ENV_FILE);
    if env.exists() {
        std::fs::remove_file(&env).with_context(|| format!("remove {}", env.display()))?;
    }
    Ok(outcome)
}
