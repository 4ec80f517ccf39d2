//! The ClusterGateway API behind a real hub kube-apiserver's aggregation layer, reaching a
//! managed kube-apiserver the hub has no route to (it listens in a network namespace) through
//! the real tunnel: OCM's documented commands work as written — `kubectl get --raw
//! …/clustergateways/<cluster>/proxy/healthz`, and plain kubectl with a kubeconfig whose server
//! ends in `…/proxy` — with the managed service account's rights on the cluster, Forbidden
//! until it is granted some. A cluster that does not exist, one without a token and one without
//! a connected agent each answer a clear error at once; nobody but the aggregation layer may
//! call the gateway. A revoked token is the managed cluster's own 401, passed back as it is.

use std::{net::IpAddr, time::Duration};

use base64::{Engine as _, engine::general_purpose::STANDARD};
use flotilla_api::{
    authentication::consts::{IS_MANAGED_SERVICE_ACCOUNT_LABEL, IS_MANAGED_SERVICE_ACCOUNT_VALUE},
    gateway::consts::proxy_path,
};
use flotilla_gateway::{
    Settings,
    registration::{self, Backend},
};
use flotilla_kube::feed::Feeds;
use flotilla_testing::{ControlPlane, netns::Netns, pki::CertificateAuthority};
use k8s_openapi::api::{
    authentication::v1::TokenRequest,
    core::v1::{Secret, ServiceAccount},
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;

const HUB_NAMESPACE: &str = "open-cluster-management-hub";
const SERVICE: &str = "flotilla-gateway";
const TOKEN_SECRET: &str = "cluster-gateway";
const MSA_NAMESPACE: &str = "open-cluster-management-managed-serviceaccount";

async fn apply(client: &Client, object: serde_json::Value) {
    let (api_version, kind) = (
        object["apiVersion"].as_str().unwrap(),
        object["kind"].as_str().unwrap(),
    );
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    let name = object["metadata"]["name"].as_str().unwrap().to_owned();
    let api: Api<kube::api::DynamicObject> = match (caps.scope, object["metadata"]["namespace"].as_str()) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
        _ => Api::all_with(client.clone(), &resource),
    };
    api.patch(&name, &PatchParams::apply("test").force(), &Patch::Apply(object))
        .await
        .unwrap();
}

/// Runs kubectl against the hub with `kubeconfig` (the admin's when `None`).
fn kubectl(
    hub: &ControlPlane,
    kubeconfig: Option<&std::path::Path>,
    args: &[&str],
) -> Result<String, String> {
    let mut command = hub.kubectl();
    if let Some(path) = kubeconfig {
        command
            .env("KUBECONFIG", path)
            .args(["--kubeconfig", &path.display().to_string()]);
    }
    let output = command.args(args).output().unwrap();
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// A token of service account `cluster-gateway` on the managed cluster, as the
/// managed-serviceaccount agent requests it.
async fn service_account_token(managed: &Client) -> String {
    apply(
        managed,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MSA_NAMESPACE}}),
    )
    .await;
    apply(
        managed,
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": TOKEN_SECRET, "namespace": MSA_NAMESPACE}}),
    )
    .await;
    let accounts: Api<ServiceAccount> = Api::namespaced(managed.clone(), MSA_NAMESPACE);
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 3600}})).unwrap();
    let issued = accounts
        .create_token_request(TOKEN_SECRET, &PostParams::default(), &request)
        .await
        .unwrap();
    issued.status.unwrap().token
}

/// The cluster namespace, its ManagedCluster (URL and CA of `managed`), and when `token` is
/// given the managed service account's token Secret.
async fn register_cluster(hub: &Client, name: &str, managed: &ControlPlane, token: Option<&str>) {
    apply(
        hub,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )
    .await;
    apply(
        hub,
        json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
               "metadata": {"name": name},
               "spec": {"hubAcceptsClient": true, "managedClusterClientConfigs": [
                   {"url": managed.server(), "caBundle": STANDARD.encode(managed.ca_pem())}]}}),
    )
    .await;
    if let Some(token) = token {
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": TOKEN_SECRET, "namespace": name,
                         "labels": {IS_MANAGED_SERVICE_ACCOUNT_LABEL: IS_MANAGED_SERVICE_ACCOUNT_VALUE}},
            "type": "Opaque",
            "data": {"token": STANDARD.encode(token), "ca.crt": STANDARD.encode(managed.ca_pem())},
        }))
        .unwrap();
        Api::<Secret>::namespaced(hub.clone(), name)
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }
}

