//! The registration agent behind a forward proxy (a real tinyproxy on loopback, and stunnel in
//! front of it for an `https://` proxy): with `proxy-url` in the bootstrap kubeconfig it
//! registers, is accepted and renews its lease through HTTP CONNECT tunnels the proxy logs,
//! and the hub kubeconfig secret it writes keeps the proxy and the CA bundle. The three proxy
//! faults — nothing listening at the proxy URL, a proxy whose rules refuse CONNECT to the
//! hub's port, an https proxy whose CA is not in `certificate-authority-data` — each show up
//! as a clear error naming the proxy in the agent's status, retried with backoff. An agent in
//! a network namespace that reaches the host only at the proxy's address joins all the same.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::agent_support;

use agent_support::*;
use base64::{Engine as _, engine::general_purpose::STANDARD};
use flotilla_registration::agent;
use flotilla_registration::agent::{Phase, kubeconfig::HubKubeconfig};
use flotilla_testing::{ControlPlane, netns::Netns, proxy::Proxy};

/// The test's bootstrap kubeconfig with `proxy-url` set and `extra_ca` appended to the CA data.
fn through_proxy(hub: &ControlPlane, proxy_url: &str, extra_ca: Option<&str>) -> String {
    let mut config: serde_yaml::Value = serde_yaml::from_str(&bootstrap_kubeconfig(hub)).unwrap();
    let cluster = &mut config["clusters"][0]["cluster"];
    cluster["proxy-url"] = proxy_url.into();
    if let Some(extra) = extra_ca {
        let ca = STANDARD
            .decode(cluster["certificate-authority-data"].as_str().unwrap())
            .unwrap();
        let bundle = format!("{}\n{extra}", String::from_utf8(ca).unwrap().trim_end());
        cluster["certificate-authority-data"] = STANDARD.encode(bundle).into();
    }
    serde_yaml::to_string(&config).unwrap()
}

/// `host:port` of the hub, as a CONNECT names it.
fn hub_authority(hub: &ControlPlane) -> String {
    hub.server().trim_start_matches("https://").to_owned()
}

/// Runs an agent whose bootstrap kubeconfig goes through `proxy_url` (with `extra_ca`) until
/// it has joined, and returns its hub kubeconfig secret's kubeconfig.
async fn join_through(
    namespace: &str,
    cluster: &str,
    proxy_url: &str,
    extra_ca: Option<&str>,
) -> HubKubeconfig {
    init_tracing();
    let (hub, managed) = planes().await;
    let hub_admin = hub.admin_client().await.unwrap();
    let managed_admin = managed.admin_client().await.unwrap();
    ensure_bootstrap_rbac(&hub_admin).await;
    let bootstrap = through_proxy(hub, proxy_url, extra_ca);
    prepare_namespace(&managed_admin, namespace, bootstrap.as_bytes()).await;
    let mut opts = options(namespace, Some(cluster));
    opts.lease_duration_seconds = 2;
    let agent = RunningAgent::start(managed, opts).await;

    let csr = wait_csrs(&hub_admin, cluster, 1).await.remove(0);
    decide_csr(&hub_admin, csr.metadata.name.as_deref().unwrap(), true).await;
    agent
        .wait("certificate written", |s| s.phase == Phase::WaitingForAcceptance)
        .await;
    accept(&hub_admin, cluster).await;
    let joined = agent.wait("joined", |s| s.phase == Phase::Joined).await;
    // The lease is renewed with the agent's own certificate, through the proxy too.
    agent
        .wait("lease renewed", |s| s.lease_renewals > joined.lease_renewals)
        .await;

    let secret = hub_secret(&managed_admin, namespace).await.unwrap();
    let text = String::from_utf8(secret_data(&secret, "kubeconfig").to_vec()).unwrap();
    let written = HubKubeconfig::parse(&text, "hub kubeconfig").unwrap();
    assert_eq!(written.cluster.proxy_url.as_deref(), Some(proxy_url));
    assert_eq!(
        written.endpoint(),
        HubKubeconfig::parse(&bootstrap, "bootstrap").unwrap().endpoint(),
        "server, proxy and CA bundle copied from the bootstrap kubeconfig"
    );
    agent.stop().await;
    written
}

