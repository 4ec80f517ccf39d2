//! The hub-permission rules, one refused shape at a time, and the shapes OCM add-ons need.

use rstest::rstest;
use serde_json::json;

use super::*;
use crate::addon::registration::{Declared, addon_group, default_user, registrations};

/// Add-on `hello` on `c1`: OCM's default kube-client registration and a custom signer's.
fn hello_registrations() -> Vec<RegistrationConfig> {
    registrations(
        &[
            Declared::KubeClient(None),
            Declared::CustomSigner {
                signer_name: "example.com/s".into(),
                subject: Some(flotilla_api::addon::v1alpha1::Subject {
                    user: "custom:{cluster-name}".into(),
                    groups: vec!["custom".into()],
                    organization_units: Vec::new(),
                }),
            },
        ],
        "c1",
        "hello",
    )
    .unwrap()
}

fn role_with(rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
           "metadata": {"name": "r", "namespace": "c1"}, "rules": rules})
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

fn role(ns: Option<&str>) -> Value {
    let mut role = role_with(json!([rule(&[""], &["configmaps"], &["get"])]));
    match ns {
        Some(ns) => role["metadata"]["namespace"] = json!(ns),
        None => drop(role["metadata"].as_object_mut().unwrap().remove("namespace")),
    }
    role
}

fn binding(role_kind: &str, role_name: &str, kind: &str, name: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "b"},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
           "subjects": [{"kind": kind, "name": name, "apiGroup": "rbac.authorization.k8s.io"}]})
}

fn own_group() -> String {
    cluster_addon_group("c1", "hello")
}

fn check(objects: &[Value]) -> Result<Checked, String> {
    check_permissions(
        typed_permissions(objects, "c1")?,
        "c1",
        "hello",
        &hello_registrations(),
    )
}

fn cluster_role(rules: Value) -> ClusterRole {
    serde_json::from_value(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                  "metadata": {"name": "cr"}, "rules": rules}),
    )
    .unwrap()
}

#[test]
fn helloworlds_role_and_binding_to_its_per_cluster_group_are_allowed() {
    let objects = [
        role_with(json!([
            rule(&[""], &["configmaps"], &["get", "list", "watch"]),
            rule(
                &["coordination.k8s.io"],
                &["leases"],
                &["get", "list", "watch", "create", "update", "patch"]
            ),
        ])),
        binding("Role", "r", "Group", &own_group()),
    ];
    let checked = check(&objects).unwrap();
    assert_eq!(checked.objects.len(), 2);
    assert!(checked.cluster_roles.is_empty());
    // What is applied is the typed object, which serialises back to what was asked.
    assert_eq!(checked.objects[1].to_value(), objects[1]);
}