/// Retries `kubectl get --raw path` until it succeeds (the APIService becomes available and
/// the caches fill), and returns what it printed.
async fn until_raw(hub: &ControlPlane, path: &str) -> String {
    let started = std::time::Instant::now();
    loop {
        match kubectl(hub, None, &["get", "--raw", path]) {
            Ok(out) => return out,
            Err(e) if started.elapsed() > Duration::from_secs(60) => panic!("get --raw {path}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

// kubectl runs blocking: the gateway serves the apiserver from the other worker meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_reaches_an_unroutable_cluster_through_the_clustergateway_api() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let hub = ControlPlane::start("gateway-hub").await.unwrap();
    let hub_admin = hub.admin_client().await.unwrap();
    let netns = Netns::create().unwrap();
    let host = netns.host_addr();
    let (managed, token) = netns
        .spawn(|| async {
            let managed = ControlPlane::builder("gateway-managed")
                .install_crds(false)
                .start()
                .await
                .unwrap();
            let token = service_account_token(&managed.admin_client().await.unwrap()).await;
            (managed, token)
        })
        .await
        .unwrap();

    // The tunnel: its server beside the hub, c1's agent beside its apiserver.
    let (tunnels, _agent) = netns
        .tunnel_from(&hub, "c1", managed.server().trim_start_matches("https://"))
        .await
        .unwrap();

    // c1 is reachable and has a token; c2 has no token; c3 has a token but no agent.
    register_cluster(&hub_admin, "c1", &managed, Some(&token)).await;
    register_cluster(&hub_admin, "c2", &managed, None).await;
    register_cluster(&hub_admin, "c3", &managed, Some(&token)).await;

    // The gateway, on an address of the host the hub's apiserver can dial (not loopback).
    let mut feeds = Feeds::new(hub_admin.clone());
    let sources = flotilla_gateway::sources(&mut feeds, hub_admin.clone(), TOKEN_SECRET);
    let feeds = tokio::spawn(feeds.run());
    let backend = Backend {
        namespace: HUB_NAMESPACE.to_owned(),
        service: SERVICE.to_owned(),
        address: None,
    };
    let gateway_ca = CertificateAuthority::new("gateway-ca").unwrap();
    let gateway_cert = gateway_ca
        .issue_serving_with_ips("gateway", &[&backend.host()], &[IpAddr::V4(host)])
        .unwrap();
    let gateway = flotilla_gateway::serve(
        Settings {
            bind: (host, 0).into(),
            cert_pem: gateway_cert.cert_pem.clone(),
            key_pem: gateway_cert.key_pem.clone(),
            front_proxy: registration::front_proxy(&hub_admin).await.unwrap(),
            tunnel_socket: tunnels.socket().to_owned(),
        },
        sources,
    )
    .await
    .unwrap();
    apply(
        &hub_admin,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HUB_NAMESPACE}}),
    )
    .await;
    let backend = Backend {
        address: Some((IpAddr::V4(host), gateway.addr().port())),
        ..backend
    };
    registration::register(&hub_admin, &backend, gateway_ca.cert_pem())
        .await
        .unwrap();

    // OCM's first command.
    assert_eq!(until_raw(&hub, &proxy_path("c1", "/healthz")).await, "ok");

    // The ClusterGateways follow the ManagedClusters.
    let listed = kubectl(&hub, None, &["get", "clustergateways", "-o", "name"]).unwrap();
    assert_eq!(
        listed.lines().collect::<Vec<_>>(),
        [
            "clustergateway.cluster.core.oam.dev/c1",
            "clustergateway.cluster.core.oam.dev/c2",
            "clustergateway.cluster.core.oam.dev/c3"
        ]
    );
    let c1 = kubectl(&hub, None, &["get", "clustergateway", "c1", "-o", "json"]).unwrap();
    assert!(!c1.contains(&token), "a ClusterGateway never shows the token");
    // Healthy when the gateway can serve it: a token and a connected tunnel.
    for (cluster, healthy) in [
        ("c1", "true/"),
        ("c2", "false/Unknown:NoManagedServiceAccountToken"),
        ("c3", "false/Unknown:TunnelNotConnected"),
    ] {
        let status = kubectl(
            &hub,
            None,
            &[
                "get",
                "clustergateway",
                cluster,
                "-o",
                "jsonpath={.status.healthy}/{.status.healthyReason}",
            ],
        )
        .unwrap();
        assert_eq!(status, healthy, "{cluster}");
    }

    // Plain kubectl with the server moved onto the gateway: the managed service account has
    // no rights there yet, so the managed cluster refuses it — as itself, not as the hub user.
    let dir = tempfile::tempdir().unwrap();
    let edited = dir.path().join("c1.kubeconfig");
    let mut config: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(hub.admin_kubeconfig()).unwrap()).unwrap();
    let server = format!("{}{}", hub.server(), proxy_path("c1", ""))
        .trim_end_matches('/')
        .to_owned();
    config["clusters"][0]["cluster"]["server"] = server.into();
    std::fs::write(&edited, serde_yaml::to_string(&config).unwrap()).unwrap();
    let refused = kubectl(&hub, Some(&edited), &["get", "ns"]).unwrap_err();
    assert!(
        refused.contains("Forbidden")
            && refused.contains(&format!("system:serviceaccount:{MSA_NAMESPACE}:{TOKEN_SECRET}")),
        "{refused}"
    );

    // Granted on the managed cluster, the same command works.
    let _managed = netns
        .spawn(move || async move {
            let admin = ControlPlane::admin_client(&managed).await.unwrap();
            apply(&admin, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "gateway-test-namespaces"},
                "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list"]}]})).await;
            apply(&admin, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "gateway-test-namespaces"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gateway-test-namespaces"},
                "subjects": [{"kind": "ServiceAccount", "name": TOKEN_SECRET, "namespace": MSA_NAMESPACE}]})).await;
            managed
        })
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let namespaces = loop {
        match kubectl(&hub, Some(&edited), &["get", "ns", "-o", "name"]) {
            Ok(out) => break out,
            Err(e) if started.elapsed() > Duration::from_secs(30) => panic!("{e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    assert!(
        namespaces.contains(&format!("namespace/{MSA_NAMESPACE}")),
        "{namespaces}"
    );
    assert!(
        !namespaces.contains("namespace/c1"),
        "these are the managed cluster's namespaces: {namespaces}"
    );

    // A revoked or expired token: the managed cluster's own 401 comes back as it is.
    let secrets: Api<Secret> = Api::namespaced(hub_admin.clone(), "c1");
    let set_token = |token: String| {
        let secrets = secrets.clone();
        async move {
            let patch = json!({"data": {"token": STANDARD.encode(token)}});
            secrets
                .patch(TOKEN_SECRET, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
        }
    };
    set_token("revoked".to_owned()).await;
    let started = std::time::Instant::now();
    let unauthorized = loop {
        match kubectl(&hub, Some(&edited), &["get", "ns"]) {
            Err(e) if e.contains("Unauthorized") => break e,
            other => assert!(started.elapsed() < Duration::from_secs(30), "{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(unauthorized.contains("Unauthorized"), "{unauthorized}");
    set_token(token.clone()).await;

    // Clear errors, at once.
    for (cluster, expected) in [
        ("nope", "not found"),
        ("c2", "no managed service account token"),
        ("c3", "no connected cluster-proxy agent"),
    ] {
        let started = std::time::Instant::now();
        let error = kubectl(&hub, None, &["get", "--raw", &proxy_path(cluster, "/healthz")]).unwrap_err();
        assert!(error.contains(expected), "{cluster}: {error}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{cluster} took {:?}",
            started.elapsed()
        );
    }

    // Only the aggregation layer may call the gateway: without its certificate, 401; with a
    // client certificate of the hub's (not the front proxy's CA), no TLS at all.
    let direct = format!("https://{}{}", gateway.addr(), proxy_path("c1", "/healthz"));
    let ca = reqwest::Certificate::from_pem(gateway_ca.cert_pem().as_bytes()).unwrap();
    let anonymous = reqwest::Client::builder()
        .add_root_certificate(ca.clone())
        .build()
        .unwrap();
    let answer = anonymous
        .get(&direct)
        .header("X-Remote-User", "system:admin")
        .header("X-Remote-Group", "system:masters")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 401);
    let hub_user = hub
        .issue_client("front-proxy-client", &["system:masters"])
        .unwrap();
    let identity =
        reqwest::Identity::from_pem(format!("{}{}", hub_user.cert_pem, hub_user.key_pem).as_bytes()).unwrap();
    let impostor = reqwest::Client::builder()
        .add_root_certificate(ca)
        .identity(identity)
        .build()
        .unwrap();
    assert!(
        impostor.get(&direct).send().await.is_err(),
        "a certificate of the wrong CA is refused in the handshake"
    );
    feeds.abort();
}
