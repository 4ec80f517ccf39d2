//! The executor check: before applying a manifest of a work with `executor.subject`, a
//! SubjectAccessReview on the managed cluster asks whether that service account may write the
//! object (create, update, patch, get, and delete when the work owns it). A review cannot see
//! RBAC's escalation rule (a Role may only grant what its writer holds), so Roles, ClusterRoles
//! and their bindings are also created in a dry run as the executor. Denied ⇒ the manifest's
//! `Applied` is False with the reason, retried after the executor retry interval.

use flotilla_api::work::v1::ManifestWorkExecutor;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::{
    Api, Client, Resource as _,
    api::{ApiResource, DynamicObject, PostParams},
};

/// The user name of the executor, if the work names one.
pub fn executor_user(executor: Option<&ManifestWorkExecutor>) -> Option<String> {
    let sa = executor?.subject.service_account.as_ref()?;
    Some(format!("system:serviceaccount:{}:{}", sa.namespace, sa.name))
}

/// `Ok(())` when `user` may write the object, else why not.
pub async fn check(
    client: &Client,
    user: &str,
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
    owned: bool,
) -> Result<(), String> {
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let mut verbs = vec!["create", "update", "patch", "get"];
    if owned {
        verbs.push("delete");
    }
    let mut groups = vec!["system:serviceaccounts".to_owned()];
    if let Some(ns) = user
        .strip_prefix("system:serviceaccount:")
        .and_then(|r| r.split(':').next())
    {
        groups.push(format!("system:serviceaccounts:{ns}"));
    }
    for verb in verbs {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.to_owned()),
                groups: Some(groups.clone()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(group.to_owned()),
                    resource: Some(resource.to_owned()),
                    namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
                    name: Some(name.to_owned()),
                    verb: Some(verb.to_owned()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| format!("could not check the executor's permissions: {e}"))?;
        if !answer.status.is_some_and(|s| s.allowed) {
            let target = if namespace.is_empty() {
                format!("{resource} {name}")
            } else {
                format!("{resource} {namespace}/{name}")
            };
            return Err(format!(
                "executor {user} is not allowed to {verb} {target}; grant it with RBAC on the managed cluster"
            ));
        }
    }
    Ok(())
}

/// Whether writes of `group`/`resource` pass RBAC's escalation check, which only a write shows.
pub fn escalation_checked(group: &str, resource: &str) -> bool {
    group == "rbac.authorization.k8s.io"
        && matches!(
            resource,
            "roles" | "rolebindings" | "clusterroles" | "clusterrolebindings"
        )
}

/// `Ok(())` when `user` may write `object` (of `resource`, in `namespace` or cluster-wide)
/// without escalating its privileges: a dry-run create as that user. An existing object is
/// fine: the apiserver checks escalation before it checks existence.
pub async fn check_escalation(
    client: &Client,
    user: &str,
    resource: &ApiResource,
    namespace: &str,
    object: &serde_json::Value,
) -> Result<(), String> {
    let name = object
        .pointer("/metadata/name")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    let target = if namespace.is_empty() {
        format!("{} {name}", resource.plural)
    } else {
        format!("{} {namespace}/{name}", resource.plural)
    };
    let body = serde_json::to_vec(object).map_err(|e| format!("encode {target}: {e}"))?;
    let url = DynamicObject::url_path(resource, (!namespace.is_empty()).then_some(namespace));
    let params = PostParams {
        dry_run: true,
        field_manager: None,
    };
    let mut request = kube::core::Request::new(url)
        .create(&params, body)
        .map_err(|e| format!("build the dry run of {target}: {e}"))?;
    // Impersonating a service account's user name gives it the service-account groups too.
    let header = hyper::header::HeaderValue::from_str(user).map_err(|e| format!("executor {user}: {e}"))?;
    request.headers_mut().insert("Impersonate-User", header);
    match client.request::<DynamicObject>(request).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 403 => Err(format!(
            "executor {user} is not allowed to write {target}: permission escalation ({}); \
             grant the executor what the object grants",
            status.message
        )),
        Err(error) => Err(format!(
            "could not check the executor's permissions on {target}: {error}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case("rbac.authorization.k8s.io", "roles", true)]
    #[case("rbac.authorization.k8s.io", "rolebindings", true)]
    #[case("rbac.authorization.k8s.io", "clusterroles", true)]
    #[case("rbac.authorization.k8s.io", "clusterrolebindings", true)]
    #[case("rbac.authorization.k8s.io", "roles/status", false)]
    #[case("", "configmaps", false)]
    #[case("example.com", "roles", false)]
    fn only_rbac_objects_get_the_escalation_dry_run(
        #[case] group: &str,
        #[case] resource: &str,
        #[case] checked: bool,
    ) {
        assert_eq!(escalation_checked(group, resource), checked);
    }
}
