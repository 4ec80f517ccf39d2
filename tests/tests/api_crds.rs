//! The CRDs on a real kube-apiserver: every kind can be created from its OCM-shaped example,
//! read back through kube-rs and compared field by field; kubectl shows OCM's columns; and the
//! schemas reject bad input with a message a person can act on.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::collections::BTreeSet;

use flotilla_api::{
    addon, authentication, cluster,
    fixtures::{self, Fixture},
    plugins, work,
};
use flotilla_testing::{ControlPlane, shared};
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client, Resource,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
    discovery,
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

async fn hub() -> &'static ControlPlane {
    shared("api").await.expect("start control plane")
}

async fn ensure_namespace(client: &Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(name).await.unwrap().is_none() {
        let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": name } })).unwrap();
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => panic!("create namespace {name}: {e}"),
        }
    }
}

/// Removes `null` members: the apiserver drops the nulls Go writes for unset pointers and
/// slices, so "null" and "absent" mean the same on both sides.
fn strip_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

/// Asserts that every field of `expected` is in `actual` with the same value; `actual` may
/// hold more (server-side defaults and metadata). A `null` in `expected` means "unset".
fn assert_contains(expected: &Value, actual: &Value, path: &str) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (key, value) in e.iter().filter(|(_, v)| !v.is_null()) {
                let Some(found) = a.get(key) else {
                    panic!("{path}.{key} is missing from the stored object");
                };
                assert_contains(value, found, &format!("{path}.{key}"));
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            assert_eq!(e.len(), a.len(), "{path}: list length differs");
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                assert_contains(ev, av, &format!("{path}[{i}]"));
            }
        }
        _ => assert_eq!(expected, actual, "{path} differs"),
    }
}

/// Reads the object through its Rust type and encodes it again (nulls removed).
async fn read_typed<K>(client: &Client, namespace: Option<&str>, name: &str) -> Value
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    // The scope is only known at run time here, so build the request from the type's URL.
    let request = kube::core::Request::new(K::url_path(&(), namespace))
        .get(name, &kube::api::GetParams::default())
        .unwrap();
    let typed: K = client
        .request(request)
        .await
        .unwrap_or_else(|e| panic!("typed get {name}: {e}"));
    strip_nulls(&serde_json::to_value(&typed).unwrap())
}

async fn read_fixture_typed(client: &Client, f: &Fixture, namespace: Option<&str>, name: &str) -> Value {
    use addon::{v1alpha1 as a1, v1beta1 as b1};
    match (f.api_version, f.kind) {
        ("cluster.open-cluster-management.io/v1", "ManagedCluster") => {
            read_typed::<cluster::v1::ManagedCluster>(client, namespace, name).await
        }
        ("cluster.open-cluster-management.io/v1beta2", "ManagedClusterSet") => {
            read_typed::<cluster::v1beta2::ManagedClusterSet>(client, namespace, name).await
        }
        ("cluster.open-cluster-management.io/v1beta2", "ManagedClusterSetBinding") => {
            read_typed::<cluster::v1beta2::ManagedClusterSetBinding>(client, namespace, name).await
        }
        ("cluster.open-cluster-management.io/v1alpha1", "ClusterClaim") => {
            read_typed::<cluster::v1alpha1::ClusterClaim>(client, namespace, name).await
        }
        ("cluster.open-cluster-management.io/v1beta1", "Placement") => {
            read_typed::<cluster::v1beta1::Placement>(client, namespace, name).await
        }
        ("cluster.open-cluster-management.io/v1beta1", "PlacementDecision") => {
            read_typed::<cluster::v1beta1::PlacementDecision>(client, namespace, name).await
        }
        ("cluster.open-cluster-management.io/v1alpha1", "AddOnPlacementScore") => {
            read_typed::<cluster::v1alpha1::AddOnPlacementScore>(client, namespace, name).await
        }
        ("work.open-cluster-management.io/v1", "ManifestWork") => {
            read_typed::<work::v1::ManifestWork>(client, namespace, name).await
        }
        ("work.open-cluster-management.io/v1", "AppliedManifestWork") => {
            read_typed::<work::v1::AppliedManifestWork>(client, namespace, name).await
        }
        ("work.open-cluster-management.io/v1alpha1", "ManifestWorkReplicaSet") => {
            read_typed::<work::v1alpha1::ManifestWorkReplicaSet>(client, namespace, name).await
        }
        ("addon.open-cluster-management.io/v1alpha1", "ClusterManagementAddOn") => {
            read_typed::<a1::ClusterManagementAddOn>(client, namespace, name).await
        }
        ("addon.open-cluster-management.io/v1beta1", "ClusterManagementAddOn") => {
            read_typed::<b1::ClusterManagementAddOn>(client, namespace, name).await
        }
        ("addon.open-cluster-management.io/v1alpha1", "ManagedClusterAddOn") => {
            read_typed::<a1::ManagedClusterAddOn>(client, namespace, name).await
        }
        ("addon.open-cluster-management.io/v1beta1", "ManagedClusterAddOn") => {
            read_typed::<b1::ManagedClusterAddOn>(client, namespace, name).await
        }
        ("addon.open-cluster-management.io/v1alpha1", "AddOnDeploymentConfig") => {
            read_typed::<a1::AddOnDeploymentConfig>(client, namespace, name).await
        }
        ("addon.open-cluster-management.io/v1beta1", "AddOnDeploymentConfig") => {
            read_typed::<b1::AddOnDeploymentConfig>(client, namespace, name).await
        }
        ("addon.open-cluster-management.io/v1alpha1", "AddOnTemplate") => {
            read_typed::<a1::AddOnTemplate>(client, namespace, name).await
        }
        ("addon.open-cluster-management.io/v1beta1", "AddOnTemplate") => {
            read_typed::<b1::AddOnTemplate>(client, namespace, name).await
        }
        ("authentication.open-cluster-management.io/v1beta1", "ManagedServiceAccount") => {
            read_typed::<authentication::v1beta1::ManagedServiceAccount>(client, namespace, name).await
        }
        ("authentication.open-cluster-management.io/v1alpha1", "ManagedServiceAccount") => {
            read_typed::<authentication::v1alpha1::ManagedServiceAccount>(client, namespace, name).await
        }
        ("plugins.flotilla.dev/v1alpha1", "AddOnPlugin") => {
            read_typed::<plugins::v1alpha1::AddOnPlugin>(client, namespace, name).await
        }
        (api_version, kind) => panic!("{}: no Rust type for {api_version} {kind}", f.file),
    }
}

