//! A managed cluster behind an `https://` forward proxy, end to end with the real binaries:
//! stunnel (TLS with a test CA) in front of tinyproxy on loopback, `flotilla hub` on a hub whose
//! signer issues two-minute certificates, and `flotilla join --local --proxy-url …
//! --proxy-ca …` discovering the hub's CA through the proxy. The klusterlet joins, is accepted
//! and becomes Available, applies a ManifestWork, rotates its certificate and applies another
//! work with the new one — every connection to the hub a CONNECT tunnel in tinyproxy's log —
//! and the hub kubeconfig secret it writes carries `proxy-url` and the CA bundle.
//!
//! The hub stays reachable directly as well (the test runs without network namespaces, which
//! would need a veth pair and routes the test cannot set up portably); the proof that the
//! traffic went through the proxy is tinyproxy's log of tunnels to the hub's address growing
//! with each step.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::time::Duration;

use base64::Engine as _;
use common::{Klusterlets, flotilla_at, hub_service_account, hub_token, join_local, ok, start_hub};
use flotilla_api::cluster::{consts::managed_cluster as mc, v1::ManagedCluster};
use flotilla_core::conditions;
use flotilla_testing::{ControlPlane, proxy::Proxy, wait};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;

const TIMEOUT: Duration = Duration::from_secs(120);
/// Lifetime of the hub's certificates: Kubernetes backdates `notBefore` by five minutes, so the
/// klusterlet renews 15–36 s after each issue.
const SIGNING: Duration = Duration::from_secs(120);

fn is_true(cluster: &ManagedCluster, type_: &str) -> bool {
    cluster
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| conditions::find(c, type_))
        .is_some_and(|c| c.status == "True")
}

async fn wait_for<T>(what: &str, check: impl AsyncFn() -> Option<T>) -> T {
    wait::until(what, TIMEOUT, || async { Ok::<_, String>(check().await) })
        .await
        .unwrap()
}

async fn hub_secret(managed: &kube::Client) -> Secret {
    Api::<Secret>::namespaced(managed.clone(), "open-cluster-management-agent")
        .get("hub-kubeconfig-secret")
        .await
        .unwrap()
}

fn data(secret: &Secret, key: &str) -> Vec<u8> {
    secret.data.as_ref().unwrap()[key].0.clone()
}

/// The tails of the klusterlet's and the hub's logs, for a failure message.
fn logs(state: &std::path::Path) -> String {
    let tail = |path: std::path::PathBuf| {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        format!(
            "--- {}\n{}",
            path.display(),
            lines[lines.len().saturating_sub(40)..].join("\n")
        )
    };
    format!(
        "{}\n{}",
        tail(state.join("klusterlets/proxied/klusterlet.log")),
        tail(state.join("hub.log"))
    )
}