#[tokio::test]
async fn the_agent_joins_through_an_http_proxy_and_keeps_it_in_the_hub_kubeconfig() {
    let proxy = Proxy::start().await.unwrap();
    let (hub, _) = planes().await;
    join_through("agent-proxy-http", "proxy-http-c1", proxy.url(), None).await;
    let connects = proxy.connects_to(&hub_authority(hub));
    assert!(
        connects >= 3,
        "bootstrap, CSR, lease: {connects} tunnels\n{}",
        proxy.log()
    );
}

#[tokio::test]
async fn the_agent_joins_through_an_https_proxy_whose_ca_is_appended_to_the_ca_data() {
    let proxy = Proxy::builder().https().start().await.unwrap();
    let (hub, _) = planes().await;
    let written = join_through("agent-proxy-https", "proxy-https-c1", proxy.url(), proxy.ca_pem()).await;
    let bundle = String::from_utf8(written.endpoint().ca_data.unwrap()).unwrap();
    assert!(
        bundle.contains(proxy.ca_pem().unwrap().trim()),
        "the proxy CA is kept"
    );
    assert_eq!(
        bundle.matches("BEGIN CERTIFICATE").count(),
        2,
        "hub CA and proxy CA"
    );
    assert!(proxy.connects_to(&hub_authority(hub)) >= 3, "{}", proxy.log());
}

/// Starts an agent with `bootstrap`, waits for an error containing every one of `expected`,
/// and checks it is retried (more errors follow, the agent keeps running, nothing reached the
/// hub).
async fn fails_with(namespace: &str, cluster: &str, bootstrap: &str, expected: &[&str]) -> String {
    init_tracing();
    let (hub, managed) = planes().await;
    let hub_admin = hub.admin_client().await.unwrap();
    let managed_admin = managed.admin_client().await.unwrap();
    prepare_namespace(&managed_admin, namespace, bootstrap.as_bytes()).await;
    let agent = RunningAgent::start(managed, options(namespace, Some(cluster))).await;
    let failed = agent
        .wait(&format!("an error mentioning {expected:?}"), |s| {
            s.last_error
                .as_deref()
                .is_some_and(|e| expected.iter().all(|x| e.contains(x)))
        })
        .await;
    let retried = agent
        .wait("the error retried", |s| s.error_count >= failed.error_count + 2)
        .await;
    assert_eq!(retried.phase, Phase::Bootstrapping);
    assert_eq!(retried.last_error, failed.last_error);
    assert!(!agent.task.is_finished(), "the agent keeps running");
    assert!(managed_cluster(&hub_admin, cluster).await.is_none());
    let error = failed.last_error.unwrap();
    eprintln!("{namespace}: {error}");
    error
}

#[tokio::test]
async fn an_unreachable_proxy_is_named_in_the_agents_error_not_the_hub() {
    let (hub, _) = planes().await;
    // A proxy that was there and is gone: its port refuses connections.
    let mut proxy = Proxy::start().await.unwrap();
    let url = proxy.url().to_owned();
    proxy.stop();
    let error = fails_with(
        "agent-proxy-gone",
        "proxy-gone",
        &through_proxy(hub, &url, None),
        &[
            &format!("cannot connect to the proxy {url}"),
            "Connection refused",
        ],
    )
    .await;
    assert!(
        error.starts_with("get ManagedCluster proxy-gone on the hub: cannot connect to the proxy"),
        "{error}"
    );
}

#[tokio::test]
async fn a_proxy_that_refuses_connect_to_the_hub_says_it_refused_the_tunnel() {
    let (hub, _) = planes().await;
    // tinyproxy's rules allow tunnels to port 443 only: CONNECT to the hub gets 403.
    let proxy = Proxy::builder()
        .allow_connect_ports(&[443])
        .start()
        .await
        .unwrap();
    fails_with(
        "agent-proxy-refuses",
        "proxy-refuses",
        &through_proxy(hub, proxy.url(), None),
        &[
            &format!(
                "the proxy {} refused the tunnel to the hub {}",
                proxy.url(),
                hub_authority(hub)
            ),
            "answered CONNECT with 403 Forbidden",
        ],
    )
    .await;
    assert!(
        proxy.log().contains(&format!("CONNECT {}", hub_authority(hub))),
        "{}",
        proxy.log()
    );
}

