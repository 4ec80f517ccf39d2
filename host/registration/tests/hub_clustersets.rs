//! Cluster sets and bindings against a real apiserver: the hub keeps `default` and `global`
//! (and puts their selectors back unless told not to), reports whether each set selects any
//! cluster as cluster labels change, and reports whether each binding's set exists.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::hub_support;

use std::time::Duration;

use flotilla_api::cluster::{
    consts::{
        CLUSTER_SET_AUTOUPDATE_ANNOTATION, CLUSTER_SET_LABEL,
        managed_cluster_set::{CONDITION_EMPTY, REASON_CLUSTERS_SELECTED, REASON_NO_CLUSTER_MATCHED},
        managed_cluster_set_binding::{
            CONDITION_BOUND, REASON_CLUSTER_SET_BOUND, REASON_CLUSTER_SET_NOT_FOUND,
        },
    },
    v1::ManagedCluster,
    v1beta2::{ManagedClusterSet, ManagedClusterSetBinding, SelectorType},
};
use flotilla_testing::wait;
use hub_support::*;
use k8s_openapi::{api::core::v1::Namespace, apimachinery::pkg::apis::meta::v1::Condition};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

const CP: &str = "hub-clustersets";

fn set(name: &str, selector: serde_json::Value) -> ManagedClusterSet {
    serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSet",
        "metadata": { "name": name },
        "spec": { "clusterSelector": selector },
    }))
    .unwrap()
}

fn set_conditions(set: &ManagedClusterSet) -> Vec<Condition> {
    set.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
}

/// Waits until set `name` satisfies `check`.
async fn wait_set(
    admin: &Client,
    name: &str,
    what: &str,
    check: impl Fn(&ManagedClusterSet) -> bool,
) -> ManagedClusterSet {
    let api: Api<ManagedClusterSet> = Api::all(admin.clone());
    let check = &check;
    wait::until(what, TIMEOUT, || {
        let api = api.clone();
        async move {
            let found = api.get_opt(name).await?;
            Ok::<_, kube::Error>(found.filter(|s| check(s)))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

async fn wait_empty(admin: &Client, name: &str, status: &str, reason: &str, message: &str) {
    wait_set(
        admin,
        name,
        &format!("{CONDITION_EMPTY} {status} {message}"),
        |s| {
            find(&set_conditions(s), CONDITION_EMPTY)
                .is_some_and(|c| c.status == status && c.reason == reason && c.message == message)
        },
    )
    .await;
}

#[tokio::test]
async fn the_hub_keeps_default_and_global_and_restores_their_selectors() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    let sets: Api<ManagedClusterSet> = Api::all(admin.clone());
    let default = wait_set(&admin, "default", "default exists", |_| true).await;
    assert_eq!(
        default.spec.cluster_selector.selector_type,
        SelectorType::ExclusiveClusterSetLabel
    );
    let global = wait_set(&admin, "global", "global exists", |_| true).await;
    assert_eq!(
        global.spec.cluster_selector.selector_type,
        SelectorType::LabelSelector
    );
    assert_eq!(
        serde_json::to_value(&global.spec.cluster_selector.label_selector).unwrap(),
        json!({})
    );

    // A changed selector is put back.
    let narrowed = json!({ "spec": { "clusterSelector": {
        "selectorType": "LabelSelector", "labelSelector": { "matchLabels": { "env": "prod" } } } } });
    sets.patch("default", &PatchParams::default(), &Patch::Merge(&narrowed))
        .await
        .unwrap();
    wait_set(&admin, "default", "default selector restored", |s| {
        s.spec.cluster_selector.selector_type == SelectorType::ExclusiveClusterSetLabel
            && s.spec.cluster_selector.label_selector.is_none()
    })
    .await;

    // A deleted hub set comes back.
    sets.delete("default", &DeleteParams::default()).await.unwrap();
    wait_set(&admin, "default", "default recreated", |s| {
        s.metadata.deletion_timestamp.is_none()
    })
    .await;

    // global is restored too, back to selecting every cluster ...
    sets.patch("global", &PatchParams::default(), &Patch::Merge(&narrowed))
        .await
        .unwrap();
    wait_set(&admin, "global", "global selector restored", |s| {
        s.spec.cluster_selector.selector_type == SelectorType::LabelSelector
            && serde_json::to_value(&s.spec.cluster_selector.label_selector).unwrap() == json!({})
    })
    .await;

    // ... unless opted out: then the admin's selector stays.
    let opted_out = json!({
        "metadata": { "annotations": { CLUSTER_SET_AUTOUPDATE_ANNOTATION: "false" } },
        "spec": { "clusterSelector": { "selectorType": "LabelSelector",
            "labelSelector": { "matchLabels": { "env": "prod" } } } },
    });
    sets.patch("global", &PatchParams::default(), &Patch::Merge(&opted_out))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let kept = sets.get("global").await.unwrap();
    assert!(
        kept.spec
            .cluster_selector
            .label_selector
            .and_then(|s| s.match_labels)
            .is_some_and(|m| m.get("env").map(String::as_str) == Some("prod")),
        "an opted-out set keeps the admin's selector"
    );
}

#[tokio::test]
async fn set_emptiness_follows_the_labels_of_clusters() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    let sets: Api<ManagedClusterSet> = Api::all(admin.clone());
    sets.create(
        &PostParams::default(),
        &set("team-blue", json!({ "selectorType": "ExclusiveClusterSetLabel" })),
    )
    .await
    .unwrap();
    sets.create(
        &PostParams::default(),
        &set(
            "prod-xyz",
            json!({ "selectorType": "LabelSelector", "labelSelector": { "matchLabels": { "env": "prod-xyz" } } }),
        ),
    )
    .await
    .unwrap();
    wait_empty(
        &admin,
        "team-blue",
        "True",
        REASON_NO_CLUSTER_MATCHED,
        "No ManagedCluster selected",
    )
    .await;
    wait_empty(
        &admin,
        "prod-xyz",
        "True",
        REASON_NO_CLUSTER_MATCHED,
        "No ManagedCluster selected",
    )
    .await;

    create_cluster(
        &admin,
        &cluster(
            "cs-c1",
            false,
            60,
            &[(CLUSTER_SET_LABEL, "team-blue"), ("env", "prod-xyz")],
        ),
    )
    .await;
    wait_empty(
        &admin,
        "team-blue",
        "False",
        REASON_CLUSTERS_SELECTED,
        "1 ManagedClusters selected",
    )
    .await;
    wait_empty(
        &admin,
        "prod-xyz",
        "False",
        REASON_CLUSTERS_SELECTED,
        "1 ManagedClusters selected",
    )
    .await;

    create_cluster(&admin, &cluster("cs-c2", false, 60, &[("env", "prod-xyz")])).await;
    wait_empty(
        &admin,
        "prod-xyz",
        "False",
        REASON_CLUSTERS_SELECTED,
        "2 ManagedClusters selected",
    )
    .await;

    let clusters: Api<ManagedCluster> = Api::all(admin.clone());
    clusters
        .patch(
            "cs-c1",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { CLUSTER_SET_LABEL: "team-red" } } })),
        )
        .await
        .unwrap();
    wait_empty(
        &admin,
        "team-blue",
        "True",
        REASON_NO_CLUSTER_MATCHED,
        "No ManagedCluster selected",
    )
    .await;

    clusters.delete("cs-c2", &DeleteParams::default()).await.unwrap();
    wait_empty(
        &admin,
        "prod-xyz",
        "False",
        REASON_CLUSTERS_SELECTED,
        "1 ManagedClusters selected",
    )
    .await;
}

