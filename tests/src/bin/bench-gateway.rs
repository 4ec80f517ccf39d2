//! Prints what the cluster gateway costs: requests per second and p50/p99 latency of
//! `GET /healthz` and of a 1 MiB list, made through the hub (kube-apiserver → aggregation
//! layer → gateway → tunnel → the managed kube-apiserver in a network namespace) beside the
//! same requests made directly to the managed apiserver, in the same run, and the hub's own
//! share (a ClusterGateway read, answered by the gateway without a tunnel) and the tunnel's
//! (the gateway's client in this process, no hub apiserver in front); and the tunnel
//! server's resident memory per connected tunnel. Asserts nothing.
//!
//! `cargo run --release -p flotilla-tests --bin bench-gateway -- [REQUESTS [TUNNELS]]`

use std::{
    net::IpAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use base64::{Engine as _, engine::general_purpose::STANDARD};
use flotilla_api::{
    authentication::consts::{IS_MANAGED_SERVICE_ACCOUNT_LABEL, IS_MANAGED_SERVICE_ACCOUNT_VALUE},
    gateway::consts::proxy_path,
};
use flotilla_gateway::registration::{self, Backend};
use flotilla_kube::feed::Feeds;
use flotilla_testing::{ControlPlane, netns::Netns, pki::CertificateAuthority, tunnel::TunnelAgent};
use flotilla_tests::hub_objects::apply;
use http_body_util::BodyExt as _;
use k8s_openapi::api::{authentication::v1::TokenRequest, core::v1::ServiceAccount};
use kube::{Api, Client, api::PostParams};
use serde_json::json;

const SA_NAMESPACE: &str = "bench-gateway";
const TOKEN_SECRET: &str = "cluster-gateway";
const CONCURRENCY: usize = 8;
const LIST_NAMESPACE: &str = "bench-list";

/// The managed side: a service account whose token the gateway uses, allowed to read what
/// is listed, and 1 MiB of ConfigMaps to list.
async fn prepare_managed(managed: &Client) -> anyhow::Result<String> {
    for ns in [SA_NAMESPACE, LIST_NAMESPACE] {
        apply(
            managed,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )
        .await?;
    }
    apply(
        managed,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": TOKEN_SECRET, "namespace": SA_NAMESPACE}}),
    )
    .await?;
    apply(
        managed,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "bench-gateway"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
    )
    .await?;
    apply(
        managed,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "bench-gateway"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "bench-gateway"},
        "subjects": [{"kind": "ServiceAccount", "name": TOKEN_SECRET, "namespace": SA_NAMESPACE}]}),
    )
    .await?;
    let blob = "x".repeat(64 * 1024);
    for i in 0..16 {
        apply(
            managed,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": format!("blob-{i}"), "namespace": LIST_NAMESPACE},
                   "data": {"blob": blob}}),
        )
        .await?;
    }
    let request: TokenRequest = serde_json::from_value(json!({"spec": {"expirationSeconds": 3600}}))?;
    let issued = Api::<ServiceAccount>::namespaced(managed.clone(), SA_NAMESPACE)
        .create_token_request(TOKEN_SECRET, &PostParams::default(), &request)
        .await?;
    Ok(issued.status.context("token status")?.token)
}

/// Latencies of `requests` sequential GETs of `path`, then requests per second of
/// [`CONCURRENCY`] concurrent loops over the same number.
async fn measure(
    client: Client,
    path: String,
    requests: usize,
) -> anyhow::Result<(Vec<Duration>, f64, usize)> {
    let get = |client: Client, path: String| async move {
        let request = http::Request::get(path).body(Vec::new())?;
        let text = client.request_text(request).await?;
        anyhow::Ok(text.len())
    };
    let mut bytes = 0;
    let mut latencies = Vec::with_capacity(requests);
    for _ in 0..requests {
        let started = Instant::now();
        bytes = get(client.clone(), path.clone()).await?;
        latencies.push(started.elapsed());
    }
    let started = Instant::now();
    let loops = (0..CONCURRENCY).map(|_| {
        let (client, path) = (client.clone(), path.clone());
        async move {
            for _ in 0..requests.div_ceil(CONCURRENCY) {
                get(client.clone(), path.clone()).await?;
            }
            anyhow::Ok(())
        }
    });
    futures::future::try_join_all(loops).await?;
    let rps = (requests.div_ceil(CONCURRENCY) * CONCURRENCY) as f64 / started.elapsed().as_secs_f64();
    Ok((latencies, rps, bytes))
}

