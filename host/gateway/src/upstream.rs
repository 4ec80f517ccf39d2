//! Requests to managed kube-apiservers: through each cluster's tunnel, TLS verified against
//! the cluster's CA bundle for the host its URL names, HTTP/1.1 on kept-alive connections.

use std::{
    collections::HashMap,
    hash::{Hash as _, Hasher as _},
    path::PathBuf,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::Duration,
};

use http::{Request, Response, Uri};
use http_body_util::combinators::BoxBody;
use hyper::body::{Bytes, Incoming};
use hyper_util::{
    client::legacy::{
        Client,
        connect::{Connected, Connection},
    },
    rt::{TokioExecutor, TokioIo},
};
use rustls::{
    ClientConfig, RootCertStore,
    pki_types::{CertificateDer, ServerName, pem::PemObject as _},
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::UnixStream,
};
use tokio_rustls::{TlsConnector, client::TlsStream};

use crate::tunnel::{self, TunnelError};

/// Why a request to a managed apiserver failed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The cluster's URL or CA bundle cannot be used.
    #[error("{0}")]
    Config(String),
    /// The cluster's agent is not connected to the tunnel server.
    #[error("{0}")]
    NotConnected(String),
    /// The tunnel, TLS or HTTP failed.
    #[error("{0}")]
    Failed(String),
    /// No answer in time.
    #[error("no answer from its kube-apiserver within {0:?}")]
    Timeout(Duration),
}

/// The name every kube-apiserver's serving certificate carries, as its cluster's pods call it.
pub const IN_CLUSTER_URL: &str = "https://kubernetes.default.svc";

/// A managed kube-apiserver: where to send, and how to verify it.
#[derive(Clone, Debug)]
pub struct Target {
    /// `host:port` of its URL (the `Host` header).
    pub authority: String,
    server_name: ServerName<'static>,
    tls: Arc<ClientConfig>,
    /// Of the URL and CA bundle: connections are reused only for the same.
    fingerprint: u64,
}

