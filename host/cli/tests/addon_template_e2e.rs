//! AddOnTemplate add-ons end to end, with no user plugin: a hub and two managed clusters on their
//! own control planes, the real `flotilla hub` (as deploy/hub's service account) and one real
//! `flotilla klusterlet` per cluster. The OCM documentation's `hello-template` example (the
//! AddOnTemplate, an AddOnDeploymentConfig for its `LOG_LEVEL`, and the ClusterManagementAddOn
//! naming both as default configs) is applied and enabled on both clusters. On each cluster:
//! the rendered Deployment exists with that cluster's name in its arguments, the add-on's CSR is
//! approved through the built-in plugin and `hello-template-hub-kubeconfig` appears, the hub
//! binds ClusterRole `cm-admin` to the agent in the cluster namespace (only once the admin
//! grants the hub `bind` on it: until then the add-on says what to grant), and the add-on turns
//! `Available` by the template's health mode, WorkloadAvailability: the real work agent reports
//! the Deployment's status, which the real deployment and replicaset controllers compute from
//! the agent's pod, run by each cluster's real node (the pause image stands for the agent
//! program the documentation's image would be).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::{path::Path, time::Duration};

use common::Fleet;
use flotilla_api::addon::v1alpha1::{
    AddOnDeploymentConfig, AddOnTemplate, ClusterManagementAddOn, ManagedClusterAddOn,
};
use flotilla_core::conditions;
use flotilla_testing::wait;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(180);
const ADDON: &str = "hello-template";
const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
const CONFIG_NAMESPACE: &str = "default";

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Waits for `check` or panics with the hub's and `cluster`'s klusterlet's logs.
async fn await_or_logs<T, F, Fut>(state: &Path, cluster: &str, what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, kube::Error>>,
{
    match wait::until(what, TIMEOUT, check).await {
        Ok(value) => value,
        Err(e) => panic!(
            "{e}\nhub log:\n{}\nklusterlet log:\n{}",
            tail(&state.join("hub.log")),
            tail(&state.join("klusterlets").join(cluster).join("klusterlet.log"))
        ),
    }
}

/// Server-side applies `object` through `api`.
async fn apply<K>(api: &Api<K>, object: Value)
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let name = object["metadata"]["name"].as_str().unwrap().to_owned();
    api.patch(&name, &PatchParams::apply("e2e").force(), &Patch::Apply(&object))
        .await
        .unwrap_or_else(|e| panic!("apply {name}: {e}"));
}

/// The documentation's `hello-template` AddOnTemplate: the install namespace, the agent's
/// Deployment, ServiceAccount and ClusterRoleBinding; one kube-client registration whose hub
/// permission binds ClusterRole `cm-admin` in the cluster namespace.
fn hello_template() -> Value {
    json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "AddOnTemplate",
        "metadata": {"name": ADDON},
        "spec": {
            "addonName": ADDON,
            "agentSpec": {"workload": {"manifests": [
                {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": INSTALL_NAMESPACE}},
                {"kind": "Deployment", "apiVersion": "apps/v1",
                 "metadata": {"name": "hello-template-agent", "namespace": INSTALL_NAMESPACE,
                              "labels": {"app": "hello-template-agent"}},
                 "spec": {"replicas": 1,
                    "selector": {"matchLabels": {"app": "hello-template-agent"}},
                    "template": {"metadata": {"labels": {"app": "hello-template-agent"}},
                      "spec": {"serviceAccountName": "hello-template-agent-sa",
                        "containers": [{"name": "helloworld-agent",
                          "image": "flotilla.local/flotilla/pause:3.10",
                          "imagePullPolicy": "IfNotPresent",
                          "args": ["/helloworld_helm", "agent", "--cluster-name={{CLUSTER_NAME}}",
                                   "--addon-namespace={{INSTALL_NAMESPACE}}", "--addon-name=hello-template",
                                   "--hub-kubeconfig={{HUB_KUBECONFIG}}"],
                          "env": [{"name": "LOG_LEVEL", "value": "{{LOG_LEVEL}}"}]}]}}}},
                {"kind": "ServiceAccount", "apiVersion": "v1",
                 "metadata": {"name": "hello-template-agent-sa", "namespace": INSTALL_NAMESPACE}},
                {"kind": "ClusterRoleBinding", "apiVersion": "rbac.authorization.k8s.io/v1",
                 "metadata": {"name": "hello-template-agent"},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                 "subjects": [{"kind": "ServiceAccount", "name": "hello-template-agent-sa",
                               "namespace": "{{INSTALL_NAMESPACE}}"}]}
            ]}},
            "registration": [{"type": "KubeClient", "kubeClient": {"hubPermissions": [
                {"type": "CurrentCluster", "currentCluster": {"clusterRoleName": "cm-admin"}}
            ]}}]
        }
    })
}

