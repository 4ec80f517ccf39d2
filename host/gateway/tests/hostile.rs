//! Hostile peers of the gateway: a tunnel server and managed kube-apiservers that stall,
//! flood, lie about their identity or send what is not HTTP. Every byte from them is an
//! attacker's. Each test shows one bound (a deadline, a size cap, a name check, certificate
//! verification) with a peer that would hang, exhaust or fool the gateway without it.
//! The peers are hand-written on purpose: they stand for attackers, not for Kubernetes.

use std::{
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use flotilla_gateway::{
    tunnel::{self, TunnelError},
    upstream::{Target, UpstreamError, Upstreams},
};
use flotilla_testing::pki::{CertAndKey, CertificateAuthority};
use http::{Request, Response, header};
use http_body_util::{BodyExt as _, Empty};
use hyper::body::{Bytes, Incoming};
use rustls::{
    ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _},
};
use serde_json::json;
use tokio::{
    io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _},
    net::{UnixListener, UnixStream},
    task::JoinHandle,
};
use tokio_rustls::TlsAcceptor;

/// The deadline a test expects to fire.
const SHORT: Duration = Duration::from_millis(300);
/// A deadline that must not be the one that ends the test.
const LONG: Duration = Duration::from_secs(10);
/// The managed apiserver's URL; the tunnel, not DNS, reaches it.
const API_URL: &str = "https://api.c1.test:6443";
const API_HOST: &str = "api.c1.test";