impl Target {
    /// The target of a ManagedCluster's client config: an `https` URL and the CA bundle that
    /// verifies it. There is no target without a CA bundle: the gateway never sends a token
    /// to a server it cannot verify.
    pub fn new(url: &str, ca_bundle: Option<&[u8]>) -> Result<Self, UpstreamError> {
        let config = |m: String| UpstreamError::Config(m);
        let uri: http::Uri = url
            .parse()
            .map_err(|e| config(format!("kube-apiserver URL {url:?}: {e}")))?;
        if uri.scheme_str() != Some("https") {
            return Err(config(format!("kube-apiserver URL {url:?} is not https")));
        }
        let host = uri
            .host()
            .ok_or_else(|| config(format!("kube-apiserver URL {url:?} has no host")))?;
        let port = uri.port_u16().unwrap_or(443);
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let server_name = ServerName::try_from(bare.to_owned())
            .map_err(|e| config(format!("kube-apiserver host {host:?}: {e}")))?;
        let ca = ca_bundle.filter(|b| !b.is_empty()).ok_or_else(|| {
            config(
                "no CA bundle for its kube-apiserver (spec.managedClusterClientConfigs[0].caBundle)".into(),
            )
        })?;
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca) {
            let cert = cert.map_err(|e| config(format!("parse its CA bundle: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| config(format!("add its CA bundle: {e}")))?;
        }
        if roots.is_empty() {
            return Err(config("its CA bundle holds no certificate".into()));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| config(format!("choose TLS versions: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (url, ca).hash(&mut hasher);
        Ok(Self {
            authority: format!("{host}:{port}"),
            server_name,
            tls: Arc::new(tls),
            fingerprint: hasher.finish(),
        })
    }
}

/// A request or response body as the gateway passes it on.
pub type Body = BoxBody<Bytes, hyper::Error>;

/// Kept-alive connections to the managed apiservers, each through its cluster's tunnel: a
/// request reuses an idle connection to the same cluster and target instead of a new tunnel
/// and TLS handshake. hyper-util's pooling client does the pooling; this crate supplies the
/// connector (tunnel, then TLS).
#[derive(Clone)]
pub struct Upstreams {
    client: Client<TunnelConnector, Body>,
    targets: Arc<Mutex<HashMap<String, Target>>>,
    answer_deadline: Duration,
}

impl Upstreams {
    /// Connections through the tunnel server at `socket`; opening one (tunnel and TLS) may
    /// take `connect_deadline`, an answer's head `answer_deadline`.
    pub fn new(socket: PathBuf, connect_deadline: Duration, answer_deadline: Duration) -> Self {
        let targets: Arc<Mutex<HashMap<String, Target>>> = Arc::default();
        let connector = TunnelConnector {
            socket: Arc::new(socket),
            targets: targets.clone(),
            deadline: connect_deadline,
        };
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE)
            .pool_max_idle_per_host(MAX_IDLE_PER_CLUSTER)
            .set_host(false)
            .build(connector);
        Self {
            client,
            targets,
            answer_deadline,
        }
    }

    /// Sends `request` (its URI a path and query) to `cluster`'s apiserver at `target`, and
    /// returns the answer's head with its body streaming. The body has no deadline, so
    /// watches run as long as the caller keeps them.
    pub async fn send(
        &self,
        cluster: &str,
        target: &Target,
        mut request: Request<Body>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        // The connector takes the cluster from the key up to its first dot: `c1.x` would
        // otherwise open cluster c1's tunnel.
        if !tunnel::is_cluster_name(cluster) {
            return Err(UpstreamError::Failed(
                TunnelError::InvalidCluster(cluster.to_owned()).to_string(),
            ));
        }
        // The pool's key: the cluster and what its connections were made for, so a changed
        // URL or CA bundle never reuses a connection made for the old one.
        let key = format!("{cluster}.{:016x}", target.fingerprint);
        lock(&self.targets).insert(key.clone(), target.clone());
        let path = request
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_else(|| "/".to_owned());
        *request.uri_mut() = format!("http://{key}{path}")
            .parse()
            .map_err(|e| UpstreamError::Failed(format!("request URI: {e}")))?;
        match tokio::time::timeout(self.answer_deadline, self.client.request(request)).await {
            Err(_) => Err(UpstreamError::Timeout(self.answer_deadline)),
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => Err(classify(&e)),
        }
    }
}

/// How long an idle connection is kept.
const IDLE: Duration = Duration::from_secs(90);
/// Idle connections kept per cluster.
const MAX_IDLE_PER_CLUSTER: usize = 8;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The error of a pooled request, with the tunnel's own errors kept apart.
fn classify(error: &hyper_util::client::legacy::Error) -> UpstreamError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(connect) = e.downcast_ref::<ConnectError>() {
            return match connect {
                ConnectError::Tunnel(TunnelError::NotConnected(m)) => UpstreamError::NotConnected(m.clone()),
                ConnectError::Tunnel(TunnelError::Timeout(_, d)) | ConnectError::Timeout(d) => {
                    UpstreamError::Timeout(*d)
                }
                other => UpstreamError::Failed(other.to_string()),
            };
        }
        source = e.source();
    }
    UpstreamError::Failed(format!("request to its kube-apiserver: {error}"))
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("{0}")]
    Tunnel(TunnelError),
    #[error("TLS with its kube-apiserver: {0}")]
    Tls(std::io::Error),
    #[error("no TLS handshake with its kube-apiserver within {0:?}")]
    Timeout(Duration),
    #[error("no target for {0}")]
    UnknownTarget(String),
}

/// Opens connections for the pool: the tunnel to the cluster the URI's host names, then TLS.
#[derive(Clone)]
struct TunnelConnector {
    socket: Arc<PathBuf>,
    targets: Arc<Mutex<HashMap<String, Target>>>,
    deadline: Duration,
}

impl tower::Service<Uri> for TunnelConnector {
    type Response = TokioIo<Tunnelled>;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, ConnectError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ConnectError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let key = uri.host().unwrap_or_default().to_owned();
        let target = lock(&self.targets).get(&key).cloned();
        let (socket, deadline) = (self.socket.clone(), self.deadline);
        Box::pin(async move {
            let target = target.ok_or_else(|| ConnectError::UnknownTarget(key.clone()))?;
            let cluster = key.split_once('.').map_or(key.as_str(), |(c, _)| c);
            let stream = tunnel::connect(&socket, cluster, deadline)
                .await
                .map_err(ConnectError::Tunnel)?;
            let connector = TlsConnector::from(target.tls.clone());
            let tls = tokio::time::timeout(deadline, connector.connect(target.server_name.clone(), stream))
                .await
                .map_err(|_| ConnectError::Timeout(deadline))?
                .map_err(ConnectError::Tls)?;
            Ok(TokioIo::new(Tunnelled(tls)))
        })
    }
}

/// A TLS connection through a tunnel, as the pool holds it.
pub struct Tunnelled(TlsStream<UnixStream>);

impl Connection for Tunnelled {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl AsyncRead for Tunnelled {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tunnelled {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_needs_https_and_a_ca_bundle() {
        let ca = rcgen::CertificateParams::new(vec!["ca".to_owned()])
            .unwrap()
            .self_signed(&rcgen::KeyPair::generate().unwrap())
            .unwrap()
            .pem();
        let target = Target::new("https://127.0.0.1:6443", Some(ca.as_bytes())).unwrap();
        assert_eq!(target.authority, "127.0.0.1:6443");
        assert_eq!(
            Target::new("https://api.example", Some(ca.as_bytes()))
                .unwrap()
                .authority,
            "api.example:443"
        );
        for (url, bundle) in [
            ("http://127.0.0.1:6443", Some(ca.as_bytes())),
            ("https://127.0.0.1:6443", None),
            ("https://127.0.0.1:6443", Some(&b""[..])),
            ("https://127.0.0.1:6443", Some(&b"not pem"[..])),
            ("not a url", Some(ca.as_bytes())),
        ] {
            assert!(Target::new(url, bundle).is_err(), "{url} {bundle:?}");
        }
    }
}
