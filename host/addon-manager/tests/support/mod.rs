//! One hub control plane for the add-on manager's tests, with the AddOnPlugin controller and the
//! add-on manager sharing one plugin registry (as `flotilla hub` runs them) on a thread of their
//! own, plus the helpers that stand in for the parts built elsewhere: cluster registration
//! (ManagedCluster and namespace written directly), the placement controller (PlacementDecisions
//! written directly) and the managed clusters' work agents (ManifestWork status patched).

#![allow(
    clippy::expect_used,
    dead_code,
    reason = "test support: fail loudly; not every binary uses every helper"
)]

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;

use flotilla_api::plugins::v1alpha1::{AddOnPlugin, AddOnPluginSpec, ConfigMapSource, PluginSource};
use flotilla_api::work::v1::ManifestWork;
use flotilla_plugin_loader::controller::{self, ControllerConfig};
use flotilla_testing::{ControlPlane, wait};
use flotilla_wasm::{PluginRegistry, Runtime, RuntimeConfig};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

pub const TIMEOUT: Duration = Duration::from_secs(90);
/// Namespace of the plugins' ConfigMaps.
pub const SOURCES: &str = "addon-plugin-sources";
/// The one namespace whose Secrets (signing CAs) the test hub's AddOnPlugins may name.
pub const PLUGIN_SECRETS: &str = "signer-cas";

/// The shared control plane, started once with the controllers running beside it.
pub async fn hub() -> &'static ControlPlane {
    static CP: tokio::sync::OnceCell<&'static ControlPlane> = tokio::sync::OnceCell::const_new();
    *CP.get_or_init(|| async {
        let cp = flotilla_testing::shared("addon-manager")
            .await
            .expect("control plane starts");
        let client = cp.admin_client().await.expect("admin client");
        namespace(&client, SOURCES).await;
        flotilla_testing::spawn_controllers_once("addon-manager", cp, |client| async move {
            let registry = std::sync::Arc::new(PluginRegistry::new(runtime()));
            let config = ControllerConfig {
                resync: Duration::from_secs(600),
                backoff_min: Duration::from_millis(200),
                backoff_max: Duration::from_secs(2),
                secrets_namespace: PLUGIN_SECRETS.to_owned(),
                ..ControllerConfig::default()
            };
            let options = flotilla_addon_manager::Options {
                resync: Duration::from_secs(600),
                retry: Duration::from_millis(500),
                max_concurrent_renders: 4,
                plugin_secrets_namespace: PLUGIN_SECRETS.to_owned(),
                ..Default::default()
            };
            futures::join!(
                controller::run(client.clone(), std::sync::Arc::clone(&registry), config),
                flotilla_addon_manager::run(client, registry, options),
            );
        });
        cp
    })
    .await
}

/// A client of the shared hub.
pub async fn client() -> Client {
    hub().await.admin_client().await.expect("admin client")
}

/// The plugin runtime of the test hub (compiled components cached under the target dir).
fn runtime() -> Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            let cache_dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-wasm-artifacts");
            Runtime::new(RuntimeConfig {
                cache_dir: Some(cache_dir),
                ..RuntimeConfig::default()
            })
            .expect("runtime builds")
        })
        .clone()
}

/// Creates namespace `name` if missing.
pub async fn namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace");
    let _ = Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await;
}

/// Registers plugin `name` (driving add-on `name`) from the component at `path`, through a
/// ConfigMap of the same name; re-registering swaps in the new bytes.
pub async fn register_plugin(client: &Client, name: &str, path: &str) {
    let bytes = std::fs::read(path).expect("plugin component was built");
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        binary_data: Some(BTreeMap::from([("plugin.wasm".to_owned(), ByteString(bytes))])),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), SOURCES)
        .patch(name, &PatchParams::apply("test").force(), &Patch::Apply(&cm))
        .await
        .expect("plugin ConfigMap");
    let plugin = AddOnPlugin::new(
        name,
        AddOnPluginSpec {
            source: PluginSource {
                config_map: Some(ConfigMapSource {
                    namespace: SOURCES.into(),
                    name: name.into(),
                    key: "plugin.wasm".into(),
                }),
                oci: None,
            },
            ..AddOnPluginSpec::default()
        },
    );
    Api::<AddOnPlugin>::all(client.clone())
        .patch(name, &PatchParams::apply("test").force(), &Patch::Apply(&plugin))
        .await
        .expect("AddOnPlugin");
}

/// Registers cluster `name` as accepted and creates its namespace (the registration hub's job).
pub async fn cluster(client: &Client, name: &str) {
    namespace(client, name).await;
    apply_json(
        client,
        "cluster.open-cluster-management.io/v1",
        "ManagedCluster",
        None,
        json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
               "metadata": {"name": name}, "spec": {"hubAcceptsClient": true}}),
    )
    .await;
}