#[test]
fn a_template_binding_of_its_cluster_role_to_the_agent_user_and_group_is_allowed_pending_the_role() {
    let objects = [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "open-cluster-management:hello:clusterrole:agent", "namespace": "c1",
                     "labels": {"addon.open-cluster-management.io/name": "hello"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cm-admin"},
        "subjects": [
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": default_user("c1", "hello")},
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": own_group()}]}),
    ];
    let checked = check(&objects).unwrap();
    assert_eq!(checked.cluster_roles, BTreeSet::from(["cm-admin".to_owned()]));
}

#[test]
fn secrets_in_the_cluster_namespace_are_allowed_as_managed_serviceaccount_needs_them() {
    let rules = json!([
        rule(
            &[""],
            &["secrets"],
            &["get", "list", "watch", "create", "update", "patch", "delete"]
        ),
        rule(
            &[RBAC_GROUP],
            &["roles", "rolebindings"],
            &["get", "list", "watch"]
        )
    ]);
    assert!(check(&[role_with(rules.clone())]).is_ok());
    assert_eq!(check_cluster_role("cr", Some(&cluster_role(rules))), Ok(()));
}

#[rstest]
#[case::star_verb(rule(&[""], &["configmaps"], &["*"]), "verb \"*\"")]
#[case::star_group(rule(&["*"], &["configmaps"], &["get"]), "apiGroup \"*\"")]
#[case::star_resource(rule(&[""], &["*"], &["get"]), "resource \"*\"")]
#[case::star_subresource(rule(&[""], &["*/status"], &["update"]), "wildcard")]
#[case::resource_star(rule(&[""], &["pods/*"], &["get"]), "wildcard")]
#[case::escalate(rule(&[RBAC_GROUP], &["roles"], &["escalate"]), "\"escalate\"")]
#[case::bind(rule(&[RBAC_GROUP], &["clusterroles"], &["bind"]), "\"bind\"")]
#[case::impersonate(rule(&[""], &["users", "groups", "serviceaccounts"], &["impersonate"]), "\"impersonate\"")]
#[case::approve(rule(&["certificates.k8s.io"], &["signers"], &["approve"]), "\"approve\"")]
#[case::sign(rule(&["certificates.k8s.io"], &["signers"], &["sign"]), "\"sign\"")]
#[case::create_roles(rule(&[RBAC_GROUP], &["roles"], &["create"]), "grant itself more")]
#[case::update_role_bindings(rule(&[RBAC_GROUP], &["rolebindings"], &["update"]), "grant itself more")]
#[case::patch_cluster_roles(rule(&[RBAC_GROUP], &["clusterroles"], &["patch"]), "grant itself more")]
#[case::delete_cluster_role_bindings(rule(&[RBAC_GROUP], &["clusterrolebindings"], &["delete"]), "grant itself more")]
#[case::service_account_tokens(rule(&[""], &["serviceaccounts/token"], &["create"]), "another identity")]
#[case::non_resource_urls(json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}), "nonResourceURLs")]
fn rules_that_grant_privileges_or_everything_are_refused(#[case] bad: Value, #[case] reason: &str) {
    let rules = json!([rule(&[""], &["configmaps"], &["get"]), bad]);
    let error = check(&[
        role_with(rules.clone()),
        binding("Role", "r", "Group", &own_group()),
    ])
    .unwrap_err();
    assert!(error.starts_with("object 0 (Role \"r\"): rule 1: "), "{error}");
    assert!(error.contains(reason), "{error}");
    // The same rules in a ClusterRole the answer binds are refused with the same reason.
    let error = check_cluster_role("cr", Some(&cluster_role(rules))).unwrap_err();
    assert!(error.starts_with("ClusterRole \"cr\": rule 1: "), "{error}");
    assert!(error.contains(reason), "{error}");
}

#[rstest]
#[case::a_cluster_role(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "x"}}), "not an rbac")]
#[case::a_secret(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}), "not an rbac")]
#[case::another_namespace(role(Some("c2")), "not the cluster namespace")]
#[case::no_name(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {}}), "no metadata.name")]
#[case::a_malformed_rule(role_with(json!([{"verbs": "get"}])), "not a valid Role")]
#[case::the_addon_wide_group(binding("Role", "r", "Group", &addon_group("hello")), "not add-on hello's agent on cluster c1")]
#[case::another_clusters_group(binding("Role", "r", "Group", &cluster_addon_group("c2", "hello")), "not add-on hello's agent")]
#[case::another_addons_group(binding("Role", "r", "Group", &cluster_addon_group("c1", "other")), "not add-on hello's agent")]
#[case::another_clusters_user(binding("Role", "r", "User", &default_user("c2", "hello")), "not add-on hello's agent")]
#[case::a_custom_signer_user(binding("Role", "r", "User", "custom:c1"), "not add-on hello's agent")]
#[case::a_service_account(
    binding("Role", "r", "ServiceAccount", "default"),
    "subject ServiceAccount \"default\""
)]
#[case::system_authenticated(
    binding("Role", "r", "Group", "system:authenticated"),
    "not add-on hello's agent"
)]
#[case::an_undeclared_role(binding("Role", "other", "Group", &own_group()), "does not declare")]
#[case::cluster_admin(binding("ClusterRole", "cluster-admin", "Group", &own_group()), "Kubernetes' or the hub's own")]
#[case::admin(binding("ClusterRole", "admin", "Group", &own_group()), "Kubernetes' or the hub's own")]
#[case::view(binding("ClusterRole", "view", "Group", &own_group()), "Kubernetes' or the hub's own")]
#[case::a_system_role(binding("ClusterRole", "system:controller:x", "Group", &own_group()), "Kubernetes' or the hub's own")]
#[case::the_hubs_role(binding("ClusterRole", "flotilla:hub", "Group", &own_group()), "Kubernetes' or the hub's own")]
#[case::the_work_agents_role(binding("ClusterRole", "open-cluster-management:managedcluster:work", "Group", &own_group()), "Kubernetes' or the hub's own")]
#[case::a_cluster_agents_role(binding("ClusterRole", "open-cluster-management:managedcluster:c1", "Group", &own_group()), "Kubernetes' or the hub's own")]
#[case::the_bootstrap_role(binding("ClusterRole", "open-cluster-management:bootstrap", "Group", &own_group()), "Kubernetes' or the hub's own")]
fn other_permissions_are_refused(#[case] object: Value, #[case] reason: &str) {
    let error = check(&[role(Some("c1")), object]).unwrap_err();
    assert!(error.contains(reason), "{error}");
}

#[test]
fn a_missing_or_aggregated_cluster_role_is_refused() {
    let error = check_cluster_role("cr", None).unwrap_err();
    assert!(error.contains("does not exist"), "{error}");
    let mut aggregated = cluster_role(json!([]));
    aggregated.aggregation_rule = serde_json::from_value(json!({"clusterRoleSelectors": [
        {"matchLabels": {"rbac.example.com/aggregate-to-cr": "true"}}]}))
    .unwrap();
    let error = check_cluster_role("cr", Some(&aggregated)).unwrap_err();
    assert!(error.contains("aggregated"), "{error}");
    let error = check_cluster_role("edit", Some(&cluster_role(json!([])))).unwrap_err();
    assert!(error.contains("Kubernetes' or the hub's own"), "{error}");
}

#[test]
fn a_role_without_namespace_is_placed_in_the_cluster_namespace_by_the_controller_and_allowed() {
    assert!(check(&[role(None)]).is_ok());
}
