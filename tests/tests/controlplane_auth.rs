//! The local control plane authenticates and authorises like a real cluster: x509 client
//! certificates issued through the CSR API work, and RBAC denies what is not granted.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::time::Duration;

use flotilla_testing::{kubeconfig, pki, shared, wait};
use flotilla_tests::status_code;
use k8s_openapi::{
    ByteString,
    api::{
        authentication::v1::SelfSubjectReview,
        certificates::v1::{CertificateSigningRequest, CertificateSigningRequestCondition},
        core::v1::{Namespace, Secret},
        rbac::v1::{Role, RoleBinding},
    },
    apimachinery::pkg::apis::meta::v1::Time,
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

async fn whoami(client: Client) -> (String, Vec<String>) {
    let reviews: Api<SelfSubjectReview> = Api::all(client);
    let review = reviews
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let info = review.status.unwrap().user_info.unwrap();
    (info.username.unwrap_or_default(), info.groups.unwrap_or_default())
}

#[tokio::test]
async fn an_approved_client_csr_is_signed_and_its_certificate_authenticates_as_cn_and_o() {
    let cp = shared("auth").await.unwrap();
    let admin = cp.admin_client().await.unwrap();

    let request = pki::client_request("csr-user", &["csr-group-a", "csr-group-b"]).unwrap();

    let csrs: Api<CertificateSigningRequest> = Api::all(admin.clone());
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": { "name": "csr-user-client" },
        "spec": {
            "request": ByteString(request.cert_pem.into_bytes()),
            "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["digital signature", "client auth"],
            "expirationSeconds": 3600,
        }
    }))
    .unwrap();
    csrs.create(&PostParams::default(), &csr).await.unwrap();

    let approval = json!({ "status": { "conditions": [CertificateSigningRequestCondition {
        type_: "Approved".into(),
        status: "True".into(),
        reason: Some("ApprovedByTest".into()),
        message: Some("approved through the API by the test".into()),
        last_update_time: Some(Time(k8s_openapi::jiff::Timestamp::now())),
        ..Default::default()
    }]}});
    csrs.patch_approval(
        "csr-user-client",
        &PatchParams::default(),
        &Patch::Merge(&approval),
    )
    .await
    .unwrap();

    let certificate = wait::until(
        "CSR signed by kube-controller-manager",
        Duration::from_secs(60),
        || {
            let csrs = csrs.clone();
            async move {
                let csr = csrs.get("csr-user-client").await?;
                Ok::<_, kube::Error>(csr.status.and_then(|s| s.certificate).filter(|c| !c.0.is_empty()))
            }
        },
    )
    .await
    .unwrap();

    let cert_pem = String::from_utf8(certificate.0).unwrap();
    let yaml = kubeconfig::render(
        cp.name(),
        cp.server(),
        cp.ca_pem(),
        "csr-user",
        &cert_pem,
        &request.key_pem,
    )
    .unwrap();
    let client = kubeconfig::client_from_yaml(&yaml).await.unwrap();
    let (user, groups) = whoami(client).await;
    assert_eq!(user, "csr-user");
    assert!(groups.contains(&"csr-group-a".to_owned()), "{groups:?}");
    assert!(groups.contains(&"csr-group-b".to_owned()), "{groups:?}");
    assert!(groups.contains(&"system:authenticated".to_owned()), "{groups:?}");
}

#[tokio::test]
async fn harness_issued_client_certificates_authenticate_as_the_requested_user_and_groups() {
    let cp = shared("auth").await.unwrap();
    let (user, groups) = whoami(cp.client_for("hub-admin-1", &["team-x"]).await.unwrap()).await;
    assert_eq!(user, "hub-admin-1");
    assert!(groups.contains(&"team-x".to_owned()));
}

#[tokio::test]
async fn rbac_denies_a_user_without_bindings_and_allows_only_what_is_bound() {
    let cp = shared("auth").await.unwrap();
    let admin = cp.admin_client().await.unwrap();

    let namespaces: Api<Namespace> = Api::all(admin.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap(),
        )
        .await
        .unwrap();
    let role: Role = serde_json::from_value(json!({
        "metadata": { "name": "secret-reader", "namespace": "team-a" },
        "rules": [{ "apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"] }]
    }))
    .unwrap();
    Api::<Role>::namespaced(admin.clone(), "team-a")
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "alice-reads-secrets", "namespace": "team-a" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "secret-reader" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice" }]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin, "team-a")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    let mallory = cp.client_for("mallory", &["intruders"]).await.unwrap();
    let stolen = Api::<Secret>::namespaced(mallory.clone(), "team-a")
        .list(&ListParams::default())
        .await;
    assert_eq!(
        status_code(&stolen),
        Some(403),
        "a user without bindings must get 403"
    );
    let stolen = Api::<Secret>::namespaced(mallory, "kube-system")
        .list(&ListParams::default())
        .await;
    assert_eq!(status_code(&stolen), Some(403));

    let alice = cp.client_for("alice", &["team-a-members"]).await.unwrap();
    // RBAC propagation is immediate for new bindings, but the authorizer cache may lag briefly.
    wait::until("alice may list team-a secrets", Duration::from_secs(30), || {
        let alice = alice.clone();
        async move {
            Api::<Secret>::namespaced(alice, "team-a")
                .list(&ListParams::default())
                .await
                .map(Some)
        }
    })
    .await
    .unwrap();
    let elsewhere = Api::<Secret>::namespaced(alice, "kube-system")
        .list(&ListParams::default())
        .await;
    assert_eq!(
        status_code(&elsewhere),
        Some(403),
        "a binding in team-a grants nothing elsewhere"
    );
}
