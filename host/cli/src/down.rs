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

use crate::{cli::GlobalArgs, up};

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

/// Stops every process the state directory records and removes their pid files and the
/// environment record; returns what happened to each. Also stops a klusterlet that
/// `flotilla join --local` started but `up` had no time to record.
pub fn teardown(state: &Path) -> anyhow::Result<Vec<(String, Stopped)>> {
    let records = processes::read_all(state)?;
    let mut outcome = processes::stop(&records, GRACE);
    for record in &records {
        processes::remove(state, &record.name)?;
    }
    if let Ok(entries) = std::fs::read_dir(state.join("klusterlets")) {
        for entry in entries.flatten() {
            let cluster = entry.file_name().to_string_lossy().into_owned();
            if let Some(pid) = crate::local::stop(state, &cluster)?
                && !records.iter().any(|r| r.pid == pid)
            {
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