#[tokio::test]
async fn an_https_proxy_whose_ca_is_missing_says_where_the_proxy_ca_belongs() {
    let (hub, _) = planes().await;
    let proxy = Proxy::builder().https().start().await.unwrap();
    fails_with(
        "agent-proxy-untrusted",
        "proxy-untrusted",
        // The hub's CA only: the proxy's certificate cannot be verified.
        &through_proxy(hub, proxy.url(), None),
        &[
            &format!("the certificate of the proxy {} was not trusted", proxy.url()),
            "certificate-authority-data",
        ],
    )
    .await;
    assert_eq!(proxy.connects_to(&hub_authority(hub)), 0, "no tunnel was opened");
}

/// `kubeconfig` (YAML) with `proxy-url` set on its cluster.
fn with_proxy(kubeconfig: &str, proxy_url: &str) -> String {
    let mut config: serde_yaml::Value = serde_yaml::from_str(kubeconfig).unwrap();
    config["clusters"][0]["cluster"]["proxy-url"] = proxy_url.into();
    serde_yaml::to_string(&config).unwrap()
}

#[tokio::test]
async fn an_agent_that_cannot_reach_the_hub_directly_joins_through_the_proxy() {
    init_tracing();
    let (hub, managed) = planes().await;
    let hub_admin = hub.admin_client().await.unwrap();
    let managed_admin = managed.admin_client().await.unwrap();
    ensure_bootstrap_rbac(&hub_admin).await;
    // The agent's network: the host at one address, where only the proxy listens.
    let netns = tokio::task::spawn_blocking(Netns::create).await.unwrap().unwrap();
    let proxy = Proxy::builder().listen(netns.host_addr()).start().await.unwrap();
    let hub_address: std::net::SocketAddr = hub_authority(hub).parse().unwrap();
    let direct = netns
        .spawn(move || async move { tokio::net::TcpStream::connect(hub_address).await.map(|_| ()) })
        .await
        .unwrap();
    assert!(direct.is_err(), "the hub must not be reachable directly");

    let (namespace, cluster) = ("agent-proxy-only", "proxy-only-c1");
    let bootstrap = through_proxy(hub, proxy.url(), None);
    prepare_namespace(&managed_admin, namespace, bootstrap.as_bytes()).await;
    let mut opts = options(namespace, Some(cluster));
    opts.lease_duration_seconds = 2;
    let status = opts.status.clone();
    // The managed cluster is reached through the proxy as well: nothing else is reachable.
    let managed_kubeconfig = with_proxy(
        &std::fs::read_to_string(managed.admin_kubeconfig()).unwrap(),
        proxy.url(),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let _agent = netns.spawn(move || async move {
        let client = flotilla_testing::kubeconfig::client_from_yaml(&managed_kubeconfig)
            .await
            .unwrap();
        tokio::select! {
            result = agent::run(client, opts) => panic!("the agent ended: {result:?}"),
            _ = stopped => {}
        }
    });

    let csr = wait_csrs(&hub_admin, cluster, 1).await.remove(0);
    decide_csr(&hub_admin, csr.metadata.name.as_deref().unwrap(), true).await;
    wait_status(&status, "certificate written", TIMEOUT, |s| {
        s.phase == Phase::WaitingForAcceptance
    })
    .await;
    accept(&hub_admin, cluster).await;
    let joined = wait_status(&status, "joined", TIMEOUT, |s| s.phase == Phase::Joined).await;
    wait_status(&status, "lease renewed", TIMEOUT, |s| {
        s.lease_renewals > joined.lease_renewals
    })
    .await;
    assert!(proxy.connects_to(&hub_authority(hub)) >= 3, "{}", proxy.log());
    let _ = stop.send(());
}
