//! Admission rules of registration, enforced by the apiserver itself through
//! ValidatingAdmissionPolicies (CEL), so no webhook server has to be reachable for them:
//!
//! | policy | rule (OCM's webhook behaviour) |
//! |---|---|
//! | `managedcluster-validation` | name is a namespace name and not a reserved one (see below); client URLs are https; turning `hubAcceptsClient` on needs `update` on `managedclusters/accept`; changing the cluster-set label needs `create` on `managedclustersets/join` for the old and the new set |
//! | `managedcluster-taints` | only the hub sets `timeAdded`: others may add taints without it and may keep an existing taint's value, nothing else |
//! | `managedclustersetbinding-validation` | name equals `spec.clusterSet`; binding needs `create` on `managedclustersets/bind` |
//!
//! Reserved cluster names (Flotilla's own rule; the hub controllers also refuse to act on them
//! when admission was bypassed): `default`, `kube-*` and `open-cluster-management*`, whose
//! namespaces belong to Kubernetes or the hub, and `registration` and `work`, whose ClusterRole
//! would be a hub-wide role. The list is derived from the names the hub's RBAC uses.
//!
//! The permission checks use CEL's `authorizer`, which asks the apiserver's own authorizer —
//! the same answer a SubjectAccessReview gives. The hub's identity (`system:masters`, or the
//! hub's service account) is exempt from the taint rule because it is the one that stamps
//! `timeAdded`.

use flotilla_core::registration::hub::acceptance;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use serde_json::json;

/// The hub's service account when it runs in the hub cluster.
pub const HUB_SERVICE_ACCOUNT_USER: &str = "system:serviceaccount:open-cluster-management-hub:flotilla-hub";

/// Applies every policy and binding (server-side, field manager `flotilla`).
pub async fn install(client: &kube::Client) -> Result<(), flotilla_kube::Error> {
    let policy_api: kube::Api<ValidatingAdmissionPolicy> = kube::Api::all(client.clone());
    let binding_api: kube::Api<ValidatingAdmissionPolicyBinding> = kube::Api::all(client.clone());
    for (policy, binding) in policies() {
        flotilla_kube::apply::apply(&policy_api, &policy).await?;
        flotilla_kube::apply::apply(&binding_api, &binding).await?;
    }
    Ok(())
}

/// Name prefix of every policy and binding Flotilla installs.
const PREFIX: &str = "flotilla.dev";

/// The policies and their bindings, ready to apply.
pub fn policies() -> Vec<(ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding)> {
    vec![
        with_binding(managed_cluster_validation()),
        with_binding(managed_cluster_taints()),
        with_binding(cluster_set_binding_validation()),
    ]
}

fn with_binding(policy: serde_json::Value) -> (ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding) {
    let name = policy["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": { "name": name },
        "spec": { "policyName": name, "validationActions": ["Deny"] }
    });
    (decode(policy), decode(binding))
}

/// The JSON below is written by hand in this file and covered by tests, so decoding it cannot
/// fail at run time; an empty object is returned rather than panicking if it ever did.
fn decode<T: serde::de::DeserializeOwned + Default>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap_or_default()
}

fn rules(resource: &str) -> serde_json::Value {
    json!({ "resourceRules": [{
        "apiGroups": ["cluster.open-cluster-management.io"],
        "apiVersions": ["*"],
        "operations": ["CREATE", "UPDATE"],
        "resources": [resource],
    }]})
}

fn managed_cluster_validation() -> serde_json::Value {
    let set_of = |object: &str| {
        format!(
            "{object} != null && has({object}.metadata.labels) && \
             'cluster.open-cluster-management.io/clusterset' in {object}.metadata.labels \
             ? {object}.metadata.labels['cluster.open-cluster-management.io/clusterset'] : ''"
        )
    };
    let may_join = |set: &str| {
        format!(
            "{set} == '' || authorizer.group('cluster.open-cluster-management.io').resource('managedclustersets')\
             .subresource('join').name({set}).check('create').allowed()"
        )
    };
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": { "name": format!("{PREFIX}-managedcluster-validation") },
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": rules("managedclusters"),
            "variables": [
                { "name": "newSet", "expression": set_of("object") },
                { "name": "oldSet", "expression": set_of("oldObject") },
                { "name": "wasAccepted", "expression":
                    "oldObject != null && has(oldObject.spec.hubAcceptsClient) && oldObject.spec.hubAcceptsClient" },
                { "name": "isAccepted", "expression":
                    "has(object.spec.hubAcceptsClient) && object.spec.hubAcceptsClient" },
            ],
            "validations": [
                {
                    "expression": "request.operation != 'CREATE' || (size(object.metadata.name) <= 63 && \
                        object.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))",
                    "messageExpression": "'metadata.name ' + object.metadata.name + ' is not a valid namespace name: \
                        use at most 63 lower-case letters, digits and \\'-\\', starting and ending with a letter or digit'",
                    "reason": "Invalid",
                },
                {
                    "expression": reserved_name_rule(),
                    "messageExpression": format!("'metadata.name ' + object.metadata.name + ' is reserved: \
                        clusters may not be named {}, or after a namespace of Kubernetes or of the hub \
                        (default, kube-*, open-cluster-management*)'", reserved_for_message()),
                    "reason": "Invalid",
                },
                {
                    "expression": "!has(object.spec.managedClusterClientConfigs) || \
                        object.spec.managedClusterClientConfigs.all(c, !has(c.url) || c.url.startsWith('https://'))",
                    "message": "spec.managedClusterClientConfigs[].url must use https://",
                    "reason": "Invalid",
                },
                {
                    "expression": "!variables.isAccepted || variables.wasAccepted || \
                        authorizer.group('register.open-cluster-management.io').resource('managedclusters')\
                        .subresource('accept').name(object.metadata.name).check('update').allowed()",
                    "messageExpression": "'user ' + request.userInfo.username + ' cannot accept cluster ' + \
                        object.metadata.name + ': it needs update on managedclusters/accept in \
                        register.open-cluster-management.io'",
                    "reason": "Forbidden",
                },
                {
                    "expression": format!("variables.newSet == variables.oldSet || (({}) && ({}))",
                        may_join("variables.newSet"), may_join("variables.oldSet")),
                    "messageExpression": "'user ' + request.userInfo.username + ' cannot move cluster ' + \
                        object.metadata.name + ' from cluster set \"' + variables.oldSet + '\" to \"' + variables.newSet + \
                        '\": it needs create on managedclustersets/join for both sets'",
                    "reason": "Forbidden",
                },
            ],
        }
    })
}

