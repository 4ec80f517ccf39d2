//! Klusterlets that `flotilla join --local` runs as background processes on this machine, one
//! state directory each (`<state dir>/klusterlets/<key>/state.json`, see [`key`]). They are tied to the
//! managed control plane they serve, so `flotilla controlplane down` can stop the ones attached
//! to the control plane it stops instead of leaving them retrying against a dead address.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// What a `--local` klusterlet leaves in its state directory.
#[derive(Debug, Serialize, Deserialize)]
pub struct LocalKlusterlet {
    /// The process.
    pub pid: u32,
    /// The binary it runs, checked before signalling so a reused pid is never hit.
    pub exe: PathBuf,
    /// Its log file.
    pub log: PathBuf,
    /// The managed cluster's apiserver URL (absent in states written by older versions).
    #[serde(default)]
    pub server: Option<String>,
}

/// The state key of the klusterlet of `cluster` in `agent_namespace`: the cluster name for the
/// default agent namespace (as before several hubs were possible), else
/// `<cluster>@<agent namespace>`, so that one cluster joined to two hubs under the same name
/// keeps one klusterlet per hub.
pub fn key(cluster: &str, agent_namespace: &str) -> String {
    if agent_namespace == flotilla_registration::names::AGENT_NAMESPACE {
        cluster.to_owned()
    } else {
        format!("{cluster}@{agent_namespace}")
    }
}

/// The directory of the local klusterlet of `cluster` (a [`key`]).
pub fn dir(state_dir: &Path, cluster: &str) -> PathBuf {
    state_dir.join("klusterlets").join(cluster)
}

/// The recorded klusterlet of `cluster`, if any.
pub fn read(state_dir: &Path, cluster: &str) -> Option<LocalKlusterlet> {
    let text = std::fs::read_to_string(dir(state_dir, cluster).join("state.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// Records the klusterlet of `cluster`.
pub fn write(state_dir: &Path, cluster: &str, state: &LocalKlusterlet) -> anyhow::Result<()> {
    std::fs::write(
        dir(state_dir, cluster).join("state.json"),
        serde_json::to_string_pretty(state)?,
    )
    .context("record the local klusterlet")
}

/// Stops the klusterlet of `cluster` if one is recorded and removes its state directory;
/// returns the stopped process's id.
pub fn stop(state_dir: &Path, cluster: &str) -> anyhow::Result<Option<u32>> {
    let Some(state) = read(state_dir, cluster) else {
        return Ok(None);
    };
    stop_process(state.pid, &state.exe);
    let dir = dir(state_dir, cluster);
    std::fs::remove_dir_all(&dir).with_context(|| format!("remove {}", dir.display()))?;
    Ok(Some(state.pid))
}

/// Stops every recorded klusterlet whose managed cluster is served at `server`; returns the
/// (cluster, process id) of each one stopped.
pub fn stop_attached(state_dir: &Path, server: &str) -> anyhow::Result<Vec<(String, u32)>> {
    let Ok(entries) = std::fs::read_dir(state_dir.join("klusterlets")) else {
        return Ok(Vec::new());
    };
    let mut stopped = Vec::new();
    for entry in entries.flatten() {
        let cluster = entry.file_name().to_string_lossy().into_owned();
        let attached = read(state_dir, &cluster)
            .and_then(|state| state.server)
            .is_some_and(|s| s.trim_end_matches('/') == server.trim_end_matches('/'));
        if attached && let Some(pid) = stop(state_dir, &cluster)? {
            stopped.push((cluster, pid));
        }
    }
    stopped.sort();
    Ok(stopped)
}

/// Stops a process only if it still runs `exe`: SIGTERM, then SIGKILL after 10 s.
pub fn stop_process(pid: u32, exe: &Path) {
    use nix::{sys::signal, unistd::Pid};
    let runs_exe = || {
        std::fs::read_link(format!("/proc/{pid}/exe"))
            .map(|p| p == exe)
            .unwrap_or(false)
            && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
    };
    if !runs_exe() {
        return;
    }
    let _ = signal::kill(Pid::from_raw(pid as i32), signal::Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(10);
    while runs_exe() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    if runs_exe() {
        let _ = signal::kill(Pid::from_raw(pid as i32), signal::Signal::SIGKILL);
    }
}
