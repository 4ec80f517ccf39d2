//! `flotilla hub --cluster-gateway-tunnel-socket …` as deploy/hub's service account: the hub
//! process serves the ClusterGateway API and registers it, so `kubectl get --raw
//! …/clustergateways/<cluster>/proxy/healthz` on the hub reaches a managed kube-apiserver the
//! hub has no route to (it listens in a network namespace) through the real tunnel, with the
//! token the hub may read by name only. The identity stays confined: it registers no other
//! APIService and reads no other Secret.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::time::Duration;

use base64::{Engine as _, engine::general_purpose::STANDARD};
use flotilla_api::{
    authentication::consts::{IS_MANAGED_SERVICE_ACCOUNT_LABEL, IS_MANAGED_SERVICE_ACCOUNT_VALUE},
    cluster::v1::ManagedCluster,
    gateway::consts::proxy_path,
};
use flotilla_testing::{ControlPlane, kubectl, netns::Netns, wait};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::{Api, api::PostParams};
use serde_json::json;

const CLUSTER: &str = "c1";
const TOKEN_SECRET: &str = "cluster-gateway";

fn object<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_process_serves_the_cluster_gateway_as_deploy_hubs_service_account() {
    let state = tempfile::tempdir().unwrap();
    let hub = ControlPlane::start("gateway-e2e-hub").await.unwrap();
    let admin = hub.admin_client().await.unwrap();

    // The managed cluster, unroutable from the hub, and a token of its service account.
    let netns = Netns::create().unwrap();
    let host = netns.host_addr();
    let (managed, token) = netns
        .spawn(|| async {
            let managed = ControlPlane::builder("gateway-e2e-managed")
                .install_crds(false)
                .start()
                .await
                .unwrap();
            kubectl(&managed, &["create", "namespace", "msa"]);
            kubectl(&managed, &["create", "serviceaccount", TOKEN_SECRET, "-n", "msa"]);
            let token = kubectl(&managed, &["create", "token", TOKEN_SECRET, "-n", "msa"]);
            (managed, token.trim().to_owned())
        })
        .await
        .unwrap();

    // The tunnel: its server beside the hub, the cluster's agent beside its apiserver.
    let (tunnels, _agent) = netns
        .tunnel_from(&hub, CLUSTER, managed.server().trim_start_matches("https://"))
        .await
        .unwrap();

    // The cluster as registration and managed-serviceaccount leave it on the hub.
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": CLUSTER}})),
        )
        .await
        .unwrap();
    Api::<ManagedCluster>::all(admin.clone())
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": CLUSTER},
                "spec": {"hubAcceptsClient": true, "managedClusterClientConfigs": [
                    {"url": managed.server(), "caBundle": STANDARD.encode(managed.ca_pem())}]}})),
        )
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), CLUSTER);
    for (name, labelled) in [(TOKEN_SECRET, true), ("other", false)] {
        let labels = if labelled {
            json!({IS_MANAGED_SERVICE_ACCOUNT_LABEL: IS_MANAGED_SERVICE_ACCOUNT_VALUE})
        } else {
            json!({})
        };
        secrets
            .create(
                &PostParams::default(),
                &object(json!({"metadata": {"name": name, "labels": labels},
                    "data": {"token": STANDARD.encode(&token)}})),
            )
            .await
            .unwrap();
    }

    // The hub as deployed: deploy/hub's identity, serving the gateway on an address the
    // apiserver can reach.
    let kubeconfig = common::hub_service_account(&hub, state.path());
    let log = state.path().join("hub.log");
    let socket = tunnels.socket().display().to_string();
    let _hub = common::start_hub(
        &kubeconfig,
        &log,
        &[
            "--no-plugin-host",
            "--cluster-gateway-tunnel-socket",
            &socket,
            "--cluster-gateway-address",
            &host.to_string(),
        ],
    );
    let path = proxy_path(CLUSTER, "/healthz");
    let raw = wait::until(
        "healthz through the hub's gateway",
        Duration::from_secs(90),
        || {
            let output = hub.kubectl().args(["get", "--raw", &path]).output().unwrap();
            async move {
                Ok::<_, String>(
                    output
                        .status
                        .success()
                        .then(|| String::from_utf8_lossy(&output.stdout).into_owned()),
                )
            }
        },
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}\nhub log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    assert_eq!(raw, "ok");
    let healthy = kubectl(
        &hub,
        &[
            "get",
            "clustergateway",
            CLUSTER,
            "-o",
            "jsonpath={.status.healthy}",
        ],
    );
    assert_eq!(healthy, "true");

    // The identity reads the token Secret by name, and nothing else.
    let other = common::kubectl_as(&kubeconfig, &["get", "secret", "other", "-n", CLUSTER]).unwrap_err();
    assert!(other.contains("Forbidden"), "{other}");
    let listed = common::kubectl_as(&kubeconfig, &["get", "secrets", "-n", CLUSTER]).unwrap_err();
    assert!(listed.contains("Forbidden"), "{listed}");

    // It registers its own APIService only: another would put the hub in front of any API group.
    let rogue = state.path().join("rogue.yaml");
    std::fs::write(
        &rogue,
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: v1.rogue.example}\n\
         spec: {group: rogue.example, version: v1, groupPriorityMinimum: 100, versionPriority: 10,\n  \
         insecureSkipTLSVerify: true,\n  service: {namespace: open-cluster-management-hub, name: flotilla-hub-webhook}}\n",
    )
    .unwrap();
    // The apiserver loads a new admission policy a moment after it is created: until the
    // refusal comes, what was created is removed again.
    let rogue = rogue.to_str().unwrap();
    let refused = wait::until("the rogue APIService refused", Duration::from_secs(30), || {
        let created = common::kubectl_as(&kubeconfig, &["create", "-f", rogue]);
        if created.is_ok() {
            kubectl(&hub, &["delete", "apiservice", "v1.rogue.example"]);
        }
        async move { Ok::<_, String>(created.err()) }
    })
    .await
    .unwrap();
    assert!(
        refused.contains("flotilla.dev-hub-confinement") && refused.contains("one APIService only"),
        "{refused}"
    );
}
