//! Unit tests of the CSR controller's own pieces; the approval rules are tested in
//! `flotilla_core::registration::hub::csr` and end to end in `tests/hub_csr.rs`.

use k8s_openapi::{
    ByteString,
    api::certificates::v1::{
        CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestSpec,
        CertificateSigningRequestStatus,
    },
    jiff::Timestamp,
};

use super::reconcile::{approved_condition, is_settled, renew_review};

fn csr() -> CertificateSigningRequest {
    CertificateSigningRequest {
        spec: CertificateSigningRequestSpec {
            request: ByteString(b"pem".to_vec()),
            signer_name: "kubernetes.io/kube-apiserver-client".into(),
            username: Some("system:open-cluster-management:c1:a1".into()),
            uid: Some("uid-1".into()),
            groups: Some(vec![
                "system:open-cluster-management:c1".into(),
                "system:authenticated".into(),
            ]),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn the_review_asks_about_the_requester_renewing_this_clusters_certificates() {
    let review = renew_review(&csr(), "c1");
    assert_eq!(
        review.spec.user.as_deref(),
        Some("system:open-cluster-management:c1:a1")
    );
    assert_eq!(review.spec.uid.as_deref(), Some("uid-1"));
    assert_eq!(review.spec.groups.as_ref().map(Vec::len), Some(2));
    let attributes = review.spec.resource_attributes.unwrap();
    assert_eq!(
        attributes.group.as_deref(),
        Some("register.open-cluster-management.io")
    );
    assert_eq!(attributes.resource.as_deref(), Some("managedclusters"));
    assert_eq!(attributes.subresource.as_deref(), Some("clientcertificates"));
    assert_eq!(attributes.verb.as_deref(), Some("renew"));
    assert_eq!(attributes.name.as_deref(), Some("c1"));
}

#[test]
fn approval_uses_ocms_reason() {
    let condition = approved_condition(Timestamp::UNIX_EPOCH);
    assert_eq!(condition.type_, "Approved");
    assert_eq!(condition.status, "True");
    assert_eq!(
        condition.reason.as_deref(),
        Some("AutoApprovedByHubCSRApprovingController")
    );
}

#[test]
fn decided_or_issued_csrs_are_settled() {
    let mut pending = csr();
    assert!(!is_settled(&pending));
    pending.status = Some(CertificateSigningRequestStatus {
        conditions: Some(vec![CertificateSigningRequestCondition {
            type_: "Denied".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        certificate: None,
    });
    assert!(is_settled(&pending));
    let mut issued = csr();
    issued.status = Some(CertificateSigningRequestStatus {
        conditions: None,
        certificate: Some(ByteString(b"cert".to_vec())),
    });
    assert!(is_settled(&issued));
}