#[tokio::test]
async fn a_binding_is_bound_while_its_set_exists() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    let namespace: Namespace = serde_json::from_value(json!({ "metadata": { "name": "bind-ns" } })).unwrap();
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let bindings: Api<ManagedClusterSetBinding> = Api::namespaced(admin.clone(), "bind-ns");
    let binding: ManagedClusterSetBinding = serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSetBinding",
        "metadata": { "name": "bind-set", "namespace": "bind-ns" },
        "spec": { "clusterSet": "bind-set" },
    }))
    .unwrap();
    bindings.create(&PostParams::default(), &binding).await.unwrap();

    let wait_bound = |status: &'static str, reason: &'static str| {
        let bindings = bindings.clone();
        async move {
            wait::until(&format!("Bound {status} {reason}"), TIMEOUT, || {
                let bindings = bindings.clone();
                async move {
                    let b = bindings.get("bind-set").await?;
                    let conditions = b.status.and_then(|s| s.conditions).unwrap_or_default();
                    Ok::<_, kube::Error>(has(&conditions, CONDITION_BOUND, status, reason).then_some(()))
                }
            })
            .await
            .unwrap();
        }
    };
    wait_bound("False", REASON_CLUSTER_SET_NOT_FOUND).await;

    let sets: Api<ManagedClusterSet> = Api::all(admin.clone());
    sets.create(
        &PostParams::default(),
        &set("bind-set", json!({ "selectorType": "ExclusiveClusterSetLabel" })),
    )
    .await
    .unwrap();
    wait_bound("True", REASON_CLUSTER_SET_BOUND).await;

    sets.delete("bind-set", &DeleteParams::default()).await.unwrap();
    wait_bound("False", REASON_CLUSTER_SET_NOT_FOUND).await;
}
