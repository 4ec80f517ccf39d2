//! `flotilla upgrade hub|klusterlet` and `flotilla clean` against a real control plane (issue
//! 30): the Deployments `init --image` and `join --image` install get a new image, or the
//! command says what installs them; `clean` refuses while ManagedClusters exist, and with
//! `--force` removes what `init --image` created. One test, in order: clean removes the hub the
//! upgrades run on.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::process::Output;

use common::{flotilla, ok};
use flotilla_api::cluster::v1::ManagedCluster;
use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::{ConfigMap, Namespace},
        rbac::v1::ClusterRole,
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{Api, api::PostParams};
use serde_json::json;

/// The standard error of a command that must fail (exit code 1).
fn refused(output: Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(1),
        "flotilla must refuse this:\n{}\n{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
    stderr
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

fn images(deployment: &Deployment) -> Vec<String> {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|s| s.containers.iter().filter_map(|c| c.image.clone()).collect())
        .unwrap_or_default()
}

/// The klusterlet Deployment as `flotilla join --image IMG` leaves it in `namespace`.
async fn joined_klusterlet(client: &kube::Client, namespace: &str, image: &str) {
    let file = include_str!("../../../deploy/klusterlet/klusterlet.yaml");
    let mut deployment: serde_json::Value = serde_yaml::Deserializer::from_str(file)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .find(|o: &serde_json::Value| o["kind"] == "Deployment")
        .unwrap();
    deployment["metadata"]["namespace"] = json!(namespace);
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
    namespaces.create(&PostParams::default(), &ns).await.unwrap();
    Api::<Deployment>::namespaced(client.clone(), namespace)
        .create(
            &PostParams::default(),
            &serde_json::from_value(deployment).unwrap(),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn upgrade_rolls_the_installed_deployments_and_clean_removes_the_install() {
    let hub = flotilla_testing::shared("hub-lifecycle-cli").await.unwrap();
    let kubeconfig = hub.admin_kubeconfig();
    let client = hub.admin_client().await.unwrap();

    // Nothing installed yet: each upgrade says what installs its Deployment.
    let stderr = refused(flotilla(
        kubeconfig,
        &["upgrade", "hub", "--image", "flotilla:v2"],
    ));
    assert_eq!(
        first_line(&stderr),
        "error: no Deployment open-cluster-management-hub/flotilla-hub on this cluster to upgrade; \
         `flotilla init --image IMG` installs it",
        "{stderr}"
    );
    let stderr = refused(flotilla(
        kubeconfig,
        &[
            "upgrade",
            "klusterlet",
            "--image",
            "flotilla:v2",
            "--agent-namespace",
            "nosuch",
        ],
    ));
    assert_eq!(
        first_line(&stderr),
        "error: no Deployment nosuch/klusterlet on this cluster to upgrade; `flotilla join --image \
         IMG` installs it (is --agent-namespace the one joined with?)",
        "{stderr}"
    );

    // The hub, installed with an image, rolled to another.
    ok(flotilla(kubeconfig, &["init", "--image", "flotilla:v1"]));
    let out = ok(flotilla(
        kubeconfig,
        &["upgrade", "hub", "--image", "flotilla:v2"],
    ));
    assert_eq!(
        first_line(&out),
        "Deployment open-cluster-management-hub/flotilla-hub upgraded from flotilla:v1 to flotilla:v2; \
         its pods roll over as its strategy allows"
    );
    let hub_deployments: Api<Deployment> = Api::namespaced(client.clone(), "open-cluster-management-hub");
    let deployment = hub_deployments.get("flotilla-hub").await.unwrap();
    assert_eq!(images(&deployment), ["flotilla:v2"]);
    let out = ok(flotilla(
        kubeconfig,
        &["upgrade", "hub", "--image", "flotilla:v2"],
    ));
    assert_eq!(
        first_line(&out),
        "Deployment open-cluster-management-hub/flotilla-hub already runs flotilla:v2"
    );

    // A klusterlet as join installs it, rolled to another image.
    joined_klusterlet(&client, "open-cluster-management-agent", "flotilla:v1").await;
    let out = ok(flotilla(
        kubeconfig,
        &["upgrade", "klusterlet", "--image", "flotilla:v2"],
    ));
    assert_eq!(
        first_line(&out),
        "Deployment open-cluster-management-agent/klusterlet upgraded from flotilla:v1 to flotilla:v2; \
         its pods roll over as its strategy allows"
    );
    let klusterlet = Api::<Deployment>::namespaced(client.clone(), "open-cluster-management-agent")
        .get("klusterlet")
        .await
        .unwrap();
    assert_eq!(images(&klusterlet), ["flotilla:v2"]);

    // A cluster is still there: clean refuses, naming it.
    let clusters: Api<ManagedCluster> = Api::all(client.clone());
    let cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": "still-here"}, "spec": {"hubAcceptsClient": true},
    }))
    .unwrap();
    clusters.create(&PostParams::default(), &cluster).await.unwrap();
    let stderr = refused(flotilla(kubeconfig, &["clean"]));
    assert_eq!(
        first_line(&stderr),
        "error: 1 managed cluster(s) still joined to this hub (still-here); unjoin them first \
         (`flotilla unjoin` on each cluster), or pass --force to remove the hub anyway",
        "{stderr}"
    );
    assert!(hub_deployments.get_opt("flotilla-hub").await.unwrap().is_some());

    // --force: the install goes, and only the install.
    let out = ok(flotilla(kubeconfig, &["clean", "--force"]));
    assert!(
        first_line(&out).starts_with("the hub's Flotilla install is removed ("),
        "{out}"
    );
    let gone_or_going = |deleting: Option<bool>| deleting.is_none_or(|d| d);
    assert!(gone_or_going(
        hub_deployments
            .get_opt("flotilla-hub")
            .await
            .unwrap()
            .map(|d| d.metadata.deletion_timestamp.is_some())
    ));
    assert!(
        Api::<ClusterRole>::all(client.clone())
            .get_opt("flotilla:hub")
            .await
            .unwrap()
            .is_none()
    );
    assert!(gone_or_going(
        Api::<CustomResourceDefinition>::all(client.clone())
            .get_opt("managedclusters.cluster.open-cluster-management.io")
            .await
            .unwrap()
            .map(|c| c.metadata.deletion_timestamp.is_some())
    ));
    assert!(gone_or_going(
        Api::<Namespace>::all(client.clone())
            .get_opt("open-cluster-management-hub")
            .await
            .unwrap()
            .map(|n| n.metadata.deletion_timestamp.is_some())
    ));
    let cluster_info = Api::<ConfigMap>::namespaced(client.clone(), "kube-public")
        .get_opt("cluster-info")
        .await
        .unwrap();
    assert!(
        cluster_info.is_none(),
        "{:?}",
        cluster_info.map(|c| c.metadata.managed_fields)
    );
    // The klusterlet is not the hub's install.
    assert!(
        Api::<Deployment>::namespaced(client, "open-cluster-management-agent")
            .get_opt("klusterlet")
            .await
            .unwrap()
            .is_some()
    );
}
