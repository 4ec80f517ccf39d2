//! Native tests of the resource-usage-collect add-on through the SDK harness: plain
//! `cargo test` on the host target, no wasm runtime. The agent it deploys is tested against real
//! control planes, with the RBAC rendered here, in `agent/tests/scores_on_a_real_hub.rs`.

use flotilla_addon_sdk::config::addon_deployment_config_type;
use flotilla_addon_sdk::testing::{Harness, addon_deployment_config, csr_for};
use flotilla_addon_sdk::{
    AddOn, AddonError, Cluster, CsrDecision, HealthMode, HealthStatus, Registration, log,
};
use resource_usage::{
    ADDON_NAME, AGENT_IMAGE, AGENT_NAME, PERIOD_VARIABLE, RBAC_NAME, ResourceUsage, SERVICE_ACCOUNT,
};
use serde_json::Value;

const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";

fn inputs() -> (Cluster, AddOn) {
    (
        Cluster::new("cluster1").label("env", "test"),
        AddOn::new(ADDON_NAME, INSTALL_NAMESPACE),
    )
}

/// `(apiGroups, resources, verbs)` of every rule of a Role or ClusterRole, in order.
fn rules(role: &Value) -> Vec<(Vec<String>, Vec<String>, Vec<String>)> {
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
            (
                strings(&r["apiGroups"]),
                strings(&r["resources"]),
                strings(&r["verbs"]),
            )
        })
        .collect()
}

fn rule(group: &str, resource: &str, verbs: &[&str]) -> (Vec<String>, Vec<String>, Vec<String>) {
    (
        vec![group.to_owned()],
        vec![resource.to_owned()],
        verbs.iter().map(|v| (*v).to_owned()).collect(),
    )
}

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["get", "list", "watch", "create", "update", "patch"];

#[test]
fn describe_registers_a_kube_client_and_uses_lease_health() {
    let options = Harness::<ResourceUsage>::new().describe();
    assert_eq!(
        options.registrations,
        vec![Registration::KubeClient { subject: None }]
    );
    assert_eq!(options.health, HealthMode::Lease);
    assert_eq!(options.supported_configs, vec![addon_deployment_config_type()]);
}

#[test]
fn manifests_put_the_agent_in_the_install_namespace() {
    let (cluster, addon) = inputs();
    let rendered = Harness::<ResourceUsage>::new()
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
    let rendered = Harness::<ResourceUsage>::new()
        .manifests(&cluster, &addon, &[])
        .unwrap();
    let deployment = rendered.find("Deployment", AGENT_NAME).expect("the Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], SERVICE_ACCOUNT);
    let container = &pod["containers"][0];
    assert_eq!(container["image"], AGENT_IMAGE);
    assert_eq!(
        container["image"],
        "flotilla.local/addons/resource-usage-agent:0.1.0"
    );
    assert_eq!(container["command"][0], "/resource-usage-agent");
    assert_eq!(
        container["args"],
        serde_json::json!([
            "--hub-kubeconfig=/var/run/hub/kubeconfig",
            "--cluster-name=cluster1",
            "--addon-namespace=open-cluster-management-agent-addon",
            "--addon-name=resource-usage-collect",
            "--period=60",
        ])
    );
    assert_eq!(container["volumeMounts"][0]["mountPath"], "/var/run/hub");
    assert_eq!(container["volumeMounts"][0]["name"], pod["volumes"][0]["name"]);
    assert_eq!(
        pod["volumes"][0]["secret"]["secretName"],
        "resource-usage-collect-hub-kubeconfig"
    );
    // The Deployment selects its own pods.
    assert_eq!(
        deployment["spec"]["selector"]["matchLabels"],
        deployment["spec"]["template"]["metadata"]["labels"]
    );
}

#[test]
fn an_addon_deployment_config_sets_the_period_image_mirror_placement_and_resources() {
    let (cluster, addon) = inputs();
    let config = addon_deployment_config(serde_json::json!({
        "customizedVariables": [{"name": PERIOD_VARIABLE, "value": "5"}],
        "registries": [{"source": "flotilla.local/addons", "mirror": "mirror.example/ocm"}],
        "nodePlacement": {"nodeSelector": {"pool": "agents"}},
        "resourceRequirements": [{
            "containerID": "deployments:resource-usage-collect-agent:*",
            "resources": {"requests": {"cpu": "5m"}},
        }],
    }));
    let rendered = Harness::<ResourceUsage>::new()
        .manifests(&cluster, &addon, &[config])
        .unwrap();
    let pod = &rendered.find("Deployment", AGENT_NAME).unwrap()["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args = container["args"].as_array().unwrap();
    assert_eq!(args.last().unwrap(), "--period=5");
    assert_eq!(
        container["image"],
        "mirror.example/ocm/resource-usage-agent:0.1.0"
    );
    assert_eq!(container["resources"]["requests"]["cpu"], "5m");
    assert_eq!(pod["nodeSelector"]["pool"], "agents");
}

#[test]
fn a_period_that_is_no_positive_whole_number_is_an_invalid_config() {
    let (cluster, addon) = inputs();
    for value in ["0", "-5", "1.5", "soon"] {
        let config = addon_deployment_config(serde_json::json!({
            "customizedVariables": [{"name": PERIOD_VARIABLE, "value": value}],
        }));
        let rendered = Harness::<ResourceUsage>::new().manifests(&cluster, &addon, &[config]);
        assert!(
            matches!(&rendered, Err(AddonError::InvalidConfig(m)) if m.contains(PERIOD_VARIABLE)),
            "{value}: {:?}",
            rendered.map(|r| r.kinds().len())
        );
    }
}

#[test]
fn the_hub_credential_secret_follows_the_addons_name() {
    let cluster = Cluster::new("cluster1");
    let addon = AddOn::new("usage", INSTALL_NAMESPACE);
    let rendered = Harness::<ResourceUsage>::new()
        .manifests(&cluster, &addon, &[])
        .unwrap();
    let pod = &rendered.find("Deployment", AGENT_NAME).unwrap()["spec"]["template"]["spec"];
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], "usage-hub-kubeconfig");
    let args = pod["containers"][0]["args"].as_array().unwrap();
    assert!(args.iter().any(|a| a == "--addon-name=usage"), "{args:?}");
}

