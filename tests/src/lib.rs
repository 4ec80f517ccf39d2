//! Shared helpers for end-to-end scenarios and benchmarks.

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
