//! The objects the hub benchmarks that run beside OCM write on a fresh control plane: accepted
//! clusters, AddOnTemplate add-ons, and the add-on conversion webhook OCM's managers read
//! v1beta1 through.

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client, ResourceExt as _};
use serde_json::{Value, json};

/// Where the template add-ons' agents are installed.
pub const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
/// Label on an add-on's works naming the add-on.
pub const ADDON_LABEL: &str = "open-cluster-management.io/addon-name";
/// Setup writes in flight at once.
pub const SETUP_CONCURRENCY: usize = 16;

/// Server-side applies `object`, of any kind the control plane serves.
pub async fn apply(client: &Client, object: Value) -> anyhow::Result<()> {
    let object: DynamicObject = serde_json::from_value(object)?;
    let types = object.types.clone().context("apiVersion and kind")?;
    let gvk = GroupVersionKind::try_from(&types)?;
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk).await?;
    let api: Api<DynamicObject> = match object.namespace() {
        Some(namespace) => Api::namespaced_with(client.clone(), &namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        &object.name_any(),
        &PatchParams::apply("bench").force(),
        &Patch::Apply(&object),
    )
    .await
    .with_context(|| format!("apply {} {}", gvk.kind, object.name_any()))?;
    Ok(())
}

/// Applies each of `objects`, [`SETUP_CONCURRENCY`] at a time.
pub async fn apply_all(client: &Client, objects: impl IntoIterator<Item = Value>) -> anyhow::Result<()> {
    futures::stream::iter(objects)
        .map(|object| apply(client, object))
        .buffer_unordered(SETUP_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// `bench-00000`, `bench-00001`, …
pub fn cluster_names(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("bench-{i:05}")).collect()
}

/// Accepted ManagedClusters `names`, in cluster set `set` when given, with their namespaces
/// when `namespaces` (a whole hub makes them itself, and refuses a cluster whose namespace
/// someone else made).
pub async fn accepted_clusters(
    client: &Client,
    names: &[String],
    set: Option<&str>,
    namespaces: bool,
) -> anyhow::Result<()> {
    let labels = set.map_or_else(
        || json!({}),
        |set| json!({"cluster.open-cluster-management.io/clusterset": set}),
    );
    futures::stream::iter(names)
        .map(|name| {
            let labels = labels.clone();
            async move {
                if namespaces {
                    apply(
                        client,
                        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
                    )
                    .await?;
                }
                apply(
                    client,
                    json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
                           "metadata": {"name": name, "labels": labels}, "spec": {"hubAcceptsClient": true}}),
                )
                .await
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// The OCM documentation's `hello-template` agent as AddOnTemplate `name` (no registrations):
/// its namespace, Deployment, ServiceAccount and ClusterRoleBinding, rendered per cluster.
pub fn addon_template(name: &str) -> Value {
    json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnTemplate",
        "metadata": {"name": name},
        "spec": {"addonName": name, "agentSpec": {"workload": {"manifests": [
            {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": INSTALL_NAMESPACE}},
            {"kind": "Deployment", "apiVersion": "apps/v1",
             "metadata": {"name": format!("{name}-agent"), "namespace": INSTALL_NAMESPACE,
                          "labels": {"app": format!("{name}-agent")}},
             "spec": {"replicas": 1, "selector": {"matchLabels": {"app": format!("{name}-agent")}},
                "template": {"metadata": {"labels": {"app": format!("{name}-agent")}},
                  "spec": {"serviceAccountName": format!("{name}-agent-sa"),
                    "containers": [{"name": "helloworld-agent", "image": "quay.io/open-cluster-management/addon-examples:latest",
                      "args": ["/helloworld_helm", "agent", "--cluster-name={{CLUSTER_NAME}}",
                               "--addon-namespace={{INSTALL_NAMESPACE}}", format!("--addon-name={name}")]}]}}}},
            {"kind": "ServiceAccount", "apiVersion": "v1",
             "metadata": {"name": format!("{name}-agent-sa"), "namespace": INSTALL_NAMESPACE}},
            {"kind": "ClusterRoleBinding", "apiVersion": "rbac.authorization.k8s.io/v1",
             "metadata": {"name": format!("{name}-agent")},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
             "subjects": [{"kind": "ServiceAccount", "name": format!("{name}-agent-sa"),
                           "namespace": "{{INSTALL_NAMESPACE}}"}]}
        ]}}}
    })
}

/// AddOnTemplate `name` and its ClusterManagementAddOn naming it as the default config;
/// installed through Placement `placement` (namespace, name) with rollout All when given.
pub async fn template_addon(
    client: &Client,
    name: &str,
    placement: Option<(&str, &str)>,
) -> anyhow::Result<()> {
    apply(client, addon_template(name)).await?;
    let mut spec = json!({"addOnMeta": {"displayName": name},
                          "supportedConfigs": [{"group": "addon.open-cluster-management.io",
                                                "resource": "addontemplates",
                                                "defaultConfig": {"name": name}}]});
    if let Some((namespace, placement)) = placement {
        spec["installStrategy"] = json!({"type": "Placements", "placements": [
            {"namespace": namespace, "name": placement, "rolloutStrategy": {"type": "All"}}]});
    }
    apply(
        client,
        json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ClusterManagementAddOn",
               "metadata": {"name": name}, "spec": spec}),
    )
    .await
}

/// Serves the add-on conversion webhook from this process and registers it on `client`'s
/// control plane; the server lives as long as the returned value.
pub async fn conversion(client: &Client) -> anyhow::Result<flotilla_webhook::Webhook> {
    let webhook = flotilla_webhook::serve_on_loopback().await?;
    let endpoint = flotilla_webhook::Endpoint::Url(format!(
        "https://{}{}",
        webhook.addr,
        flotilla_webhook::CONVERT_PATH
    ));
    flotilla_webhook::register_conversion(client, &endpoint, &webhook.ca_pem).await?;
    Ok(webhook)
}

/// The writes of `resources` the apiserver has counted so far.
pub async fn writes(client: &Client, resources: &[&str]) -> anyhow::Result<f64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await.context("read /metrics")?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| {
            ["POST", "PUT", "PATCH", "DELETE"]
                .iter()
                .any(|v| l.contains(&format!("verb=\"{v}\"")))
        })
        .filter(|l| resources.iter().any(|r| l.contains(&format!("resource=\"{r}\""))))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum())
}

/// Starts `binary ARGS` as a child logging to `log` in the temp directory, with a free
/// loopback port for its metrics (`--listen`) when `listen` is set, as OCM's commands take.
pub fn spawn(
    binary: &std::path::Path,
    args: &[String],
    log: &str,
    listen: bool,
) -> anyhow::Result<crate::KillOnDrop> {
    let log = std::fs::File::create(std::env::temp_dir().join(log))?;
    let mut command = std::process::Command::new(binary);
    command.args(args);
    if listen {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        command.arg(format!("--listen=127.0.0.1:{port}"));
    }
    let child = command
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("start {}", binary.display()))?;
    Ok(crate::KillOnDrop(child))
}
