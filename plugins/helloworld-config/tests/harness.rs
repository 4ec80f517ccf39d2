//! Native tests of helloworld-config through the SDK harness. (The same plugin runs through the
//! real host in `host/wasm/tests/examples.rs`.)

use flotilla_addon_sdk::serde_json::json;
use flotilla_addon_sdk::testing::{Harness, addon_deployment_config};
use flotilla_addon_sdk::{
    AddOn, AddonError, Cluster, FeedbackField, FeedbackValue, HealthMode, HealthStatus, ResolvedConfig,
    ResourceIdentifier,
};
use helloworld_config::{AGENT_NAME, AVAILABLE_FIELD, HelloWorldConfig, MESSAGE_CONFIG_MAP};

fn inputs() -> (Cluster, AddOn) {
    (
        Cluster::new("cluster1"),
        AddOn::new("helloworld-config", "open-cluster-management-agent-addon"),
    )
}

fn config_map(data: flotilla_addon_sdk::serde_json::Value) -> ResolvedConfig {
    ResolvedConfig {
        group: String::new(),
        resource: "configmaps".into(),
        namespace: "default".into(),
        name: "hello".into(),
        spec_json: json!({ "data": data }).to_string(),
        spec_hash: String::new(),
    }
}

#[test]
fn describe_declares_both_config_kinds_and_customized_health() {
    let options = Harness::<HelloWorldConfig>::new().describe();
    let kinds: Vec<&str> = options
        .supported_configs
        .iter()
        .map(|c| c.resource.as_str())
        .collect();
    assert_eq!(kinds, ["addondeploymentconfigs", "configmaps"]);
    assert!(matches!(options.health, HealthMode::Customized(ref f) if f.len() == 1));
}

#[test]
fn the_deployment_config_and_the_config_map_shape_the_agent() {
    let (cluster, addon) = inputs();
    let configs = [
        addon_deployment_config(json!({
            "customizedVariables": [{"name": "LOG_LEVEL", "value": "4"}],
            "registries": [{"source": "quay.io/open-cluster-management", "mirror": "mirror.local/ocm"}],
            "nodePlacement": {"nodeSelector": {"role": "infra"}},
            "resourceRequirements": [{"containerID": "deployments:helloworld-agent:*",
                                      "resources": {"limits": {"memory": "64Mi"}}}]
        })),
        config_map(
            json!({"replicas": "2", "message": "hi", "image": "quay.io/open-cluster-management/custom:v2"}),
        ),
    ];
    let rendered = Harness::<HelloWorldConfig>::new()
        .manifests(&cluster, &addon, &configs)
        .unwrap();
    assert!(rendered.all_well_formed());
    let d = rendered.find("Deployment", AGENT_NAME).unwrap();
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(pod["containers"][0]["image"], "mirror.local/ocm/custom:v2");
    assert_eq!(pod["nodeSelector"]["role"], "infra");
    assert_eq!(pod["containers"][0]["resources"]["limits"]["memory"], "64Mi");
    assert_eq!(pod["containers"][0]["env"][0]["name"], "LOG_LEVEL");
    let args = pod["containers"][0]["args"].as_array().unwrap();
    assert!(args.iter().any(|a| a == "--v=4"), "{args:?}");
    assert_eq!(
        rendered.find("ConfigMap", MESSAGE_CONFIG_MAP).unwrap()["data"]["message"],
        "hi"
    );
}

#[test]
fn a_bad_replica_count_is_an_invalid_config() {
    let (cluster, addon) = inputs();
    let err = Harness::<HelloWorldConfig>::new()
        .manifests(&cluster, &addon, &[config_map(json!({"replicas": "many"}))])
        .unwrap_err();
    assert!(
        matches!(err, AddonError::InvalidConfig(ref m) if m.contains("replicas")),
        "{err}"
    );
}

#[test]
fn health_follows_the_agent_feedback() {
    let (cluster, addon) = inputs();
    let resource = ResourceIdentifier {
        group: "apps".into(),
        resource: "deployments".into(),
        name: AGENT_NAME.into(),
        namespace: "open-cluster-management-agent-addon".into(),
    };
    let field = |name: &str, value: FeedbackValue| FeedbackField {
        resource: resource.clone(),
        name: name.into(),
        value,
    };
    let h = Harness::<HelloWorldConfig>::new();
    assert_eq!(
        h.probe_health(&cluster, &addon, &[]).status,
        HealthStatus::Unknown
    );
    assert_eq!(
        h.probe_health(
            &cluster,
            &addon,
            &[field("ReadyReplicas", FeedbackValue::Integer(1))]
        )
        .status,
        HealthStatus::Available
    );
    assert_eq!(
        h.probe_health(
            &cluster,
            &addon,
            &[
                field("ReadyReplicas", FeedbackValue::Integer(0)),
                field(AVAILABLE_FIELD, FeedbackValue::Text("False".into()))
            ]
        )
        .status,
        HealthStatus::Unavailable
    );
}