/// CEL refusing, on create, every name [`crate::names::validate_cluster_name`] refuses.
fn reserved_name_rule() -> String {
    let mut names: Vec<String> = acceptance::PROTECTED_NAMESPACES.map(str::to_owned).to_vec();
    names.extend(crate::names::hub_role_cluster_names());
    let list = |items: &[String]| serde_json::to_string(items).unwrap_or_default();
    let prefixes: Vec<String> = acceptance::PROTECTED_NAMESPACE_PREFIXES
        .map(str::to_owned)
        .to_vec();
    format!(
        "request.operation != 'CREATE' || !(object.metadata.name in {} || {}.exists(p, object.metadata.name.startsWith(p)))",
        list(&names),
        list(&prefixes)
    )
}

/// The hub-role names, for the refusal message.
fn reserved_for_message() -> String {
    crate::names::hub_role_cluster_names().join(" or ")
}

fn managed_cluster_taints() -> serde_json::Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": { "name": format!("{PREFIX}-managedcluster-taints") },
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": rules("managedclusters"),
            "matchConditions": [{
                "name": "not-the-hub",
                "expression": format!(
                    "!('system:masters' in request.userInfo.groups) && request.userInfo.username != '{HUB_SERVICE_ACCOUNT_USER}'"
                ),
            }],
            "validations": [{
                "expression": "!has(object.spec.taints) || object.spec.taints.all(t, !has(t.timeAdded) || \
                    (oldObject != null && has(oldObject.spec.taints) && oldObject.spec.taints.exists(o, \
                    o.key == t.key && o.effect == t.effect && has(o.timeAdded) && o.timeAdded == t.timeAdded)))",
                "message": "spec.taints[].timeAdded is set by the hub: leave it empty on new taints and unchanged on existing ones",
                "reason": "Forbidden",
            }],
        }
    })
}

fn cluster_set_binding_validation() -> serde_json::Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": { "name": format!("{PREFIX}-managedclustersetbinding-validation") },
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": rules("managedclustersetbindings"),
            "validations": [
                {
                    "expression": "object.metadata.name == object.spec.clusterSet",
                    "messageExpression": "'metadata.name must equal spec.clusterSet (\"' + object.spec.clusterSet + '\")'",
                    "reason": "Invalid",
                },
                {
                    "expression": "authorizer.group('cluster.open-cluster-management.io').resource('managedclustersets')\
                        .subresource('bind').name(object.spec.clusterSet).check('create').allowed()",
                    "messageExpression": "'user ' + request.userInfo.username + ' cannot bind cluster set ' + \
                        object.spec.clusterSet + ': it needs create on managedclustersets/bind'",
                    "reason": "Forbidden",
                },
            ],
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserved_name_rule_lists_every_reserved_name() {
        let rule = reserved_name_rule();
        for needle in [
            "\"default\"",
            "\"registration\"",
            "\"work\"",
            "\"kube-\"",
            "\"open-cluster-management\"",
        ] {
            assert!(rule.contains(needle), "{needle} missing from {rule}");
        }
    }

    #[test]
    fn every_policy_decodes_and_has_a_binding_of_the_same_name() {
        let all = policies();
        assert_eq!(all.len(), 3);
        for (policy, binding) in all {
            let name = policy.metadata.name.clone().unwrap();
            assert!(name.starts_with("flotilla.dev-"), "{name}");
            let spec = policy.spec.unwrap();
            assert!(
                !spec.validations.unwrap_or_default().is_empty(),
                "{name} has no validations"
            );
            let binding_spec = binding.spec.unwrap();
            assert_eq!(binding_spec.policy_name.as_deref(), Some(name.as_str()));
            assert_eq!(binding_spec.validation_actions, Some(vec!["Deny".to_owned()]));
        }
    }
}
