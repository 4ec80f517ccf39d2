//! Building manifests from `k8s-openapi` types.
//!
//! [`to_manifest`] serializes any top-level Kubernetes type with its `apiVersion` and `kind` set
//! (from the type, so they cannot be forgotten or misspelt). [`meta`] and [`labels`] shorten the
//! usual `ObjectMeta` boilerplate; [`agent_deployment`] wraps a pod spec in the Deployment most
//! add-on agents are; [`role_bound_to`] grants rules in one namespace, with [`rule`],
//! [`agent_group`] (an agent's hub identity) and [`service_account`] as subjects.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentSpec},
        core::v1::{PodSpec, PodTemplateSpec},
        rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta},
};
use serde::Serialize;

use crate::types::{AddonError, Manifest};

/// `object` as a manifest with `apiVersion` and `kind` from its type.
pub fn to_manifest<K: k8s_openapi::Resource + Serialize>(object: &K) -> Result<Manifest, AddonError> {
    let mut value = serde_json::to_value(object)
        .map_err(|e| AddonError::Internal(format!("cannot serialize {}: {e}", K::KIND)))?;
    let map = value
        .as_object_mut()
        .ok_or_else(|| AddonError::Internal(format!("{} did not serialize to a JSON object", K::KIND)))?;
    map.insert("apiVersion".to_owned(), K::API_VERSION.into());
    map.insert("kind".to_owned(), K::KIND.into());
    Ok(value)
}

/// `ObjectMeta` with a name and, if not empty, a namespace.
pub fn meta(name: impl Into<String>, namespace: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
        ..ObjectMeta::default()
    }
}

/// A label map from pairs.
pub fn labels<const N: usize>(pairs: [(&str, &str); N]) -> BTreeMap<String, String> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// A Deployment `name` in `namespace` running `replicas` copies of `pod`, whose pods carry
/// `pod_labels` and are selected by them; the Deployment carries them too.
pub fn agent_deployment(
    name: &str,
    namespace: &str,
    pod_labels: BTreeMap<String, String>,
    replicas: i32,
    pod: PodSpec,
) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            labels: Some(pod_labels.clone()),
            ..meta(name, namespace)
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(pod_labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// A rule granting `verbs` on `resource` of API group `group` (`""` for the core group).
pub fn rule(group: &str, resource: &str, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(vec![resource.to_owned()]),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

/// The group every credential the add-on's agent obtains on `cluster` carries on the hub
/// (`system:open-cluster-management:cluster:<cluster>:addon:<addon>`): the subject of its hub
/// permissions.
pub fn agent_group(cluster: &str, addon: &str) -> Subject {
    Subject {
        kind: "Group".into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        name: format!("system:open-cluster-management:cluster:{cluster}:addon:{addon}"),
        namespace: None,
    }
}

/// Service account `name` in `namespace` as a subject.
pub fn service_account(name: &str, namespace: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        api_group: None,
        name: name.to_owned(),
        namespace: Some(namespace.to_owned()),
    }
}

/// Role `name` in `namespace` with `rules`, and RoleBinding `name` granting it to `subject`.
pub fn role_bound_to(
    name: &str,
    namespace: &str,
    rules: Vec<PolicyRule>,
    subject: Subject,
) -> Result<Vec<Manifest>, AddonError> {
    let role = Role {
        metadata: meta(name, namespace),
        rules: Some(rules),
    };
    let binding = RoleBinding {
        metadata: meta(name, namespace),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: name.to_owned(),
        },
        subjects: Some(vec![subject]),
    };
    Ok(vec![to_manifest(&role)?, to_manifest(&binding)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ServiceAccount;

    #[test]
    fn manifests_carry_api_version_and_kind() {
        let sa = ServiceAccount {
            metadata: meta("agent", "ns"),
            ..ServiceAccount::default()
        };
        let m = to_manifest(&sa).unwrap();
        assert_eq!(m["apiVersion"], "v1");
        assert_eq!(m["kind"], "ServiceAccount");
        assert_eq!(m["metadata"]["namespace"], "ns");
    }

    #[test]
    fn agent_deployments_select_their_own_pods() {
        let d = to_manifest(&agent_deployment(
            "agent",
            "ns",
            labels([("app", "agent")]),
            2,
            PodSpec::default(),
        ))
        .unwrap();
        assert_eq!(d["metadata"]["labels"]["app"], "agent");
        assert_eq!(d["spec"]["replicas"], 2);
        assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "agent");
        assert_eq!(d["spec"]["template"]["metadata"]["labels"]["app"], "agent");
    }
}
