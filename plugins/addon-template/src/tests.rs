//! Unit tests of the pure parts: variable rules, rendering, decorations, hub permissions → RBAC,
//! registrations and CSR approval, on the OCM documentation's `hello-template` example.

use flotilla_addon_sdk::testing::{addon_deployment_config, csr_for};
use rstest::rstest;

use super::*;

/// The documentation's `hello-template` AddOnTemplate (Deployment, ServiceAccount,
/// ClusterRoleBinding; one kube-client registration with CurrentCluster permissions).
fn hello_template() -> Template {
    parse(
        &json!({
            "name": "hello-template",
            "spec": {
                "addonName": "hello-template",
                "agentSpec": {"workload": {"manifests": [
                    {"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": "hello-template-agent", "namespace": "{{INSTALL_NAMESPACE}}"},
                     "spec": {"replicas": 1,
                        "selector": {"matchLabels": {"app": "hello-template-agent"}},
                        "template": {"metadata": {"labels": {"app": "hello-template-agent"}},
                          "spec": {"serviceAccountName": "hello-template-agent-sa",
                            "containers": [{"name": "helloworld-agent",
                              "image": "quay.io/open-cluster-management/addon-examples:latest",
                              "args": ["/helloworld_helm", "agent", "--cluster-name={{CLUSTER_NAME}}",
                                       "--hub-kubeconfig={{HUB_KUBECONFIG}}"],
                              "env": [{"name": "LOG_LEVEL", "value": "{{LOG_LEVEL}}"}]}]}}}},
                    {"apiVersion": "v1", "kind": "ServiceAccount",
                     "metadata": {"name": "hello-template-agent-sa", "namespace": "{{INSTALL_NAMESPACE}}"}}
                ]}},
                "registration": [{"type": "KubeClient", "kubeClient": {"hubPermissions": [
                    {"type": "CurrentCluster", "currentCluster": {"clusterRoleName": "cm-admin"}}
                ]}}]
            }
        })
        .to_string(),
    )
    .expect("the example parses")
}

fn log_level(level: &str) -> ResolvedConfig {
    addon_deployment_config(json!({"customizedVariables": [{"name": "LOG_LEVEL", "value": level}]}))
}

#[test]
fn the_documentation_example_renders_with_the_clusters_name_and_the_config_variables() {
    let template = hello_template();
    let (cluster, addon) = (Cluster::new("cluster1"), AddOn::new("hello-template", "agents"));
    let out = manifests(&template, &cluster, &addon, &[log_level("4")]).expect("renders");
    assert_eq!(out.len(), 2);
    let deployment = &out[0];
    assert_eq!(deployment["metadata"]["namespace"], "agents");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["args"][2], "--cluster-name=cluster1");
    assert_eq!(
        container["args"][3],
        "--hub-kubeconfig=/managed/hub-kubeconfig/kubeconfig"
    );
    let env: Vec<(&str, &str)> = container["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap_or(""),
                e["value"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        env,
        [
            ("LOG_LEVEL", "4"),
            ("HUB_KUBECONFIG", "/managed/hub-kubeconfig/kubeconfig"),
            ("CLUSTER_NAME", "cluster1"),
            ("INSTALL_NAMESPACE", "agents"),
        ]
    );
    assert_eq!(
        container["volumeMounts"],
        json!([{"name": "hub-kubeconfig", "mountPath": "/managed/hub-kubeconfig"}])
    );
    assert_eq!(
        deployment["spec"]["template"]["spec"]["volumes"],
        json!([{"name": "hub-kubeconfig", "secret": {"secretName": "hello-template-hub-kubeconfig"}}])
    );
    // The ServiceAccount is not a workload: rendered, not decorated.
    assert_eq!(
        out[1],
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "hello-template-agent-sa", "namespace": "agents"}})
    );
}

#[rstest]
#[case::customized_overrides_the_default_hub_kubeconfig(
    &[("HUB_KUBECONFIG", "/elsewhere")], "HUB_KUBECONFIG", "/elsewhere")]
#[case::built_in_cluster_name_wins_over_customized(&[("CLUSTER_NAME", "evil")], "CLUSTER_NAME", "c1")]
#[case::built_in_install_namespace_wins_over_customized(
    &[("INSTALL_NAMESPACE", "kube-system")], "INSTALL_NAMESPACE", "agents")]
