//! Example objects of every kind and version, one YAML file each under `tests/fixtures/`.
//!
//! Each is written the way Go's `encoding/json` writes the OCM type (always-written fields
//! included), is valid against the CRD, and can be created as is: namespaced ones name a
//! namespace, status is included where the kind has one (the apiserver ignores it on create),
//! and nothing carries a finalizer or owner reference. The crate's round-trip tests check that
//! each decodes into its Rust type and encodes back to the same JSON.
//!
//! As installed (conversion strategy `None`) a v1beta1 add-on object is stored as v1alpha1
//! field for field; the hub's conversion webhook ([`crate::addon::conversion`]) maps the fields
//! that differ once `flotilla hub` runs. A v1alpha1 ManagedServiceAccount is stored as v1beta1,
//! which has the same fields, so it needs no webhook.

/// One example object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fixture {
    /// File name under `tests/fixtures/`.
    pub file: &'static str,
    /// `apiVersion` of the object.
    pub api_version: &'static str,
    /// `kind` of the object.
    pub kind: &'static str,
    /// The YAML text.
    pub yaml: &'static str,
}

/// Every fixture, one per kind and served version.
pub const ALL: &[Fixture] = &[
    Fixture {
        file: "managedcluster.yaml",
        api_version: "cluster.open-cluster-management.io/v1",
        kind: "ManagedCluster",
        yaml: include_str!("../tests/fixtures/managedcluster.yaml"),
    },
    Fixture {
        file: "managedclusterset.yaml",
        api_version: "cluster.open-cluster-management.io/v1beta2",
        kind: "ManagedClusterSet",
        yaml: include_str!("../tests/fixtures/managedclusterset.yaml"),
    },
    Fixture {
        file: "managedclustersetbinding.yaml",
        api_version: "cluster.open-cluster-management.io/v1beta2",
        kind: "ManagedClusterSetBinding",
        yaml: include_str!("../tests/fixtures/managedclustersetbinding.yaml"),
    },
    Fixture {
        file: "clusterclaim.yaml",
        api_version: "cluster.open-cluster-management.io/v1alpha1",
        kind: "ClusterClaim",
        yaml: include_str!("../tests/fixtures/clusterclaim.yaml"),
    },
    Fixture {
        file: "placement.yaml",
        api_version: "cluster.open-cluster-management.io/v1beta1",
        kind: "Placement",
        yaml: include_str!("../tests/fixtures/placement.yaml"),
    },
    Fixture {
        file: "placementdecision.yaml",
        api_version: "cluster.open-cluster-management.io/v1beta1",
        kind: "PlacementDecision",
        yaml: include_str!("../tests/fixtures/placementdecision.yaml"),
    },
    Fixture {
        file: "addonplacementscore.yaml",
        api_version: "cluster.open-cluster-management.io/v1alpha1",
        kind: "AddOnPlacementScore",
        yaml: include_str!("../tests/fixtures/addonplacementscore.yaml"),
    },
    Fixture {
        file: "manifestwork.yaml",
        api_version: "work.open-cluster-management.io/v1",
        kind: "ManifestWork",
        yaml: include_str!("../tests/fixtures/manifestwork.yaml"),
    },
    Fixture {
        file: "appliedmanifestwork.yaml",
        api_version: "work.open-cluster-management.io/v1",
        kind: "AppliedManifestWork",
        yaml: include_str!("../tests/fixtures/appliedmanifestwork.yaml"),
    },
    Fixture {
        file: "manifestworkreplicaset.yaml",
        api_version: "work.open-cluster-management.io/v1alpha1",
        kind: "ManifestWorkReplicaSet",
        yaml: include_str!("../tests/fixtures/manifestworkreplicaset.yaml"),
    },
    Fixture {
        file: "clustermanagementaddon.yaml",
        api_version: "addon.open-cluster-management.io/v1alpha1",
        kind: "ClusterManagementAddOn",
        yaml: include_str!("../tests/fixtures/clustermanagementaddon.yaml"),
    },
    Fixture {
        file: "clustermanagementaddon.v1beta1.yaml",
        api_version: "addon.open-cluster-management.io/v1beta1",
        kind: "ClusterManagementAddOn",
        yaml: include_str!("../tests/fixtures/clustermanagementaddon.v1beta1.yaml"),
    },
    Fixture {
        file: "managedclusteraddon.yaml",
        api_version: "addon.open-cluster-management.io/v1alpha1",
        kind: "ManagedClusterAddOn",
        yaml: include_str!("../tests/fixtures/managedclusteraddon.yaml"),
    },
    Fixture {
        file: "managedclusteraddon.v1beta1.yaml",
        api_version: "addon.open-cluster-management.io/v1beta1",
        kind: "ManagedClusterAddOn",
        yaml: include_str!("../tests/fixtures/managedclusteraddon.v1beta1.yaml"),
    },
    Fixture {
        file: "addondeploymentconfig.yaml",
        api_version: "addon.open-cluster-management.io/v1alpha1",
        kind: "AddOnDeploymentConfig",
        yaml: include_str!("../tests/fixtures/addondeploymentconfig.yaml"),
    },
    Fixture {
        file: "addondeploymentconfig.v1beta1.yaml",
        api_version: "addon.open-cluster-management.io/v1beta1",
        kind: "AddOnDeploymentConfig",
        yaml: include_str!("../tests/fixtures/addondeploymentconfig.v1beta1.yaml"),
    },
    Fixture {
        file: "addontemplate.yaml",
        api_version: "addon.open-cluster-management.io/v1alpha1",
        kind: "AddOnTemplate",
        yaml: include_str!("../tests/fixtures/addontemplate.yaml"),
    },
    Fixture {
        file: "addontemplate.v1beta1.yaml",
        api_version: "addon.open-cluster-management.io/v1beta1",
        kind: "AddOnTemplate",
        yaml: include_str!("../tests/fixtures/addontemplate.v1beta1.yaml"),
    },
    Fixture {
        file: "managedserviceaccount.yaml",
        api_version: "authentication.open-cluster-management.io/v1beta1",
        kind: "ManagedServiceAccount",
        yaml: include_str!("../tests/fixtures/managedserviceaccount.yaml"),
    },
    Fixture {
        file: "managedserviceaccount.v1alpha1.yaml",
        api_version: "authentication.open-cluster-management.io/v1alpha1",
        kind: "ManagedServiceAccount",
        yaml: include_str!("../tests/fixtures/managedserviceaccount.v1alpha1.yaml"),
    },
    Fixture {
        file: "addonplugin.yaml",
        api_version: "plugins.flotilla.dev/v1alpha1",
        kind: "AddOnPlugin",
        yaml: include_str!("../tests/fixtures/addonplugin.yaml"),
    },
];

/// Namespaces the namespaced fixtures live in; create them before the fixtures.
pub const NAMESPACES: &[&str] = &["cluster1", "default", "open-cluster-management"];

/// The fixture of a kind at an `apiVersion`.
pub fn get(api_version: &str, kind: &str) -> Option<&'static Fixture> {
    ALL.iter()
        .find(|f| f.api_version == api_version && f.kind == kind)
}
