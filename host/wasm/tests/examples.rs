//! The example plugins through the real host (components compiled by wasmtime, called in the
//! sandbox): `helloworld-config` (AddOnDeploymentConfig + ConfigMap config, customized health),
//! `custom-signer` (its own signer and approval policy) and `hello-js`, written in JavaScript and
//! built with componentize-js, which shows the contract is language-neutral.

use crate::common;

use common::{addon, agent_csr, cluster, load};
use flotilla_test_plugins as plugins;
use flotilla_wasm::types::{
    CsrDecision, FeedbackField, FeedbackValue, HealthMode, HealthStatus, KeyValue, Registration,
    ResolvedConfig, ResourceIdentifier,
};
use flotilla_wasm::{Error, Limits, inputs};
use serde_json::json;

fn config(object: serde_json::Value) -> ResolvedConfig {
    inputs::resolved_config(&object, None).expect("config object converts")
}

fn adc(spec: serde_json::Value) -> ResolvedConfig {
    config(json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnDeploymentConfig",
        "metadata": {"name": "deploy", "namespace": "default"}, "spec": spec,
    }))
}

fn agent_feedback(name: &str, value: FeedbackValue) -> FeedbackField {
    FeedbackField {
        resource: ResourceIdentifier {
            group: "apps".into(),
            resource: "deployments".into(),
            name: "helloworld-agent".into(),
            namespace: "open-cluster-management-agent-addon".into(),
        },
        name: name.into(),
        value,
    }
}

#[tokio::test]
async fn helloworld_config_renders_from_its_configs_in_the_sandbox() {
    let plugin = load("helloworld-config", plugins::HELLOWORLD_CONFIG, Limits::default())
        .await
        .unwrap();
    assert!(matches!(plugin.options().health, HealthMode::Customized(_)));
    assert_eq!(plugin.options().supported_configs.len(), 2);

    let configs = [
        adc(json!({
            "customizedVariables": [{"name": "LOG_LEVEL", "value": "2"}],
            "registries": [{"source": "flotilla.local/addons", "mirror": "mirror.local/addons"}],
            "nodePlacement": {"tolerations": [{"key": "dedicated", "operator": "Exists"}]},
            "resourceRequirements": [{"containerID": "*:*:*", "resources": {"requests": {"cpu": "20m"}}}]
        })),
        config(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "hello", "namespace": "default"},
            "data": {"replicas": "3", "message": "from the hub"}})),
    ];
    let objects = plugin
        .manifests(&cluster("cluster1"), &addon("helloworld-config"), &configs)
        .await
        .unwrap();
    let objects = crate::common::json_objects(objects);
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(
        pod["containers"][0]["image"],
        "mirror.local/addons/helloworld-agent:0.1.0"
    );
    assert_eq!(pod["tolerations"][0]["key"], "dedicated");
    assert_eq!(pod["containers"][0]["resources"]["requests"]["cpu"], "20m");
    assert!(
        objects
            .iter()
            .any(|o| o["kind"] == "ConfigMap" && o["data"]["message"] == "from the hub")
    );

    // A bad config is the plugin's typed error, not a fault.
    let bad = [config(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "hello", "namespace": "default"}, "data": {"replicas": "-1"}}))];
    let err = plugin
        .manifests(&cluster("cluster1"), &addon("helloworld-config"), &bad)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Plugin { .. }), "{err}");

    let c = cluster("cluster1");
    let a = addon("helloworld-config");
    let health = plugin
        .probe_health(
            &c,
            &a,
            &[agent_feedback("ReadyReplicas", FeedbackValue::Integer(2))],
        )
        .await;
    assert_eq!(health.status, HealthStatus::Available, "{}", health.message);
    let health = plugin
        .probe_health(
            &c,
            &a,
            &[agent_feedback("isAvailable", FeedbackValue::Text("False".into()))],
        )
        .await;
    assert_eq!(health.status, HealthStatus::Unavailable, "{}", health.message);
}

