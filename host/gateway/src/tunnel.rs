//! The hub's end of the cluster-proxy tunnel: a connection to a managed cluster's
//! kube-apiserver, opened with `CONNECT <cluster>:443` on the tunnel server's unix socket.
//!
//! The server answers 200 and then relays bytes, 503 when the cluster has no connected agent,
//! 502 when the agent could not take the connection. Everything here is bounded: the
//! cluster name is checked before it is written into the request line, the answer's head is
//! read up to [`MAX_HEAD`] bytes, and the whole exchange has a deadline.

use std::{path::Path, time::Duration};

use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::UnixStream,
};

/// The longest answer head accepted from the tunnel server.
const MAX_HEAD: usize = 8 * 1024;
/// The longest list of connected clusters read (some 50 000 names).
const MAX_LIST: usize = 4 << 20;

/// Why no tunnel was opened.
#[derive(Debug, thiserror::Error)]
pub enum TunnelError {
    /// The name cannot be a managed cluster's (a DNS-1123 label).
    #[error("{0:?} is not a managed cluster name")]
    InvalidCluster(String),
    /// The cluster's agent is not connected to the tunnel server.
    #[error("{0}")]
    NotConnected(String),
    /// The tunnel server or the agent failed to open the connection.
    #[error("open a tunnel to cluster {cluster}: {message}")]
    Dial {
        /// The cluster.
        cluster: String,
        /// What failed.
        message: String,
    },
    /// No answer within the deadline.
    #[error("open a tunnel to cluster {0}: no answer within {1:?}")]
    Timeout(String, Duration),
}

/// Whether `name` is a DNS-1123 label, as a managed cluster's name (its namespace) must be.
pub fn is_cluster_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first() != Some(&b'-')
        && bytes.last() != Some(&b'-')
}

/// Opens a connection to `cluster`'s kube-apiserver through the tunnel server at `socket`.
pub async fn connect(socket: &Path, cluster: &str, deadline: Duration) -> Result<UnixStream, TunnelError> {
    if !is_cluster_name(cluster) {
        return Err(TunnelError::InvalidCluster(cluster.to_owned()));
    }
    tokio::time::timeout(deadline, open(socket, cluster))
        .await
        .map_err(|_| TunnelError::Timeout(cluster.to_owned(), deadline))?
}

async fn open(socket: &Path, cluster: &str) -> Result<UnixStream, TunnelError> {
    let dial = |message: String| TunnelError::Dial {
        cluster: cluster.to_owned(),
        message,
    };
    let mut stream = UnixStream::connect(socket)
        .await
        .map_err(|e| dial(format!("reach the tunnel server at {}: {e}", socket.display())))?;
    let request = format!("CONNECT {cluster}:443 HTTP/1.1\r\nHost: {cluster}:443\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| dial(format!("send CONNECT: {e}")))?;

    // Read byte by byte up to the blank line: what follows belongs to the tunnelled stream.
    let mut head = Vec::with_capacity(128);
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_HEAD {
            return Err(dial(format!("answer head over {MAX_HEAD} bytes")));
        }
        let byte = stream
            .read_u8()
            .await
            .map_err(|e| dial(format!("read the answer: {e}")))?;
        head.push(byte);
    }
    let head = String::from_utf8_lossy(&head);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| {
            dial(format!(
                "malformed answer {:?}",
                head.lines().next().unwrap_or("")
            ))
        })?;
    match status {
        200 => Ok(stream),
        _ => {
            // The server's errors are short plain-text bodies; read what comes, bounded.
            let mut body = vec![0; 1024];
            let read = tokio::time::timeout(Duration::from_secs(1), stream.read(&mut body))
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or(0);
            let message = String::from_utf8_lossy(&body[..read]).trim().to_owned();
            if status == 503 {
                Err(TunnelError::NotConnected(message))
            } else {
                Err(dial(format!("{status}: {message}")))
            }
        }
    }
}

/// The clusters whose agents are connected to the tunnel server at `socket`. Read with
/// hyper's client: the server may answer a long list in chunks.
pub async fn connected(socket: &Path, deadline: Duration) -> Result<Vec<String>, TunnelError> {
    let dial = |message: String| TunnelError::Dial {
        cluster: String::new(),
        message,
    };
    let exchange = async {
        let stream = UnixStream::connect(socket)
            .await
            .map_err(|e| dial(format!("reach the tunnel server at {}: {e}", socket.display())))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| dial(format!("HTTP with the tunnel server: {e}")))?;
        tokio::spawn(connection);
        let request = http::Request::get("/clusters")
            .header(http::header::HOST, "tunnel")
            .body(Empty::<Bytes>::new())
            .map_err(|e| dial(format!("GET /clusters: {e}")))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| dial(format!("GET /clusters: {e}")))?;
        // An error's body is no list, whatever it holds.
        if response.status() != http::StatusCode::OK {
            return Err(dial(format!("GET /clusters: {}", response.status())));
        }
        let body = Limited::new(response.into_body(), MAX_LIST)
            .collect()
            .await
            .map_err(|e| dial(format!("read the cluster list: {e}")))?
            .to_bytes();
        #[derive(serde::Deserialize)]
        struct List {
            clusters: Vec<String>,
        }
        serde_json::from_slice::<List>(&body)
            .map(|list| list.clusters)
            .map_err(|e| dial(format!("parse the cluster list: {e}")))
    };
    tokio::time::timeout(deadline, exchange)
        .await
        .map_err(|_| TunnelError::Timeout("(list)".into(), deadline))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_dns_labels_are_cluster_names() {
        for good in ["c1", "cluster-a", "a", &"x".repeat(63)] {
            assert!(is_cluster_name(good), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a.b",
            "a:443",
            "a\r\nHost: evil",
            "a b",
            &"x".repeat(64),
        ] {
            assert!(!is_cluster_name(bad), "{bad:?}");
        }
    }
}
