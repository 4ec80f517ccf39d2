//! The generated CRDs: structural, with OCM's names, scopes, versions, subresources and printer
//! columns, and identical to the files checked in under `deploy/crds/`.

use std::collections::BTreeMap;

use flotilla_api::crds::{crds, render_files};
use flotilla_api::schema::structural_problems;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn by_name() -> BTreeMap<String, CustomResourceDefinition> {
    crds()
        .into_iter()
        .map(|crd| (crd.metadata.name.clone().unwrap_or_default(), crd))
        .collect()
}

fn crd(name: &str) -> CustomResourceDefinition {
    by_name().remove(name).unwrap_or_else(|| panic!("no CRD {name}"))
}

fn schema(crd: &CustomResourceDefinition, version: &str) -> Value {
    let v = crd
        .spec
        .versions
        .iter()
        .find(|v| v.name == version)
        .expect("version");
    let schema = v
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("schema");
    serde_json::to_value(schema).expect("schema as JSON")
}

/// `(name, type, jsonPath)` of every printer column of a version.
fn columns(crd: &CustomResourceDefinition, version: &str) -> Vec<(String, String, String)> {
    let v = crd
        .spec
        .versions
        .iter()
        .find(|v| v.name == version)
        .expect("version");
    v.additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.clone(), c.type_.clone(), c.json_path.clone()))
        .collect()
}

fn cols(list: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    list.iter()
        .map(|(n, t, p)| (n.to_string(), t.to_string(), p.to_string()))
        .collect()
}

#[test]
fn every_crd_schema_is_structural() {
    for crd in crds() {
        for version in &crd.spec.versions {
            let problems = structural_problems(&schema(&crd, &version.name));
            assert!(
                problems.is_empty(),
                "{} {}: {problems:#?}",
                crd.spec.names.kind,
                version.name
            );
        }
    }
}

#[test]
fn the_structural_check_catches_untyped_and_any_of_schemas() {
    let bad = json!({
        "type": "object",
        "properties": {
            "untyped": {},
            "union": { "anyOf": [{ "type": "string" }, { "type": "object", "properties": {} }] },
        },
    });
    assert_eq!(structural_problems(&bad).len(), 3);
}

#[test]
fn crds_have_ocm_names_scopes_and_short_names() {
    let expected: &[(&str, &str, &str, &[&str])] = &[
        (
            "addondeploymentconfigs.addon.open-cluster-management.io",
            "AddOnDeploymentConfig",
            "Namespaced",
            &[],
        ),
        (
            "addonplacementscores.cluster.open-cluster-management.io",
            "AddOnPlacementScore",
            "Namespaced",
            &[],
        ),
        ("addonplugins.plugins.flotilla.dev", "AddOnPlugin", "Cluster", &[]),
        (
            "addontemplates.addon.open-cluster-management.io",
            "AddOnTemplate",
            "Cluster",
            &[],
        ),
        (
            "appliedmanifestworks.work.open-cluster-management.io",
            "AppliedManifestWork",
            "Cluster",
            &[],
        ),
        (
            "clusterclaims.cluster.open-cluster-management.io",
            "ClusterClaim",
            "Cluster",
            &[],
        ),
        (
            "clustermanagementaddons.addon.open-cluster-management.io",
            "ClusterManagementAddOn",
            "Cluster",
            &["cma", "cmas"],
        ),
        (
            "managedclusteraddons.addon.open-cluster-management.io",
            "ManagedClusterAddOn",
            "Namespaced",
            &["mca", "mcas"],
        ),
        (
            "managedclusters.cluster.open-cluster-management.io",
            "ManagedCluster",
            "Cluster",
            &["mcl", "mcls"],
        ),
        (
            "managedclustersetbindings.cluster.open-cluster-management.io",
            "ManagedClusterSetBinding",
            "Namespaced",
            &["mclsetbinding", "mclsetbindings"],
        ),
        (
            "managedclustersets.cluster.open-cluster-management.io",
            "ManagedClusterSet",
            "Cluster",
            &["mclset", "mclsets"],
        ),
        (
            "managedserviceaccounts.authentication.open-cluster-management.io",
            "ManagedServiceAccount",
            "Namespaced",
            &[],
        ),
        (
            "manifestworkreplicasets.work.open-cluster-management.io",
            "ManifestWorkReplicaSet",
            "Namespaced",
            &["mwrs"],
        ),
        (
            "manifestworks.work.open-cluster-management.io",
            "ManifestWork",
            "Namespaced",
            &[],
        ),
        (
            "placementdecisions.cluster.open-cluster-management.io",
            "PlacementDecision",
            "Namespaced",
            &[],
        ),
        (
            "placements.cluster.open-cluster-management.io",
            "Placement",
            "Namespaced",
            &[],
        ),
    ];
    let crds = by_name();
    assert_eq!(
        crds.keys().map(String::as_str).collect::<Vec<_>>(),
        expected.iter().map(|e| e.0).collect::<Vec<_>>()
    );
    for (name, kind, scope, short) in expected {
        let crd = &crds[*name];
        assert_eq!(crd.spec.names.kind, *kind, "{name}");
        assert_eq!(crd.spec.scope, *scope, "{name}");
        let got: Vec<&str> = crd
            .spec
            .names
            .short_names
            .iter()
            .flatten()
            .map(String::as_str)
            .collect();
        assert_eq!(got, *short, "{name}");
    }
}