#[case::customized_variable_is_added(&[("LOG_LEVEL", "2")], "LOG_LEVEL", "2")]
fn variables_follow_ocms_precedence(
    #[case] customized: &[(&str, &str)],
    #[case] name: &str,
    #[case] expected: &str,
) {
    let customized: BTreeMap<String, String> = customized
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let (values, _) = variables(&hello_template(), "c1", "agents", &customized);
    assert_eq!(values.get(name).map(String::as_str), Some(expected));
}

#[test]
fn hub_kubeconfig_is_defined_only_when_the_template_registers() {
    let mut template = hello_template();
    template.spec.registration = None;
    let (values, preset) = variables(&template, "c1", "agents", &BTreeMap::new());
    assert!(!values.contains_key(HUB_KUBECONFIG));
    assert_eq!(preset, [CLUSTER_NAME, INSTALL_NAMESPACE]);
}

#[rstest]
#[case::unknown_variable(json!({"apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": "{{NOPE}}"}}), "unknown variable {{NOPE}}")]
#[case::not_an_object(json!("just text"), "manifest 0: a string is not a Kubernetes object")]
#[case::list(json!([1, 2]), "a list is not a Kubernetes object")]
#[case::no_kind(json!({"apiVersion": "v1", "metadata": {"name": "x"}}), "is not a Kubernetes object: it has no kind")]
#[case::empty_name(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "{{EMPTY}}"}}),
    "it has no metadata.name")]
#[case::value_breaking_json(json!({"apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": "x"}, "data": {"v": "{{QUOTE}}"}}), "not valid JSON once the variables are put in")]
fn bad_manifests_are_errors_naming_the_problem(#[case] manifest: Value, #[case] expected: &str) {
    let mut values = BTreeMap::new();
    values.insert("QUOTE".to_owned(), "a\"b".to_owned());
    values.insert("EMPTY".to_owned(), String::new());
    let error = render(0, &manifest, &values).expect_err("refused");
    let AddonError::InvalidConfig(message) = error else {
        panic!("not an invalid-config error: {error:?}");
    };
    assert!(message.contains(expected), "{message}");
}

#[test]
fn current_cluster_permission_binds_the_cluster_role_in_the_cluster_namespace_to_this_clusters_agent_only() {
    let rbac = hub_permissions(&hello_template(), "cluster1", "hello-template").expect("permissions");
    assert_eq!(
        rbac,
        [json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {
                "name": "open-cluster-management:hello-template:clusterrole:agent",
                "namespace": "cluster1",
                "labels": {"addon.open-cluster-management.io/name": "hello-template",
                           "open-cluster-management.io/addon-template-name": "hello-template"},
            },
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cm-admin"},
            "subjects": [
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io",
                 "name": "system:open-cluster-management:cluster:cluster1:addon:hello-template:agent:hello-template-agent"},
                {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                 "name": "system:open-cluster-management:cluster:cluster1:addon:hello-template"},
            ],
        })]
    );
}

#[rstest]
#[case::single_namespace_in_the_cluster_namespace(
    json!({"type": "SingleNamespace", "singleNamespace": {"namespace": "c1",
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}}}),
    Ok("open-cluster-management:t:role:agent"))]