#[test]
fn on_the_managed_cluster_the_agent_only_reads_nodes_and_pods_and_renews_its_lease() {
    let (cluster, addon) = inputs();
    let rendered = Harness::<ResourceUsage>::new()
        .manifests(&cluster, &addon, &[])
        .unwrap();
    let cluster_role = rendered.find("ClusterRole", RBAC_NAME).expect("the ClusterRole");
    assert_eq!(
        rules(cluster_role),
        [rule("", "nodes", READ), rule("", "pods", READ)]
    );
    let binding = rendered.find("ClusterRoleBinding", RBAC_NAME).unwrap();
    assert_eq!(binding["roleRef"]["name"], RBAC_NAME);
    assert_eq!(binding["subjects"][0]["kind"], "ServiceAccount");
    assert_eq!(binding["subjects"][0]["name"], SERVICE_ACCOUNT);
    assert_eq!(binding["subjects"][0]["namespace"], INSTALL_NAMESPACE);

    let role = rendered.find("Role", RBAC_NAME).expect("the lease Role");
    assert_eq!(role["metadata"]["namespace"], INSTALL_NAMESPACE);
    assert_eq!(rules(role), [rule("coordination.k8s.io", "leases", WRITE)]);
    let role_binding = rendered.find("RoleBinding", RBAC_NAME).unwrap();
    assert_eq!(role_binding["roleRef"]["kind"], "Role");
    assert_eq!(role_binding["subjects"][0]["name"], SERVICE_ACCOUNT);
}

#[test]
fn hub_permissions_stay_in_the_cluster_namespace() {
    let (cluster, addon) = inputs();
    let rendered = Harness::<ResourceUsage>::new()
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
fn the_hub_role_grants_exactly_the_scores_their_status_and_leases() {
    let (cluster, addon) = inputs();
    let rendered = Harness::<ResourceUsage>::new()
        .hub_permissions(&cluster, &addon)
        .unwrap();
    let role = rendered.find("Role", RBAC_NAME).expect("the Role");
    assert_eq!(
        rules(role),
        [
            rule(
                "cluster.open-cluster-management.io",
                "addonplacementscores",
                WRITE
            ),
            rule(
                "cluster.open-cluster-management.io",
                "addonplacementscores/status",
                &["update", "patch"]
            ),
            rule("coordination.k8s.io", "leases", WRITE),
        ]
    );
}

#[test]
fn the_hub_role_is_bound_to_the_agents_default_group() {
    let (cluster, addon) = inputs();
    let rendered = Harness::<ResourceUsage>::new()
        .hub_permissions(&cluster, &addon)
        .unwrap();
    let binding = rendered.find("RoleBinding", RBAC_NAME).expect("the RoleBinding");
    assert_eq!(binding["roleRef"]["kind"], "Role");
    assert_eq!(binding["roleRef"]["name"], RBAC_NAME);
    assert_eq!(
        binding["subjects"],
        serde_json::json!([{
            "kind": "Group",
            "apiGroup": "rbac.authorization.k8s.io",
            "name": "system:open-cluster-management:cluster:cluster1:addon:resource-usage-collect",
        }])
    );
}

#[test]
fn default_csr_approval_approves_the_agent_and_denies_another_cluster() {
    let (cluster, addon) = inputs();
    let harness = Harness::<ResourceUsage>::new();
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
        Harness::<ResourceUsage>::new()
            .probe_health(&cluster, &addon, &[])
            .status,
        HealthStatus::Unknown
    );
}