/// A tunnel server under the test's control: a unix socket whose every connection `serve`
/// handles. Dropping it stops accepting.
struct Peer {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    accepted: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Peer {
    fn start<F, Fut>(serve: F) -> Self
    where
        F: Fn(UnixStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("tunnel.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn({
            let accepted = accepted.clone();
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    accepted.fetch_add(1, Ordering::SeqCst);
                    tokio::spawn(serve(stream));
                }
            }
        });
        Self {
            _dir: dir,
            socket,
            accepted,
            task,
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads a head up to its blank line (empty at end of stream).
async fn read_head(stream: &mut (impl AsyncRead + Unpin)) -> String {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read_u8().await {
            Ok(byte) => head.push(byte),
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// Keeps a connection open and silent until the other side leaves.
async fn hold(mut stream: impl AsyncRead + Unpin) {
    let mut sink = [0; 1024];
    while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
}

/// A tunnel server that reads one request head and answers `answer`, then holds.
fn answering(answer: &'static [u8]) -> Peer {
    Peer::start(move |mut stream| async move {
        read_head(&mut stream).await;
        let _ = stream.write_all(answer).await;
        hold(stream).await;
    })
}

/// Asserts `result` is a `Dial` error whose message holds `what`.
fn assert_dial<T: std::fmt::Debug>(result: Result<T, TunnelError>, what: &str) {
    match result {
        Err(TunnelError::Dial { message, .. }) => assert!(message.contains(what), "{message}"),
        other => panic!("expected a failure to {what:?}, got {other:?}"),
    }
}

/// Asserts `result` is the timeout of `deadline`, reported soon after it.
fn assert_timeout<T: std::fmt::Debug>(result: Result<T, TunnelError>, deadline: Duration, started: Instant) {
    assert!(
        matches!(result, Err(TunnelError::Timeout(_, d)) if d == deadline),
        "{result:?}"
    );
    assert!(started.elapsed() < deadline + Duration::from_secs(2));
}

// === The tunnel server's CONNECT answer ===

#[tokio::test]
async fn a_tunnel_server_that_never_answers_connect_times_out() {
    let peer = answering(b"");
    let started = Instant::now();
    assert_timeout(tunnel::connect(&peer.socket, "c1", SHORT).await, SHORT, started);
}

/// A tunnel server whose answer head never ends.
fn endless_head() -> Peer {
    Peer::start(|mut stream| async move {
        read_head(&mut stream).await;
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\n").await;
        while stream
            .write_all(b"X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n")
            .await
            .is_ok()
        {}
    })
}

#[tokio::test]
async fn an_endless_connect_answer_head_is_refused_at_8_kib() {
    // The head never ends; an unbounded reader would read until the deadline.
    let peer = endless_head();
    assert_dial(tunnel::connect(&peer.socket, "c1", LONG).await, "over 8192 bytes");
}

#[tokio::test]
async fn a_refused_or_garbled_connect_answer_is_a_clear_error() {
    for (answer, what) in [
        (
            &b"HTTP/1.1 502 Bad Gateway\r\n\r\nthe agent could not dial"[..],
            "502: the agent could not dial",
        ),
        (b"HTTP/1.1 204 No Content\r\n\r\n", "204"),
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "malformed answer"),
        (b"HTTP/1.1 OK\r\n\r\n", "malformed answer"),
        (b"\r\n\r\n", "malformed answer"),
        // The server leaves in the middle of its head.
        (b"HTTP/1.1 200 OK\r\n", "read the answer"),
    ] {
        let peer = Peer::start(move |mut stream| async move {
            read_head(&mut stream).await;
            let _ = stream.write_all(answer).await;
        });
        assert_dial(tunnel::connect(&peer.socket, "c1", LONG).await, what);
    }
    let peer = answering(b"HTTP/1.1 503 Service Unavailable\r\n\r\nno connected agent for c1");
    assert!(
        matches!(
            tunnel::connect(&peer.socket, "c1", LONG).await,
            Err(TunnelError::NotConnected(m)) if m == "no connected agent for c1"
        ),
        "a 503 says the cluster has no agent"
    );
}

#[tokio::test]
async fn a_name_that_is_no_cluster_never_reaches_the_tunnel_server() {
    let peer = Peer::start(|mut stream| async move {
        read_head(&mut stream).await;
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await;
        hold(stream).await;
    });
    let (_ca, target) = managed_cluster();
    let upstreams = Upstreams::new(peer.socket.clone(), SHORT, SHORT);
    // Through `Upstreams` too: there `c1.other` once opened cluster c1's tunnel.
    for name in [
        "c1.other",
        "c1/../c2",
        "../c1",
        "c1:80",
        "c1\r\nX-Injected: 1",
        "C1",
    ] {
        assert!(
            matches!(
                tunnel::connect(&peer.socket, name, LONG).await,
                Err(TunnelError::InvalidCluster(_))
            ),
            "{name:?}"
        );
        let result = get(&upstreams, name, &target, "/api").await;
        assert!(
            matches!(&result, Err(UpstreamError::Failed(m)) if m.contains("not a managed cluster name")),
            "{name:?}: {result:?}"
        );
    }
    // Connections are accepted in order: once a good one is, any earlier one would have been.
    tunnel::connect(&peer.socket, "c1", LONG).await.unwrap();
    assert_eq!(peer.accepted.load(Ordering::SeqCst), 1);
}

// === The tunnel server's list of connected clusters ===

#[tokio::test]
async fn a_cluster_list_that_never_comes_or_never_ends_times_out() {
    let silent = answering(b"");
    let started = Instant::now();
    assert_timeout(tunnel::connected(&silent.socket, SHORT).await, SHORT, started);

    // A chunked list that trickles forever, each chunk valid JSON whitespace.
    let endless = Peer::start(|mut stream| async move {
        read_head(&mut stream).await;
        let _ = stream
            .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            .await;
        while stream.write_all(b"1\r\n \r\n").await.is_ok() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let started = Instant::now();
    assert_timeout(tunnel::connected(&endless.socket, SHORT).await, SHORT, started);
}

#[tokio::test]
async fn a_cluster_list_over_4_mib_is_refused() {
    // Valid JSON: without the cap it would be read whole and believed.
    let names: Vec<String> = (0..400_000).map(|i| format!("cluster-{i:06}")).collect();
    let body = serde_json::to_vec(&json!({ "clusters": names })).unwrap();
    assert!(body.len() > 4 << 20);
    let answer: &'static [u8] = Vec::leak(
        [
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes(),
            &body,
        ]
        .concat(),
    );
    let peer = answering(answer);
    assert_dial(
        tunnel::connected(&peer.socket, LONG).await,
        "read the cluster list",
    );
}

#[tokio::test]
async fn an_endless_cluster_list_head_is_refused() {
    let peer = endless_head();
    assert_dial(tunnel::connected(&peer.socket, LONG).await, "GET /clusters");
}

#[tokio::test]
async fn a_malformed_or_failed_cluster_list_is_a_clear_error() {
    for body in [
        &b"not json"[..],
        br#"{"clusters": [1]}"#,
        br#"{"clusters": "c1"}"#,
        b"",
    ] {
        let answer = Vec::leak(
            [
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes(),
                body,
            ]
            .concat(),
        );
        let peer = answering(answer);
        assert_dial(
            tunnel::connected(&peer.socket, LONG).await,
            "parse the cluster list",
        );
    }
    // An error answer is no list, whatever its body says.
    let body = br#"{"clusters": ["c1"]}"#;
    let answer = Vec::leak(
        [
            format!(
                "HTTP/1.1 500 Internal Server Error\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
            body,
        ]
        .concat(),
    );
    let peer = answering(answer);
    assert_dial(tunnel::connected(&peer.socket, LONG).await, "500");
}

// === A managed kube-apiserver behind the tunnel ===

/// A managed cluster's CA and the target that trusts it.
fn managed_cluster() -> (CertificateAuthority, Target) {
    let ca = CertificateAuthority::new("managed-ca").unwrap();
    let target = Target::new(API_URL, Some(ca.cert_pem().as_bytes())).unwrap();
    (ca, target)
}

fn acceptor(serving: &CertAndKey) -> TlsAcceptor {
    let chain = CertificateDer::pem_slice_iter(serving.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes()).unwrap();
    let mut config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    TlsAcceptor::from(Arc::new(config))
}

/// A tunnel server that opens every CONNECT and hands the stream to `apiserver`.
fn relay<F, Fut>(apiserver: F) -> Peer
where
    F: Fn(UnixStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let apiserver = Arc::new(apiserver);
    Peer::start(move |mut stream| {
        let apiserver = apiserver.clone();
        async move {
            read_head(&mut stream).await;
            if stream.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.is_ok() {
                apiserver(stream).await;
            }
        }
    })
}

/// The request heads a managed apiserver read in the clear, after its TLS handshake.
type Seen = Arc<Mutex<Vec<String>>>;

/// A managed apiserver serving TLS with `serving` that answers every request with `answer`
/// as it is (nothing when empty), and records what it read.
fn apiserver(serving: &CertAndKey, answer: &'static [u8]) -> (Peer, Seen) {
    let (acceptor, seen) = (acceptor(serving), Seen::default());
    let peer = relay({
        let seen = seen.clone();
        move |stream| {
            let (acceptor, seen) = (acceptor.clone(), seen.clone());
            async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                loop {
                    let head = read_head(&mut tls).await;
                    if head.is_empty() {
                        return;
                    }
                    seen.lock().unwrap().push(head);
                    if tls.write_all(answer).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    (peer, seen)
}

async fn get(
    upstreams: &Upstreams,
    cluster: &str,
    target: &Target,
    path: &str,
) -> Result<Response<Incoming>, UpstreamError> {
    let request = Request::get(path)
        .header(header::HOST, &target.authority)
        .header(header::AUTHORIZATION, "Bearer msa-token")
        .body(Empty::<Bytes>::new().map_err(|never| match never {}).boxed())
        .unwrap();
    upstreams.send(cluster, target, request).await
}

/// `result` is the short deadline's timeout, reached in about that time.
fn assert_upstream_timeout<T: std::fmt::Debug>(result: Result<T, UpstreamError>, started: Instant) {
    assert!(
        matches!(result, Err(UpstreamError::Timeout(d)) if d == SHORT),
        "{result:?}"
    );
    assert!(started.elapsed() < SHORT + Duration::from_secs(2));
}

#[tokio::test]
async fn a_tls_handshake_that_never_completes_times_out_within_the_connect_deadline() {
    let (_ca, target) = managed_cluster();
    let peer = relay(hold);
    let upstreams = Upstreams::new(peer.socket.clone(), SHORT, LONG);
    let started = Instant::now();
    assert_upstream_timeout(get(&upstreams, "c1", &target, "/api").await, started);
}

#[tokio::test]
async fn garbage_instead_of_tls_is_a_tls_error() {
    let (_ca, target) = managed_cluster();
    let peer = relay(|mut stream| async move {
        let _ = stream
            .write_all(b"HTTP/1.1 400 Bad Request\r\n\r\nnot TLS at all")
            .await;
        hold(stream).await;
    });
    let upstreams = Upstreams::new(peer.socket.clone(), LONG, LONG);
    let result = get(&upstreams, "c1", &target, "/api").await;
    assert!(
        matches!(&result, Err(UpstreamError::Failed(m)) if m.contains("TLS")),
        "{result:?}"
    );
}

#[tokio::test]
async fn an_apiserver_that_never_answers_times_out_within_the_answer_deadline() {
    let (ca, target) = managed_cluster();
    let (peer, seen) = apiserver(&ca.issue_serving("apiserver", &[API_HOST]).unwrap(), b"");
    let upstreams = Upstreams::new(peer.socket.clone(), LONG, SHORT);
    let started = Instant::now();
    assert_upstream_timeout(get(&upstreams, "c1", &target, "/api").await, started);
    assert_eq!(seen.lock().unwrap().len(), 1, "the request reached it");
}

#[tokio::test]
async fn garbage_instead_of_http_is_an_error_at_once() {
    let (ca, target) = managed_cluster();
    let (peer, _seen) = apiserver(
        &ca.issue_serving("apiserver", &[API_HOST]).unwrap(),
        b"\x00\x01\x02 not HTTP\r\n\r\n",
    );
    let upstreams = Upstreams::new(peer.socket.clone(), LONG, LONG);
    let started = Instant::now();
    let result = get(&upstreams, "c1", &target, "/api").await;
    assert!(matches!(result, Err(UpstreamError::Failed(_))), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn the_token_never_reaches_a_server_the_clusters_ca_did_not_certify() {
    let (ca, target) = managed_cluster();
    let stranger = CertificateAuthority::new("managed-ca").unwrap();
    for (serving, why) in [
        (
            stranger.issue_serving("apiserver", &[API_HOST]).unwrap(),
            "another CA",
        ),
        (
            ca.issue_serving("apiserver", &["api.c2.test"]).unwrap(),
            "another name",
        ),
    ] {
        // It would answer, if it were ever asked.
        let (peer, seen) = apiserver(&serving, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        let upstreams = Upstreams::new(peer.socket.clone(), LONG, LONG);
        let result = get(&upstreams, "c1", &target, "/api").await;
        assert!(
            matches!(&result, Err(UpstreamError::Failed(m)) if m.contains("certificate")),
            "{why}: {result:?}"
        );
        assert!(seen.lock().unwrap().is_empty(), "{why}: the request was sent");
    }
}

#[tokio::test]
async fn an_answer_streams_with_no_deadline_on_its_body() {
    // A watch: its head and a first event, then silence. The chunked framing wins over a
    // Content-Length that would swallow what follows.
    let (ca, target) = managed_cluster();
    let (peer, _seen) = apiserver(
        &ca.issue_serving("apiserver", &[API_HOST]).unwrap(),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 60\r\n\r\n3\r\n{}\n\r\n",
    );
    let upstreams = Upstreams::new(peer.socket.clone(), LONG, SHORT);
    let mut body = get(&upstreams, "c1", &target, "/api?watch=1")
        .await
        .unwrap()
        .into_body();
    let first = tokio::time::timeout(LONG, body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.into_data().unwrap(), "{}\n");
    // The answer deadline bounds the head only: past it, the body is still open.
    assert!(tokio::time::timeout(SHORT * 2, body.frame()).await.is_err());
}