#[tokio::test]
async fn custom_signer_applies_its_own_approval_policy_in_the_sandbox() {
    let plugin = load("custom-signer", plugins::CUSTOM_SIGNER, Limits::default())
        .await
        .unwrap();
    assert!(plugin.options().registrations.iter().any(|r| matches!(r,
        Registration::CustomSigner(c) if c.signer_name == "example.com/custom-signer")));

    let mut opted_in = cluster("cluster1");
    opted_in.labels.push(KeyValue {
        key: "custom-signer.example.com/enabled".into(),
        value: "true".into(),
    });
    let a = addon("custom-signer");
    let mut csr = agent_csr("cluster1", "custom-signer");
    csr.signer_name = "example.com/custom-signer".into();
    csr.common_name = "custom-signer-agent:cluster1".into();
    csr.organizations = vec!["custom-signer:cluster1".into(), "custom-signer:agents".into()];
    csr.organizational_units = vec!["flotilla".into()];
    csr.dns_names.clear();
    csr.usages = vec!["digital signature".into(), "client auth".into()];
    assert_eq!(
        plugin.approve_csr(&opted_in, &a, &csr).await,
        CsrDecision::Approve
    );

    let CsrDecision::Deny(reason) = plugin.approve_csr(&cluster("cluster1"), &a, &csr).await else {
        panic!("a cluster that did not opt in got a custom certificate");
    };
    assert!(reason.contains("opted in"), "{reason}");
    // The kube-client registration keeps OCM's default rules.
    assert_eq!(
        plugin
            .approve_csr(&opted_in, &a, &agent_csr("cluster1", "custom-signer"))
            .await,
        CsrDecision::Approve
    );
}

#[tokio::test]
async fn the_javascript_plugin_runs_every_hook_through_the_host() {
    let path = tokio::task::spawn_blocking(plugins::js::hello_js)
        .await
        .unwrap()
        .expect("the JavaScript plugin builds (needs npm)");
    let bytes = std::fs::read(&path).unwrap();
    let inspection = flotilla_wasm::inspect::inspect(&bytes);
    assert!(inspection.accepted, "{inspection:?}");
    assert_eq!(inspection.wit_version.as_deref(), Some("0.1.0"));

    // A SpiderMonkey-based component is large: a generous time, and a full plugin share of memory.
    let limits = Limits {
        timeout: std::time::Duration::from_secs(30),
        memory_bytes: 128 << 20,
        ..Limits::default()
    };
    let plugin = common::runtime().load("hello-js", bytes, limits).await.unwrap();
    assert_eq!(plugin.options().health, HealthMode::DeploymentAvailability);

    let (c, a) = (cluster("cluster1"), addon("hello-js"));
    let configs = [adc(
        json!({"customizedVariables": [{"name": "GREETING", "value": "ahoy"}]}),
    )];
    let objects = crate::common::json_objects(plugin.manifests(&c, &a, &configs).await.unwrap());
    let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(kinds, ["ServiceAccount", "Deployment"]);
    assert_eq!(
        objects[1]["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"],
        "ahoy, cluster1"
    );

    // A malformed config comes back as the plugin's typed error (a thrown JS payload).
    let bad = [adc(json!({"customizedVariables": "oops"}))];
    let err = plugin.manifests(&c, &a, &bad).await.unwrap_err();
    assert!(
        matches!(&err, Error::Plugin { error: flotilla_wasm::types::PluginError::InvalidConfig(m), .. } if m.contains("customizedVariables")),
        "{err}"
    );

    assert_eq!(
        plugin
            .approve_csr(&c, &a, &agent_csr("cluster1", "hello-js"))
            .await,
        CsrDecision::Approve
    );
    assert!(matches!(
        plugin
            .approve_csr(&c, &a, &agent_csr("cluster2", "hello-js"))
            .await,
        CsrDecision::Deny(_)
    ));
    // Exactly the agent's identity: no group, unit or requester beyond it.
    let mut one_more_group = agent_csr("cluster1", "hello-js");
    one_more_group
        .organizations
        .push("system:open-cluster-management:cluster:cluster2:addon:hello-js".into());
    let mut a_unit = agent_csr("cluster1", "hello-js");
    a_unit.organizational_units.push("admins".into());
    let mut not_an_agent = agent_csr("cluster1", "hello-js");
    not_an_agent.username = "system:open-cluster-management:cluster1:agent:x".into();
    for (what, csr) in [
        ("one more group", one_more_group),
        ("an organizational unit", a_unit),
        ("a requester that is no agent", not_an_agent),
    ] {
        assert!(
            matches!(plugin.approve_csr(&c, &a, &csr).await, CsrDecision::Deny(_)),
            "{what} is approved"
        );
    }
    let rbac = crate::common::json_permissions(plugin.hub_permissions(&c, &a).await.unwrap());
    assert!(rbac.iter().all(|o| o["metadata"]["namespace"] == "cluster1"));

    let ready = FeedbackField {
        resource: ResourceIdentifier {
            group: "apps".into(),
            resource: "deployments".into(),
            name: "hello-js-agent".into(),
            namespace: "open-cluster-management-agent-addon".into(),
        },
        name: "ReadyReplicas".into(),
        value: FeedbackValue::Integer(1),
    };
    assert_eq!(
        plugin.probe_health(&c, &a, &[ready]).await.status,
        HealthStatus::Available
    );
    assert_eq!(
        plugin.probe_health(&c, &a, &[]).await.status,
        HealthStatus::Unknown
    );
}
