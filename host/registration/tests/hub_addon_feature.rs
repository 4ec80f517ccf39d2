//! The hub keeps each cluster's `feature.open-cluster-management.io/addon-<name>` labels in step
//! with its add-ons' `Available` (OCM's add-on feature discovery), and a cluster going Unknown
//! takes its add-ons — and so their labels — to Unknown / `unreachable`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::hub_support;

use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_api::cluster::v1::ManagedCluster;
use hub_support::*;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

const CP: &str = "addon-feature";
const LABEL: &str = "feature.open-cluster-management.io/addon-probe";
const STALE: &str = "feature.open-cluster-management.io/addon-gone";

fn condition(type_: &str, status: &str, reason: &str) -> serde_json::Value {
    json!({"type": type_, "status": status, "reason": reason, "message": format!("set by the test: {status}"),
           "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

async fn set_cluster_available(admin: &Client, name: &str, status: &str) {
    let api: Api<ManagedCluster> = Api::all(admin.clone());
    let mut conditions: Vec<serde_json::Value> = api
        .get(name)
        .await
        .unwrap()
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.type_ != "ManagedClusterConditionAvailable")
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    conditions.push(condition("ManagedClusterConditionAvailable", status, "TestSet"));
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": conditions}})),
    )
    .await
    .unwrap();
}

async fn set_addon_available(api: &Api<ManagedClusterAddOn>, status: &str) {
    api.patch_status(
        "probe",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [condition("Available", status, "TestSet")]}})),
    )
    .await
    .unwrap();
}

async fn wait_label(admin: &Client, name: &str, key: &str, value: Option<&str>) -> ManagedCluster {
    wait_cluster(admin, name, &format!("label {key}={value:?}"), |c| {
        c.labels().get(key).map(String::as_str) == value
    })
    .await
}

#[tokio::test]
async fn feature_labels_follow_addon_health_and_a_cluster_gone_unknown_makes_them_unreachable() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    let name = "feat-c1";
    create_cluster(&admin, &cluster(name, true, 60, &[(STALE, "available")])).await;
    wait_accepted(&admin, name).await;
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(admin.clone(), name);
    let addon: ManagedClusterAddOn = serde_json::from_value(json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
        "metadata": {"name": "probe", "namespace": name}, "spec": {},
    }))
    .unwrap();
    addons.create(&PostParams::default(), &addon).await.unwrap();
    set_addon_available(&addons, "True").await;

    // Once the cluster reports, its add-ons get labels and stale labels go.
    set_cluster_available(&admin, name, "True").await;
    let labelled = wait_label(&admin, name, LABEL, Some("available")).await;
    assert!(!labelled.labels().contains_key(STALE), "{:?}", labelled.labels());

    set_addon_available(&addons, "False").await;
    wait_label(&admin, name, LABEL, Some("unhealthy")).await;

    // The cluster goes Unknown: its add-on follows with the cluster's reason, then the label.
    set_cluster_available(&admin, name, "Unknown").await;
    wait_label(&admin, name, LABEL, Some("unreachable")).await;
    let addon = addons.get("probe").await.unwrap();
    let available = find(&addon.status.unwrap().conditions, "Available")
        .cloned()
        .unwrap();
    assert_eq!(
        (available.status.as_str(), available.reason.as_str()),
        ("Unknown", "TestSet")
    );

    // The add-on is gone: so is its label.
    addons.delete("probe", &DeleteParams::default()).await.unwrap();
    wait_label(&admin, name, LABEL, None).await;
}