#[tokio::test]
async fn the_documentation_addon_template_installs_registers_and_reports_health_on_both_clusters() {
    let fleet = Fleet::start_on_nodes("addontpl", &[]).await;
    let state = fleet.state();
    let hub = fleet.hub.admin_client().await.unwrap();

    // The hub admin applies the documentation's example: no AddOnPlugin anywhere.
    apply(
        &Api::<ClusterRole>::all(hub.clone()),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "cm-admin"},
               "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                          "verbs": ["get", "list", "watch", "create", "update", "delete"]}]}),
    )
    .await;
    apply(&Api::<AddOnTemplate>::all(hub.clone()), hello_template()).await;
    apply(
        &Api::<AddOnDeploymentConfig>::namespaced(hub.clone(), CONFIG_NAMESPACE),
        json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnDeploymentConfig",
               "metadata": {"name": ADDON, "namespace": CONFIG_NAMESPACE},
               "spec": {"customizedVariables": [{"name": "LOG_LEVEL", "value": "4"}]}}),
    )
    .await;
    apply(
        &Api::<ClusterManagementAddOn>::all(hub.clone()),
        json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ClusterManagementAddOn",
               "metadata": {"name": ADDON,
                            "annotations": {"addon.open-cluster-management.io/lifecycle": "addon-manager"}},
               "spec": {"addOnMeta": {"displayName": ADDON, "description": "hello-template is an addon built with addon template"},
                        "supportedConfigs": [
                            {"group": "addon.open-cluster-management.io", "resource": "addontemplates",
                             "defaultConfig": {"name": ADDON}},
                            {"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs",
                             "defaultConfig": {"namespace": CONFIG_NAMESPACE, "name": ADDON}}]}}),
    )
    .await;
    for cluster in ["cluster1", "cluster2"] {
        apply(
            &Api::<ManagedClusterAddOn>::namespaced(hub.clone(), cluster),
            json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
                   "metadata": {"name": ADDON, "namespace": cluster}, "spec": {}}),
        )
        .await;
    }

    // The hub does not hold cm-admin's rules and has no `bind` on it: the permission waits,
    // and says what to grant, until the admin grants it as deploy/hub says.
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(hub.clone(), "cluster1");
    let refused = await_or_logs(state, "cluster1", "the ungranted ClusterRole reported", || {
        let addons = addons.clone();
        async move {
            Ok(addons.get_opt(ADDON).await?.and_then(|a| {
                let status = a.status?;
                conditions::find(&status.conditions, "RegistrationApplied")
                    .filter(|c| c.status == "False" && c.message.contains("flotilla:hub:addon-roles"))
                    .map(|c| c.message.clone())
            }))
        }
    })
    .await;
    assert!(refused.contains("cm-admin"), "{refused}");
    Api::<ClusterRole>::all(hub.clone())
        .patch(
            "flotilla:hub:addon-roles",
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": [{"apiGroups": ["rbac.authorization.k8s.io"],
                "resources": ["clusterroles"], "resourceNames": ["cm-admin"], "verbs": ["bind"]}]})),
        )
        .await
        .unwrap();

    for (cluster, cp) in [("cluster1", &fleet.one), ("cluster2", &fleet.two)] {
        let managed = cp.admin_client().await.unwrap();

        // Installed: the rendered Deployment, with this cluster's name and the config's variable.
        let deployments: Api<Deployment> = Api::namespaced(managed.clone(), INSTALL_NAMESPACE);
        let deployment = await_or_logs(
            state,
            cluster,
            &format!("the agent Deployment on {cluster}"),
            || {
                let deployments = deployments.clone();
                async move { deployments.get_opt("hello-template-agent").await }
            },
        )
        .await;
        let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
        let args = container.args.clone().unwrap();
        assert!(args.contains(&format!("--cluster-name={cluster}")), "{args:?}");
        assert!(args.contains(&"--hub-kubeconfig=/managed/hub-kubeconfig/kubeconfig".to_owned()));
        let env = container.env.clone().unwrap();
        assert_eq!(env[0].name, "LOG_LEVEL");
        assert_eq!(env[0].value.as_deref(), Some("4"));

        // Registered: the add-on CSR approved through the built-in plugin, the secret written.
        let secrets: Api<Secret> = Api::namespaced(managed.clone(), INSTALL_NAMESPACE);
        let secret = await_or_logs(
            state,
            cluster,
            &format!("hello-template-hub-kubeconfig on {cluster}"),
            || {
                let secrets = secrets.clone();
                async move { secrets.get_opt("hello-template-hub-kubeconfig").await }
            },
        )
        .await;
        assert_eq!(secret.data.unwrap()["cluster-name"].0, cluster.as_bytes());
        let csrs = Api::<CertificateSigningRequest>::all(hub.clone())
            .list(&ListParams::default().labels(&format!(
                "open-cluster-management.io/cluster-name={cluster},open-cluster-management.io/addon-name={ADDON}"
            )))
            .await
            .unwrap();
        let approved = csrs.items.iter().find_map(|csr| {
            csr.status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "Approved")
                .cloned()
        });
        assert_eq!(
            approved.expect("an approved add-on CSR").reason.as_deref(),
            Some("AutoApprovedByHubCSRApprovingController")
        );
        // The hub permission: ClusterRole cm-admin bound to the agent in the cluster namespace.
        let binding = Api::<RoleBinding>::namespaced(hub.clone(), cluster)
            .get("open-cluster-management:hello-template:clusterrole:agent")
            .await
            .expect("the template's hub permission");
        assert_eq!(binding.role_ref.name, "cm-admin");
        assert_eq!(
            binding.subjects.unwrap()[0].name,
            format!("system:open-cluster-management:cluster:{cluster}:addon:{ADDON}:agent:{ADDON}-agent")
        );

        // Health: WorkloadAvailability from the Deployment whose pod runs on the cluster's node
        // (the pause image: the template names no real agent program).
        let addons: Api<ManagedClusterAddOn> = Api::namespaced(hub.clone(), cluster);
        await_or_logs(state, cluster, &format!("{ADDON} Available on {cluster}"), || {
            let addons = addons.clone();
            async move {
                Ok(addons.get_opt(ADDON).await?.filter(|a| {
                    a.status.as_ref().is_some_and(|s| {
                        conditions::find(&s.conditions, "Available").is_some_and(|c| c.status == "True")
                    })
                }))
            }
        })
        .await;
    }
}