#[test]
fn addon_kinds_store_v1alpha1_and_serve_v1beta1_without_conversion() {
    for name in [
        "clustermanagementaddons.addon.open-cluster-management.io",
        "managedclusteraddons.addon.open-cluster-management.io",
        "addondeploymentconfigs.addon.open-cluster-management.io",
        "addontemplates.addon.open-cluster-management.io",
    ] {
        let crd = crd(name);
        let versions: Vec<(&str, bool, bool)> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage))
            .collect();
        assert_eq!(
            versions,
            [("v1alpha1", true, true), ("v1beta1", true, false)],
            "{name}"
        );
        assert_eq!(
            crd.spec.conversion.as_ref().map(|c| c.strategy.as_str()),
            Some("None"),
            "{name}"
        );
    }
    for crd in crds() {
        if crd.spec.versions.len() == 1 {
            assert!(
                crd.spec.versions[0].served && crd.spec.versions[0].storage,
                "{:?}",
                crd.metadata.name
            );
        }
    }
}

#[test]
fn status_subresource_exactly_where_ocm_has_one() {
    let without: [&str; 3] = ["ClusterClaim", "AddOnDeploymentConfig", "AddOnTemplate"];
    for crd in crds() {
        for version in &crd.spec.versions {
            let has = version.subresources.as_ref().is_some_and(|s| s.status.is_some());
            assert_eq!(
                has,
                !without.contains(&crd.spec.names.kind.as_str()),
                "{} {}",
                crd.spec.names.kind,
                version.name
            );
        }
    }
}

#[test]
fn managed_cluster_printer_columns_are_ocms() {
    let crd = crd("managedclusters.cluster.open-cluster-management.io");
    let names: Vec<String> = columns(&crd, "v1").into_iter().map(|c| c.0).collect();
    assert_eq!(
        names,
        [
            "Hub Accepted",
            "Managed Cluster URLs",
            "Joined",
            "Available",
            "Age"
        ]
    );
    assert_eq!(
        columns(&crd, "v1"),
        cols(&[
            ("Hub Accepted", "boolean", ".spec.hubAcceptsClient"),
            (
                "Managed Cluster URLs",
                "string",
                ".spec.managedClusterClientConfigs[*].url"
            ),
            (
                "Joined",
                "string",
                r#".status.conditions[?(@.type=="ManagedClusterJoined")].status"#
            ),
            (
                "Available",
                "string",
                r#".status.conditions[?(@.type=="ManagedClusterConditionAvailable")].status"#
            ),
            ("Age", "date", ".metadata.creationTimestamp"),
        ])
    );
}