fn percentiles(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1e3;
    (at(0.50), at(0.99))
}

fn row(what: &str, path: &str, (mut latencies, rps, bytes): (Vec<Duration>, f64, usize)) -> (f64, f64, f64) {
    let (p50, p99) = percentiles(&mut latencies);
    println!("{what:<10} {path:<44} {bytes:>9} B  p50 {p50:>7.2} ms  p99 {p99:>7.2} ms  {rps:>8.0} req/s");
    (p50, p99, rps)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut args = std::env::args().skip(1);
    let requests: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(500);
    let tunnels: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(50);

    let hub = ControlPlane::start("bench-gateway-hub").await?;
    let hub_admin = hub.admin_client().await?;
    let netns = Netns::create()?;
    let host = netns.host_addr();
    let (managed, token) = netns
        .spawn(|| async {
            let managed = ControlPlane::builder("bench-gateway-managed")
                .install_crds(false)
                .start()
                .await?;
            let token = prepare_managed(&managed.admin_client().await?).await?;
            anyhow::Ok((managed, token))
        })
        .await??;
    let managed = Arc::new(managed);

    let (tunnel_server, _agent) = netns
        .tunnel_from(&hub, "c1", managed.server().trim_start_matches("https://"))
        .await?;
    let credential = |cluster: &str| {
        let (common_name, group) = flotilla_testing::netns::agent_subject(cluster);
        hub.issue_client(&common_name, &[&group])
    };

    apply(
        &hub_admin,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "c1"}}),
    )
    .await?;
    apply(
        &hub_admin,
        json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": "c1"},
        "spec": {"hubAcceptsClient": true, "managedClusterClientConfigs": [
            {"url": managed.server(), "caBundle": STANDARD.encode(managed.ca_pem())}]}}),
    )
    .await?;
    apply(
        &hub_admin,
        json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": TOKEN_SECRET, "namespace": "c1",
                     "labels": {IS_MANAGED_SERVICE_ACCOUNT_LABEL: IS_MANAGED_SERVICE_ACCOUNT_VALUE}},
        "data": {"token": STANDARD.encode(&token)}}),
    )
    .await?;

    let mut feeds = Feeds::new(hub_admin.clone());
    let sources = flotilla_gateway::sources(&mut feeds, hub_admin.clone(), TOKEN_SECRET);
    let feeds = tokio::spawn(feeds.run());
    let mut backend = Backend {
        namespace: "open-cluster-management-hub".to_owned(),
        service: "flotilla-gateway".to_owned(),
        address: None,
    };
    let gateway_ca = CertificateAuthority::new("gateway-ca")?;
    let cert = gateway_ca.issue_serving("gateway", &[&backend.host()])?;
    let gateway = flotilla_gateway::serve(
        flotilla_gateway::Settings {
            bind: (host, 0).into(),
            cert_pem: cert.cert_pem,
            key_pem: cert.key_pem,
            front_proxy: registration::front_proxy(&hub_admin).await?,
            tunnel_socket: tunnel_server.socket().to_owned(),
        },
        sources,
    )
    .await?;
    apply(
        &hub_admin,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": backend.namespace}}),
    )
    .await?;
    backend.address = Some((IpAddr::V4(host), gateway.addr().port()));
    registration::register(&hub_admin, &backend, gateway_ca.cert_pem()).await?;

    let healthz = proxy_path("c1", "/healthz");
    let started = Instant::now();
    while hub_admin
        .request_text(http::Request::get(&healthz).body(Vec::new())?)
        .await
        .is_err()
    {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(60),
            "the gateway never answered"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    println!(
        "# {requests} sequential requests (latency), then {requests} over {CONCURRENCY} concurrent loops (req/s)"
    );
    let list = format!("/api/v1/namespaces/{LIST_NAMESPACE}/configmaps");
    let mut rows = Vec::new();
    for path in ["/healthz".to_owned(), list] {
        let direct = {
            let (managed, path) = (managed.clone(), path.clone());
            netns
                .spawn(move || async move { measure(managed.admin_client().await?, path, requests).await })
                .await??
        };
        let direct = row("direct", &path, direct);
        let through = proxy_path("c1", &path);
        let gateway = row(
            "gateway",
            &path,
            measure(hub_admin.clone(), through, requests).await?,
        );
        rows.push((path, direct, gateway));
    }
    // The tunnel alone: the gateway's client in this process, no hub apiserver in front.
    let upstreams = flotilla_gateway::upstream::Upstreams::new(
        tunnel_server.socket().to_owned(),
        Duration::from_secs(10),
        Duration::from_secs(30),
    );
    let target =
        flotilla_gateway::upstream::Target::new(managed.server(), Some(managed.ca_pem().as_bytes()))?;
    for path in [
        "/healthz".to_owned(),
        format!("/api/v1/namespaces/{LIST_NAMESPACE}/configmaps"),
    ] {
        let mut latencies = Vec::with_capacity(requests);
        let mut bytes = 0;
        for _ in 0..requests {
            let started = Instant::now();
            let request = http::Request::get(&path)
                .header(http::header::HOST, &target.authority)
                .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
                .body(
                    http_body_util::Empty::new()
                        .map_err(|never| match never {})
                        .boxed(),
                )?;
            let response = upstreams.send("c1", &target, request).await?;
            bytes = response.into_body().collect().await?.to_bytes().len();
            latencies.push(started.elapsed());
        }
        row("tunnel", &path, (latencies, 0.0, bytes));
    }

    // The floor of the hub's side: the aggregation layer and the gateway answering from its
    // cache, with no tunnel and no managed apiserver.
    let local = "/apis/cluster.core.oam.dev/v1alpha1/clustergateways/c1".to_owned();
    row(
        "hub only",
        "clustergateways/c1 (no tunnel)",
        measure(hub_admin.clone(), local, requests).await?,
    );
    for (path, direct, gateway) in rows {
        println!(
            "ratio      {path:<44} p50 {:.2}x  p99 {:.2}x  req/s {:.2}x",
            gateway.0 / direct.0,
            gateway.1 / direct.1,
            gateway.2 / direct.2
        );
    }

    // Memory per tunnel: the server's resident set with one agent, then with `tunnels` more.
    let rss = |pid| flotilla_tests::status_kib(pid, "VmRSS:");
    let before = rss(tunnel_server.pid());
    let mut agents = Vec::with_capacity(tunnels);
    for i in 0..tunnels {
        let cluster = format!("t{i}");
        agents.push(TunnelAgent::start(
            &tunnel_server.agent_url(),
            tunnel_server.ca_pem(),
            &credential(&cluster)?,
            "127.0.0.1:1",
        )?);
    }
    let started = Instant::now();
    while flotilla_gateway::tunnel::connected(tunnel_server.socket(), Duration::from_secs(5))
        .await?
        .len()
        < tunnels + 1
    {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(120),
            "agents did not connect"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss(tunnel_server.pid());
    println!(
        "tunnel server RSS: {before} KiB with 1 tunnel, {after} KiB with {} tunnels: {:.0} KiB per tunnel",
        tunnels + 1,
        (after.saturating_sub(before)) as f64 / tunnels as f64
    );
    drop(agents);
    feeds.abort();
    Ok(())
}
