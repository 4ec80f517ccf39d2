//! The hub's admission of ManifestWorks, enforced by the real apiserver: the CEL admission
//! policy (no manifests, a manifest without a name, two identical resources, an executor the
//! requester may not use) and the hub's HTTPS webhook for the 500 KiB size limit, which CEL
//! cannot measure. Each refusal carries a message a person can act on.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use crate::agent_support;

use std::time::Duration;

use agent_support::*;
use flotilla_api::work::v1::{
    ManifestWork, ManifestWorkExecutor, ManifestWorkExecutorSubject, ManifestWorkSubjectServiceAccount,
};
use flotilla_testing::wait;
use k8s_openapi::api::{
    admissionregistration::v1::ValidatingWebhookConfiguration,
    rbac::v1::{Role, RoleBinding},
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

fn config_map(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name, "namespace": namespace },
        "data": { "k": "v" },
    })
}

async fn refused(api: &Api<ManifestWork>, work: &ManifestWork, hint: &str) {
    // The policy takes effect a moment after it is installed: retry until it refuses.
    let message = wait::until("refused at admission", Duration::from_secs(30), || async {
        match api.create(&PostParams::default(), work).await {
            // Accepted by an earlier try that could not delete it: admission runs before
            // storage, so once the policy is in effect the refusal comes first.
            Err(kube::Error::Api(status)) if status.code == 409 => Err(status.message),
            Err(kube::Error::Api(status)) => Ok(Some(status.message)),
            Err(other) => Err(other.to_string()),
            Ok(created) => {
                let _ = api
                    .delete(&created.metadata.name.unwrap_or_default(), &Default::default())
                    .await;
                Err("accepted".to_owned())
            }
        }
    })
    .await
    .unwrap();
    assert!(message.contains(hint), "{message}");
}

/// The shared hub, an admin client and a webhook server of this test's own on loopback.
async fn hub_with_webhook() -> (
    &'static flotilla_testing::ControlPlane,
    kube::Client,
    flotilla_webhook::Webhook,
) {
    init_tracing();
    let hub = flotilla_testing::shared("work-admission-hub").await.unwrap();
    let admin = hub.admin_client().await.unwrap();
    let webhook = flotilla_webhook::serve_on_loopback().await.unwrap();
    (hub, admin, webhook)
}

#[tokio::test]
async fn malformed_works_are_refused_at_admission_with_a_clear_message() {
    init_tracing();
    let hub = flotilla_testing::shared("work-admission-hub").await.unwrap();
    let admin = hub.admin_client().await.unwrap();
    flotilla_work::admission::install(&admin).await.unwrap();
    namespace(&admin, "admission-works").await;
    let api: Api<ManifestWork> = Api::namespaced(admin, "admission-works");

    refused(&api, &work("empty", vec![]), "at least one manifest").await;
    refused(
        &api,
        &work(
            "nameless",
            vec![json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "namespace": "x" } })],
        ),
        "needs metadata.name",
    )
    .await;
    refused(
        &api,
        &work("twice", vec![config_map("x", "same"), config_map("x", "same")]),
        "ConfigMap x/same",
    )
    .await;
    let mut with_executor = work("executor", vec![config_map("x", "a")]);
    with_executor.spec.executor = Some(ManifestWorkExecutor {
        subject: ManifestWorkExecutorSubject {
            service_account: Some(ManifestWorkSubjectServiceAccount {
                namespace: "x".into(),
                name: "sa".into(),
            }),
            ..Default::default()
        },
    });
    // The intruder may create works in the namespace, but not use an executor.
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": { "name": "work-writer", "namespace": "admission-works" },
        "rules": [{ "apiGroups": ["work.open-cluster-management.io"], "resources": ["manifestworks"],
                    "verbs": ["create", "delete", "get"] }],
    });
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": { "name": "work-writer", "namespace": "admission-works" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "work-writer" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "intruder" }],
    });
    let admin = hub.admin_client().await.unwrap();
    let apply = PatchParams::apply("work-test").force();
    Api::<Role>::namespaced(admin.clone(), "admission-works")
        .patch("work-writer", &apply, &Patch::Apply(&role))
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(admin, "admission-works")
        .patch("work-writer", &apply, &Patch::Apply(&binding))
        .await
        .unwrap();
    let intruder = hub.client_for("intruder", &[]).await.unwrap();
    let intruder_api: Api<ManifestWork> = Api::namespaced(intruder, "admission-works");
    refused(&intruder_api, &with_executor, "execute-as").await;
    // A good work is accepted.
    api.create(&PostParams::default(), &work("fine", vec![config_map("x", "a")]))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_work_over_500_kib_is_refused_by_the_hub_s_webhook() {
    let (_, admin, webhook) = hub_with_webhook().await;
    let url = format!("https://{}{}", webhook.addr, flotilla_webhook::VALIDATE_PATH);
    flotilla_webhook::register(&admin, &url, &webhook.ca_pem)
        .await
        .unwrap();
    namespace(&admin, "size-works").await;
    let api: Api<ManifestWork> = Api::namespaced(admin.clone(), "size-works");

    let mut big = config_map("x", "big");
    big["data"]["blob"] = json!("x".repeat(600 * 1024));
    refused(&api, &work("too-big", vec![big]), "500 KiB").await;
    api.create(
        &PostParams::default(),
        &work("small", vec![config_map("x", "small")]),
    )
    .await
    .unwrap();

    Api::<ValidatingWebhookConfiguration>::all(admin)
        .delete(flotilla_webhook::CONFIGURATION_NAME, &DeleteParams::default())
        .await
        .unwrap();
}

