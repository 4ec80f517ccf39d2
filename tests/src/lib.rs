//! Shared helpers for end-to-end scenarios and benchmarks.

pub mod hub_objects;

use std::{
    net::{Ipv4Addr, SocketAddr, TcpStream},
    time::Duration,
};

/// Whether a process with this id is still running. A zombie (exited, not yet reaped — what
/// a detached process becomes when the machine's init does not reap) counts as gone.
pub fn process_exists(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state is the first field after the parenthesised command name.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, Some("Z" | "X"))
}

/// Whether something accepts TCP connections on `127.0.0.1:port`.
pub fn port_is_listening(port: u16) -> bool {
    TcpStream::connect_timeout(
        &SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        Duration::from_millis(300),
    )
    .is_ok()
}

/// The HTTP status code of an API error, if `result` failed with one.
pub fn status_code<T>(result: &Result<T, kube::Error>) -> Option<u16> {
    match result {
        Err(kube::Error::Api(status)) => Some(status.code),
        _ => None,
    }
}

/// CPU seconds (user + system) and resident memory (MiB) of a process, from /proc; zeros when
/// the process is gone.
pub fn process_usage(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // After the command name: state is field 0, utime 11, stime 12 (clock ticks of 1/100 s).
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i)?.parse::<u64>().ok())
        .sum();
    (ticks as f64 / 100.0, status_mib(pid, "VmRSS:"))
}

/// CPU seconds (user + system) and peak resident memory (MiB, `VmHWM`) of a process, from
/// /proc; zeros when the process is gone.
pub fn process_peak_usage(pid: u32) -> (f64, u64) {
    (process_usage(pid).0, status_mib(pid, "VmHWM:"))
}

/// A memory figure of /proc/PID/status (`field` with its colon), in MiB; 0 when unknown.
fn status_mib(pid: u32, field: &str) -> u64 {
    status_kib(pid, field) / 1024
}

/// A memory figure of /proc/PID/status (`field` with its colon, e.g. `VmRSS:`), in KiB; 0
/// when unknown.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// A child process that is killed and reaped when dropped, so a benchmark that fails half-way
/// leaves nothing running.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The plugin loader and the add-on manager on `client` as `flotilla hub` runs them: on one
/// set of shared feeds, until dropped.
pub async fn run_addon_manager(
    client: kube::Client,
    registry: std::sync::Arc<flotilla_wasm::PluginRegistry>,
    options: flotilla_addon_manager::Options,
) {
    let mut feeds = flotilla_kube::feed::Feeds::new(client.clone());
    let loader = flotilla_plugin_loader::controller::start(
        &mut feeds,
        client.clone(),
        std::sync::Arc::clone(&registry),
        Default::default(),
    );
    let manager = flotilla_addon_manager::start(&mut feeds, client, registry, options);
    futures::join!(feeds.run(), loader, manager);
}