/// Creates the fixture (renamed by `suffix` so each version's example is its own object),
/// writes its status through `/status`, and returns the stored object.
async fn create_fixture(client: &Client, f: &Fixture) -> (Option<String>, String, Value) {
    let mut object: Value = serde_yaml::from_str(f.yaml).unwrap();
    let version = f.api_version.rsplit('/').next().unwrap();
    let name = format!("{}-{version}", object["metadata"]["name"].as_str().unwrap());
    object["metadata"]["name"] = json!(name);
    let namespace = object["metadata"]["namespace"].as_str().map(str::to_owned);
    if let Some(ns) = &namespace {
        ensure_namespace(client, ns).await;
    }

    let (group, version) = f.api_version.split_once('/').unwrap();
    let gvk = GroupVersionKind::gvk(group, version, f.kind);
    let (resource, _capabilities): (ApiResource, _) = discovery::pinned_kind(client, &gvk).await.unwrap();
    let api: Api<DynamicObject> = match &namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let dynamic: DynamicObject = serde_json::from_value(object.clone()).unwrap();
    api.create(&PostParams::default(), &dynamic)
        .await
        .unwrap_or_else(|e| panic!("{}: create: {e}", f.file));
    if let Some(status) = object.get("status") {
        let patch = json!({ "status": status });
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("{}: write status: {e}", f.file));
    }
    let stored = serde_json::to_value(api.get(&name).await.unwrap()).unwrap();
    (namespace, name, stored)
}

#[tokio::test]
async fn every_kind_is_created_from_its_example_and_read_back_field_by_field() {
    let cp = hub().await;
    let client = cp.admin_client().await.unwrap();
    for f in fixtures::ALL {
        let (namespace, name, stored) = create_fixture(&client, f).await;
        let mut expected: Value = serde_yaml::from_str(f.yaml).unwrap();
        expected["metadata"]["name"] = stored["metadata"]["name"].clone();

        // Without the conversion webhook (it comes with the add-on manager), objects of a
        // non-storage version are stored as v1alpha1 and lose fields that only v1beta1 has;
        // for those the typed read below is the check.
        let converted = f.api_version == "addon.open-cluster-management.io/v1beta1";
        if !converted {
            for part in ["spec", "status", "metadata"] {
                if let Some(value) = expected.get(part) {
                    assert_contains(value, &stored[part], &format!("{}: .{part}", f.file));
                }
            }
            for top in strip_nulls(&expected).as_object().unwrap().keys() {
                assert!(stored.get(top).is_some(), "{}: .{top} missing", f.file);
            }
        }
        if converted {
            // Stored as v1alpha1 without conversion, such an object has neither version's
            // shape; reading it back typed waits for the conversion webhook (add-on manager).
            continue;
        } else {
            // The type loses nothing the server returned and invents nothing.
            let encoded = read_fixture_typed(&client, f, namespace.as_deref(), &name).await;
            pretty_assertions::assert_eq!(encoded, strip_nulls(&stored), "{}: typed read differs", f.file);
        }
    }
}

