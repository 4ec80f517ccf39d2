//! Native tests of the managed-serviceaccount add-on through the SDK harness: plain `cargo test`
//! on the host target, no wasm runtime. The agent it deploys is tested against real control
//! planes, with the RBAC rendered here, in `agent/tests/tokens_on_a_real_hub.rs`.

use flotilla_addon_sdk::testing::{Harness, csr_for};
use flotilla_addon_sdk::{AddOn, Cluster, CsrDecision, HealthMode, HealthStatus, Registration, log};
use managed_serviceaccount::{
    ADDON_NAME, AGENT_IMAGE, AGENT_NAME, HUB_RBAC_NAME, ManagedServiceAccount, RBAC_NAME, SERVICE_ACCOUNT,
};
use serde_json::Value;

const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
const GROUP: &str = "authentication.open-cluster-management.io";

fn inputs() -> (Cluster, AddOn) {
    (
        Cluster::new("cluster1").label("env", "test"),
        AddOn::new(ADDON_NAME, INSTALL_NAMESPACE),
    )
}

type Rule = (Vec<String>, Vec<String>, Vec<String>);

/// `(apiGroups, resources, verbs)` of every rule of a Role or ClusterRole, in order.
fn rules(role: &Value) -> Vec<Rule> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .expect("a list")
            .iter()
            .map(|s| s.as_str().expect("a string").to_owned())
            .collect()
    };
    role["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| {
            assert!(r.get("resourceNames").is_none() && r.get("nonResourceURLs").is_none());
            (
                strings(&r["apiGroups"]),
                strings(&r["resources"]),
                strings(&r["verbs"]),
            )
        })
        .collect()
}

fn rule(group: &str, resource: &str, verbs: &[&str]) -> Rule {
    (
        vec![group.to_owned()],
        vec![resource.to_owned()],
        verbs.iter().map(|v| (*v).to_owned()).collect(),
    )
}

const LEASE: &[&str] = &["get", "create", "update"];

#[test]
fn describe_registers_a_kube_client_and_uses_lease_health() {
    let options = Harness::<ManagedServiceAccount>::new().describe();
    assert_eq!(
        options.registrations,
        vec![Registration::KubeClient { subject: None }]
    );
    assert_eq!(options.health, HealthMode::Lease);
    assert!(options.supported_configs.is_empty());
}

#[test]
fn manifests_put_the_agent_in_the_install_namespace() {
    let (cluster, addon) = inputs();
    let rendered = Harness::<ManagedServiceAccount>::new()
        .manifests(&cluster, &addon, &[])
        .unwrap();
    assert_eq!(
        rendered.kinds(),
        [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Deployment"
        ]
    );
    assert!(rendered.all_well_formed());
    assert!(rendered.all_in_namespace(INSTALL_NAMESPACE));
    assert!(rendered.find("ServiceAccount", SERVICE_ACCOUNT).is_some());
    assert_eq!(log::take_captured().len(), 1);
}

#[test]
fn the_deployment_runs_the_agent_image_with_the_clusters_arguments_and_hub_credential() {
    let (cluster, addon) = inputs();
    let rendered = Harness::<ManagedServiceAccount>::new()
        .manifests(&cluster, &addon, &[])
        .unwrap();
    let deployment = rendered.find("Deployment", AGENT_NAME).expect("the Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], SERVICE_ACCOUNT);
    let container = &pod["containers"][0];
    assert_eq!(container["image"], AGENT_IMAGE);
    assert_eq!(
        container["image"],
        "flotilla.local/addons/managed-serviceaccount-agent:0.1.0"
    );
    assert_eq!(container["command"][0], "/managed-serviceaccount-agent");
    assert_eq!(
        container["args"],
        serde_json::json!([
            "--hub-kubeconfig=/var/run/hub/kubeconfig",
            "--cluster-name=cluster1",
            "--addon-namespace=open-cluster-management-agent-addon",
            "--addon-name=managed-serviceaccount",
            "--check-period=60",
        ])
    );
    assert_eq!(container["volumeMounts"][0]["mountPath"], "/var/run/hub");
    assert_eq!(container["volumeMounts"][0]["name"], pod["volumes"][0]["name"]);
    assert_eq!(
        pod["volumes"][0]["secret"]["secretName"],
        "managed-serviceaccount-hub-kubeconfig"
    );
    // The Deployment selects its own pods.
    assert_eq!(
        deployment["spec"]["selector"]["matchLabels"],
        deployment["spec"]["template"]["metadata"]["labels"]
    );
}

#[test]
fn the_hub_credential_secret_follows_the_addons_name() {
    let cluster = Cluster::new("cluster1");
    let addon = AddOn::new("msa", INSTALL_NAMESPACE);
    let rendered = Harness::<ManagedServiceAccount>::new()
        .manifests(&cluster, &addon, &[])
        .unwrap();
    let pod = &rendered.find("Deployment", AGENT_NAME).unwrap()["spec"]["template"]["spec"];
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], "msa-hub-kubeconfig");
    let args = pod["containers"][0]["args"].as_array().unwrap();
    assert!(args.iter().any(|a| a == "--addon-name=msa"), "{args:?}");
}

