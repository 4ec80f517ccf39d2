//! The ClusterGateway aggregated API server: discovery, ClusterGateways read from the
//! ManagedClusters, and the `proxy` subresource forwarded to each cluster's kube-apiserver
//! through its cluster-proxy tunnel with the cluster's managed service account token.
//!
//! ```text
//!  kube-apiserver (authenticates, authorizes clustergateways/proxy)
//!    └─ front-proxy client certificate ─▶ here: only that certificate's requests are served
//!         /…/clustergateways/<c>/proxy/<path>
//!           ManagedCluster <c> ─ 404 when absent (URL and CA bundle of its apiserver)
//!           Secret <c>/<token secret> (read, kept 5 s) ─ 503 without a token (managed-serviceaccount)
//!           tunnel CONNECT <c>:443 ─ 503 without an agent, 502/504 when it fails
//!           TLS to the apiserver (the cluster's CA, never unverified) ─ Authorization: Bearer
//! ```
//!
//! The caller's identity headers, credentials and impersonation headers never reach the
//! managed cluster: what a request may do there is what the managed service account may.

use std::{convert::Infallible, net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use flotilla_api::{
    cluster::v1::ManagedCluster,
    gateway::{
        GROUP,
        consts::{
            API_VERSION, KIND, PLURAL, VERSION, credential_type, endpoint_type,
            healthy_reason::UNKNOWN_PREFIX,
        },
        v1alpha1::{
            ClusterAccess, ClusterAccessCredential, ClusterEndpoint, ClusterGateway, ClusterGatewaySpec,
            ClusterGatewayStatus,
        },
    },
};
use flotilla_kube::server::{Limits, Server};
use futures::StreamExt as _;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full, combinators::BoxBody};
use hyper::{
    body::{Bytes, Incoming},
    service::service_fn,
};
use hyper_util::rt::TokioIo;
use kube::{
    ResourceExt as _,
    runtime::reflector::{ObjectRef, Store},
};
use rustls::{
    RootCertStore, ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _},
    server::WebPkiClientVerifier,
};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::{
    Error,
    route::{Route, route},
    tokens::{Credential, Tokens},
    tunnel,
    upstream::{self, UpstreamError, Upstreams},
};

/// A response body: local JSON or a managed apiserver's streamed answer.
pub type Body = BoxBody<Bytes, hyper::Error>;

/// The gateway's connection limits. Bodies are streamed through, never held, so the body
/// limits of [`Limits`] do not apply; watches hold a connection for as long as they run.
pub const GATEWAY: Limits = Limits {
    max_connections: 4096,
    handshake: Duration::from_secs(10),
    headers: Duration::from_secs(30),
    body: Duration::from_secs(30),
    max_body_bytes: 0,
    body_budget_bytes: 0,
};

/// How long opening a tunnel and the TLS handshake through it may take.
const CONNECT_DEADLINE: Duration = Duration::from_secs(10);
/// How long asking the tunnel server which clusters are connected may take.
const LIST_DEADLINE: Duration = Duration::from_secs(2);
/// How long a managed apiserver may take to start its answer.
const ANSWER_DEADLINE: Duration = Duration::from_secs(30);

/// The aggregation layer the gateway trusts: the kube-apiserver's front-proxy client CA and
/// the common names it accepts (all names signed by the CA when empty), as the apiserver
/// publishes them in ConfigMap kube-system/extension-apiserver-authentication.
#[derive(Clone, Debug)]
pub struct FrontProxy {
    /// `requestheader-client-ca-file`.
    pub ca_pem: String,
    /// `requestheader-allowed-names`.
    pub allowed_names: Vec<String>,
}

/// What the gateway serves with.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where it listens.
    pub bind: SocketAddr,
    /// Its serving certificate and key, PEM (the APIService's `caBundle` signs it).
    pub cert_pem: String,
    /// The key of [`Self::cert_pem`].
    pub key_pem: String,
    /// Who may call it.
    pub front_proxy: FrontProxy,
    /// The cluster-proxy tunnel server's unix socket.
    pub tunnel_socket: PathBuf,
}

