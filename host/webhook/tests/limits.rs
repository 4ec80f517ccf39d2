//! The hub's webhook server against a client that does not play fair: thousands of
//! connections that never speak and a chunked POST without end. The server closes the idle
//! connections at its handshake deadline, refuses the endless body once it passes the cap
//! (having read no more than that), and meanwhile answers a normal AdmissionReview.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use std::{sync::Arc, time::Duration};

use flotilla_webhook::{VALIDATE_PATH, Webhook};
use serde_json::json;
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};

/// Connections that connect and never send a byte.
const IDLE_CONNECTIONS: usize = 2000;
/// What the endless body would send if nobody stopped it.
const ENDLESS_BYTES: u64 = 4 << 30;

async fn tls(webhook: &Webhook) -> tokio_rustls::client::TlsStream<TcpStream> {
    use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject as _};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(webhook.ca_pem.as_bytes()).unwrap())
        .unwrap();
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(webhook.addr).await.unwrap();
    connector
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap()
}

/// The status line and body of the response to one request written by hand.
async fn exchange(webhook: &Webhook, body: &str) -> (String, String) {
    let mut stream = tls(webhook).await;
    let request = format!(
        "POST {VALIDATE_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

fn admission_review() -> String {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "0f6a1c3e-0000-4000-8000-000000000001",
            "kind": {"group": "work.open-cluster-management.io", "version": "v1", "kind": "ManifestWork"},
            "resource": {"group": "work.open-cluster-management.io", "version": "v1", "resource": "manifestworks"},
            "name": "w", "namespace": "cluster1", "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": {
                "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
                "metadata": {"name": "w", "namespace": "cluster1"},
                "spec": {"workload": {"manifests": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
                ]}}
            }
        }
    })
    .to_string()
}

/// Streams a chunked body of [`ENDLESS_BYTES`] until the server answers or hangs up; returns
/// the status line (if any) and the body bytes written.
async fn endless_post(webhook: &Webhook) -> (Option<String>, u64) {
    let stream = tls(webhook).await;
    let (mut reader, mut writer) = tokio::io::split(stream);
    let head = format!(
        "POST {VALIDATE_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n"
    );
    writer.write_all(head.as_bytes()).await.unwrap();
    let answer = tokio::spawn(async move {
        let mut buffer = vec![0; 4096];
        let read = reader.read(&mut buffer).await.unwrap_or(0);
        String::from_utf8_lossy(&buffer[..read])
            .lines()
            .next()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
    });
    let chunk = vec![b'x'; 1 << 20];
    let mut sent = 0u64;
    while sent < ENDLESS_BYTES && !answer.is_finished() {
        let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), &chunk, b"\r\n"].concat();
        if writer.write_all(&framed).await.is_err() {
            break;
        }
        sent += chunk.len() as u64;
    }
    let _ = writer.write_all(b"0\r\n\r\n").await;
    (answer.await.unwrap(), sent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_and_an_endless_body_do_not_keep_the_webhook_from_answering() {
    let webhook = flotilla_webhook::serve_on_loopback().await.unwrap();

    let mut idle = Vec::with_capacity(IDLE_CONNECTIONS);
    for _ in 0..IDLE_CONNECTIONS {
        idle.push(TcpStream::connect(webhook.addr).await.unwrap());
    }
    let (status, sent) = endless_post(&webhook).await;
    println!(
        "endless body: {} MiB written before the answer {status:?}",
        sent >> 20
    );
    assert_eq!(status.as_deref(), Some("HTTP/1.1 413 Payload Too Large"));
    let cap = flotilla_kube::server::WEBHOOK.max_body_bytes as u64;
    assert!(
        sent < 2 * cap,
        "the server kept reading past its {cap}-byte cap: {sent} bytes written"
    );

    // While the idle connections are still open, a review is answered.
    let started = std::time::Instant::now();
    let (status, body) = exchange(&webhook, &admission_review()).await;
    println!(
        "a review beside {IDLE_CONNECTIONS} idle connections answered in {:?}",
        started.elapsed()
    );
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    let review: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(review["response"]["allowed"], true, "{body}");

    // The idle connections are closed by the server at its handshake deadline.
    let mut first = idle.pop().unwrap();
    let closed = tokio::time::timeout(
        flotilla_kube::server::WEBHOOK.handshake + Duration::from_secs(20),
        first.read(&mut [0; 16]),
    )
    .await;
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "an idle connection was still open after the handshake deadline: {closed:?}"
    );
}
