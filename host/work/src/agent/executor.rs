//! The executor check: before applying a manifest of a work with `executor.subject`, a
//! SubjectAccessReview on the managed cluster asks whether that service account may write the
//! object (create, update, patch, get, and delete when the work owns it). Denied ⇒ the
//! manifest's `Applied` is False with the reason, retried after the executor retry interval.

use flotilla_api::work::v1::ManifestWorkExecutor;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::{Api, Client, api::PostParams};

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
