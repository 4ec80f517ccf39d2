//! Native tests of the cluster-proxy add-on through the SDK harness: plain `cargo test` on the
//! host target, no wasm runtime. What the agent does with the rendered arguments is tested with
//! the real tunnel in `host/gateway/tests/tunnel.rs`.

use cluster_proxy::settings::{CA_VARIABLE, URL_VARIABLE};
use cluster_proxy::{
    AGENT_IMAGE, AGENT_NAME, AGENT_PROGRAM, CA_CONFIG_MAP, CA_DIR, CA_KEY, ClusterProxy, RUN_AS,
    SERVICE_ACCOUNT,
};
use flotilla_addon_sdk::csr::{KUBE_CLIENT_SIGNER, expected_subject};
use flotilla_addon_sdk::serde_json::{Value, json};
use flotilla_addon_sdk::testing::{Harness, Rendered, addon_deployment_config, csr_for};
use flotilla_addon_sdk::{
    AddOn, AddonError, Cluster, CsrDecision, HealthMode, Registration, ResolvedConfig, Subject,
};

const NAMESPACE: &str = "open-cluster-management-agent-addon";
const URL: &str = "wss://tunnel.hub.example:8091/connect";
const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIBhTCCASugAwIBAgIU\nAAAA\n-----END CERTIFICATE-----\n";

fn inputs() -> (Cluster, AddOn) {
    (Cluster::new("cluster1"), AddOn::new("cluster-proxy", NAMESPACE))
}

fn config(variables: &[(&str, &str)]) -> ResolvedConfig {
    let variables: Vec<Value> = variables
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    addon_deployment_config(json!({ "customizedVariables": variables }))
}

fn render(configs: &[ResolvedConfig]) -> Result<Rendered, AddonError> {
    let (cluster, addon) = inputs();
    Harness::<ClusterProxy>::new().manifests(&cluster, &addon, configs)
}

fn rendered() -> Rendered {
    render(&[config(&[(URL_VARIABLE, URL), (CA_VARIABLE, CA)])]).expect("a valid config renders")
}

fn pod(rendered: &Rendered) -> Value {
    rendered.find("Deployment", AGENT_NAME).expect("the Deployment")["spec"]["template"]["spec"].clone()
}

/// The message of an error of the expected variant.
fn refused(result: Result<Rendered, AddonError>, missing: bool) -> String {
    match result {
        Err(AddonError::MissingConfig(m)) if missing => m,
        Err(AddonError::InvalidConfig(m)) if !missing => m,
        other => panic!(
            "expected a {} config error, got {other:?}",
            if missing { "missing" } else { "invalid" }
        ),
    }
}

#[test]
fn describe_registers_one_default_kube_client_and_judges_the_deployment() {
    let options = Harness::<ClusterProxy>::new().describe();
    assert_eq!(
        options.registrations,
        vec![Registration::KubeClient { subject: None }]
    );
    assert_eq!(options.health, HealthMode::DeploymentAvailability);
    let kinds: Vec<&str> = options
        .supported_configs
        .iter()
        .map(|c| c.resource.as_str())
        .collect();
    assert_eq!(kinds, ["addondeploymentconfigs"]);
}

#[test]
fn the_credential_subject_is_the_one_the_tunnel_server_accepts() {
    let (cluster, addon) = inputs();
    let harness = Harness::<ClusterProxy>::new();
    let subject = expected_subject(
        &harness.describe(),
        KUBE_CLIENT_SIGNER,
        &cluster.name,
        &addon.name,
    );
    // tunnel/identity.go: CN ...:cluster:<cluster>:addon:cluster-proxy:agent:<agent>, and O
    // holding ...:cluster:<cluster>:addon:cluster-proxy.
    assert_eq!(
        subject,
        Some(Subject {
            user: "system:open-cluster-management:cluster:cluster1:addon:cluster-proxy:agent:cluster-proxy"
                .into(),
            groups: vec![
                "system:open-cluster-management:cluster:cluster1:addon:cluster-proxy".into(),
                "system:open-cluster-management:addon:cluster-proxy".into(),
            ],
            organization_units: Vec::new(),
        })
    );
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
fn the_agent_is_given_no_hub_permissions() {
    let (cluster, addon) = inputs();
    let rendered = Harness::<ClusterProxy>::new()
        .hub_permissions(&cluster, &addon)
        .unwrap();
    assert!(rendered.0.is_empty(), "{:?}", rendered.0);
}

#[test]
fn manifests_render_the_account_the_ca_and_the_agent_into_the_install_namespace() {
    let rendered = rendered();
    assert_eq!(rendered.kinds(), ["ServiceAccount", "ConfigMap", "Deployment"]);
    assert!(rendered.all_well_formed());
    assert!(rendered.all_in_namespace(NAMESPACE));
    // No RBAC on the managed cluster: the agent relays TCP and calls no API.
    assert!(!rendered.kinds().iter().any(|k| k.contains("Role")));
    let account = rendered.find("ServiceAccount", SERVICE_ACCOUNT).unwrap();
    assert_eq!(account["automountServiceAccountToken"], false);
    assert_eq!(
        rendered.find("ConfigMap", CA_CONFIG_MAP).unwrap()["data"][CA_KEY],
        CA
    );
}

#[test]
fn the_agent_runs_the_tunnel_with_the_configured_server_and_the_mounted_credential() {
    let rendered = rendered();
    let pod = pod(&rendered);
    let container = &pod["containers"][0];
    assert_eq!(pod["serviceAccountName"], SERVICE_ACCOUNT);
    assert_eq!(container["image"], AGENT_IMAGE);
    assert_eq!(container["command"], json!([AGENT_PROGRAM]));
    assert_eq!(
        container["args"],
        json!([
            "agent",
            format!("--hub-url={URL}"),
            "--hub-ca=/etc/cluster-proxy/hub-ca/ca.crt",
            "--cert=/var/run/hub/tls.crt",
            "--key=/var/run/hub/tls.key",
        ])
    );

    let mount = |name: &str| {
        container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no mount {name}"))
    };
    let volume = |name: &str| {
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no volume {name}"))
    };
    assert_eq!(mount("hub-credential")["mountPath"], "/var/run/hub");
    let secret = &volume("hub-credential")["secret"];
    assert_eq!(secret["secretName"], "cluster-proxy-hub-kubeconfig");
    assert_eq!(
        secret["items"],
        json!([{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}])
    );
    assert_eq!(mount("hub-ca")["mountPath"], CA_DIR);
    assert_eq!(volume("hub-ca")["configMap"]["name"], CA_CONFIG_MAP);
}

#[test]
fn the_agent_runs_unprivileged_with_no_token_and_bounded_resources() {
    let pod = pod(&rendered());
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], RUN_AS);
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    let container = &pod["containers"][0];
    let security = &container["securityContext"];
    assert_eq!(security["runAsNonRoot"], true);
    assert_eq!(security["privileged"], false);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    assert!(security["capabilities"]["add"].is_null());
    for bound in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(
                container["resources"][bound][resource].is_string(),
                "no {bound}.{resource}: {}",
                container["resources"]
            );
        }
    }
}