/// Server-side applies `object` (of `api_version`/`kind`, in `namespace`).
pub async fn apply_json(
    client: &Client,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    object: serde_json::Value,
) {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .expect("kind is served");
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let name = object["metadata"]["name"]
        .as_str()
        .expect("object has a name")
        .to_owned();
    api.patch(&name, &PatchParams::apply("test").force(), &Patch::Apply(&object))
        .await
        .expect("apply object");
}

/// Enables add-on `addon` on `cluster` by hand (install strategy Manual), with `configs`.
pub async fn enable(client: &Client, addon: &str, cluster: &str, configs: serde_json::Value) {
    apply_json(
        client,
        "addon.open-cluster-management.io/v1alpha1",
        "ManagedClusterAddOn",
        Some(cluster),
        json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
               "metadata": {"name": addon, "namespace": cluster}, "spec": {"configs": configs}}),
    )
    .await;
}

/// Waits until `check` holds for work `name` in `namespace`, returning it.
pub async fn await_work(
    client: &Client,
    namespace: &str,
    name: &str,
    what: &str,
    check: impl Fn(&ManifestWork) -> bool,
) -> ManifestWork {
    let api: Api<ManifestWork> = Api::namespaced(client.clone(), namespace);
    wait::until(what, TIMEOUT, || {
        let api = api.clone();
        let check = &check;
        async move { Ok::<_, kube::Error>(api.get_opt(name).await?.filter(|w| check(w))) }
    })
    .await
    .expect(what)
}

/// Waits until work `name` in `namespace` is gone.
pub async fn await_no_work(client: &Client, namespace: &str, name: &str) {
    let api: Api<ManifestWork> = Api::namespaced(client.clone(), namespace);
    wait::until(&format!("work {namespace}/{name} gone"), TIMEOUT, || {
        let api = api.clone();
        async move { Ok::<_, kube::Error>(api.get_opt(name).await?.is_none().then_some(())) }
    })
    .await
    .expect("work removed");
}

/// Waits until condition `type_` of ManagedClusterAddOn `cluster/addon` satisfies `check`.
pub async fn await_condition(
    client: &Client,
    cluster: &str,
    addon: &str,
    type_: &str,
    check: impl Fn(&Condition) -> bool,
) -> Condition {
    let api: Api<flotilla_api::addon::v1alpha1::ManagedClusterAddOn> =
        Api::namespaced(client.clone(), cluster);
    let what = format!("ManagedClusterAddOn {cluster}/{addon} condition {type_}");
    wait::until(&what, TIMEOUT, || {
        let api = api.clone();
        let check = &check;
        async move {
            let addon = api.get_opt(addon).await.map_err(|e| e.to_string())?;
            let status = addon.and_then(|a| a.status);
            match status
                .iter()
                .flat_map(|s| &s.conditions)
                .find(|c| c.type_ == type_ && check(c))
            {
                Some(found) => Ok(Some(found.clone())),
                // Kept waiting; a timeout shows the last status seen.
                None => Err(format!("status: {status:?}")),
            }
        }
    })
    .await
    .expect(&what)
}

/// Stands in for the managed cluster's work agent: reports `work` Applied and Available at its
/// generation.
pub async fn agent_applied(client: &Client, work: &ManifestWork) {
    let generation = work.metadata.generation.unwrap_or_default();
    let now = Time(Timestamp::now());
    let condition = |type_: &str, reason: &str| {
        json!({"type": type_, "status": "True", "reason": reason, "message": "",
               "observedGeneration": generation, "lastTransitionTime": now})
    };
    Api::<ManifestWork>::namespaced(client.clone(), &work.namespace().unwrap_or_default())
        .patch_status(
            &work.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [
                condition("Applied", "AppliedManifestWorkComplete"),
                condition("Available", "ResourcesAvailable"),
            ]}})),
        )
        .await
        .expect("report work status");
}

/// Waits until the plugin's ClusterManagementAddOn exists with the addon-manager lifecycle.
pub async fn await_cma(
    client: &Client,
    addon: &str,
) -> flotilla_api::addon::v1alpha1::ClusterManagementAddOn {
    let api: Api<flotilla_api::addon::v1alpha1::ClusterManagementAddOn> = Api::all(client.clone());
    wait::until(&format!("ClusterManagementAddOn {addon}"), TIMEOUT, || {
        let api = api.clone();
        async move {
            Ok::<_, kube::Error>(api.get_opt(addon).await?.filter(|c| {
                c.annotations()
                    .get(flotilla_api::addon::consts::LIFECYCLE_ANNOTATION)
                    .map(String::as_str)
                    == Some("addon-manager")
            }))
        }
    })
    .await
    .expect("ClusterManagementAddOn ensured")
}

