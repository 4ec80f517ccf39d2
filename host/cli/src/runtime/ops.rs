//! The operations endpoint of `flotilla hub` and `flotilla klusterlet`: `/metrics` (Prometheus
//! text), `/healthz` (the process serves) and `/readyz` (its apiserver is ready, storage
//! included, and every controller's cache has synced), on one plain-HTTP port as kubelet probes and Prometheus
//! scrapes expect.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;

/// How long `/readyz` waits for the apiserver before calling it unreachable.
const APISERVER_TIMEOUT: Duration = Duration::from_secs(2);

/// What the endpoint serves.
struct State {
    registry: Registry,
    client: kube::Client,
}

/// Binds `bind` and serves the endpoint in the background; returns the bound address (port 0
/// picks a free one).
pub async fn serve(bind: SocketAddr, registry: Registry, client: kube::Client) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("bind the metrics and health endpoint to {bind}"))?;
    let addr = listener.local_addr().context("read the endpoint's address")?;
    let state = Arc::new(State { registry, client });
    let server = flotilla_kube::server::Server::new(flotilla_kube::server::OPS);
    tokio::spawn({
        let accepting = server.clone();
        async move {
            accepting
                .accept(listener, move |stream| {
                    let (state, server) = (state.clone(), server.clone());
                    async move {
                        let service = service_fn(move |request| {
                            let state = state.clone();
                            async move { Ok::<_, std::convert::Infallible>(handle(&state, &request).await) }
                        });
                        let served = server
                            .http1()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                        if let Err(error) = served {
                            tracing::debug!(%error, "metrics and health connection ended");
                        }
                    }
                })
                .await;
        }
    });
    Ok(addr)
}

async fn handle(state: &State, request: &Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    match request.uri().path() {
        "/metrics" => {
            let mut text = String::new();
            match prometheus_client::encoding::text::encode(&mut text, &state.registry) {
                Ok(()) => reply(
                    StatusCode::OK,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    text,
                ),
                Err(error) => reply(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    format!("encode metrics: {error}\n"),
                ),
            }
        }
        "/healthz" | "/livez" => reply(StatusCode::OK, "text/plain", "ok\n".to_owned()),
        "/readyz" => match not_ready(state).await {
            None => reply(StatusCode::OK, "text/plain", "ok\n".to_owned()),
            Some(why) => reply(StatusCode::SERVICE_UNAVAILABLE, "text/plain", format!("{why}\n")),
        },
        _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n".to_owned()),
    }
}

/// Why the process is not ready, if it is not.
async fn not_ready(state: &State) -> Option<String> {
    // The apiserver's own /readyz, not /version: /version answers without storage, so an
    // apiserver whose etcd is down would pass while every read and write fails.
    let request = match http::Request::get("/readyz").body(Vec::new()) {
        Ok(request) => request,
        Err(error) => return Some(format!("build the apiserver readiness request: {error}")),
    };
    match tokio::time::timeout(APISERVER_TIMEOUT, state.client.request_text(request)).await {
        Err(_) => {
            return Some(format!(
                "apiserver unreachable: no answer within {APISERVER_TIMEOUT:?}"
            ));
        }
        Ok(Err(error)) => return Some(format!("apiserver unreachable or not ready: {error}")),
        Ok(Ok(_)) => {}
    }
    let unsynced = flotilla_kube::metrics::global().unsynced_caches();
    (!unsynced.is_empty()).then(|| format!("caches not synced: {}", unsynced.join(", ")))
}

fn reply(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}
