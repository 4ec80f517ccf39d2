//! `flotilla accept` against a real control plane, with the shared bootstrap token `flotilla
//! init` printed: accepting cluster1 approves cluster1's own first request and leaves pending,
//! naming the rule, a request filed under cluster1's label for cluster2's agent identity by
//! the same token — approving it would give the token holder cluster2's certificate.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use base64::{Engine as _, engine::general_purpose::STANDARD};
use common::{flotilla, hub_token, ok};
use flotilla_api::cluster::v1::{ManagedCluster, ManagedClusterSpec};
use flotilla_registration::names;
use flotilla_testing::{ControlPlane, kubeconfig, wait};
use k8s_openapi::{ByteString, api::certificates::v1::CertificateSigningRequest};
use kube::{Api, Client, ResourceExt, api::PostParams};
use serde_json::json;
use std::time::Duration;

const CLIENT_USAGES: [&str; 3] = ["digital signature", "key encipherment", "client auth"];

/// A client authenticating with the bootstrap token, as `flotilla join` does.
async fn bootstrap_client(hub: &ControlPlane, token: &str) -> Client {
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "hub", "cluster": {
            "server": hub.server(),
            "certificate-authority-data": STANDARD.encode(hub.ca_pem()),
        }}],
        "users": [{ "name": "bootstrap", "user": { "token": token } }],
        "contexts": [{ "name": "hub", "context": { "cluster": "hub", "user": "bootstrap" } }],
        "current-context": "hub",
    });
    kubeconfig::client_from_yaml(&config.to_string()).await.unwrap()
}

/// A first-time request labelled `cluster_label` for `user` in `groups`, as the klusterlet files it.
fn first_request(cluster_label: &str, user: &str, groups: &[&str]) -> CertificateSigningRequest {
    let pem = flotilla_core::x509::client_request(user, groups, &[], &[])
        .unwrap()
        .request_pem;
    serde_json::from_value(json!({
        "metadata": {
            "generateName": format!("{cluster_label}-"),
            "labels": { "open-cluster-management.io/cluster-name": cluster_label },
        },
        "spec": {
            "request": ByteString(pem.into_bytes()),
            "signerName": names::KUBE_APISERVER_CLIENT_SIGNER,
            "usages": CLIENT_USAGES,
        }
    }))
    .unwrap()
}

fn approved(csr: &CertificateSigningRequest) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Approved"))
}

#[tokio::test]
async fn accepting_a_cluster_approves_only_a_request_for_its_own_agent_identity() {
    let hub = ControlPlane::start("accept-cli").await.unwrap();
    let admin = hub.admin_client().await.unwrap();
    let token = hub_token(&ok(flotilla(hub.admin_kubeconfig(), &["init"])));
    let bootstrap = bootstrap_client(&hub, &token).await;

    // The token holder registers cluster1, then files cluster1's genuine request and a forged
    // one: cluster1's label, cluster2's agent and group.
    let clusters: Api<ManagedCluster> = Api::all(bootstrap.clone());
    let csrs: Api<CertificateSigningRequest> = Api::all(bootstrap);
    wait::until(
        "bootstrap identity creates ManagedCluster",
        Duration::from_secs(30),
        || {
            let clusters = clusters.clone();
            async move {
                let cluster = ManagedCluster::new("cluster1", ManagedClusterSpec::default());
                clusters.create(&PostParams::default(), &cluster).await.map(Some)
            }
        },
    )
    .await
    .unwrap();
    let (c1_group, c2_group) = (names::cluster_group("cluster1"), names::cluster_group("cluster2"));
    let all = names::MANAGED_CLUSTERS_GROUP;
    let forged = first_request(
        "cluster1",
        &names::agent_user("cluster2", "agent1"),
        &[&c2_group, all],
    );
    let forged = csrs
        .create(&PostParams::default(), &forged)
        .await
        .unwrap()
        .name_any();
    let genuine = first_request(
        "cluster1",
        &names::agent_user("cluster1", "agent1"),
        &[&c1_group, all],
    );
    let genuine = csrs
        .create(&PostParams::default(), &genuine)
        .await
        .unwrap()
        .name_any();

    let output = flotilla(
        hub.admin_kubeconfig(),
        &["accept", "--clusters", "cluster1", "--timeout", "30s"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    ok(output);

    let admin_csrs: Api<CertificateSigningRequest> = Api::all(admin.clone());
    assert!(approved(&admin_csrs.get(&genuine).await.unwrap()), "{stderr}");
    assert!(
        !approved(&admin_csrs.get(&forged).await.unwrap()),
        "cluster2's identity must not be approved by accepting cluster1:\n{stderr}"
    );
    let line = stderr
        .lines()
        .find(|l| l.contains(&forged))
        .unwrap_or_else(|| panic!("accept must name the request it left alone:\n{stderr}"));
    assert!(
        line.contains("left pending") && line.contains("organizations"),
        "{line}"
    );
    assert!(
        Api::<ManagedCluster>::all(admin)
            .get("cluster1")
            .await
            .unwrap()
            .spec
            .hub_accepts_client
    );
}