#[tokio::test]
async fn a_klusterlet_behind_an_https_proxy_joins_works_and_rotates_through_it() {
    let (hub, managed, proxy) = tokio::join!(
        ControlPlane::builder("proxy-hub")
            .signing_duration(SIGNING)
            .start(),
        ControlPlane::start("proxy-managed"),
        Proxy::builder().https().start()
    );
    let (hub, managed, proxy) = (hub.unwrap(), managed.unwrap(), proxy.unwrap());
    let hub_address = hub.server().trim_start_matches("https://").to_owned();
    let state = tempfile::tempdir().unwrap();
    let _klusterlets = Klusterlets(state.path().to_owned());
    let state = state.path();
    let admin = hub.admin_kubeconfig();
    let proxy_ca = state.join("proxy-ca.pem");
    std::fs::write(&proxy_ca, proxy.ca_pem().unwrap()).unwrap();
    let proxy_args = [
        "--proxy-url",
        proxy.url(),
        "--proxy-ca",
        proxy_ca.to_str().unwrap(),
    ];

    let token = hub_token(&ok(flotilla_at(state, admin, &["init"])));
    let _hub = start_hub(&hub_service_account(&hub, state), &state.join("hub.log"), &[]);

    // --dry-run shows the bootstrap kubeconfig; CA discovery already went through the proxy.
    let mut dry_run = vec![
        "join",
        "--dry-run",
        "-o",
        "json",
        "--hub-token",
        &token,
        "--hub-apiserver",
        hub.server(),
        "--cluster-name",
        "proxied",
    ];
    dry_run.extend_from_slice(&proxy_args);
    let printed: serde_json::Value =
        serde_json::from_str(&ok(flotilla_at(state, managed.admin_kubeconfig(), &dry_run))).unwrap();
    let secret = printed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "Secret")
        .unwrap();
    let bootstrap: serde_json::Value =
        serde_yaml::from_str(secret["stringData"]["kubeconfig"].as_str().unwrap()).unwrap();
    let cluster = &bootstrap["clusters"][0]["cluster"];
    assert_eq!(cluster["proxy-url"], proxy.url());
    let bundle = base64::engine::general_purpose::STANDARD
        .decode(cluster["certificate-authority-data"].as_str().unwrap())
        .unwrap();
    let bundle = String::from_utf8(bundle).unwrap();
    assert!(bundle.starts_with(hub.ca_pem().trim()), "hub CA first");
    assert!(
        bundle.contains(proxy.ca_pem().unwrap().trim()),
        "proxy CA appended"
    );
    let after_discovery = proxy.connects_to(&hub_address);
    assert!(
        after_discovery >= 1,
        "discovery went through the proxy:\n{}",
        proxy.log()
    );

    // Join for real, accept, Available.
    let mut join = vec!["--lease-duration-seconds=2"];
    join.extend_from_slice(&proxy_args);
    ok(join_local(
        state,
        managed.admin_kubeconfig(),
        hub.server(),
        &token,
        "proxied",
        &join,
    ));
    ok(flotilla_at(
        state,
        admin,
        &["accept", "--wait", "--clusters", "proxied", "--timeout", "120s"],
    ));
    let clusters: Api<ManagedCluster> = Api::all(hub.admin_client().await.unwrap());
    wait_for("proxied joined and available", async || {
        let c = clusters.get_opt("proxied").await.ok().flatten()?;
        (is_true(&c, mc::CONDITION_JOINED) && is_true(&c, mc::CONDITION_AVAILABLE)).then_some(())
    })
    .await;
    let managed_admin = managed.admin_client().await.unwrap();
    let written = hub_secret(&managed_admin).await;
    let kubeconfig: serde_json::Value = serde_yaml::from_slice(&data(&written, "kubeconfig")).unwrap();
    assert_eq!(kubeconfig["clusters"][0]["cluster"]["proxy-url"], proxy.url());
    assert_eq!(
        kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"],
        cluster["certificate-authority-data"],
        "the CA bundle is kept"
    );
    let after_join = proxy.connects_to(&hub_address);
    assert!(after_join > after_discovery, "{}", proxy.log());

    // A ManifestWork reaches the cluster: the work agent's watches run through the proxy too.
    let apply_work = async |name: &str| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cm.yaml"),
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default}}\ndata: {{via: proxy}}\n"),
        )
        .unwrap();
        ok(flotilla_at(
            state,
            admin,
            &[
                "create",
                "work",
                name,
                "-f",
                dir.path().to_str().unwrap(),
                "--clusters",
                "proxied",
            ],
        ));
        let config_maps: Api<ConfigMap> = Api::namespaced(managed_admin.clone(), "default");
        wait_for(&format!("ConfigMap {name} applied"), async || {
            config_maps.get_opt(name).await.ok().flatten()
        })
        .await;
    };
    apply_work("before-rotation").await;

    // The certificate is rotated through the proxy, and the new one works.
    let first_cert = data(&written, "tls.crt");
    wait::until("hub certificate rotated", SIGNING, || async {
        let cert = data(&hub_secret(&managed_admin).await, "tls.crt");
        Ok::<_, String>((cert != first_cert).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs(state)));
    wait_for("rotation reported", async || {
        let c = clusters.get_opt("proxied").await.ok().flatten()?;
        is_true(&c, mc::CONDITION_CLUSTER_CERTIFICATE_ROTATED).then_some(())
    })
    .await;
    apply_work("after-rotation").await;
    let cluster = clusters.get("proxied").await.unwrap();
    assert!(is_true(&cluster, mc::CONDITION_AVAILABLE));
    let rotated = hub_secret(&managed_admin).await;
    let kubeconfig: serde_json::Value = serde_yaml::from_slice(&data(&rotated, "kubeconfig")).unwrap();
    assert_eq!(
        kubeconfig["clusters"][0]["cluster"]["proxy-url"],
        proxy.url(),
        "rotation keeps the proxy"
    );
    assert!(proxy.connects_to(&hub_address) > after_join, "{}", proxy.log());
}

#[test]
fn join_through_a_proxy_that_is_not_there_names_the_proxy() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let proxy = format!("http://127.0.0.1:{port}");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["join", "--dry-run", "--cluster-name", "c1"])
        .args(["--hub-token", "abcdef.0123456789abcdef"])
        .args(["--hub-apiserver", "https://hub.invalid:6443"])
        .args(["--proxy-url", &proxy])
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("cannot connect to the proxy {proxy}")),
        "{stderr}"
    );
    assert!(stderr.contains("read kube-public/cluster-info"), "{stderr}");
}
