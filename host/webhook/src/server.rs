//! The HTTPS server: ManifestWork admission reviews on [`VALIDATE_PATH`], add-on conversion
//! reviews on [`CONVERT_PATH`], each body read under `flotilla_kube::server`'s limits.

use std::{net::SocketAddr, sync::Arc};

use flotilla_api::work::{consts::MAX_MANIFESTS_SIZE, v1::ManifestWorkSpec};
use http_body_util::Full;
use hyper::{Request, Response, body::Bytes, service::service_fn};
use hyper_util::rt::TokioIo;
use kube::core::{
    DynamicObject,
    admission::{AdmissionRequest, AdmissionResponse, AdmissionReview},
    conversion::{ConversionResponse, ConversionReview},
};
use tokio_rustls::TlsAcceptor;

use crate::{CONVERT_PATH, Error, ServingCertificate, VALIDATE_PATH};

/// A running webhook server.
pub struct Webhook {
    /// Where it listens.
    pub addr: SocketAddr,
    /// PEM of the CA that signed its serving certificate (the `caBundle`).
    pub ca_pem: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The message refusing a work whose manifests take `size` bytes, or `None` when it fits.
pub fn size_violation(spec: &ManifestWorkSpec) -> Option<String> {
    let size: usize = spec
        .workload
        .manifests
        .iter()
        .map(|m| serde_json::to_vec(&m.0).map_or(0, |b| b.len()))
        .sum();
    (size > MAX_MANIFESTS_SIZE).then(|| {
        format!(
            "the manifests take {size} bytes, more than the limit of {MAX_MANIFESTS_SIZE} bytes (500 KiB); \
             split them over several ManifestWorks"
        )
    })
}

/// The answer to one admission review.
pub fn review(request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
    let response = AdmissionResponse::from(request);
    let Some(object) = &request.object else {
        return response;
    };
    let spec: ManifestWorkSpec = match object.data.get("spec").cloned().map(serde_json::from_value) {
        Some(Ok(spec)) => spec,
        // Malformed specs are the schema's to refuse.
        _ => return response,
    };
    match size_violation(&spec) {
        Some(message) => response.deny(message),
        None => response,
    }
}

fn plain(status: hyper::StatusCode, text: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = status;
    response
}

async fn handle(
    server: &flotilla_kube::server::Server,
    request: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let path = request.uri().path().to_owned();
    if path != VALIDATE_PATH && path != CONVERT_PATH {
        return Ok(plain(hyper::StatusCode::NOT_FOUND, "not found".to_owned()));
    }
    let (body, _held) = match server.read_body(request.into_body()).await {
        Ok(read) => read,
        Err(refused) => {
            tracing::warn!(%path, %refused, "webhook request refused");
            return Ok(plain(refused.status(), refused.to_string()));
        }
    };
    let bytes = if path == CONVERT_PATH {
        let answer = match serde_json::from_slice::<ConversionReview>(&body) {
            Ok(request) => flotilla_api::addon::conversion::review(request),
            Err(e) => ConversionResponse::invalid(kube::core::Status::failure(
                &format!("decode the ConversionReview: {e}"),
                "BadRequest",
            ))
            .into_review(),
        };
        serde_json::to_vec(&answer).unwrap_or_default()
    } else {
        let answer = match serde_json::from_slice::<AdmissionReview<DynamicObject>>(&body)
            .map_err(|e| e.to_string())
            .and_then(|r| {
                let request: Result<AdmissionRequest<DynamicObject>, _> = r.try_into();
                request.map_err(|e| e.to_string())
            }) {
            Ok(request) => review(&request).into_review(),
            Err(message) => AdmissionResponse::invalid(message).into_review(),
        };
        serde_json::to_vec(&answer).unwrap_or_default()
    };
    let mut response = Response::new(Full::new(Bytes::from(bytes)));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// A server on a free loopback port with a fresh certificate for `127.0.0.1`: the webhook a
/// local apiserver on the same host calls (tests register it by URL).
pub async fn serve_on_loopback() -> Result<Webhook, Error> {
    let certificate = ServingCertificate::issue(&["127.0.0.1".to_owned()])?;
    serve(SocketAddr::from(([127, 0, 0, 1], 0)), &certificate).await
}

/// Starts the server on `bind`, serving `certificate`.
pub async fn serve(bind: SocketAddr, certificate: &ServingCertificate) -> Result<Webhook, Error> {
    let config = certificate
        .server_config()
        .map_err(|problem| Error::Certificate(format!("the serving certificate {problem}")))?;
    let ca_pem = certificate.ca_pem.clone();
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|source| Error::Listen { addr: bind, source })?;
    let addr = listener
        .local_addr()
        .map_err(|source| Error::Listen { addr: bind, source })?;
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let server = flotilla_kube::server::Server::new(flotilla_kube::server::WEBHOOK);
    // Connections live in the accept loop, so stopping the server (dropping [`Webhook`]) also
    // ends the apiserver's kept-alive connections.
    let task = tokio::spawn({
        let accepting = server.clone();
        async move {
            accepting
                .accept(listener, move |stream| {
                    let (acceptor, server) = (acceptor.clone(), server.clone());
                    async move {
                        let handshake = server.limits().handshake;
                        let Ok(Ok(tls)) = tokio::time::timeout(handshake, acceptor.accept(stream)).await
                        else {
                            return;
                        };
                        let service = service_fn(|request| handle(&server, request));
                        let connection = server.http1().serve_connection(TokioIo::new(tls), service);
                        if let Err(error) = connection.await {
                            tracing::debug!(%error, "webhook connection ended");
                        }
                    }
                })
                .await;
        }
    });
    Ok(Webhook { addr, ca_pem, task })
}

#[cfg(test)]
mod tests {
    use flotilla_api::work::v1::{Manifest, ManifestsTemplate};
    use serde_json::json;

    use super::*;

    fn spec(bytes: usize) -> ManifestWorkSpec {
        ManifestWorkSpec {
            workload: ManifestsTemplate {
                manifests: vec![Manifest(json!({
                    "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
                    "data": {"blob": "x".repeat(bytes)},
                }))],
            },
            ..Default::default()
        }
    }

    #[test]
    fn works_over_500_kib_are_refused_with_their_size_and_what_to_do() {
        assert_eq!(size_violation(&spec(1000)), None);
        let message = size_violation(&spec(MAX_MANIFESTS_SIZE)).unwrap();
        assert!(
            message.contains("500 KiB") && message.contains("split"),
            "{message}"
        );
    }
}
