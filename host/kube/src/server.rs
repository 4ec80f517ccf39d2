//! Limits of the HTTP servers anyone on the network can reach (the hub's webhook, the
//! metrics and health endpoint): a bounded number of connections, deadlines on the TLS
//! handshake, on request headers (which also close idle kept-alive connections) and on bodies,
//! and bodies capped per request and in total. A client that opens thousands of connections
//! and never speaks, dribbles headers, or streams a body without end holds a slot and a few
//! kilobytes for a deadline, never the process's memory or its other clients.
//!
//! ```text
//!  accept ─▶ slots full? ─yes─▶ closed at once
//!            └─▶ TLS handshake (deadline) ─▶ headers (deadline, also between requests)
//!                 ─▶ body: frames taken from a shared byte budget, cap per request, deadline
//!                    ─▶ too large 413 · too slow 408 · otherwise the handler
//! ```

use std::{future::Future, sync::Arc, time::Duration};

use http_body_util::BodyExt as _;
use hyper::body::{Bytes, Incoming};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::Semaphore,
};

/// What one server allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; more are closed as they arrive.
    pub max_connections: usize,
    /// Time for a client's TLS handshake.
    pub handshake: Duration,
    /// Time for a request's headers, counted from when the server waits for them (so an idle
    /// kept-alive connection closes after it too).
    pub headers: Duration,
    /// Time for a request's body.
    pub body: Duration,
    /// Largest body of one request.
    pub max_body_bytes: usize,
    /// Bytes of bodies held at once across all requests.
    pub body_budget_bytes: usize,
}

/// The hub's webhook: the apiserver is its client. Its own webhook timeout is 10 s, so a
/// request slower than that is answered to nobody. A body holds an AdmissionReview (an object
/// and its old version, each within the apiserver's 3 MiB request limit) or a ConversionReview,
/// which carries every object of a LIST to convert: 32 MiB is some 15 000 add-ons.
pub const WEBHOOK: Limits = Limits {
    max_connections: 4096,
    handshake: Duration::from_secs(10),
    headers: Duration::from_secs(30),
    body: Duration::from_secs(10),
    max_body_bytes: 32 << 20,
    body_budget_bytes: 128 << 20,
};

/// The metrics and health endpoint: probes and scrapers send GETs without bodies.
pub const OPS: Limits = Limits {
    max_connections: 256,
    handshake: Duration::from_secs(10),
    headers: Duration::from_secs(30),
    body: Duration::from_secs(5),
    max_body_bytes: 64 << 10,
    body_budget_bytes: 1 << 20,
};

/// A body the server would not read whole.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BodyError {
    /// Over [`Limits::max_body_bytes`]: 413.
    #[error("request body over {limit} bytes")]
    TooLarge {
        /// The cap.
        limit: usize,
    },
    /// Not received within [`Limits::body`] (budget waits included): 408.
    #[error("request body not received within {0:?}")]
    TooSlow(Duration),
    /// The connection failed while reading it: 400.
    #[error("read the request body: {0}")]
    Read(String),
}

impl BodyError {
    /// The HTTP status to answer with.
    pub fn status(&self) -> hyper::StatusCode {
        match self {
            Self::TooLarge { .. } => hyper::StatusCode::PAYLOAD_TOO_LARGE,
            Self::TooSlow(_) => hyper::StatusCode::REQUEST_TIMEOUT,
            Self::Read(_) => hyper::StatusCode::BAD_REQUEST,
        }
    }
}

/// One server's limits and its shared body budget.
#[derive(Clone, Debug)]
pub struct Server {
    limits: Limits,
    /// Permits are KiB of body held.
    budget: Arc<Semaphore>,
}

impl Server {
    /// A server with `limits`.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            budget: Arc::new(Semaphore::new(limits.body_budget_bytes.div_ceil(1024))),
        }
    }

    /// Its limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// An HTTP/1 connection builder with the header deadline.
    pub fn http1(&self) -> hyper::server::conn::http1::Builder {
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(self.limits.headers);
        builder
    }

    /// Reads `body` whole within the limits. The bytes stay counted against the shared budget
    /// until the returned guard drops.
    pub async fn read_body(&self, body: Incoming) -> Result<(Bytes, BodyPermit), BodyError> {
        let deadline = self.limits.body;
        tokio::time::timeout(deadline, self.read_frames(body))
            .await
            .unwrap_or(Err(BodyError::TooSlow(deadline)))
    }

    async fn read_frames(&self, mut body: Incoming) -> Result<(Bytes, BodyPermit), BodyError> {
        let limit = self.limits.max_body_bytes;
        let mut collected = Vec::new();
        let mut permit = BodyPermit {
            budget: self.budget.clone(),
            kib: 0,
        };
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| BodyError::Read(e.to_string()))?;
            let Ok(data) = frame.into_data() else {
                continue; // trailers
            };
            if collected.len() + data.len() > limit {
                return Err(BodyError::TooLarge { limit });
            }
            let needed = (collected.len() + data.len()).div_ceil(1024);
            if needed > permit.kib {
                let more = u32::try_from(needed - permit.kib).unwrap_or(u32::MAX);
                self.budget
                    .acquire_many(more)
                    .await
                    .map_err(|e| BodyError::Read(e.to_string()))?
                    .forget();
                permit.kib = needed;
            }
            collected.extend_from_slice(&data);
        }
        Ok((Bytes::from(collected), permit))
    }

    /// Accepts connections on `listener` until the returned future is dropped, serving each with
    /// `serve` while fewer than [`Limits::max_connections`] are open and closing it otherwise.
    /// Dropping the future ends every connection it serves.
    pub async fn accept<F, Fut>(&self, listener: TcpListener, serve: F)
    where
        F: Fn(TcpStream) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of file descriptors, mostly: accepting again at once would spin.
                    tracing::warn!(%error, "accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            while connections.try_join_next().is_some() {}
            if connections.len() >= self.limits.max_connections {
                tracing::debug!(
                    max = self.limits.max_connections,
                    "connection refused: all slots taken"
                );
                continue;
            }
            connections.spawn(serve(stream));
        }
    }
}

/// Bytes of a body counted against its server's budget while this lives.
#[derive(Debug)]
pub struct BodyPermit {
    budget: Arc<Semaphore>,
    kib: usize,
}

impl Drop for BodyPermit {
    fn drop(&mut self) {
        self.budget.add_permits(self.kib);
    }
}
