//! Validation of ManifestWorks on the hub, enforced by the real apiserver: the CEL admission
//! policy (no manifests, a manifest without a name, two identical resources, an executor the
//! requester may not use) and the HTTPS webhook for the 500 KiB size limit, which CEL cannot
//! measure. Each refusal carries a message a person can act on.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

mod agent_support;

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
    Api,
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
    init_tracing();
    let hub = flotilla_testing::shared("work-admission-hub").await.unwrap();
    let admin = hub.admin_client().await.unwrap();
    let certificate = flotilla_work::webhook::ServingCertificate::issue(&["127.0.0.1".to_owned()]).unwrap();
    let webhook = flotilla_work::webhook::serve("127.0.0.1:0".parse().unwrap(), &certificate)
        .await
        .unwrap();
    let url = format!(
        "https://{}{}",
        webhook.addr,
        flotilla_work::webhook::VALIDATE_PATH
    );
    flotilla_work::webhook::register(&admin, &url, &webhook.ca_pem)
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
        .delete(
            flotilla_work::webhook::CONFIGURATION_NAME,
            &DeleteParams::default(),
        )
        .await
        .unwrap();
}
