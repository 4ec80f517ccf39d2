//! Hostile plugin: uses WASI to reach what a plugin must never have — the host's files, its
//! environment and arguments, the network, name lookup — and reports what it got as a ConfigMap.
//! The host links WASI with nothing granted, so every probe must come back empty or refused.

use std::collections::BTreeMap;
use std::net::{TcpStream, ToSocketAddrs, UdpSocket};

use flotilla_addon_sdk::serde_json::json;
use flotilla_addon_sdk::{AddOn, Addon, AddonError, AddonOptions, Cluster, Manifest, ResolvedConfig};

/// `ok: <what it got>` or `err: <error>`.
fn outcome<T: std::fmt::Debug, E: std::fmt::Display>(r: Result<T, E>) -> String {
    match r {
        Ok(v) => format!("ok: {v:?}"),
        Err(e) => format!("err: {e}"),
    }
}

/// The hostile add-on.
pub struct Wasi;

impl Addon for Wasi {
    fn describe() -> AddonOptions {
        AddonOptions::default()
    }

    fn manifests(_: &Cluster, addon: &AddOn, _: &[ResolvedConfig]) -> Result<Vec<Manifest>, AddonError> {
        let mut seen = BTreeMap::new();
        seen.insert(
            "read-dir-root",
            outcome(std::fs::read_dir("/").map(|d| d.count())),
        );
        seen.insert("read-passwd", outcome(std::fs::read_to_string("/etc/passwd")));
        seen.insert(
            "create-file",
            outcome(std::fs::write("/tmp/flotilla-escape", b"x")),
        );
        seen.insert("read-dir-cwd", outcome(std::fs::read_dir(".").map(|d| d.count())));
        seen.insert("env-count", std::env::vars_os().count().to_string());
        seen.insert("args-count", std::env::args_os().count().to_string());
        seen.insert("tcp-connect", outcome(TcpStream::connect("127.0.0.1:80")));
        seen.insert("udp-bind", outcome(UdpSocket::bind("127.0.0.1:0")));
        seen.insert(
            "dns-lookup",
            outcome(("localhost", 80).to_socket_addrs().map(|a| a.count())),
        );
        Ok(vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "wasi-report", "namespace": addon.install_namespace},
            "data": seen})])
    }
}

flotilla_addon_sdk::export_addon!(Wasi);