/// What the gateway reads: the hub's caches, shared with its other parts.
#[derive(Clone)]
pub struct Sources {
    /// ManagedClusters.
    pub clusters: Store<ManagedCluster>,
    /// The managed service account tokens.
    pub tokens: Tokens,
}

struct State {
    settings: Settings,
    upstreams: Upstreams,
    sources: Sources,
    allowed_names: Vec<String>,
}

/// A running gateway; dropping it stops the server and its connections.
pub struct Gateway {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Gateway {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the gateway.
pub async fn serve(settings: Settings, sources: Sources) -> Result<Gateway, Error> {
    let config = tls_config(&settings)?;
    let listener = tokio::net::TcpListener::bind(settings.bind)
        .await
        .map_err(|source| Error::Listen {
            addr: settings.bind,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| Error::Listen {
        addr: settings.bind,
        source,
    })?;
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let server = Server::new(GATEWAY);
    let state = Arc::new(State {
        allowed_names: settings.front_proxy.allowed_names.clone(),
        upstreams: Upstreams::new(settings.tunnel_socket.clone(), CONNECT_DEADLINE, ANSWER_DEADLINE),
        settings,
        sources,
    });
    let task = tokio::spawn({
        let accepting = server.clone();
        async move {
            accepting
                .accept(listener, move |stream| {
                    let (acceptor, server, state) = (acceptor.clone(), server.clone(), state.clone());
                    async move {
                        // Streamed answers go out frame by frame: without this, Nagle holds
                        // each small write for the peer's delayed ACK (some 40 ms a MiB).
                        let _ = stream.set_nodelay(true);
                        let handshake = server.limits().handshake;
                        let Ok(Ok(tls)) = tokio::time::timeout(handshake, acceptor.accept(stream)).await
                        else {
                            return;
                        };
                        let front_proxy =
                            is_front_proxy(tls.get_ref().1.peer_certificates(), &state.allowed_names);
                        let service = service_fn(move |request| {
                            let state = state.clone();
                            async move { Ok::<_, Infallible>(handle(&state, front_proxy, request).await) }
                        });
                        let connection = server.http1().serve_connection(TokioIo::new(tls), service);
                        if let Err(error) = connection.await {
                            tracing::debug!(%error, "gateway connection ended");
                        }
                    }
                })
                .await;
        }
    });
    Ok(Gateway { addr, task })
}

fn tls_config(settings: &Settings) -> Result<ServerConfig, Error> {
    let invalid = |what: &str, e: &dyn std::fmt::Display| Error::Certificate(format!("{what}: {e}"));
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(settings.front_proxy.ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| invalid("parse the front-proxy CA", &e))?;
        roots
            .add(cert)
            .map_err(|e| invalid("add the front-proxy CA", &e))?;
    }
    // Requests without a client certificate reach only the health endpoints (the apiserver's
    // probes); a certificate that is presented must verify.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| invalid("build the front-proxy verifier", &e))?;
    let chain = CertificateDer::pem_slice_iter(settings.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid("parse the serving certificate", &e))?;
    let key = PrivateKeyDer::from_pem_slice(settings.key_pem.as_bytes())
        .map_err(|e| invalid("parse the serving key", &e))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("choose TLS versions", &e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| invalid("the serving certificate", &e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Whether the verified client certificate is the front proxy's: its common name is one the
/// apiserver allows, or any when it allows all.
fn is_front_proxy(chain: Option<&[CertificateDer<'_>]>, allowed: &[String]) -> bool {
    let Some(leaf) = chain.and_then(|c| c.first()) else {
        return false;
    };
    if allowed.is_empty() {
        return true;
    }
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(leaf) else {
        return false;
    };
    let names: Vec<&str> = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok())
        .collect();
    // One common name only: a second could make the apiserver and this check disagree.
    matches!(names.as_slice(), [name] if allowed.iter().any(|a| a == name))
}

async fn handle(state: &State, front_proxy: bool, request: Request<Incoming>) -> Response<Body> {
    let path = request.uri().path().to_owned();
    match route(&path) {
        Route::Health => text(StatusCode::OK, "ok"),
        _ if !front_proxy => status(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "the cluster gateway serves only the kube-apiserver's aggregation layer",
        ),
        Route::NotFound => status(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        ),
        Route::Discovery => json_response(StatusCode::OK, &discovery()),
        Route::List if request.method() == Method::GET => {
            let connected = connected(state).await;
            let mut clusters = state.sources.clusters.state();
            clusters.sort_by_key(|c| c.name_any());
            let items: Vec<ClusterGateway> = with_tokens(state, clusters)
                .await
                .iter()
                .map(|(c, has_token)| gateway_of(c, *has_token, &connected))
                .collect();
            json_response(
                StatusCode::OK,
                &json!({
                    "apiVersion": API_VERSION, "kind": format!("{KIND}List"),
                    "metadata": {}, "items": items,
                }),
            )
        }
        Route::Get(name) if request.method() == Method::GET => match cluster(state, name) {
            Some(c) => {
                let has_token = with_tokens(state, vec![c]).await;
                let (c, has_token) = &has_token[0];
                json_response(
                    StatusCode::OK,
                    &gateway_of(c, *has_token, &connected(state).await),
                )
            }
            None => not_found(name),
        },
        Route::List | Route::Get(_) => status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "ClusterGateways are read-only here: they follow the ManagedClusters",
        ),
        Route::Proxy { cluster: name, path } => {
            let name = name.to_owned();
            let path = path.to_owned();
            forward(state, &name, &path, request).await
        }
    }
}

/// The clusters whose agents the tunnel server holds, or why that is not known.
type Connected = Result<Vec<String>, String>;

async fn connected(state: &State) -> Connected {
    tunnel::connected(&state.settings.tunnel_socket, LIST_DEADLINE)
        .await
        .map_err(|e| e.to_string())
}

/// Whether requests to `cluster` can be served now, and why not: the gateway needs the
/// managed service account's token and the cluster's tunnel.
fn health(has_token: bool, connected: &Connected, cluster: &str) -> (bool, String) {
    let unknown = |why: &str| (false, format!("{UNKNOWN_PREFIX}{why}"));
    match connected {
        _ if !has_token => unknown("NoManagedServiceAccountToken"),
        Err(_) => unknown("TunnelServerUnreachable"),
        Ok(clusters) if !clusters.iter().any(|c| c == cluster) => unknown("TunnelNotConnected"),
        Ok(_) => (true, String::new()),
    }
}

fn cluster(state: &State, name: &str) -> Option<Arc<ManagedCluster>> {
    state.sources.clusters.get(&ObjectRef::new(name))
}

/// Token reads a list of ClusterGateways makes at once.
const TOKEN_READS_AT_ONCE: usize = 16;

/// Whether each cluster has a token, read [`TOKEN_READS_AT_ONCE`] at a time.
async fn with_tokens(state: &State, clusters: Vec<Arc<ManagedCluster>>) -> Vec<(Arc<ManagedCluster>, bool)> {
    futures::stream::iter(clusters)
        .map(|cluster| async move {
            // A token is of use only with an apiserver it can be sent to, verified.
            let has_token = match state.sources.tokens.get(&cluster.name_any()).await {
                Ok(Some(credential)) => matches!(target_of(&cluster, &credential), Some(Ok(_))),
                _ => false,
            };
            (cluster, has_token)
        })
        .buffered(TOKEN_READS_AT_ONCE)
        .collect()
        .await
}

/// The ClusterGateway of a ManagedCluster: reached through the tunnel, with the managed
/// service account's token.
fn gateway_of(cluster: &ManagedCluster, has_token: bool, connected: &Connected) -> ClusterGateway {
    let name = cluster.name_any();
    let (healthy, healthy_reason) = health(has_token, connected, &name);
    ClusterGateway {
        metadata: kube::api::ObjectMeta {
            name: Some(name),
            creation_timestamp: cluster.metadata.creation_timestamp.clone(),
            ..Default::default()
        },
        spec: ClusterGatewaySpec {
            provider: String::new(),
            access: ClusterAccess {
                endpoint: Some(ClusterEndpoint {
                    type_: endpoint_type::CLUSTER_PROXY.to_owned(),
                    ..Default::default()
                }),
                // The token itself is never served: reading a ClusterGateway is not reading
                // the managed service account's Secret.
                credential: Some(ClusterAccessCredential {
                    type_: credential_type::SERVICE_ACCOUNT_TOKEN.to_owned(),
                    ..Default::default()
                }),
            },
        },
        status: ClusterGatewayStatus {
            healthy,
            healthy_reason,
        },
    }
}

async fn forward(state: &State, name: &str, path: &str, request: Request<Incoming>) -> Response<Body> {
    let Some(managed) = cluster(state, name) else {
        return not_found(name);
    };
    if request.headers().contains_key(header::UPGRADE) {
        return status(
            StatusCode::NOT_IMPLEMENTED,
            "NotImplemented",
            "connection upgrades (exec, attach, port-forward) are not served through the cluster gateway",
        );
    }
    let credential = match state.sources.tokens.get(name).await {
        Ok(Some(credential)) => credential,
        Ok(None) => {
            return unavailable(format!(
                "cluster {name} has no managed service account token (Secret {name}/{}): enable the managed-serviceaccount add-on for it",
                state.sources.tokens.secret_name()
            ));
        }
        Err(e) => return unavailable(format!("cluster {name}: {e}")),
    };
    let target = match target_of(&managed, &credential) {
        Some(Ok(target)) => target,
        Some(Err(e)) => return upstream_failure(name, &e).response(),
        None => {
            return unavailable(format!(
                "cluster {name} reports no kube-apiserver URL (spec.managedClusterClientConfigs) and its token Secret no CA"
            ));
        }
    };
    let token = credential.token;
    let query = request.uri().query().map(|q| format!("?{q}")).unwrap_or_default();
    let (parts, body) = request.into_parts();
    let mut upstream_request = Request::builder()
        .method(parts.method)
        .uri(format!("{path}{query}"))
        .body(body.boxed())
        .expect("a request from valid parts");
    *upstream_request.headers_mut() = forwarded_headers(&parts.headers, &target.authority, &token);

    match state.upstreams.send(name, &target, upstream_request).await {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            match answer_head(name, parts) {
                Ok(parts) => Response::from_parts(parts, body.boxed()),
                Err(failure) => failure.response(),
            }
        }
        Err(e) => upstream_failure(name, &e).response(),
    }
}

/// Where a cluster's apiserver is reached through its tunnel, and what verifies it: the URL and
/// CA its ManagedCluster reports; without a URL (OCM's klusterlet reports none unless given
/// external server URLs), the in-cluster name every apiserver's certificate carries, verified
/// with the CA the managed-serviceaccount agent read on the cluster. The tunnel agent dials its
/// own apiserver whatever the name, so the name only selects what TLS verifies. `None`: no CA
/// to verify with, and a token is never sent unverified.
fn target_of(
    cluster: &ManagedCluster,
    credential: &Credential,
) -> Option<Result<upstream::Target, UpstreamError>> {
    match cluster.spec.managed_cluster_client_configs.first() {
        Some(config) if !config.url.is_empty() => Some(upstream::Target::new(
            &config.url,
            config.ca_bundle.as_ref().map(|b| b.0.as_slice()),
        )),
        Some(_) | None => {
            let ca = credential.ca_pem.as_deref()?;
            Some(upstream::Target::new(upstream::IN_CLUSTER_URL, Some(ca)))
        }
    }
}

/// A proxied request that got no usable answer, as its caller is told.
#[derive(Debug, PartialEq, Eq)]
struct Failure {
    code: StatusCode,
    /// The `Status` reason.
    reason: &'static str,
    message: String,
}

impl Failure {
    fn response(&self) -> Response<Body> {
        status(self.code, self.reason, &self.message)
    }
}

/// How a failed request to `name`'s apiserver is answered: 503 when the gateway cannot reach
/// the cluster at all (no agent, an unusable URL or CA bundle), 504 when the apiserver is
/// too slow, 502 when the tunnel, TLS or HTTP with it fails.
fn upstream_failure(name: &str, error: &UpstreamError) -> Failure {
    let (code, reason) = match error {
        UpstreamError::NotConnected(_) | UpstreamError::Config(_) => {
            (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable")
        }
        UpstreamError::Timeout(_) => (StatusCode::GATEWAY_TIMEOUT, "Timeout"),
        UpstreamError::Failed(_) => (StatusCode::BAD_GATEWAY, "ServiceUnavailable"),
    };
    let message = match error {
        // The tunnel server's own words, which name the cluster.
        UpstreamError::NotConnected(message) => message.clone(),
        _ => format!("cluster {name}: {error}"),
    };
    Failure {
        code,
        reason,
        message,
    }
}

/// The head of `name`'s answer as passed back, without its hop-by-hop headers; an
/// informational one is refused. The gateway sends no upgrade (it answers those requests
/// 501), so a 101 is unrequested, and passing it on would switch the caller's connection to
/// whatever the managed apiserver speaks next.
fn answer_head(name: &str, mut head: http::response::Parts) -> Result<http::response::Parts, Failure> {
    if head.status.is_informational() {
        return Err(Failure {
            code: StatusCode::BAD_GATEWAY,
            reason: "ServiceUnavailable",
            message: format!(
                "cluster {name}: its kube-apiserver answered {} to a request that asked for no upgrade",
                head.status
            ),
        });
    }
    strip_hop_by_hop(&mut head.headers);
    Ok(head)
}

/// Headers dropped between the caller and the managed cluster: hop-by-hop ones, and every
/// header that carries an identity or a credential of the hub side.
fn is_dropped(name: &HeaderName) -> bool {
    let name = name.as_str();
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "authorization"
            | "cookie"
    ) || name.starts_with("x-remote-")
        || name.starts_with("impersonate-")
}

/// The headers a message's `Connection` header names: hop-by-hop for that message alone,
/// so a proxy removes them (RFC 9110 §7.6.1). Options that are no header name are skipped.
fn connection_options(headers: &HeaderMap) -> Vec<HeaderName> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|option| HeaderName::from_bytes(option.trim().as_bytes()).ok())
        .collect()
}

fn forwarded_headers(incoming: &HeaderMap, authority: &str, token: &str) -> HeaderMap {
    let options = connection_options(incoming);
    let mut headers: HeaderMap = incoming
        .iter()
        .filter(|(name, _)| !is_dropped(name) && !options.contains(name))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    if let Ok(host) = HeaderValue::from_str(authority) {
        headers.insert(header::HOST, host);
    }
    if let Ok(mut bearer) = HeaderValue::from_str(&format!("Bearer {token}")) {
        bearer.set_sensitive(true);
        headers.insert(header::AUTHORIZATION, bearer);
    }
    headers
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    for name in connection_options(headers) {
        headers.remove(name);
    }
    for name in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
    ] {
        headers.remove(name);
    }
}

