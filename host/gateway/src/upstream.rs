//! One request to a managed kube-apiserver over an opened tunnel: TLS verified against the
//! cluster's CA bundle for the host its URL names, then HTTP/1.1.

use std::{sync::Arc, time::Duration};

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::{
    ClientConfig, RootCertStore,
    pki_types::{CertificateDer, ServerName, pem::PemObject as _},
};
use tokio::net::UnixStream;
use tokio_rustls::TlsConnector;

/// Why a request to a managed apiserver failed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The cluster's URL or CA bundle cannot be used.
    #[error("{0}")]
    Config(String),
    /// TLS or HTTP failed.
    #[error("{0}")]
    Failed(String),
    /// No answer in time.
    #[error("no answer from its kube-apiserver within {0:?}")]
    Timeout(Duration),
}

/// A managed kube-apiserver: where to send, and how to verify it.
#[derive(Clone, Debug)]
pub struct Target {
    /// `host:port` of its URL (the `Host` header).
    pub authority: String,
    server_name: ServerName<'static>,
    tls: Arc<ClientConfig>,
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
        Ok(Self {
            authority: format!("{host}:{port}"),
            server_name,
            tls: Arc::new(tls),
        })
    }
}

/// Sends `request` over `stream` (a tunnel to the target) and returns the answer's head with
/// its body streaming. The handshake and the answer's head each have a deadline; the body has
/// none, so watches run as long as the caller keeps them.
pub async fn send<B>(
    stream: UnixStream,
    target: &Target,
    request: Request<B>,
    handshake_deadline: Duration,
    answer_deadline: Duration,
) -> Result<Response<Incoming>, UpstreamError>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let failed = |m: String| UpstreamError::Failed(m);
    let connector = TlsConnector::from(target.tls.clone());
    let tls = tokio::time::timeout(
        handshake_deadline,
        connector.connect(target.server_name.clone(), stream),
    )
    .await
    .map_err(|_| UpstreamError::Timeout(handshake_deadline))?
    .map_err(|e| failed(format!("TLS with its kube-apiserver: {e}")))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| failed(format!("HTTP with its kube-apiserver: {e}")))?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "managed apiserver connection ended");
        }
    });
    tokio::time::timeout(answer_deadline, sender.send_request(request))
        .await
        .map_err(|_| UpstreamError::Timeout(answer_deadline))?
        .map_err(|e| failed(format!("request to its kube-apiserver: {e}")))
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
