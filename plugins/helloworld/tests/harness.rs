//! Native tests of the helloworld add-on through the SDK harness: plain `cargo test` on the host
//! target, no wasm runtime. (The same plugin runs through the real host in
//! `host/wasm/tests/helloworld.rs`.)

use flotilla_addon_sdk::testing::{Harness, csr_for};
use flotilla_addon_sdk::{AddOn, Cluster, CsrDecision, HealthMode, HealthStatus, Registration, log};
use helloworld::{AGENT_NAME, HelloWorld, RBAC_NAME, SERVICE_ACCOUNT};

fn inputs() -> (Cluster, AddOn) {
    (
        Cluster::new("cluster1").label("env", "test"),
        AddOn::new("helloworld", "open-cluster-management-agent-addon"),
    )
}

#[test]
fn describe_registers_a_kube_client_and_uses_lease_health() {
    let options = Harness::<HelloWorld>::new().describe();
    assert_eq!(
        options.registrations,
        vec![Registration::KubeClient { subject: None }]
    );
    assert_eq!(options.health, HealthMode::Lease);
}

#[test]
fn manifests_put_the_agent_in_the_install_namespace_for_the_cluster() {
    let (cluster, addon) = inputs();
    let rendered = Harness::<HelloWorld>::new()
        .manifests(&cluster, &addon, &[])
        .unwrap();
    assert_eq!(
        rendered.kinds(),
        [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment"
        ]
    );
    assert!(rendered.all_well_formed());
    assert!(rendered.all_in_namespace("open-cluster-management-agent-addon"));

    let deployment = rendered.find("Deployment", AGENT_NAME).unwrap();
    let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--cluster-name=cluster1"),
        "{args}"
    );
    assert!(rendered.find("ServiceAccount", SERVICE_ACCOUNT).is_some());
    let binding = rendered.find("ClusterRoleBinding", RBAC_NAME).unwrap();
    assert_eq!(
        binding["subjects"][0]["namespace"],
        "open-cluster-management-agent-addon"
    );
    assert_eq!(log::take_captured().len(), 1);
}

#[test]
fn hub_permissions_stay_in_the_cluster_namespace() {
    let (cluster, addon) = inputs();
    let rendered = Harness::<HelloWorld>::new()
        .hub_permissions(&cluster, &addon)
        .unwrap();
    assert_eq!(rendered.kinds(), ["Role", "RoleBinding"]);
    assert!(rendered.all_in_namespace("cluster1"));
}

#[test]
fn the_hub_role_lets_the_agent_renew_its_lease() {
    let (cluster, addon) = inputs();
    let rendered = Harness::<HelloWorld>::new()
        .hub_permissions(&cluster, &addon)
        .unwrap();
    let role = rendered.find("Role", RBAC_NAME).expect("the Role");
    let rules = role["rules"].as_array().unwrap();
    let leases = rules
        .iter()
        .find(|r| r["resources"][0] == "leases")
        .expect("a leases rule");
    assert_eq!(leases["apiGroups"][0], "coordination.k8s.io");
    let verbs: Vec<&str> = leases["verbs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(verbs, ["get", "list", "watch", "create", "update", "patch"]);
}

#[test]
fn default_csr_approval_approves_the_agent_and_denies_another_cluster() {
    let (cluster, addon) = inputs();
    let harness = Harness::<HelloWorld>::new();
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
fn default_csr_approval_denies_a_group_beyond_the_agents_own() {
    let (cluster, addon) = inputs();
    let mut csr = csr_for(&cluster, &addon);
    csr.organizations
        .push("system:open-cluster-management:cluster:cluster2:addon:helloworld".into());
    assert!(matches!(
        Harness::<HelloWorld>::new().approve_csr(&cluster, &addon, &csr),
        CsrDecision::Deny(reason) if reason.contains("not exactly the registered groups")
    ));
}

#[test]
fn probe_health_defers_to_the_lease() {
    let (cluster, addon) = inputs();
    assert_eq!(
        Harness::<HelloWorld>::new()
            .probe_health(&cluster, &addon, &[])
            .status,
        HealthStatus::Unknown
    );
}
