//! Hook inputs from Kubernetes objects: `ManagedCluster` → [`Cluster`], `ManagedClusterAddOn` →
//! [`Addon`], config objects → [`ResolvedConfig`], `CertificateSigningRequest` → [`Csr`].
//!
//! The add-on manager passes the typed objects it watches; `flotilla plugin run` reads the same
//! kinds from YAML files ([`cluster_from_value`], [`addon_from_value`]), so a hook sees the same
//! input either way. Configs are taken as JSON values: any kind, any served version.
//!
//! A config's `spec-json` is the object's `spec`; for kinds without one (ConfigMap, Secret) it is
//! the object minus `apiVersion`, `kind`, `metadata` and `status` (for a ConfigMap:
//! `{"data": {...}}`). `spec-hash` is the object's OCM spec hash
//! ([`flotilla_core::addon::spec_hash`]), the value the hub writes to `configReferences`.

use std::collections::BTreeMap;

use base64::Engine as _;
use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_core::addon::spec_hash::{UNHASHED_FIELDS, spec_hash};
use flotilla_core::resources::plural;
use serde_json::{Map, Value};

use crate::types::{Addon, Cluster, Csr, KeyValue, ResolvedConfig};
use crate::validate::DEFAULT_INSTALL_NAMESPACE;

/// Why an object cannot be turned into a hook input.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {reason}")]
pub struct InputError {
    /// Which object.
    pub what: String,
    /// What is wrong.
    pub reason: String,
}

fn err(what: &str, reason: impl Into<String>) -> InputError {
    InputError {
        what: what.to_owned(),
        reason: reason.into(),
    }
}

fn pairs(map: Option<&BTreeMap<String, String>>) -> Vec<KeyValue> {
    map.into_iter()
        .flatten()
        .map(|(key, value)| KeyValue {
            key: key.clone(),
            value: value.clone(),
        })
        .collect()
}

fn name_of(object: &Value, what: &str) -> Result<String, InputError> {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| err(what, "metadata.name is missing"))
}

fn expect_kind(object: &Value, kind: &str, what: &str) -> Result<(), InputError> {
    match object.get("kind").and_then(Value::as_str) {
        Some(k) if k == kind => Ok(()),
        other => Err(err(
            what,
            format!("kind is {:?}, want {kind}", other.unwrap_or_default()),
        )),
    }
}

/// `object` as a `K` of kind `kind`, with a name.
fn typed<K: serde::de::DeserializeOwned>(object: &Value, kind: &str) -> Result<K, InputError> {
    expect_kind(object, kind, kind)?;
    name_of(object, kind)?;
    serde_json::from_value(object.clone()).map_err(|e| err(kind, e.to_string()))
}

