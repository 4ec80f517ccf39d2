//! Bounded reads from a misbehaving registry: a registry on loopback, written for this test,
//! that serves endless or mislabelled manifests, configs and layers. Each read must stop at its
//! cap — an endless body would otherwise never end, which `ends_within` turns into a failure —
//! with a reason naming what was too large. (The normal path is tested against the real
//! registry in `oci.rs` and `controller.rs`.)
//!
//! The server is hand-written because its whole point is to break the protocol in ways a real
//! registry never would: bodies without end and lengths that lie.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::ends_within;
use flotilla_plugin_loader::fetch::oci::{self, RegistryAuth};
use flotilla_wasm::Digest;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// What the hostile registry answers for one path.
#[derive(Clone)]
enum Body {
    /// These bytes, with a true `Content-Length`.
    Exact(Vec<u8>),
    /// Bytes without end, without `Content-Length` (the body ends when the connection does).
    Endless,
    /// A `Content-Length` of this many bytes, then bytes without end.
    Claims(u64),
}

/// Starts the registry; returns its `host:port`.
async fn hostile_registry(routes: BTreeMap<String, Body>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let routes = routes.clone();
            tokio::spawn(serve(socket, routes));
        }
    });
    address
}

async fn serve(mut socket: TcpStream, routes: BTreeMap<String, Body>) {
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match socket.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&request);
    let path = text.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let head = |status: &str, length: Option<u64>| {
        let mut h = format!(
            "HTTP/1.1 {status}\r\nConnection: close\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\n"
        );
        if let Some(length) = length {
            h.push_str(&format!("Content-Length: {length}\r\n"));
        }
        h.push_str("\r\n");
        h
    };
    let endless = |mut socket: TcpStream| async move {
        let chunk = vec![b' '; 64 << 10];
        // Until the client hangs up.
        while socket.write_all(&chunk).await.is_ok() {}
    };
    match routes.get(&path).cloned() {
        None if path == "/v2/" => {
            let _ = socket.write_all(head("200 OK", Some(2)).as_bytes()).await;
            let _ = socket.write_all(b"{}").await;
        }
        None => {
            let _ = socket.write_all(head("404 Not Found", Some(0)).as_bytes()).await;
        }
        Some(Body::Exact(bytes)) => {
            let _ = socket
                .write_all(head("200 OK", Some(bytes.len() as u64)).as_bytes())
                .await;
            let _ = socket.write_all(&bytes).await;
        }
        Some(Body::Endless) => {
            if socket.write_all(head("200 OK", None).as_bytes()).await.is_ok() {
                endless(socket).await;
            }
        }
        Some(Body::Claims(length)) => {
            if socket
                .write_all(head("200 OK", Some(length)).as_bytes())
                .await
                .is_ok()
            {
                endless(socket).await;
            }
        }
    }
}

const CONFIG: &[u8] = b"{\"architecture\":\"wasm\",\"os\":\"wasip2\"}";

/// A CNCF Wasm manifest naming a config and a layer with the given digests and sizes.
fn manifest(config: (&str, u64), layer: (&str, u64)) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": oci::WASM_CONFIG_MEDIA_TYPE, "digest": config.0, "size": config.1},
        "layers": [{"mediaType": oci::WASM_LAYER_MEDIA_TYPE, "digest": layer.0, "size": layer.1}],
    }))
    .unwrap()
}

async fn pull(address: &str, repository: &str) -> flotilla_plugin_loader::FetchError {
    let reference = format!("{address}/{repository}:v1");
    ends_within(
        Duration::from_secs(60),
        oci::pull(&reference, &RegistryAuth::Anonymous, true, 1 << 20, None),
    )
    .await
    .unwrap_err()
}

#[tokio::test]
async fn every_registry_read_stops_at_its_cap_however_the_registry_lies() {
    let config_digest = Digest::of(CONFIG).to_string();
    let layer_digest = Digest::of(b"a layer that never arrives").to_string();
    let good_config = (config_digest.as_str(), CONFIG.len() as u64);
    let mut routes = BTreeMap::new();
    let mut route = |path: String, body: Body| {
        routes.insert(path, body);
    };
    // Manifests: endless, and with a lying length.
    route("/v2/endless-manifest/manifests/v1".into(), Body::Endless);
    route("/v2/long-manifest/manifests/v1".into(), Body::Claims(10 << 30));
    // Configs: stated too large, and endless behind a small stated size.
    for (repo, config_size, config_body) in [
        ("big-config", 10 << 20, Body::Exact(CONFIG.to_vec())),
        ("endless-config", CONFIG.len() as u64, Body::Endless),
    ] {
        route(
            format!("/v2/{repo}/manifests/v1"),
            Body::Exact(manifest((&config_digest, config_size), (&layer_digest, 1000))),
        );
        route(format!("/v2/{repo}/blobs/{config_digest}"), config_body);
    }
    // Layers larger than declared: endless, and a Content-Length past the stated size.
    for (repo, layer_body) in [
        ("endless-layer", Body::Endless),
        ("long-layer", Body::Claims(1 << 30)),
    ] {
        route(
            format!("/v2/{repo}/manifests/v1"),
            Body::Exact(manifest(good_config, (&layer_digest, 1000))),
        );
        route(
            format!("/v2/{repo}/blobs/{config_digest}"),
            Body::Exact(CONFIG.to_vec()),
        );
        route(format!("/v2/{repo}/blobs/{layer_digest}"), layer_body);
    }
    let address = hostile_registry(routes).await;

    let cases = [
        ("endless-manifest", "ManifestTooLarge", "streamed"),
        ("long-manifest", "ManifestTooLarge", "Content-Length"),
        ("big-config", "ConfigTooLarge", "by the manifest"),
        ("endless-config", "ConfigTooLarge", "streamed"),
        (
            "endless-layer",
            "LayerTooLarge",
            "more than the manifest's 1000 bytes",
        ),
        ("long-layer", "LayerTooLarge", "Content-Length"),
    ];
    for (repository, reason, words) in cases {
        let err = pull(&address, repository).await;
        assert_eq!(err.reason(), reason, "{repository}: {err}");
        assert!(err.to_string().contains(words), "{repository}: {err}");
    }
}

#[tokio::test]
async fn a_registry_answering_an_image_index_is_refused_before_any_blob_is_read() {
    // An index whose one entry is a Wasm artifact; its manifest and blobs are never asked for
    // (the registry would answer 404 for them).
    let config_digest = Digest::of(CONFIG).to_string();
    let inner = manifest((&config_digest, CONFIG.len() as u64), (&config_digest, 1));
    let index = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": Digest::of(&inner).to_string(),
            "size": inner.len(),
            "platform": {"architecture": "wasm", "os": "wasip2"},
        }],
    }))
    .unwrap();
    let address = hostile_registry(BTreeMap::from([(
        "/v2/index/manifests/v1".to_owned(),
        Body::Exact(index),
    )]))
    .await;
    let err = pull(&address, "index").await;
    assert_eq!(err.reason(), "NotAWasmArtifact", "{err}");
    assert!(err.to_string().contains("image index"), "{err}");
}