#[test]
fn printer_columns_of_the_other_kinds_are_ocms() {
    let crds = by_name();
    let get = |name: &str, version: &str| columns(&crds[name], version);
    assert_eq!(
        get("managedclustersets.cluster.open-cluster-management.io", "v1beta2"),
        cols(&[
            (
                "Empty",
                "string",
                r#".status.conditions[?(@.type=="ClusterSetEmpty")].status"#
            ),
            ("Age", "date", ".metadata.creationTimestamp"),
        ])
    );
    assert_eq!(
        get("placements.cluster.open-cluster-management.io", "v1beta1"),
        cols(&[
            (
                "Succeeded",
                "string",
                r#".status.conditions[?(@.type=="PlacementSatisfied")].status"#
            ),
            (
                "Reason",
                "string",
                r#".status.conditions[?(@.type=="PlacementSatisfied")].reason"#
            ),
            ("SelectedClusters", "integer", ".status.numberOfSelectedClusters"),
        ])
    );
    assert_eq!(
        get(
            "manifestworkreplicasets.work.open-cluster-management.io",
            "v1alpha1"
        ),
        cols(&[
            (
                "Placement",
                "string",
                r#".status.conditions[?(@.type=="PlacementVerified")].reason"#
            ),
            (
                "Found",
                "string",
                r#".status.conditions[?(@.type=="PlacementVerified")].status"#
            ),
            (
                "ManifestWorks",
                "string",
                r#".status.conditions[?(@.type=="ManifestworkApplied")].reason"#
            ),
            (
                "Applied",
                "string",
                r#".status.conditions[?(@.type=="ManifestworkApplied")].status"#
            ),
        ])
    );
    let cma = "clustermanagementaddons.addon.open-cluster-management.io";
    assert_eq!(
        get(cma, "v1alpha1"),
        cols(&[
            ("DISPLAY NAME", "string", ".spec.addOnMeta.displayName"),
            ("CRD NAME", "string", ".spec.addOnConfiguration.crdName"),
        ])
    );
    assert_eq!(
        get(cma, "v1beta1"),
        cols(&[("DISPLAY NAME", "string", ".spec.addOnMeta.displayName")])
    );
    let mca_columns = cols(&[
        (
            "Available",
            "string",
            r#".status.conditions[?(@.type=="Available")].status"#,
        ),
        (
            "Degraded",
            "string",
            r#".status.conditions[?(@.type=="Degraded")].status"#,
        ),
        (
            "Progressing",
            "string",
            r#".status.conditions[?(@.type=="Progressing")].status"#,
        ),
    ]);
    let mca = "managedclusteraddons.addon.open-cluster-management.io";
    assert_eq!(get(mca, "v1alpha1"), mca_columns);
    assert_eq!(get(mca, "v1beta1"), mca_columns);
    let template = "addontemplates.addon.open-cluster-management.io";
    for version in ["v1alpha1", "v1beta1"] {
        assert_eq!(
            get(template, version),
            cols(&[("ADDON NAME", "string", ".spec.addonName")])
        );
    }
    for (name, version) in [
        (
            "managedclustersetbindings.cluster.open-cluster-management.io",
            "v1beta2",
        ),
        ("clusterclaims.cluster.open-cluster-management.io", "v1alpha1"),
        ("placementdecisions.cluster.open-cluster-management.io", "v1beta1"),
        (
            "addonplacementscores.cluster.open-cluster-management.io",
            "v1alpha1",
        ),
        ("manifestworks.work.open-cluster-management.io", "v1"),
        (
            "addondeploymentconfigs.addon.open-cluster-management.io",
            "v1alpha1",
        ),
        (
            "managedserviceaccounts.authentication.open-cluster-management.io",
            "v1alpha1",
        ),
        (
            "managedserviceaccounts.authentication.open-cluster-management.io",
            "v1beta1",
        ),
    ] {
        assert_eq!(get(name, version), vec![], "{name}");
    }
}