#[test]
fn the_deployment_config_places_mirrors_and_sizes_the_agent() {
    let spec = json!({
        "customizedVariables": [{"name": URL_VARIABLE, "value": URL}, {"name": CA_VARIABLE, "value": CA}],
        "registries": [{"source": "flotilla.local/addons", "mirror": "mirror.example/flotilla"}],
        "nodePlacement": {"nodeSelector": {"role": "infra"}},
        "resourceRequirements": [{"containerID": "deployments:cluster-proxy-agent:*",
                                  "resources": {"limits": {"memory": "256Mi"}}}]
    });
    let pod = pod(&render(&[addon_deployment_config(spec)]).unwrap());
    let container = &pod["containers"][0];
    assert_eq!(
        container["image"],
        "mirror.example/flotilla/cluster-proxy-agent:0.1.0"
    );
    assert_eq!(pod["nodeSelector"]["role"], "infra");
    assert_eq!(container["resources"], json!({"limits": {"memory": "256Mi"}}));
}

#[test]
fn without_a_deployment_config_the_missing_url_is_named() {
    let message = refused(render(&[]), true);
    assert!(message.contains(URL_VARIABLE), "{message}");
}

#[test]
fn a_missing_or_blank_url_is_refused_naming_the_variable() {
    for configs in [
        config(&[(CA_VARIABLE, CA)]),
        config(&[(URL_VARIABLE, ""), (CA_VARIABLE, CA)]),
        config(&[(URL_VARIABLE, "  "), (CA_VARIABLE, CA)]),
    ] {
        let message = refused(render(&[configs]), true);
        assert!(message.contains(URL_VARIABLE), "{message}");
    }
}

#[test]
fn an_invalid_url_is_refused_naming_the_variable() {
    for url in [
        "https://tunnel.hub.example:8091/connect",
        "tunnel.hub.example:8091",
        "wss://tunnel.hub.example:8091/connect --target=10.0.0.1:22",
        "wss:///connect",
    ] {
        let message = refused(
            render(&[config(&[(URL_VARIABLE, url), (CA_VARIABLE, CA)])]),
            false,
        );
        assert!(message.contains(URL_VARIABLE), "{url:?}: {message}");
    }
}

#[test]
fn a_missing_ca_is_refused_naming_the_variable() {
    let message = refused(render(&[config(&[(URL_VARIABLE, URL)])]), true);
    assert!(message.contains(CA_VARIABLE), "{message}");
}

#[test]
fn a_ca_that_is_not_pem_is_refused_naming_the_variable() {
    for ca in [
        "not a certificate",
        "MIIBhTCCASugAwIBAgIU",
        "-----BEGIN CERTIFICATE-----\nMIIBhTCCASugAwIBAgIU\n",
        "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n",
    ] {
        let message = refused(
            render(&[config(&[(URL_VARIABLE, URL), (CA_VARIABLE, ca)])]),
            false,
        );
        assert!(message.contains(CA_VARIABLE), "{ca:?}: {message}");
    }
}

#[test]
fn a_private_key_is_never_rendered_into_the_ca_config_map() {
    let key = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
    let message = refused(
        render(&[config(&[
            (URL_VARIABLE, URL),
            (CA_VARIABLE, &format!("{CA}{key}")),
        ])]),
        false,
    );
    assert!(message.contains("PRIVATE KEY"), "{message}");
    assert!(
        !message.contains("AAAA"),
        "the message echoes the value: {message}"
    );
}
