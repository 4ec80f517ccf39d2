//! Every fixture decodes into its Rust type and encodes back to exactly the same JSON: no field
//! OCM writes is lost, none is added, and Go's always-written fields (`reason: ""`,
//! `timeAdded: null`, `numberOfSelectedClusters: 0`, ...) stay written.

use flotilla_api::fixtures::{self, Fixture};
use flotilla_api::{addon, authentication, cluster, plugins, work};
use pretty_assertions::assert_eq;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Decodes the fixture as `K`, encodes it again, and compares both as JSON values.
fn roundtrip<K: DeserializeOwned + Serialize>(fixture: &Fixture) {
    let original: Value =
        serde_yaml::from_str(fixture.yaml).unwrap_or_else(|e| panic!("{}: {e}", fixture.file));
    let typed: K =
        serde_json::from_value(original.clone()).unwrap_or_else(|e| panic!("{}: decode: {e}", fixture.file));
    let encoded = serde_json::to_value(&typed).unwrap_or_else(|e| panic!("{}: encode: {e}", fixture.file));
    assert_eq!(original, encoded, "{} does not round-trip", fixture.file);
}

/// Round-trips a fixture through the type of its `apiVersion` and `kind`.
fn roundtrip_fixture(f: &Fixture) {
    use addon::{v1alpha1 as a1, v1beta1 as b1};
    match (f.api_version, f.kind) {
        ("cluster.open-cluster-management.io/v1", "ManagedCluster") => {
            roundtrip::<cluster::v1::ManagedCluster>(f)
        }
        ("cluster.open-cluster-management.io/v1beta2", "ManagedClusterSet") => {
            roundtrip::<cluster::v1beta2::ManagedClusterSet>(f)
        }
        ("cluster.open-cluster-management.io/v1beta2", "ManagedClusterSetBinding") => {
            roundtrip::<cluster::v1beta2::ManagedClusterSetBinding>(f)
        }
        ("cluster.open-cluster-management.io/v1alpha1", "ClusterClaim") => {
            roundtrip::<cluster::v1alpha1::ClusterClaim>(f)
        }
        ("cluster.open-cluster-management.io/v1beta1", "Placement") => {
            roundtrip::<cluster::v1beta1::Placement>(f)
        }
        ("cluster.open-cluster-management.io/v1beta1", "PlacementDecision") => {
            roundtrip::<cluster::v1beta1::PlacementDecision>(f)
        }
        ("cluster.open-cluster-management.io/v1alpha1", "AddOnPlacementScore") => {
            roundtrip::<cluster::v1alpha1::AddOnPlacementScore>(f)
        }
        ("work.open-cluster-management.io/v1", "ManifestWork") => roundtrip::<work::v1::ManifestWork>(f),
        ("work.open-cluster-management.io/v1", "AppliedManifestWork") => {
            roundtrip::<work::v1::AppliedManifestWork>(f)
        }
        ("work.open-cluster-management.io/v1alpha1", "ManifestWorkReplicaSet") => {
            roundtrip::<work::v1alpha1::ManifestWorkReplicaSet>(f)
        }
        ("addon.open-cluster-management.io/v1alpha1", "ClusterManagementAddOn") => {
            roundtrip::<a1::ClusterManagementAddOn>(f)
        }
        ("addon.open-cluster-management.io/v1beta1", "ClusterManagementAddOn") => {
            roundtrip::<b1::ClusterManagementAddOn>(f)
        }
        ("addon.open-cluster-management.io/v1alpha1", "ManagedClusterAddOn") => {
            roundtrip::<a1::ManagedClusterAddOn>(f)
        }
        ("addon.open-cluster-management.io/v1beta1", "ManagedClusterAddOn") => {
            roundtrip::<b1::ManagedClusterAddOn>(f)
        }
        ("addon.open-cluster-management.io/v1alpha1", "AddOnDeploymentConfig") => {
            roundtrip::<a1::AddOnDeploymentConfig>(f)
        }
        ("addon.open-cluster-management.io/v1beta1", "AddOnDeploymentConfig") => {
            roundtrip::<b1::AddOnDeploymentConfig>(f)
        }
        ("addon.open-cluster-management.io/v1alpha1", "AddOnTemplate") => roundtrip::<a1::AddOnTemplate>(f),
        ("addon.open-cluster-management.io/v1beta1", "AddOnTemplate") => roundtrip::<b1::AddOnTemplate>(f),
        ("authentication.open-cluster-management.io/v1beta1", "ManagedServiceAccount") => {
            roundtrip::<authentication::v1beta1::ManagedServiceAccount>(f)
        }
        ("authentication.open-cluster-management.io/v1alpha1", "ManagedServiceAccount") => {
            roundtrip::<authentication::v1alpha1::ManagedServiceAccount>(f)
        }
        ("plugins.flotilla.dev/v1alpha1", "AddOnPlugin") => roundtrip::<plugins::v1alpha1::AddOnPlugin>(f),
        (api_version, kind) => panic!("{}: no Rust type for {api_version} {kind}", f.file),
    }
}

#[test]
fn every_fixture_round_trips_through_its_type() {
    for fixture in fixtures::ALL {
        roundtrip_fixture(fixture);
    }
}

#[test]
fn every_fixture_declares_its_api_version_and_kind() {
    for fixture in fixtures::ALL {
        let value: Value = serde_yaml::from_str(fixture.yaml).expect("fixture is YAML");
        assert_eq!(value["apiVersion"], fixture.api_version, "{}", fixture.file);
        assert_eq!(value["kind"], fixture.kind, "{}", fixture.file);
        assert!(
            value["metadata"]["name"].is_string(),
            "{} has no name",
            fixture.file
        );
    }
}

#[test]
fn every_served_version_of_every_crd_has_a_fixture_with_the_right_scope() {
    for crd in flotilla_api::crds::crds() {
        for version in &crd.spec.versions {
            let api_version = format!("{}/{}", crd.spec.group, version.name);
            let fixture = fixtures::get(&api_version, &crd.spec.names.kind)
                .unwrap_or_else(|| panic!("no fixture for {api_version} {}", crd.spec.names.kind));
            let value: Value = serde_yaml::from_str(fixture.yaml).expect("fixture is YAML");
            let namespaced = crd.spec.scope == "Namespaced";
            if let Some(ns) = value["metadata"]["namespace"].as_str() {
                assert!(
                    fixtures::NAMESPACES.contains(&ns),
                    "{}: namespace {ns} not in NAMESPACES",
                    fixture.file
                );
            }
            assert_eq!(
                value["metadata"]["namespace"].is_string(),
                namespaced,
                "{}: namespace vs scope",
                fixture.file
            );
            let has_status = version.subresources.as_ref().is_some_and(|s| s.status.is_some());
            if !has_status {
                assert!(
                    value.get("status").is_none(),
                    "{}: status without a status subresource",
                    fixture.file
                );
            }
        }
    }
}

#[test]
fn fixture_files_on_disk_are_all_listed() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .expect("fixtures directory")
        .map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = fixtures::ALL.iter().map(|f| f.file.to_owned()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
}
