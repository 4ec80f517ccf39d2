//! Admission rules of ManifestWork on the hub, enforced by the apiserver itself through a
//! ValidatingAdmissionPolicy (CEL), so no webhook server has to be reachable for them (OCM's
//! work webhook rules, ocm-reference §1):
//!
//! | rule | message |
//! |---|---|
//! | at least one manifest | `spec.workload.manifests` must hold at least one manifest |
//! | every manifest has `metadata.name`, no `generateName` | names the ordinal |
//! | no two manifests with the same apiVersion, kind, namespace and name | names the object |
//! | a work with an `executor`, created or with a changed `spec`, needs `execute-as` on `manifestworks` for `system:serviceaccount:<ns>:<name>` | names the user |
//!
//! The executor rule is stricter than OCM's webhook, which skips the check when an update
//! leaves the executor as it was: there, anyone with plain `update` on ManifestWorks could
//! rewrite the manifests (or delete option, or manifest configs) that a service account they
//! may not impersonate then applies. Flotilla checks every create and every update that changes
//! anything in `spec`, since the executor acts on all of it; updates of metadata alone (labels,
//! annotations, finalizers) and of status are not checked, as they change nothing the executor
//! does.
//!
//! The 500 KiB limit on the manifests' total size is not expressible in CEL (it cannot
//! measure an object's encoded size); see the report of this change for its status.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use serde_json::json;

/// Name of the policy and of its binding.
pub const POLICY_NAME: &str = "flotilla.dev-manifestwork-validation";

/// Applies the policy and its binding (server-side, field manager `flotilla`).
pub async fn install(client: &kube::Client) -> Result<(), flotilla_kube::Error> {
    let (policy, binding) = policy();
    let policy_api: kube::Api<ValidatingAdmissionPolicy> = kube::Api::all(client.clone());
    let binding_api: kube::Api<ValidatingAdmissionPolicyBinding> = kube::Api::all(client.clone());
    flotilla_kube::apply::apply(&policy_api, &policy).await?;
    flotilla_kube::apply::apply(&binding_api, &binding).await?;
    Ok(())
}

/// The JSON below is written by hand in this file and covered by tests, so decoding it cannot
/// fail at run time; an empty object is returned rather than panicking if it ever did.
fn decode<T: serde::de::DeserializeOwned + Default>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap_or_default()
}

/// The policy and its binding, ready to apply.
pub fn policy() -> (ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding) {
    let ns = |m: &str| format!("(has({m}.metadata.namespace) ? {m}.metadata.namespace : '')");
    let same = format!(
        "n.apiVersion == m.apiVersion && n.kind == m.kind && {} == {} && n.metadata.name == m.metadata.name",
        ns("n"),
        ns("m")
    );
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": { "name": POLICY_NAME },
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": { "resourceRules": [{
                "apiGroups": ["work.open-cluster-management.io"],
                "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["manifestworks"],
            }]},
            "variables": [
                { "name": "manifests", "expression":
                    "has(object.spec.workload) && has(object.spec.workload.manifests) ? object.spec.workload.manifests : []" },
                { "name": "executorUser", "expression":
                    "has(object.spec.executor) && has(object.spec.executor.subject) && \
                     has(object.spec.executor.subject.serviceAccount) ? 'system:serviceaccount:' + \
                     object.spec.executor.subject.serviceAccount.namespace + ':' + \
                     object.spec.executor.subject.serviceAccount.name : ''" },
                // An update that leaves `spec` as it was changes nothing the executor does.
                { "name": "specUnchanged", "expression":
                    "oldObject != null && has(object.spec) && has(oldObject.spec) && object.spec == oldObject.spec" },
            ],
            "validations": [
                {
                    "expression": "size(variables.manifests) > 0",
                    "message": "spec.workload.manifests must hold at least one manifest",
                    "reason": "Invalid",
                },
                {
                    "expression": "variables.manifests.all(m, has(m.metadata) && has(m.metadata.name) && m.metadata.name != '')",
                    "messageExpression": "'every manifest needs metadata.name; missing in manifest ' + \
                        string(variables.manifests.map(m, !(has(m.metadata) && has(m.metadata.name) && m.metadata.name != '')).indexOf(true))",
                    "reason": "Invalid",
                },
                {
                    "expression": "variables.manifests.all(m, !has(m.metadata) || !has(m.metadata.generateName) || m.metadata.generateName == '')",
                    "message": "manifests may not use metadata.generateName: give each a fixed metadata.name",
                    "reason": "Invalid",
                },
                {
                    "expression": format!("variables.manifests.all(m, variables.manifests.exists_one(n, {same}))"),
                    "messageExpression": format!("'two manifests describe the same object: ' + \
                        variables.manifests.filter(m, !variables.manifests.exists_one(n, {same}))\
                        .map(m, m.kind + ' ' + {} + '/' + m.metadata.name)[0] + '; keep one of them'", ns("m")),
                    "reason": "Invalid",
                },
                {
                    "expression": "variables.executorUser == '' || variables.specUnchanged || \
                        authorizer.group('work.open-cluster-management.io').resource('manifestworks')\
                        .namespace(object.metadata.namespace).name(variables.executorUser).check('execute-as').allowed()",
                    "messageExpression": "'user ' + request.userInfo.username + ' may not use executor ' + \
                        variables.executorUser + ': it needs the verb execute-as on manifestworks \
                        (work.open-cluster-management.io) named ' + variables.executorUser + ' in namespace ' + \
                        object.metadata.namespace",
                    "reason": "Forbidden",
                },
            ],
        }
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": { "name": POLICY_NAME },
        "spec": { "policyName": POLICY_NAME, "validationActions": ["Deny"] }
    });
    (decode(policy), decode(binding))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_decodes_with_every_rule_and_a_deny_binding() {
        let (policy, binding) = policy();
        assert_eq!(policy.metadata.name.as_deref(), Some(POLICY_NAME));
        assert_eq!(policy.spec.unwrap().validations.unwrap_or_default().len(), 5);
        let binding = binding.spec.unwrap();
        assert_eq!(binding.policy_name.as_deref(), Some(POLICY_NAME));
        assert_eq!(binding.validation_actions, Some(vec!["Deny".to_owned()]));
    }
}