fn discovery() -> serde_json::Value {
    let resource = |name: String, verbs: &[&str]| {
        json!({
            "name": name, "singularName": if name == PLURAL { "clustergateway" } else { "" },
            "namespaced": false, "kind": KIND, "verbs": verbs,
        })
    };
    json!({
        "kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": format!("{GROUP}/{VERSION}"),
        "resources": [
            resource(PLURAL.to_owned(), &["get", "list"]),
            resource(format!("{PLURAL}/health"), &["get"]),
            resource(format!("{PLURAL}/proxy"), &["create", "delete", "get", "patch", "update"]),
        ],
    })
}

fn json_response(code: StatusCode, value: &impl serde::Serialize) -> Response<Body> {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut response = Response::new(full(body));
    *response.status_mut() = code;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn text(code: StatusCode, body: &'static str) -> Response<Body> {
    let mut response = Response::new(full(body.as_bytes().to_vec()));
    *response.status_mut() = code;
    response
}

fn full(bytes: Vec<u8>) -> Body {
    Full::new(Bytes::from(bytes))
        .map_err(|never| match never {})
        .boxed()
}

/// A Kubernetes `Status` failure, as clients print it.
fn status(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    json_response(
        code,
        &json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code.as_u16(),
        }),
    )
}

fn not_found(name: &str) -> Response<Body> {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("{PLURAL}.{GROUP} \"{name}\" not found"),
    )
}