#[tokio::test]
async fn kubectl_lists_ocm_kinds_and_shows_ocm_printer_columns() {
    let cp = hub().await;
    let listed = cp
        .kubectl()
        .args([
            "get",
            "managedclusters,manifestworks,placements,clustermanagementaddons",
            "-A",
        ])
        .output()
        .unwrap();
    assert!(
        listed.status.success(),
        "kubectl get failed: {}",
        String::from_utf8_lossy(&listed.stderr)
    );

    let client = cp.admin_client().await.unwrap();
    let clusters: Api<cluster::v1::ManagedCluster> = Api::all(client);
    let cluster: cluster::v1::ManagedCluster = serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": { "name": "columns-demo" },
        "spec": {
            "hubAcceptsClient": true,
            "managedClusterClientConfigs": [{ "url": "https://columns-demo.example:6443" }]
        }
    }))
    .unwrap();
    clusters.create(&PostParams::default(), &cluster).await.unwrap();
    let output = cp
        .kubectl()
        .args(["get", "managedcluster", "columns-demo"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    let header: Vec<&str> = text
        .lines()
        .next()
        .unwrap()
        .split("  ")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "HUB ACCEPTED",
            "MANAGED CLUSTER URLS",
            "JOINED",
            "AVAILABLE",
            "AGE"
        ]
    );
    let row = text.lines().nth(1).unwrap();
    assert!(
        row.contains("columns-demo")
            && row.contains("true")
            && row.contains("https://columns-demo.example:6443"),
        "{row}"
    );

    // Short names resolve as in OCM.
    for short in ["mcl", "mcls", "mclset", "cma", "mca"] {
        let output = cp.kubectl().args(["get", short, "-A"]).output().unwrap();
        assert!(
            output.status.success(),
            "kubectl get {short}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Creates `object` and returns the apiserver's refusal message (the test fails if accepted).
async fn rejection(client: &Client, object: Value) -> String {
    let api_version = object["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap();
    let gvk = GroupVersionKind::gvk(group, version, object["kind"].as_str().unwrap());
    let (resource, _) = discovery::pinned_kind(client, &gvk).await.unwrap();
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(ns) => {
            ensure_namespace(client, ns).await;
            Api::namespaced_with(client.clone(), ns, &resource)
        }
        None => Api::all_with(client.clone(), &resource),
    };
    let dynamic: DynamicObject = serde_json::from_value(object).unwrap();
    match api.create(&PostParams::default(), &dynamic).await {
        Ok(created) => panic!("invalid object {:?} was accepted", created.metadata.name),
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "expected 422 Invalid, got {status:?}");
            status.message
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[tokio::test]
async fn invalid_objects_are_rejected_by_crd_validation_with_a_clear_message() {
    let cp = hub().await;
    let client = cp.admin_client().await.unwrap();

    let message = rejection(
        &client,
        json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta1",
            "kind": "Placement",
            "metadata": { "name": "negative", "namespace": "validation" },
            "spec": { "numberOfClusters": -1 }
        }),
    )
    .await;
    assert!(message.contains("spec.numberOfClusters"), "{message}");

    let message = rejection(
        &client,
        json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta1",
            "kind": "Placement",
            "metadata": { "name": "bad-coordinate", "namespace": "validation" },
            "spec": { "prioritizerPolicy": { "configurations": [
                { "scoreCoordinate": { "type": "Magic", "builtIn": "Steady" }, "weight": 1 }
            ] } }
        }),
    )
    .await;
    assert!(
        message.contains("scoreCoordinate.type") && message.contains("Unsupported value"),
        "{message}"
    );

    let message = rejection(
        &client,
        json!({
            "apiVersion": "cluster.open-cluster-management.io/v1",
            "kind": "ManagedCluster",
            "metadata": { "name": "bad-taint" },
            "spec": { "hubAcceptsClient": true, "taints": [{ "key": "k", "effect": "Sometimes" }] }
        }),
    )
    .await;
    assert!(
        message.contains("effect") && message.contains("Unsupported value"),
        "{message}"
    );

    let message = rejection(
        &client,
        json!({
            "apiVersion": "work.open-cluster-management.io/v1",
            "kind": "ManifestWork",
            "metadata": { "name": "bad-strategy", "namespace": "validation" },
            "spec": {
                "workload": { "manifests": [] },
                "manifestConfigs": [{
                    "resourceIdentifier": { "resource": "configmaps", "name": "a", "namespace": "b" },
                    "updateStrategy": { "type": "Sometimes" }
                }]
            }
        }),
    )
    .await;
    assert!(message.contains("updateStrategy.type"), "{message}");

    let message = rejection(
        &client,
        json!({
            "apiVersion": "plugins.flotilla.dev/v1alpha1",
            "kind": "AddOnPlugin",
            "metadata": { "name": "two-sources" },
            "spec": { "source": {
                "configMap": { "namespace": "a", "name": "b", "key": "c" },
                "oci": { "reference": "registry.example/plugin:1" }
            } }
        }),
    )
    .await;
    assert!(message.contains("spec.source"), "{message}");

    let message = rejection(
        &client,
        json!({
            "apiVersion": "plugins.flotilla.dev/v1alpha1",
            "kind": "AddOnPlugin",
            "metadata": { "name": "bad-digest" },
            "spec": {
                "source": { "oci": { "reference": "registry.example/plugin:1" } },
                "digest": "md5:1234"
            }
        }),
    )
    .await;
    assert!(message.contains("spec.digest"), "{message}");

    let message = rejection(
        &client,
        json!({
            "apiVersion": "authentication.open-cluster-management.io/v1beta1",
            "kind": "ManagedServiceAccount",
            "metadata": { "name": "zero-ttl", "namespace": "validation" },
            "spec": { "rotation": {}, "ttlSecondsAfterCreation": 0 }
        }),
    )
    .await;
    assert!(message.contains("spec.ttlSecondsAfterCreation"), "{message}");

    let message = rejection(
        &client,
        json!({
            "apiVersion": "authentication.open-cluster-management.io/v1alpha1",
            "kind": "ManagedServiceAccount",
            "metadata": { "name": "no-rotation", "namespace": "validation" },
            "spec": {}
        }),
    )
    .await;
    assert!(message.contains("spec.rotation"), "{message}");
}

