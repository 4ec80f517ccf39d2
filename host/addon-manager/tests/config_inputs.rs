//! What a plugin is given for its configs is what the hub wrote about them: the spec hash a
//! plugin sees for every config kind equals `configReferences[].desiredConfig.specHash`, and the
//! resource it sees is the one the apiserver serves the kind by, for built-in kinds and custom
//! ones alike.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_core::resources::plural;
use flotilla_test_plugins as plugins;
use flotilla_testing::wait;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::discovery::Discovery;
use kube::{Api, Client};
use serde_json::{Value, json};
use support::*;

const GATEWAY_GROUP: &str = "gateway.flotilla.test";

/// Serves kind `Gateway` (resource `gateways`) in the test group, as gateway APIs do.
async fn gateway_crd(client: &Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gateways.{GATEWAY_GROUP}")},
        "spec": {"group": GATEWAY_GROUP, "scope": "Namespaced",
                 "names": {"kind": "Gateway", "plural": "gateways", "singular": "gateway", "listKind": "GatewayList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    }))
    .expect("CRD");
    flotilla_kube::crds::install(client, &[crd], TIMEOUT)
        .await
        .expect("Gateway CRD established");
}

/// Each config the plugin rendered, keyed by group/resource/namespace/name.
fn echoed(work: &flotilla_api::work::v1::ManifestWork) -> BTreeMap<String, Value> {
    let text = work.spec.workload.manifests.iter().find_map(|m| {
        let object = serde_json::to_value(m).ok()?;
        object.pointer("/data/configs")?.as_str().map(str::to_owned)
    });
    let seen: Vec<Value> = serde_json::from_str(&text.unwrap_or_default()).unwrap_or_default();
    seen.into_iter()
        .map(|c| {
            let key = ["group", "resource", "namespace", "name"]
                .map(|k| c[k].as_str().unwrap_or_default().to_owned())
                .join("/");
            (key, c)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_hash_a_plugin_sees_is_the_one_in_config_references_for_every_config_kind() {
    let client = client().await;
    let addon = "config-echo";
    let (cluster_name, configs_ns) = ("echo-c1", "echo-configs");
    register_plugin(&client, addon, plugins::CONFIG_ECHO).await;
    gateway_crd(&client).await;
    await_cma(&client, addon).await;
    cluster(&client, cluster_name).await;
    namespace(&client, configs_ns).await;
    // Characters Go's JSON escapes and serde's does not, so a hash of the wrong text differs.
    deployment_config(&client, configs_ns, "tuning", "<2>").await;
    apply_json(
        &client,
        "v1",
        "ConfigMap",
        Some(configs_ns),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": configs_ns},
               "data": {"message": "a & b"}}),
    )
    .await;
    apply_json(
        &client,
        &format!("{GATEWAY_GROUP}/v1"),
        "Gateway",
        Some(configs_ns),
        json!({"apiVersion": format!("{GATEWAY_GROUP}/v1"), "kind": "Gateway",
               "metadata": {"name": "edge", "namespace": configs_ns},
               "spec": {"listeners": [{"port": 443, "host": "<any>"}]}}),
    )
    .await;
    let references = [
        (
            "addon.open-cluster-management.io",
            "addondeploymentconfigs",
            "tuning",
        ),
        ("", "configmaps", "settings"),
        (GATEWAY_GROUP, "gateways", "edge"),
    ];
    enable(
        &client,
        addon,
        cluster_name,
        Value::Array(
            references
                .iter()
                .map(|(group, resource, name)| {
                    json!({"group": group, "resource": resource, "namespace": configs_ns, "name": name})
                })
                .collect(),
        ),
    )
    .await;

    let work = await_work(
        &client,
        cluster_name,
        &format!("addon-{addon}-deploy-0"),
        "the plugin rendered all three configs",
        |w| echoed(w).len() == references.len(),
    )
    .await;
    let seen = echoed(&work);
    // The works render from the released configs as soon as they are released; the add-on's
    // status shows them once its writer writes them.
    let mcas = Api::<ManagedClusterAddOn>::namespaced(client.clone(), cluster_name);
    let count = references.len();
    let written = wait::until("configReferences written", Duration::from_secs(20), || {
        let mcas = mcas.clone();
        async move {
            let mca = mcas.get(addon).await?;
            let written = mca.status.map(|s| s.config_references).unwrap_or_default();
            Ok::<_, kube::Error>((written.len() == count).then_some(written))
        }
    })
    .await
    .expect("configReferences written");
    for reference in &written {
        let desired = reference.desired_config.as_ref().expect("desired config");
        let key = format!(
            "{}/{}/{}/{}",
            reference.group_resource.group,
            reference.group_resource.resource,
            desired.referent.namespace,
            desired.referent.name
        );
        let plugin_saw = seen
            .get(&key)
            .unwrap_or_else(|| panic!("plugin saw {key}: {seen:?}"));
        assert_eq!(
            plugin_saw["specHash"].as_str(),
            Some(desired.spec_hash.as_str()),
            "{key}: the plugin's spec hash is the one in configReferences"
        );
    }
    assert_eq!(
        seen[&format!("{GATEWAY_GROUP}/gateways/{configs_ns}/edge")]["spec"]["listeners"][0]["port"],
        443
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_served_kind_is_named_by_the_resource_the_apiserver_serves_it_by() {
    let client = client().await;
    gateway_crd(&client).await;
    // Discovery caches nothing across runs; a fresh one sees the Gateway CRD.
    let discovery = wait::until(
        "discovery lists the Gateway kind",
        Duration::from_secs(30),
        || {
            let client = client.clone();
            async move {
                let discovery = Discovery::new(client).run().await?;
                let served = discovery.groups().any(|g| g.name() == GATEWAY_GROUP);
                Ok::<_, kube::Error>(served.then_some(discovery))
            }
        },
    )
    .await
    .expect("discovery");
    let mut checked = 0;
    let mut wrong = Vec::new();
    for group in discovery.groups() {
        for version in group.versions() {
            for (resource, _) in group.versioned_resources(version) {
                checked += 1;
                if plural(&resource.kind) != resource.plural {
                    wrong.push(format!(
                        "{} → {} (apiserver: {})",
                        resource.kind,
                        plural(&resource.kind),
                        resource.plural
                    ));
                }
            }
        }
    }
    println!("{checked} served kinds checked");
    assert!(checked > 50, "discovery listed only {checked} kinds");
    assert!(
        wrong.is_empty(),
        "kinds pluralised unlike the apiserver: {wrong:#?}"
    );
}
