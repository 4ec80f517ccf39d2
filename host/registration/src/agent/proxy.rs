//! The hub client's proxy diagnosis: a layer on the client's tower stack that turns a request
//! failed on the way through the forward proxy into an error naming the proxy, the leg that
//! failed and what to fix ([`flotilla_core::registration::agent::proxy`] decides the words).
//!
//! hyper-util's tunnel connector drops the status with which a proxy refused CONNECT (it only
//! says "unsuccessful"); when that happens the layer asks the proxy once more, with hyper's
//! HTTP/1 client over kube's own connector to the proxy (same TLS roots), and reports the
//! status it answers. That second request is a diagnosis only; the tunnels themselves are
//! always kube's.

use std::{sync::Arc, time::Duration};

use flotilla_core::registration::agent::proxy::{self, ProxyFault};
use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::client::legacy::connect::HttpConnector;
use kube::client::ConfigExt as _;
use tower::ServiceExt as _;

/// A boxed error as the client stack carries it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long the status probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// A request failed on the way through the proxy; the message says which leg and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ProxyError {
    message: String,
    /// The client's own error.
    #[source]
    source: BoxError,
}

/// What the layer needs to explain a failure: the proxy, the hub and the client's settings.
#[derive(Clone)]
pub(crate) struct Diagnosis(Arc<Inner>);

struct Inner {
    /// The proxy URL as configured (with any credentials: the probe needs the real URL).
    proxy_url: http::Uri,
    /// The proxy URL without a password, for messages.
    shown: String,
    /// `host:port` of the hub.
    hub: String,
    /// The client's settings (TLS roots for an https proxy).
    config: kube::Config,
}

impl Diagnosis {
    /// For a client with `config`; `None` without a proxy.
    pub(crate) fn new(config: &kube::Config) -> Option<Self> {
        let proxy_url = config.proxy_url.clone()?;
        let hub = match (config.cluster_url.host(), config.cluster_url.port_u16()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) if config.cluster_url.scheme_str() == Some("http") => format!("{host}:80"),
            (Some(host), None) => format!("{host}:443"),
            _ => config.cluster_url.to_string(),
        };
        Some(Self(Arc::new(Inner {
            shown: redact(&proxy_url),
            proxy_url,
            hub,
            config: config.clone(),
        })))
    }

    /// `error` as it should reach the caller: a [`ProxyError`] when the proxy leg failed.
    pub(crate) async fn explain(&self, error: BoxError) -> BoxError {
        let chain = causes(&*error);
        let Some(fault) = proxy::classify(&chain) else {
            return error;
        };
        let status = match fault {
            ProxyFault::TunnelRefused => self.connect_status().await,
            _ => None,
        };
        match proxy::diagnose(&self.0.shown, &self.0.hub, &chain, status.as_deref()) {
            Some(message) => Box::new(ProxyError {
                message,
                source: error,
            }),
            None => error,
        }
    }

    /// Asks the proxy for a tunnel to the hub once and returns its status (`403 Forbidden`);
    /// `None` if that cannot be learnt (the proxy wants credentials, which the probe does not
    /// send, or the probe fails too).
    async fn connect_status(&self) -> Option<String> {
        let inner = &self.0;
        if inner.proxy_url.authority()?.as_str().contains('@') {
            return None;
        }
        let probe = async {
            let mut http = HttpConnector::new();
            http.enforce_http(false);
            let connector = inner.config.rustls_https_connector_with_connector(http).ok()?;
            let io = connector.oneshot(inner.proxy_url.clone()).await.ok()?;
            let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await.ok()?;
            let connection = tokio::spawn(connection);
            let request = http::Request::connect(inner.hub.as_str())
                .header(http::header::HOST, inner.hub.as_str())
                .body(Empty::<Bytes>::new())
                .ok()?;
            let response = sender.send_request(request).await.ok();
            connection.abort();
            let status = response?.status();
            Some(match status.canonical_reason() {
                Some(reason) => format!("{} {reason}", status.as_u16()),
                None => status.as_u16().to_string(),
            })
        };
        tokio::time::timeout(PROBE_TIMEOUT, probe).await.ok().flatten()
    }
}

/// The proxy URL without credentials, for messages.
fn redact(url: &http::Uri) -> String {
    match url.authority() {
        Some(authority) if authority.as_str().contains('@') => {
            let host = authority.as_str().rsplit('@').next().unwrap_or_default();
            format!("{}://{host}", url.scheme_str().unwrap_or("http"))
        }
        _ => url.to_string().trim_end_matches('/').to_owned(),
    }
}

/// The messages of `error` and its causes, outermost first.
fn causes(error: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut chain = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        chain.push(cause.to_string());
        source = cause.source();
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_is_shown_without_its_password() {
        let url: http::Uri = "http://user:secret@proxy:3128".parse().unwrap();
        assert_eq!(redact(&url), "http://proxy:3128");
        let url: http::Uri = "https://proxy:3129".parse().unwrap();
        assert_eq!(redact(&url), "https://proxy:3129");
    }

    #[test]
    fn the_hub_is_named_with_its_port() {
        let mut config = kube::Config::new("https://hub.example".parse().unwrap());
        config.proxy_url = Some("http://proxy:3128".parse().unwrap());
        assert_eq!(Diagnosis::new(&config).unwrap().0.hub, "hub.example:443");
        config.cluster_url = "https://10.0.0.1:6443".parse().unwrap();
        assert_eq!(Diagnosis::new(&config).unwrap().0.hub, "10.0.0.1:6443");
        config.proxy_url = None;
        assert!(Diagnosis::new(&config).is_none());
    }
}