/// OCM's CRD defaults an empty `rotation` (enabled, 8640h0m0s), and with conversion `None` an
/// object reads the same through v1alpha1 and v1beta1.
#[tokio::test]
async fn managed_service_account_gets_ocm_defaults_and_reads_the_same_in_both_versions() {
    use authentication::{v1alpha1, v1beta1};

    let cp = hub().await;
    let client = cp.admin_client().await.unwrap();
    let namespace = "msa-defaults";
    ensure_namespace(&client, namespace).await;
    let resource = ApiResource::erase::<v1alpha1::ManagedServiceAccount>(&());
    let alpha_dynamic: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "authentication.open-cluster-management.io/v1alpha1",
        "kind": "ManagedServiceAccount",
        "metadata": { "name": "defaulted", "namespace": namespace },
        "spec": { "rotation": {} }
    }))
    .unwrap();
    alpha_dynamic
        .create(&PostParams::default(), &object)
        .await
        .unwrap();

    let beta: Api<v1beta1::ManagedServiceAccount> = Api::namespaced(client.clone(), namespace);
    let stored = beta.get("defaulted").await.unwrap();
    assert_eq!(
        stored.spec.rotation,
        v1beta1::ManagedServiceAccountRotation::crd_default()
    );
    assert_eq!(stored.spec.ttl_seconds_after_creation, None);

    let alpha: Api<v1alpha1::ManagedServiceAccount> = Api::namespaced(client, namespace);
    let read = alpha.get("defaulted").await.unwrap();
    assert_eq!(v1beta1::ManagedServiceAccountSpec::from(read.spec), stored.spec);
}

#[tokio::test]
async fn every_crd_is_installed_and_served() {
    let cp = hub().await;
    let output = cp
        .kubectl()
        .args(["api-resources", "-o", "name"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let served: BTreeSet<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    for crd in flotilla_api::crds::crds() {
        let name = crd.metadata.name.unwrap();
        assert!(served.contains(&name), "{name} is not served; served: {served:?}");
    }
}