#[case::single_namespace_elsewhere(
    json!({"type": "SingleNamespace", "singleNamespace": {"namespace": "default",
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cm-admin"}}}),
    Err("namespace \"default\" is not the cluster namespace"))]
#[case::current_cluster_without_settings(json!({"type": "CurrentCluster"}), Err("needs currentCluster"))]
#[case::unknown_type(json!({"type": "Everywhere"}), Err("neither CurrentCluster nor SingleNamespace"))]
fn hub_permission_types_map_to_bindings_in_the_cluster_namespace_only(
    #[case] permission: Value,
    #[case] expected: Result<&str, &str>,
) {
    let template = parse(
        &json!({"name": "t", "spec": {"addonName": "t", "registration": [
            {"type": "KubeClient", "kubeClient": {"hubPermissions": [permission]}}]}})
        .to_string(),
    )
    .expect("parses");
    match (hub_permissions(&template, "c1", "t"), expected) {
        (Ok(rbac), Ok(name)) => {
            assert_eq!(rbac[0]["metadata"]["name"], name);
            assert_eq!(rbac[0]["metadata"]["namespace"], "c1");
        }
        (Err(e), Err(message)) => assert!(e.to_string().contains(message), "{e}"),
        (got, want) => panic!("got {got:?}, want {want:?}"),
    }
}

#[test]
fn registrations_name_the_template_agent_and_declared_signers_and_health_is_workload_availability() {
    let mut template = hello_template();
    template.spec.registration = Some(vec![
        RegistrationSpec {
            type_: "KubeClient".into(),
            ..RegistrationSpec::default()
        },
        RegistrationSpec {
            type_: "CustomSigner".into(),
            custom_signer: Some(CustomSignerSpec {
                signer_name: "example.com/hello".into(),
                subject: None,
            }),
            ..RegistrationSpec::default()
        },
    ]);
    let options = options(&template);
    assert_eq!(options.health, HealthMode::WorkloadAvailability);
    assert!(
        matches!(&options.registrations[0], Registration::KubeClient { subject: Some(s) }
        if s.user.ends_with(":addon:{addon-name}:agent:hello-template-agent"))
    );
    assert_eq!(
        options.registrations[1],
        Registration::CustomSigner {
            signer_name: "example.com/hello".into(),
            subject: None
        }
    );
    let resources: Vec<&str> = options
        .supported_configs
        .iter()
        .map(|c| c.resource.as_str())
        .collect();
    assert_eq!(resources, ["addontemplates", "addondeploymentconfigs"]);
}

#[test]
fn csrs_are_approved_as_ocm_approves_template_addons() {
    let template = hello_template();
    let (cluster, addon) = (Cluster::new("c1"), AddOn::new("hello-template", "agents"));
    let mut csr = csr_for(&cluster, &addon);
    // The default approver wants the template agent's user, `<addon>-agent`.
    assert!(matches!(
        approve(&template, &cluster, &addon, &csr),
        CsrDecision::Deny(_)
    ));
    csr.common_name.push_str("-agent");
    assert_eq!(approve(&template, &cluster, &addon, &csr), CsrDecision::Approve);
    csr.signer_name = "example.com/undeclared".into();
    assert!(matches!(approve(&template, &cluster, &addon, &csr),
        CsrDecision::Deny(reason) if reason.contains("no registration for signer")));
}

#[test]
fn the_deployment_configs_placement_registries_proxy_and_resources_reach_the_workloads_only() {
    let template = hello_template();
    let (cluster, addon) = (Cluster::new("c1"), AddOn::new("hello-template", "agents"));
    let adc = addon_deployment_config(json!({
        "customizedVariables": [{"name": "LOG_LEVEL", "value": "1"}],
        "nodePlacement": {"nodeSelector": {"zone": "a"},
                          "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]},
        "registries": [{"source": "quay.io/open-cluster-management", "mirror": "mirror.example/ocm"}],
        "proxyConfig": {"httpProxy": "http://proxy:3128", "noProxy": "10.0.0.0/8"},
        "resourceRequirements": [{"containerID": "deployments:hello-template-agent:*",
                                  "resources": {"limits": {"memory": "64Mi"}}}],
    }));
    let out = manifests(&template, &cluster, &addon, &[adc]).expect("renders");
    let pod = &out[0]["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"], json!({"zone": "a"}));
    assert_eq!(pod["tolerations"][0]["key"], "dedicated");
    let container = &pod["containers"][0];
    assert_eq!(container["image"], "mirror.example/ocm/addon-examples:latest");
    assert_eq!(container["resources"], json!({"limits": {"memory": "64Mi"}}));
    let env = container["env"].as_array().expect("env");
    assert!(env.contains(&json!({"name": "HTTP_PROXY", "value": "http://proxy:3128"})));
    assert!(env.contains(&json!({"name": "NO_PROXY", "value": "10.0.0.0/8"})));
    assert!(!env.iter().any(|e| e["name"] == "HTTPS_PROXY"));
    // The ServiceAccount is no workload: untouched.
    assert_eq!(
        out[1]["metadata"],
        json!({"name": "hello-template-agent-sa", "namespace": "agents"})
    );
}