#[test]
fn only_ocm_nullable_fields_are_nullable() {
    fn nullable_paths(value: &Value, path: String, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if map.get("nullable") == Some(&Value::Bool(true)) {
                    out.push(path.clone());
                }
                for (k, v) in map {
                    nullable_paths(v, format!("{path}/{k}"), out);
                }
            }
            Value::Array(list) => list.iter().for_each(|v| nullable_paths(v, path.clone(), out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    for crd in crds() {
        for version in &crd.spec.versions {
            nullable_paths(
                &schema(&crd, &version.name),
                crd.spec.names.kind.clone(),
                &mut found,
            );
        }
    }
    assert_eq!(
        found,
        ["ManagedCluster/properties/spec/properties/taints/items/properties/timeAdded"]
    );
}

#[test]
fn ocm_defaults_are_in_the_schemas() {
    let mc = schema(&crd("managedclusters.cluster.open-cluster-management.io"), "v1");
    assert_eq!(
        mc["properties"]["spec"]["properties"]["leaseDurationSeconds"]["default"],
        60
    );
    assert!(
        mc["properties"]["spec"]["properties"]["hubAcceptsClient"]
            .get("default")
            .is_none()
    );
    assert_eq!(mc["properties"]["spec"].get("default"), None);
    assert_eq!(mc.get("required"), None);

    let set = schema(
        &crd("managedclustersets.cluster.open-cluster-management.io"),
        "v1beta2",
    );
    assert_eq!(
        set["properties"]["spec"]["default"],
        json!({ "clusterSelector": { "selectorType": "ExclusiveClusterSetLabel" } })
    );

    let placement = schema(&crd("placements.cluster.open-cluster-management.io"), "v1beta1");
    assert_eq!(placement["required"], json!(["spec"]));
    let group =
        &placement["properties"]["spec"]["properties"]["decisionStrategy"]["properties"]["groupStrategy"];
    let per_group = &group["properties"]["clustersPerDecisionGroup"];
    assert_eq!(per_group["default"], "100%");
    assert_eq!(per_group["x-kubernetes-int-or-string"], true);
    assert_eq!(per_group["pattern"], "^((100|[1-9][0-9]{0,1})%|[1-9][0-9]*)$");

    let mca = schema(
        &crd("managedclusteraddons.addon.open-cluster-management.io"),
        "v1alpha1",
    );
    assert_eq!(
        mca["properties"]["spec"]["properties"]["installNamespace"]["default"],
        "open-cluster-management-agent-addon"
    );
    assert_eq!(mca["required"], json!(["spec"]));

    let mwrs = schema(
        &crd("manifestworkreplicasets.work.open-cluster-management.io"),
        "v1alpha1",
    );
    let refs = &mwrs["properties"]["spec"]["properties"]["placementRefs"];
    assert_eq!(refs["minItems"], 1);
    assert_eq!(
        refs["items"]["properties"]["rolloutStrategy"]["default"],
        json!({ "type": "All", "all": { "progressDeadline": "None" } })
    );
}

#[test]
fn manifests_are_embedded_resources_that_keep_unknown_fields() {
    let mw = schema(&crd("manifestworks.work.open-cluster-management.io"), "v1");
    let manifest = &mw["properties"]["spec"]["properties"]["workload"]["properties"]["manifests"]["items"];
    assert_eq!(manifest["type"], "object");
    assert_eq!(manifest["x-kubernetes-embedded-resource"], true);
    assert_eq!(manifest["x-kubernetes-preserve-unknown-fields"], true);
    assert_eq!(manifest.get("properties"), None);
}

#[test]
fn addon_plugin_requires_exactly_one_source_and_bounds_its_limits() {
    let plugin = schema(&crd("addonplugins.plugins.flotilla.dev"), "v1alpha1");
    let spec = &plugin["properties"]["spec"];
    assert_eq!(spec["required"], json!(["source"]));
    assert_eq!(
        spec["properties"]["source"]["x-kubernetes-validations"],
        json!([{ "rule": "has(self.configMap) != has(self.oci)", "message": "exactly one of configMap or oci must be set" }])
    );
    assert_eq!(spec["properties"]["digest"]["pattern"], "^sha256:[a-f0-9]{64}$");
    let limits = &spec["properties"]["limits"];
    assert_eq!(limits["default"], json!({}));
    assert_eq!(limits["properties"]["timeoutMillis"]["default"], 5000);
    assert_eq!(limits["properties"]["memoryMiB"]["default"], 64);
    assert_eq!(limits["properties"]["maxOutputBytes"]["default"], 1_048_576);
    assert_eq!(limits["properties"]["memoryMiB"]["maximum"], 1024.0);
}

/// As OCM's managed-serviceaccount CRD: v1beta1 stored, v1alpha1 served and deprecated, the
/// same schema in both (so conversion `None` is exact), `rotation` required and defaulted.
#[test]
fn managed_service_account_stores_v1beta1_and_serves_a_deprecated_v1alpha1_with_the_same_schema() {
    let msa = crd("managedserviceaccounts.authentication.open-cluster-management.io");
    let versions: Vec<(&str, bool, bool, Option<bool>)> = msa
        .spec
        .versions
        .iter()
        .map(|v| (v.name.as_str(), v.served, v.storage, v.deprecated))
        .collect();
    assert_eq!(
        versions,
        [
            ("v1alpha1", true, false, Some(true)),
            ("v1beta1", true, true, None)
        ]
    );
    assert!(msa.spec.versions[0].deprecation_warning.is_some());
    assert_eq!(
        msa.spec.conversion.as_ref().map(|c| c.strategy.as_str()),
        Some("None")
    );

    let beta = schema(&msa, "v1beta1");
    assert_eq!(schema(&msa, "v1alpha1"), beta);
    assert_eq!(beta.get("required"), None);
    let spec = &beta["properties"]["spec"];
    assert_eq!(spec["required"], json!(["rotation"]));
    let rotation = &spec["properties"]["rotation"]["properties"];
    assert_eq!(rotation["enabled"]["default"], true);
    assert_eq!(rotation["validity"]["default"], "8640h0m0s");
    assert_eq!(rotation["validity"]["type"], "string");
    let ttl = &spec["properties"]["ttlSecondsAfterCreation"];
    assert_eq!(
        (
            &ttl["type"],
            &ttl["format"],
            &ttl["minimum"],
            &ttl["exclusiveMinimum"]
        ),
        (&json!("integer"), &json!("int32"), &json!(0.0), &json!(true))
    );
    let status = &beta["properties"]["status"]["properties"];
    assert_eq!(status["conditions"].get("x-kubernetes-list-type"), None);
    assert_eq!(status["expirationTimestamp"]["format"], "date-time");
    let secret_ref = &status["tokenSecretRef"];
    assert_eq!(secret_ref["required"], json!(["lastRefreshTimestamp", "name"]));
    assert_eq!(
        secret_ref["properties"]["lastRefreshTimestamp"]["format"],
        "date-time"
    );
}

/// The check CI relies on for generated files: every file of `deploy/crds/` is what
/// `flotilla-crdgen` writes, none is missing and none is left over.
#[test]
fn deploy_crds_match_the_generated_crds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds");
    let wanted = render_files().expect("render CRDs");
    for (name, text) in &wanted {
        let on_disk = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        assert!(
            on_disk == *text,
            "deploy/crds/{name} is stale: run `cargo run -p flotilla-api --bin flotilla-crdgen`"
        );
    }
    let extra: Vec<String> = std::fs::read_dir(&dir)
        .expect("deploy/crds")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && !wanted.contains_key(n))
        .collect();
    assert!(
        extra.is_empty(),
        "deploy/crds has files flotilla-crdgen does not write: {extra:?}; run `cargo run -p flotilla-api --bin flotilla-crdgen`"
    );
}

/// OCM's v1alpha1 ManagedClusterAddOn allows only `csr` and `token` as `kubeClientDriver`, as
/// v1beta1 does for `registrations[].kubeClient.driver` (issue 30).
#[test]
fn addon_kube_client_driver_is_csr_or_token_in_both_versions() {
    let mca = crd("managedclusteraddons.addon.open-cluster-management.io");
    let alpha = schema(&mca, "v1alpha1");
    let driver = &alpha["properties"]["status"]["properties"]["kubeClientDriver"];
    assert_eq!(driver["type"], "string", "{driver}");
    assert_eq!(driver["enum"], json!(["csr", "token"]), "{driver}");
    let beta = schema(&mca, "v1beta1");
    let registration = &beta["properties"]["status"]["properties"]["registrations"]["items"];
    let driver = &registration["properties"]["kubeClient"]["properties"]["driver"];
    assert_eq!(driver["enum"], json!(["csr", "token"]), "{driver}");
}