/// A `ManagedCluster` as the hooks see it: name, labels, annotations, claims
/// (`status.clusterClaims`) and `status.version.kubernetes`.
pub fn cluster(cluster: &ManagedCluster) -> Cluster {
    let status = cluster.status.as_ref();
    Cluster {
        name: cluster.metadata.name.clone().unwrap_or_default(),
        labels: pairs(cluster.metadata.labels.as_ref()),
        annotations: pairs(cluster.metadata.annotations.as_ref()),
        claims: status
            .map(|s| {
                s.cluster_claims
                    .iter()
                    .map(|c| KeyValue {
                        key: c.name.clone(),
                        value: c.value.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        kubernetes_version: status.map(|s| s.version.kubernetes.clone()).unwrap_or_default(),
    }
}

/// [`cluster`] of a `ManagedCluster` read from a file.
pub fn cluster_from_value(object: &Value) -> Result<Cluster, InputError> {
    typed::<ManagedCluster>(object, "ManagedCluster").map(|c| cluster(&c))
}

/// A `ManagedClusterAddOn` as the hooks see it. The install namespace is resolved as OCM does:
/// an `AddOnDeploymentConfig`'s `agentInstallNamespace` among `configs`, then the add-on's
/// `spec.installNamespace`, then `default_namespace` (the plugin's `describe()` default), then
/// `open-cluster-management-agent-addon`.
pub fn addon(
    addon: &ManagedClusterAddOn,
    configs: &[ResolvedConfig],
    default_namespace: Option<&str>,
) -> Addon {
    let from_config = configs
        .iter()
        .rev()
        .filter(|c| c.resource == "addondeploymentconfigs")
        .find_map(|c| {
            let spec: Value = serde_json::from_str(&c.spec_json).ok()?;
            spec.get("agentInstallNamespace")?
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        });
    let from_spec = Some(&addon.spec.install_namespace)
        .filter(|s| !s.is_empty())
        .cloned();
    let install_namespace = from_config
        .or(from_spec)
        .or_else(|| default_namespace.map(str::to_owned))
        .unwrap_or_else(|| DEFAULT_INSTALL_NAMESPACE.to_owned());
    Addon {
        name: addon.metadata.name.clone().unwrap_or_default(),
        install_namespace,
        annotations: pairs(addon.metadata.annotations.as_ref()),
    }
}

/// [`addon`] of a `ManagedClusterAddOn` read from a file.
pub fn addon_from_value(
    object: &Value,
    configs: &[ResolvedConfig],
    default_namespace: Option<&str>,
) -> Result<Addon, InputError> {
    typed::<ManagedClusterAddOn>(object, "ManagedClusterAddOn").map(|a| addon(&a, configs, default_namespace))
}

/// A config object (an `AddOnDeploymentConfig`, a ConfigMap, any kind with a `spec`) as a
/// resolved config. `resource` is the plural its apiserver serves it by (the hub knows it from
/// the config reference); without one it is guessed from the kind
/// ([`flotilla_core::resources::plural`]). See the module docs for `spec-json` and `spec-hash`.
pub fn resolved_config(object: &Value, resource: Option<&str>) -> Result<ResolvedConfig, InputError> {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .ok_or_else(|| err("config", "kind is missing"))?;
    let what = format!("config {kind}");
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| err(&what, "apiVersion is missing"))?;
    let group = api_version
        .rsplit_once('/')
        .map(|(g, _)| g.to_owned())
        .unwrap_or_default();
    let spec = match object.get("spec") {
        Some(spec) => spec.clone(),
        None => {
            let mut rest: Map<String, Value> = object.as_object().cloned().unwrap_or_default();
            for key in UNHASHED_FIELDS {
                rest.remove(key);
            }
            Value::Object(rest)
        }
    };
    let spec_json = serde_json::to_string(&sorted(spec)).map_err(|e| err(&what, e.to_string()))?;
    Ok(ResolvedConfig {
        group,
        resource: resource.map_or_else(|| plural(kind), str::to_owned),
        namespace: object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        name: name_of(object, &what)?,
        spec_hash: spec_hash(object).map_err(|e| err(&what, e.to_string()))?,
        spec_json,
    })
}

/// `value` with every object's keys in sorted order (as Go's `json.Marshal` writes maps), whatever
/// order serde_json's map keeps.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let ordered: std::collections::BTreeMap<String, Value> =
                map.into_iter().map(|(k, v)| (k, sorted(v))).collect();
            Value::Object(ordered.into_iter().collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// A `CertificateSigningRequest` (`certificates.k8s.io/v1`) as `approve-csr` sees it: the
/// request's subject and DNS names are read from the PEM in `spec.request`.
pub fn csr(object: &Value) -> Result<Csr, InputError> {
    let what = "CertificateSigningRequest";
    expect_kind(object, what, what)?;
    let strings = |pointer: &str| -> Vec<String> {
        object
            .pointer(pointer)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    };
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let request = text("/spec/request");
    let pem = base64::engine::general_purpose::STANDARD
        .decode(request.trim())
        .map_err(|e| err(what, format!("spec.request is not base64: {e}")))?;
    let info =
        flotilla_core::x509::parse_request(&pem).map_err(|e| err(what, format!("spec.request: {e}")))?;
    Ok(Csr {
        name: name_of(object, what)?,
        signer_name: text("/spec/signerName"),
        username: text("/spec/username"),
        groups: strings("/spec/groups"),
        common_name: info.subject.common_name,
        organizations: info.subject.organizations,
        organizational_units: info.subject.organizational_units,
        dns_names: info.dns_names,
        usages: strings("/spec/usages"),
        request_pem: String::from_utf8_lossy(&pem).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_managed_cluster_carries_labels_claims_and_version() {
        let c = cluster_from_value(&json!({
            "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": {"name": "c1", "labels": {"env": "prod"}},
            "status": {"clusterClaims": [{"name": "platform", "value": "AWS"}],
                       "version": {"kubernetes": "v1.33.1"}}
        }))
        .unwrap();
        assert_eq!(c.name, "c1");
        assert_eq!(c.labels[0].key, "env");
        assert_eq!(c.claims[0].value, "AWS");
        assert_eq!(c.kubernetes_version, "v1.33.1");
        assert!(cluster_from_value(&json!({"kind": "ConfigMap", "metadata": {"name": "x"}})).is_err());
        let unnamed = json!({"kind": "ManagedCluster", "metadata": {}});
        assert!(cluster_from_value(&unnamed).is_err());
    }

    #[test]
    fn the_install_namespace_prefers_the_deployment_config() {
        let mca = json!({"kind": "ManagedClusterAddOn", "metadata": {"name": "a", "namespace": "c1"},
                         "spec": {"installNamespace": "from-spec"}});
        let adc = resolved_config(
            &json!({
                "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnDeploymentConfig",
                "metadata": {"name": "d", "namespace": "default"},
                "spec": {"agentInstallNamespace": "from-config"}
            }),
            None,
        )
        .unwrap();
        assert_eq!(adc.group, "addon.open-cluster-management.io");
        assert_eq!(adc.resource, "addondeploymentconfigs");
        let namespace = |object: &Value, configs: &[ResolvedConfig], default| {
            addon_from_value(object, configs, default)
                .unwrap()
                .install_namespace
        };
        assert_eq!(namespace(&mca, &[adc], None), "from-config");
        assert_eq!(namespace(&mca, &[], None), "from-spec");
        let bare = json!({"kind": "ManagedClusterAddOn", "metadata": {"name": "a"}, "spec": {}});
        assert_eq!(namespace(&bare, &[], Some("mine")), "mine");
        assert_eq!(namespace(&bare, &[], None), DEFAULT_INSTALL_NAMESPACE);
    }

    #[test]
    fn a_config_map_config_is_its_data_and_the_hash_is_stable() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "c", "namespace": "n"}, "data": {"b": "2", "a": "1"}});
        let rc = resolved_config(&cm, None).unwrap();
        assert_eq!(rc.group, "");
        assert_eq!(rc.resource, "configmaps");
        assert_eq!(rc.spec_json, r#"{"data":{"a":"1","b":"2"}}"#);
        assert_eq!(rc.spec_hash, spec_hash(&cm).unwrap());
    }

    #[test]
    fn a_config_with_a_spec_carries_the_hash_the_hub_writes_and_the_served_resource() {
        let gateway = json!({"apiVersion": "gateway.flotilla.test/v1", "kind": "Gateway",
                             "metadata": {"name": "g", "namespace": "n"}, "spec": {"port": 80}});
        let rc = resolved_config(&gateway, None).unwrap();
        assert_eq!(rc.resource, "gateways");
        assert_eq!(rc.spec_json, r#"{"port":80}"#);
        // OCM hashes `{"spec":{...}}`, not the spec alone.
        assert_eq!(rc.spec_hash, spec_hash(&gateway).unwrap());
        let served = resolved_config(&gateway, Some("gatewayz")).unwrap();
        assert_eq!(served.resource, "gatewayz");
    }
}