fn unavailable(message: String) -> Response<Body> {
    status(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", &message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_without_a_url_is_reached_by_its_in_cluster_name_and_verified_with_the_agents_ca() {
        let ca = rcgen::CertificateParams::default()
            .self_signed(&rcgen::KeyPair::generate().unwrap())
            .unwrap()
            .pem()
            .into_bytes();
        let cluster = |configs: serde_json::Value| -> ManagedCluster {
            serde_json::from_value(
                json!({"metadata": {"name": "c1"}, "spec": {"managedClusterClientConfigs": configs}}),
            )
            .unwrap()
        };
        let with_ca = Credential {
            token: "t".to_owned(),
            ca_pem: Some(ca.clone()),
        };
        let without_ca = Credential {
            token: "t".to_owned(),
            ca_pem: None,
        };
        let reported = cluster(
            json!([{"url": "https://10.0.0.1:6443", "caBundle": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &ca)}]),
        );
        let target = target_of(&reported, &without_ca).unwrap().unwrap();
        assert_eq!(target.authority, "10.0.0.1:6443");
        for silent in [cluster(json!([])), cluster(json!([{"url": ""}]))] {
            let target = target_of(&silent, &with_ca).unwrap().unwrap();
            assert_eq!(target.authority, "kubernetes.default.svc:443");
            assert!(
                target_of(&silent, &without_ca).is_none(),
                "no token is sent unverified"
            );
        }
    }

    fn certificate(common_names: &[&str]) -> CertificateDer<'static> {
        let mut params = rcgen::CertificateParams::default();
        for name in common_names {
            params.distinguished_name.push(rcgen::DnType::CommonName, *name);
        }
        let cert = params.self_signed(&rcgen::KeyPair::generate().unwrap()).unwrap();
        cert.der().clone()
    }

    #[test]
    fn only_the_allowed_front_proxy_name_is_the_front_proxy() {
        let allowed = ["front-proxy-client".to_owned()];
        let proxy = certificate(&["front-proxy-client"]);
        assert!(is_front_proxy(Some(std::slice::from_ref(&proxy)), &allowed));
        assert!(!is_front_proxy(Some(&[certificate(&["mallory"])]), &allowed));
        assert!(!is_front_proxy(None, &allowed));
        assert!(!is_front_proxy(Some(&[]), &allowed));
        // With no names configured, the apiserver accepts any certificate its CA signed.
        assert!(is_front_proxy(Some(&[certificate(&["anyone"])]), &[]));
    }

    #[test]
    fn a_cluster_is_healthy_with_a_token_and_a_connected_tunnel() {
        let connected: Connected = Ok(vec!["c1".to_owned()]);
        assert_eq!(health(true, &connected, "c1"), (true, String::new()));
        assert_eq!(
            health(false, &connected, "c1").1,
            "Unknown:NoManagedServiceAccountToken"
        );
        assert_eq!(health(true, &connected, "c2").1, "Unknown:TunnelNotConnected");
        assert_eq!(
            health(true, &Err("gone".into()), "c1").1,
            "Unknown:TunnelServerUnreachable"
        );
    }

    #[test]
    fn identities_and_credentials_of_the_caller_never_reach_the_cluster() {
        let mut incoming = HeaderMap::new();
        for (name, value) in [
            ("authorization", "Bearer hub-user"),
            ("x-remote-user", "alice"),
            ("x-remote-group", "system:masters"),
            ("x-remote-extra-scopes", "all"),
            ("impersonate-user", "system:admin"),
            ("impersonate-group", "system:masters"),
            ("cookie", "session=1"),
            ("connection", "keep-alive"),
            ("host", "hub:6443"),
            ("accept", "application/json"),
            ("user-agent", "kubectl"),
        ] {
            incoming.append(HeaderName::from_static(name), HeaderValue::from_static(value));
        }
        let out = forwarded_headers(&incoming, "127.0.0.1:6443", "msa-token");
        let mut names: Vec<&str> = out.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["accept", "authorization", "host", "user-agent"]);
        assert_eq!(out[header::AUTHORIZATION], "Bearer msa-token");
        assert_eq!(out[header::HOST], "127.0.0.1:6443");
    }

    #[test]
    fn headers_the_caller_names_in_connection_never_reach_the_cluster() {
        let mut incoming = HeaderMap::new();
        for (name, value) in [
            ("connection", "close, X-Hub-Secret"),
            ("connection", " x-trace ,, not a name"),
            ("x-hub-secret", "s3cret"),
            ("x-trace", "1"),
            ("accept", "application/json"),
        ] {
            incoming.append(HeaderName::from_static(name), HeaderValue::from_static(value));
        }
        let out = forwarded_headers(&incoming, "127.0.0.1:6443", "msa-token");
        let mut names: Vec<&str> = out.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["accept", "authorization", "host"]);
    }

    fn answer(code: u16, headers: &[(&'static str, &'static str)]) -> http::response::Parts {
        let mut builder = Response::builder().status(code);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap().into_parts().0
    }

    #[test]
    fn hop_by_hop_headers_of_an_answer_and_those_its_connection_names_are_not_passed_back() {
        let head = answer(
            200,
            &[
                ("connection", "close, X-Secret"),
                ("connection", "X-Internal"),
                ("x-secret", "from the managed cluster"),
                ("x-internal", "1"),
                ("keep-alive", "timeout=5"),
                ("proxy-connection", "keep-alive"),
                ("te", "trailers"),
                ("trailer", "x-checksum"),
                ("upgrade", "h2c"),
                ("content-type", "application/json"),
                ("audit-id", "a1"),
            ],
        );
        let head = answer_head("c1", head).unwrap();
        assert_eq!(head.status, StatusCode::OK);
        let mut names: Vec<&str> = head.headers.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["audit-id", "content-type"]);
    }

    #[test]
    fn an_unrequested_switching_protocols_answer_is_a_bad_gateway() {
        let head = answer(101, &[("connection", "upgrade"), ("upgrade", "SPDY/3.1")]);
        let failure = answer_head("c1", head).unwrap_err();
        assert_eq!(failure.code, StatusCode::BAD_GATEWAY);
        assert!(failure.message.starts_with("cluster c1: "), "{}", failure.message);
        assert!(failure.message.contains("101"), "{}", failure.message);
        assert_eq!(failure.response().status(), StatusCode::BAD_GATEWAY);
    }

    #[test]
    fn each_upstream_failure_has_its_status() {
        let cases = [
            (
                UpstreamError::NotConnected("no agent for c1".into()),
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
            ),
            (
                UpstreamError::Config("its CA bundle holds no certificate".into()),
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
            ),
            (
                UpstreamError::Timeout(Duration::from_secs(30)),
                StatusCode::GATEWAY_TIMEOUT,
                "Timeout",
            ),
            (
                UpstreamError::Failed("TLS with its kube-apiserver: invalid peer certificate".into()),
                StatusCode::BAD_GATEWAY,
                "ServiceUnavailable",
            ),
            (
                UpstreamError::Failed("tunnel: connection refused".into()),
                StatusCode::BAD_GATEWAY,
                "ServiceUnavailable",
            ),
        ];
        for (error, code, reason) in cases {
            let failure = upstream_failure("c1", &error);
            assert_eq!((failure.code, failure.reason), (code, reason), "{error}");
            assert!(
                failure.message.contains(&error.to_string()),
                "{}",
                failure.message
            );
        }
    }
}
