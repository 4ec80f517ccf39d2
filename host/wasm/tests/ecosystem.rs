//! The ecosystem add-ons' plugins through the real host (components compiled by wasmtime,
//! called in the sandbox), as the add-on manager calls them: cluster-proxy (the tunnel agent,
//! configured by an AddOnDeploymentConfig, no hub rights), managed-serviceaccount and
//! resource-usage-collect (hub rights confined to the cluster's namespace). Their native
//! harness tests cover every rendered field; these show the built components behave the same.

use crate::common;

use common::{addon, cluster, json_objects, json_permissions, load};
use flotilla_test_plugins as plugins;
use flotilla_wasm::types::{HealthMode, Registration, ResolvedConfig};
use flotilla_wasm::{Error, Limits, inputs};
use serde_json::json;

fn tunnel_config(url: &str) -> ResolvedConfig {
    let object = json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnDeploymentConfig",
        "metadata": {"name": "cluster-proxy", "namespace": "default"},
        "spec": {"customizedVariables": [
            {"name": "TunnelServerURL", "value": url},
            {"name": "TunnelServerCA", "value": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"},
        ]},
    });
    inputs::resolved_config(&object, None).expect("config object converts")
}

/// Every rule of every Role the plugin grants on the hub, and the namespaces they are in.
fn hub_rules(permissions: Vec<serde_json::Value>) -> (Vec<String>, Vec<serde_json::Value>) {
    let namespaces = permissions
        .iter()
        .map(|p| {
            p["metadata"]["namespace"]
                .as_str()
                .unwrap_or("<cluster-wide>")
                .to_owned()
        })
        .collect();
    let rules = permissions
        .iter()
        .filter(|p| p["kind"] == "Role")
        .flat_map(|p| p["rules"].as_array().cloned().unwrap_or_default())
        .collect();
    (namespaces, rules)
}

#[tokio::test]
async fn cluster_proxy_deploys_the_tunnel_agent_and_asks_for_no_hub_rights() {
    let plugin = load("cluster-proxy", plugins::CLUSTER_PROXY, Limits::default())
        .await
        .unwrap();
    assert!(matches!(
        plugin.options().registrations[..],
        [Registration::KubeClient { .. }]
    ));
    let (c, a) = (cluster("cluster1"), addon("cluster-proxy"));
    let objects = json_objects(
        plugin
            .manifests(&c, &a, &[tunnel_config("wss://hub.example:8091/connect")])
            .await
            .unwrap(),
    );
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(
        args.contains("--hub-url=wss://hub.example:8091/connect"),
        "{args}"
    );
    assert!(plugin.hub_permissions(&c, &a).await.unwrap().is_empty());

    let refused = plugin
        .manifests(&c, &a, &[tunnel_config("https://hub.example --target=evil:443")])
        .await
        .unwrap_err();
    assert!(matches!(refused, Error::Plugin { .. }), "{refused}");
}

#[tokio::test]
async fn managed_serviceaccount_and_resource_usage_are_confined_to_the_cluster_namespace() {
    for (name, path, resource) in [
        (
            "managed-serviceaccount",
            plugins::MANAGED_SERVICEACCOUNT,
            "managedserviceaccounts",
        ),
        (
            "resource-usage-collect",
            plugins::RESOURCE_USAGE,
            "addonplacementscores",
        ),
    ] {
        let plugin = load(name, path, Limits::default()).await.unwrap();
        assert!(matches!(plugin.options().health, HealthMode::Lease), "{name}");
        let (c, a) = (cluster("cluster1"), addon(name));
        let objects = json_objects(plugin.manifests(&c, &a, &[]).await.unwrap());
        assert!(objects.iter().any(|o| o["kind"] == "Deployment"), "{name}");
        let (namespaces, rules) = hub_rules(json_permissions(plugin.hub_permissions(&c, &a).await.unwrap()));
        assert!(
            namespaces.iter().all(|ns| ns == "cluster1"),
            "{name}: {namespaces:?}"
        );
        assert!(
            rules
                .iter()
                .any(|r| r["resources"].as_array().unwrap().iter().any(|x| x == resource)),
            "{name}: {rules:?}"
        );
    }
}