/// Grants `user` the `verbs` on ManifestWorks in `namespace` (and, with `executor`, the verb
/// `execute-as` on the ManifestWork named after that service account user, as OCM's review asks).
async fn grant_works(
    admin: &kube::Client,
    namespace: &str,
    user: &str,
    verbs: &[&str],
    executor: Option<&str>,
) {
    let mut rules = vec![json!({ "apiGroups": ["work.open-cluster-management.io"],
                                 "resources": ["manifestworks"], "verbs": verbs })];
    if let Some(executor) = executor {
        rules.push(
            json!({ "apiGroups": ["work.open-cluster-management.io"], "resources": ["manifestworks"],
                           "resourceNames": [executor], "verbs": ["execute-as"] }),
        );
    }
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": { "name": user, "namespace": namespace }, "rules": rules,
    });
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": { "name": user, "namespace": namespace },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
    });
    let apply = PatchParams::apply("work-test").force();
    Api::<Role>::namespaced(admin.clone(), namespace)
        .patch(user, &apply, &Patch::Apply(&role))
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .patch(user, &apply, &Patch::Apply(&binding))
        .await
        .unwrap();
}

/// A work's executor acts on whatever its spec says, so whoever changes the spec must be allowed
/// to act as the executor — even when the executor itself is left as it was (OCM checks only a
/// changed executor). Labels and annotations stay free to anyone who may update the work.
#[tokio::test]
async fn changing_the_manifests_of_a_work_needs_execute_as_for_its_unchanged_executor() {
    init_tracing();
    let hub = flotilla_testing::shared("work-admission-hub").await.unwrap();
    let admin = hub.admin_client().await.unwrap();
    flotilla_work::admission::install(&admin).await.unwrap();
    let ns = "admission-executor-update";
    namespace(&admin, ns).await;
    let executor = "system:serviceaccount:x:deployer";
    // The owner may use the executor; the editor may only read and update works.
    grant_works(&admin, ns, "owner", &["create", "get", "update"], Some(executor)).await;
    grant_works(&admin, ns, "editor", &["create", "get", "update"], None).await;
    let owner: Api<ManifestWork> = Api::namespaced(hub.client_for("owner", &[]).await.unwrap(), ns);
    let editor: Api<ManifestWork> = Api::namespaced(hub.client_for("editor", &[]).await.unwrap(), ns);

    let mut with_executor = work("deployed", vec![config_map("x", "a")]);
    with_executor.spec.executor = Some(ManifestWorkExecutor {
        subject: ManifestWorkExecutorSubject {
            service_account: Some(ManifestWorkSubjectServiceAccount {
                namespace: "x".into(),
                name: "deployer".into(),
            }),
            ..Default::default()
        },
    });
    // The policy is in effect once the editor's own work with that executor is refused.
    let mut probe = with_executor.clone();
    probe.metadata.name = Some("probe".into());
    refused(&editor, &probe, "execute-as").await;
    owner
        .create(&PostParams::default(), &with_executor)
        .await
        .unwrap();

    // New manifests under the same executor: refused for the editor, naming the rule.
    let mut rewritten = editor.get("deployed").await.unwrap();
    rewritten.spec.workload.manifests[0].0["data"]["k"] = json!("rewritten");
    match editor
        .replace("deployed", &PostParams::default(), &rewritten)
        .await
    {
        Err(kube::Error::Api(status)) => assert!(
            status.message.contains("execute-as") && status.message.contains(executor),
            "{}",
            status.message
        ),
        other => panic!("the editor rewrote the manifests of a work it may not execute: {other:?}"),
    }
    // Any other spec change is the executor's to act on too.
    let mut orphaning = editor.get("deployed").await.unwrap();
    orphaning.spec.delete_option = serde_json::from_value(json!({ "propagationPolicy": "Orphan" })).unwrap();
    assert!(
        editor
            .replace("deployed", &PostParams::default(), &orphaning)
            .await
            .is_err(),
        "the editor changed the delete option of a work it may not execute"
    );

    // Labels and annotations: allowed.
    let mut labelled = editor.get("deployed").await.unwrap();
    labelled.labels_mut().insert("team".into(), "a".into());
    labelled.annotations_mut().insert("note".into(), "b".into());
    editor
        .replace("deployed", &PostParams::default(), &labelled)
        .await
        .unwrap();

    // The owner may change the manifests.
    let mut owned = owner.get("deployed").await.unwrap();
    owned.spec.workload.manifests[0].0["data"]["k"] = json!("changed by the owner");
    owner
        .replace("deployed", &PostParams::default(), &owned)
        .await
        .unwrap();
}
