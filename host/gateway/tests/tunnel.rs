//! The cluster-proxy tunnel with its real programs: a managed kube-apiserver in a network
//! namespace that reaches the host at one address only (the hub has no route to it), the
//! tunnel agent beside it, the tunnel server on the host. The hub reaches the apiserver
//! through the tunnel; only a cluster's own agent credential opens that cluster's tunnel; a
//! cluster without an agent, or whose agent is gone, is a clear error at once.

use std::{net::IpAddr, time::Duration};

use flotilla_gateway::{
    tunnel::{self, TunnelError},
    upstream::{Target, Upstreams},
};
use flotilla_testing::{
    ControlPlane,
    netns::Netns,
    pki::{CertAndKey, CertificateAuthority},
    tunnel::{ADDON, TunnelAgent, TunnelServer},
};
use http_body_util::{BodyExt as _, Empty};
use hyper::body::Bytes;

const DEADLINE: Duration = Duration::from_secs(10);

/// The add-on agent credential the hub issues to `cluster`'s agent of `addon`.
fn agent_credential(ca: &CertificateAuthority, cluster: &str, addon: &str) -> CertAndKey {
    let group = format!("system:open-cluster-management:cluster:{cluster}:addon:{addon}");
    ca.issue_client(
        &format!("{group}:agent:proxy-agent"),
        &[&group, &format!("system:open-cluster-management:addon:{addon}")],
    )
    .unwrap()
}

/// A tunnel server on the namespace's host address, trusting `ca` for agents.
fn server(ca: &CertificateAuthority, netns: &Netns) -> TunnelServer {
    let serving = ca
        .issue_serving_with_ips("tunnel", &[], &[IpAddr::V4(netns.host_addr())])
        .unwrap();
    TunnelServer::start(netns.host_addr(), ca.cert_pem(), &serving, ca.cert_pem(), ADDON).unwrap()
}

/// Starts an agent inside the namespace.
async fn agent_in(
    netns: &Netns,
    server: &TunnelServer,
    credential: CertAndKey,
    target: String,
) -> TunnelAgent {
    let (url, ca) = (server.agent_url(), server.ca_pem().to_owned());
    netns
        .spawn(move || async move { TunnelAgent::start(&url, &ca, &credential, &target) })
        .await
        .unwrap()
        .unwrap()
}

/// Waits until the server's list of connected clusters satisfies `done`.
async fn until_connected(server: &TunnelServer, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let started = std::time::Instant::now();
    loop {
        let clusters = tunnel::connected(server.socket(), DEADLINE).await.unwrap();
        if done(&clusters) {
            return clusters;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "connected clusters stay {clusters:?}; server log:\n{}",
            server.log_tail(20)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the server has logged `what` at least `times` times.
async fn until_logged(server: &TunnelServer, what: &str, times: usize) {
    let started = std::time::Instant::now();
    while server.log_tail(1000).matches(what).count() < times {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the server did not log {what:?} {times} times:\n{}",
            server.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn healthz(upstreams: &Upstreams, cluster: &str, managed: &ControlPlane) -> Result<String, String> {
    let target = Target::new(managed.server(), Some(managed.ca_pem().as_bytes())).unwrap();
    let request = http::Request::get("/healthz")
        .header(http::header::HOST, &target.authority)
        .body(Empty::<Bytes>::new().map_err(|never| match never {}).boxed())
        .unwrap();
    let response = upstreams
        .send(cluster, &target, request)
        .await
        .map_err(|e| e.to_string())?;
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Ok(String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn an_unroutable_cluster_is_reached_through_its_own_tunnel_only() {
    let ca = CertificateAuthority::new("hub-ca").unwrap();
    let netns = Netns::create().unwrap();
    let managed = netns
        .spawn(|| async {
            ControlPlane::builder("tunnel-managed")
                .install_crds(false)
                .start()
                .await
        })
        .await
        .unwrap()
        .unwrap();
    let apiserver = managed.server().trim_start_matches("https://").to_owned();
    // The apiserver listens on the namespace's loopback: the host cannot reach it.
    assert!(
        std::net::TcpStream::connect_timeout(&apiserver.parse().unwrap(), Duration::from_secs(1)).is_err(),
        "the managed apiserver must be unreachable from the host"
    );
    let server = server(&ca, &netns);
    let upstreams = Upstreams::new(server.socket().to_owned(), DEADLINE, DEADLINE);

    // Credentials that are not cluster c1's cluster-proxy agent's open no tunnel for it: the
    // klusterlet's own, another add-on's agent's, one whose groups name another cluster, and
    // one from another CA (refused in the TLS handshake).
    let stranger = CertificateAuthority::new("stranger-ca").unwrap();
    let refused = [
        ca.issue_client(
            "system:open-cluster-management:c1:agent",
            &["system:open-cluster-management:c1"],
        )
        .unwrap(),
        agent_credential(&ca, "c1", "helloworld"),
        ca.issue_client(
            "system:open-cluster-management:cluster:c1:addon:cluster-proxy:agent:x",
            &["system:open-cluster-management:cluster:c2:addon:cluster-proxy"],
        )
        .unwrap(),
        agent_credential(&stranger, "c1", ADDON),
    ];
    let mut hostile = Vec::new();
    for credential in refused {
        hostile.push(agent_in(&netns, &server, credential, apiserver.clone()).await);
    }
    let _c2 = agent_in(
        &netns,
        &server,
        agent_credential(&ca, "c2", ADDON),
        apiserver.clone(),
    )
    .await;
    until_logged(&server, "refused an agent", 3).await;
    until_logged(&server, "TLS handshake error", 1).await;
    let clusters = until_connected(&server, |c| c.contains(&"c2".to_owned())).await;
    assert_eq!(clusters, ["c2"]);
    match tunnel::connect(server.socket(), "c1", DEADLINE).await {
        Err(TunnelError::NotConnected(message)) => assert!(message.contains("c1"), "{message}"),
        other => panic!("a cluster without its agent must be refused at once, got {other:?}"),
    }
    drop(hostile);

    // c1's own agent opens its tunnel; the apiserver answers through it.
    let c1 = agent_in(
        &netns,
        &server,
        agent_credential(&ca, "c1", ADDON),
        apiserver.clone(),
    )
    .await;
    until_connected(&server, |c| c.contains(&"c1".to_owned())).await;
    assert_eq!(healthz(&upstreams, "c1", &managed).await.unwrap(), "ok");
    // Again, on the kept-alive connection.
    assert_eq!(healthz(&upstreams, "c1", &managed).await.unwrap(), "ok");

    // A name that is no cluster's never reaches the server's request line.
    assert!(matches!(
        tunnel::connect(server.socket(), "c1:443 HTTP/1.1\r\nX: y", DEADLINE).await,
        Err(TunnelError::InvalidCluster(_))
    ));

    // The agent goes away: the tunnel is gone, and saying so takes no longer than the
    // server's noticing.
    drop(c1);
    until_connected(&server, |c| !c.contains(&"c1".to_owned())).await;
    let started = std::time::Instant::now();
    let error = healthz(&upstreams, "c1", &managed).await.unwrap_err();
    assert!(error.contains("no connected cluster-proxy agent"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(2));
}
