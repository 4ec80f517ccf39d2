//! Encoding rules that mirror Go's `encoding/json` (see the crate docs).

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::cluster::v1::{ManagedCluster, ManagedClusterSpec, Taint, TaintEffect};
use crate::cluster::v1beta1::{ClusterDecision, PlacementStatus};
use crate::cluster::v1beta2::ManagedClusterSetBinding;
use crate::work::v1::{ManifestWork, ManifestWorkSpec};
use crate::work::v1alpha1::ManifestWorkReplicaSet;

#[test]
fn always_written_go_fields_are_written_when_empty() {
    let decision = ClusterDecision {
        cluster_name: "c1".into(),
        reason: String::new(),
        score: 0,
    };
    assert_eq!(
        serde_json::to_value(&decision).unwrap(),
        json!({ "clusterName": "c1", "reason": "" })
    );

    let taint = Taint {
        key: "k".into(),
        effect: TaintEffect::NoSelect,
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_value(&taint).unwrap(),
        json!({ "key": "k", "effect": "NoSelect", "timeAdded": null })
    );

    assert_eq!(
        serde_json::to_value(PlacementStatus::default()).unwrap(),
        json!({ "numberOfSelectedClusters": 0, "decisionGroups": null, "conditions": null })
    );
}

#[test]
fn omitempty_go_fields_are_skipped_when_empty() {
    let spec = ManagedClusterSpec {
        hub_accepts_client: true,
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_value(&spec).unwrap(),
        json!({ "hubAcceptsClient": true })
    );
    let decision = ClusterDecision {
        cluster_name: "c1".into(),
        reason: String::new(),
        score: 7,
    };
    assert_eq!(serde_json::to_value(&decision).unwrap()["score"], 7);
}

#[test]
fn a_missing_or_null_spec_decodes_as_the_zero_spec_where_ocm_allows_it() {
    let cluster: ManagedCluster = serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": { "name": "c1" },
    }))
    .unwrap();
    assert_eq!(cluster.spec, ManagedClusterSpec::default());

    let binding: ManagedClusterSetBinding = serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSetBinding",
        "metadata": { "name": "s", "namespace": "ns" },
        "spec": null,
    }))
    .unwrap();
    assert_eq!(binding.spec.cluster_set, "");

    let work: ManifestWork = serde_json::from_value(json!({
        "apiVersion": "work.open-cluster-management.io/v1",
        "kind": "ManifestWork",
        "metadata": { "name": "w", "namespace": "c1" },
    }))
    .unwrap();
    assert_eq!(work.spec, ManifestWorkSpec::default());
    assert_eq!(
        serde_json::to_value(&work.spec).unwrap(),
        json!({ "workload": {} })
    );
}

#[test]
fn a_present_spec_still_rejects_missing_required_fields() {
    let result: Result<ManifestWorkReplicaSet, _> = serde_json::from_value(json!({
        "apiVersion": "work.open-cluster-management.io/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": { "name": "r", "namespace": "ns" },
        "spec": { "manifestWorkTemplate": {} },
    }));
    let error = result.unwrap_err().to_string();
    assert!(error.contains("placementRefs"), "{error}");
}