/// Creates Placement `namespace/name` (empty spec) and writes its one PlacementDecision,
/// labelled as the placement controller labels it (decision group 0), choosing `clusters`.
pub async fn placement_deciding(client: &Client, namespace: &str, name: &str, clusters: &[&str]) {
    self::namespace(client, namespace).await;
    apply_json(
        client,
        "cluster.open-cluster-management.io/v1beta1",
        "Placement",
        Some(namespace),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
               "metadata": {"name": name, "namespace": namespace}, "spec": {}}),
    )
    .await;
    let decision = format!("{name}-decision-1");
    apply_json(
        client,
        "cluster.open-cluster-management.io/v1beta1",
        "PlacementDecision",
        Some(namespace),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "PlacementDecision",
               "metadata": {"name": decision, "namespace": namespace,
                            "labels": {"cluster.open-cluster-management.io/placement": name,
                                       "cluster.open-cluster-management.io/decision-group-index": "0",
                                       "cluster.open-cluster-management.io/decision-group-name": ""}}}),
    )
    .await;
    let decisions: Vec<_> = clusters
        .iter()
        .map(|c| json!({"clusterName": c, "reason": ""}))
        .collect();
    Api::<flotilla_api::cluster::v1beta1::PlacementDecision>::namespaced(client.clone(), namespace)
        .patch_status(
            &decision,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"decisions": decisions}})),
        )
        .await
        .expect("decisions");
}

/// Applies AddOnDeploymentConfig `namespace/name` with one customized variable `LOG_LEVEL`.
pub async fn deployment_config(client: &Client, namespace: &str, name: &str, log_level: &str) {
    apply_json(
        client,
        "addon.open-cluster-management.io/v1alpha1",
        "AddOnDeploymentConfig",
        Some(namespace),
        json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnDeploymentConfig",
               "metadata": {"name": name, "namespace": namespace},
               "spec": {"customizedVariables": [{"name": "LOG_LEVEL", "value": log_level}]}}),
    )
    .await;
}

/// Clusters whose stand-in agent reports their works as failing to apply.
pub type Failing = std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>;

/// Stands in for the work agents of every cluster whose name starts with `prefix`: watches
/// the add-on works and reports each, at its generation, Applied and Available — or, for the
/// clusters in `failing`, Applied and Available False. Runs until the test ends.
pub fn spawn_agent(client: Client, prefix: &'static str, failing: Failing) {
    use futures::TryStreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    tokio::spawn(async move {
        let api: Api<ManifestWork> = Api::all(client.clone());
        let config = watcher::Config::default().labels(flotilla_api::addon::consts::ADDON_NAME_LABEL);
        let mut works = std::pin::pin!(watcher(api, config).applied_objects());
        while let Ok(Some(work)) = works.try_next().await {
            let namespace = work.namespace().unwrap_or_default();
            if !namespace.starts_with(prefix) {
                continue;
            }
            let fail = failing.lock().expect("failing set").contains(&namespace);
            let status = if fail { "False" } else { "True" };
            let generation = work.metadata.generation.unwrap_or_default();
            let reported = work.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "Applied" && c.status == status && c.observed_generation == Some(generation)
                })
            });
            if reported {
                continue;
            }
            let now = Time(Timestamp::now());
            let condition = |type_: &str, reason: &str| {
                json!({"type": type_, "status": status, "reason": reason, "message": "stand-in agent",
                       "observedGeneration": generation, "lastTransitionTime": now})
            };
            let _ = Api::<ManifestWork>::namespaced(client.clone(), &namespace)
                .patch_status(
                    &work.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"conditions": [
                        condition("Applied", if fail { "AppliedManifestWorkFailed" } else { "AppliedManifestWorkComplete" }),
                        condition("Available", if fail { "ResourcesNotAvailable" } else { "ResourcesAvailable" }),
                    ]}})),
                )
                .await;
        }
    });
}

/// The add-ons' install namespace on the managed cluster.
pub const AGENT_NAMESPACE: &str = "open-cluster-management-agent-addon";

/// Stands in for the work agent: `work` Applied and Available, with `feedback` for Deployment
/// `deployment` in the agent namespace.
pub async fn report_feedback(client: &Client, work: &ManifestWork, deployment: &str, feedback: Value) {
    let generation = work.metadata.generation.unwrap_or_default();
    let now = Time(Timestamp::now());
    let condition = |type_: &str, reason: &str| {
        json!({"type": type_, "status": "True", "reason": reason, "message": "",
               "observedGeneration": generation, "lastTransitionTime": now})
    };
    Api::<ManifestWork>::namespaced(client.clone(), &work.namespace().unwrap_or_default())
        .patch_status(
            &work.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "conditions": [
                    condition("Applied", "AppliedManifestWorkComplete"),
                    condition("Available", "ResourcesAvailable"),
                ],
                "resourceStatus": {"manifests": [{
                    "resourceMeta": {"ordinal": 0, "group": "apps", "version": "v1", "kind": "Deployment",
                                     "resource": "deployments", "name": deployment, "namespace": AGENT_NAMESPACE},
                    "statusFeedback": {"values": feedback},
                    "conditions": [],
                }]},
            }})),
        )
        .await
        .expect("report work status");
}

/// An Integer feedback value.
pub fn int(name: &str, value: i64) -> Value {
    json!({"name": name, "fieldValue": {"type": "Integer", "integer": value}})
}

/// A String feedback value.
pub fn text(name: &str, value: &str) -> Value {
    json!({"name": name, "fieldValue": {"type": "String", "string": value}})
}