#[test]
fn on_the_managed_cluster_only_token_reviews_are_granted_cluster_wide() {
    let (cluster, addon) = inputs();
    let rendered = Harness::<ManagedServiceAccount>::new()
        .manifests(&cluster, &addon, &[])
        .unwrap();
    let cluster_role = rendered.find("ClusterRole", RBAC_NAME).expect("the ClusterRole");
    assert_eq!(
        rules(cluster_role),
        [rule("authentication.k8s.io", "tokenreviews", &["create"])]
    );
    let binding = rendered.find("ClusterRoleBinding", RBAC_NAME).unwrap();
    assert_eq!(binding["roleRef"]["kind"], "ClusterRole");
    assert_eq!(binding["roleRef"]["name"], RBAC_NAME);
    assert_eq!(
        binding["subjects"],
        serde_json::json!([{
            "kind": "ServiceAccount",
            "name": SERVICE_ACCOUNT,
            "namespace": INSTALL_NAMESPACE,
        }])
    );
}

#[test]
fn service_accounts_their_tokens_and_the_lease_are_granted_in_the_install_namespace_only() {
    let (cluster, addon) = inputs();
    let rendered = Harness::<ManagedServiceAccount>::new()
        .manifests(&cluster, &addon, &[])
        .unwrap();
    let role = rendered.find("Role", RBAC_NAME).expect("the Role");
    assert_eq!(role["metadata"]["namespace"], INSTALL_NAMESPACE);
    assert_eq!(
        rules(role),
        [
            rule(
                "",
                "serviceaccounts",
                &["get", "list", "watch", "create", "delete"]
            ),
            rule("", "serviceaccounts/token", &["create"]),
            rule("coordination.k8s.io", "leases", LEASE),
        ]
    );
    let role_binding = rendered.find("RoleBinding", RBAC_NAME).unwrap();
    assert_eq!(role_binding["metadata"]["namespace"], INSTALL_NAMESPACE);
    assert_eq!(role_binding["roleRef"]["kind"], "Role");
    assert_eq!(role_binding["roleRef"]["name"], RBAC_NAME);
    assert_eq!(role_binding["subjects"][0]["name"], SERVICE_ACCOUNT);
    assert_eq!(role_binding["subjects"][0]["namespace"], INSTALL_NAMESPACE);
}

#[test]
fn hub_permissions_stay_in_the_cluster_namespace() {
    let (cluster, addon) = inputs();
    let rendered = Harness::<ManagedServiceAccount>::new()
        .hub_permissions(&cluster, &addon)
        .unwrap();
    assert_eq!(rendered.kinds(), ["Role", "RoleBinding"]);
    assert!(rendered.all_in_namespace("cluster1"));
    assert!(
        rendered
            .0
            .iter()
            .all(|m| m["metadata"]["namespace"] == "cluster1")
    );
}

#[test]
fn the_hub_role_grants_exactly_the_managed_service_accounts_their_status_secrets_and_leases() {
    let (cluster, addon) = inputs();
    let rendered = Harness::<ManagedServiceAccount>::new()
        .hub_permissions(&cluster, &addon)
        .unwrap();
    let role = rendered.find("Role", HUB_RBAC_NAME).expect("the Role");
    assert_eq!(
        rules(role),
        [
            rule(GROUP, "managedserviceaccounts", &["get", "list", "watch"]),
            rule(
                GROUP,
                "managedserviceaccounts/status",
                &["get", "update", "patch"]
            ),
            rule("", "secrets", &["get", "list", "watch", "create", "update"]),
            rule("coordination.k8s.io", "leases", LEASE),
        ]
    );
}

#[test]
fn the_hub_role_is_bound_to_the_agents_default_group() {
    let (cluster, addon) = inputs();
    let rendered = Harness::<ManagedServiceAccount>::new()
        .hub_permissions(&cluster, &addon)
        .unwrap();
    let binding = rendered
        .find("RoleBinding", HUB_RBAC_NAME)
        .expect("the RoleBinding");
    assert_eq!(binding["roleRef"]["kind"], "Role");
    assert_eq!(binding["roleRef"]["name"], HUB_RBAC_NAME);
    assert_eq!(
        binding["subjects"],
        serde_json::json!([{
            "kind": "Group",
            "apiGroup": "rbac.authorization.k8s.io",
            "name": "system:open-cluster-management:cluster:cluster1:addon:managed-serviceaccount",
        }])
    );
}

#[test]
fn default_csr_approval_approves_the_agent_and_denies_another_cluster() {
    let (cluster, addon) = inputs();
    let harness = Harness::<ManagedServiceAccount>::new();
    assert_eq!(
        harness.approve_csr(&cluster, &addon, &csr_for(&cluster, &addon)),
        CsrDecision::Approve
    );
    let foreign = csr_for(&Cluster::new("cluster2"), &addon);
    assert!(matches!(
        harness.approve_csr(&cluster, &addon, &foreign),
        CsrDecision::Deny(_)
    ));
}

#[test]
fn probe_health_defers_to_the_lease() {
    let (cluster, addon) = inputs();
    assert_eq!(
        Harness::<ManagedServiceAccount>::new()
            .probe_health(&cluster, &addon, &[])
            .status,
        HealthStatus::Unknown
    );
}
