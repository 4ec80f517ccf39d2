//! The cluster's certificate signing requests as the agent sees them: whether it may ask for
//! another (not while 10 of the cluster's CSRs exist, so a stuck agent cannot flood the hub),
//! and what the hub answered.

use std::collections::BTreeMap;

use k8s_openapi::api::certificates::v1::CertificateSigningRequestStatus;

/// No new CSR while this many of the cluster's (non-add-on) CSRs exist.
pub const CLUSTER_CSR_THRESHOLD: usize = 10;
/// Key usages of a cluster client certificate, in OCM's order.
pub const CLIENT_USAGES: [&str; 3] = ["digital signature", "key encipherment", "client auth"];

/// Whether a CSR with these labels counts towards the cluster's limit: it carries the
/// cluster-name label with `cluster` and no add-on label.
pub fn counts_for_cluster(
    labels: &BTreeMap<String, String>,
    cluster_label: &str,
    addon_label: &str,
    cluster: &str,
) -> bool {
    labels.get(cluster_label).is_some_and(|v| v == cluster) && !labels.contains_key(addon_label)
}

/// Whether another CSR may be created while `existing` of the cluster's CSRs exist.
pub fn may_create(existing: usize) -> bool {
    existing < CLUSTER_CSR_THRESHOLD
}

/// What became of a CSR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CsrState {
    /// Neither approved nor denied yet.
    Pending,
    /// Approved; the signer has not issued the certificate yet.
    Approved,
    /// Approved and issued: the PEM certificate.
    Issued(Vec<u8>),
    /// Denied by the hub (terminal).
    Denied {
        /// The condition's reason.
        reason: String,
        /// The condition's message.
        message: String,
    },
    /// The signer failed to issue it (terminal).
    Failed {
        /// The condition's reason.
        reason: String,
        /// The condition's message.
        message: String,
    },
}

impl CsrState {
    /// Whether the CSR will never yield a certificate.
    pub fn is_terminal_failure(&self) -> bool {
        matches!(self, Self::Denied { .. } | Self::Failed { .. })
    }
}

/// Reads a CSR's status: a `Denied` or `Failed` condition with status `True` wins, then an
/// issued certificate of an approved request, then approval alone.
pub fn state(status: Option<&CertificateSigningRequestStatus>) -> CsrState {
    let Some(status) = status else {
        return CsrState::Pending;
    };
    let conditions = status.conditions.as_deref().unwrap_or_default();
    let holds = |type_: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
            .map(|c| {
                (
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                )
            })
    };
    if let Some((reason, message)) = holds("Denied") {
        return CsrState::Denied { reason, message };
    }
    if let Some((reason, message)) = holds("Failed") {
        return CsrState::Failed { reason, message };
    }
    if holds("Approved").is_none() {
        return CsrState::Pending;
    }
    match &status.certificate {
        Some(certificate) if !certificate.0.is_empty() => CsrState::Issued(certificate.0.clone()),
        _ => CsrState::Approved,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{ByteString, api::certificates::v1::CertificateSigningRequestCondition};

    use super::*;

    const CLUSTER: &str = "open-cluster-management.io/cluster-name";
    const ADDON: &str = "open-cluster-management.io/addon-name";

    fn condition(type_: &str, status: &str) -> CertificateSigningRequestCondition {
        CertificateSigningRequestCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some(format!("{type_}ByTest")),
            message: Some("because".into()),
            ..Default::default()
        }
    }

    fn status(conditions: &[(&str, &str)], certificate: &[u8]) -> CertificateSigningRequestStatus {
        CertificateSigningRequestStatus {
            conditions: Some(conditions.iter().map(|(t, s)| condition(t, s)).collect()),
            certificate: (!certificate.is_empty()).then(|| ByteString(certificate.to_vec())),
        }
    }

    #[test]
    fn ten_csrs_stop_the_agent_from_asking_again() {
        assert!(may_create(0));
        assert!(may_create(9));
        assert!(!may_create(10));
        assert!(!may_create(11));
    }

    #[test]
    fn only_the_clusters_own_non_addon_csrs_count() {
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        assert!(counts_for_cluster(
            &labels(&[(CLUSTER, "c1")]),
            CLUSTER,
            ADDON,
            "c1"
        ));
        assert!(!counts_for_cluster(
            &labels(&[(CLUSTER, "c2")]),
            CLUSTER,
            ADDON,
            "c1"
        ));
        assert!(!counts_for_cluster(
            &labels(&[(CLUSTER, "c1"), (ADDON, "helloworld")]),
            CLUSTER,
            ADDON,
            "c1"
        ));
        assert!(!counts_for_cluster(&labels(&[]), CLUSTER, ADDON, "c1"));
    }

    #[test]
    fn a_new_csr_is_pending() {
        assert_eq!(state(None), CsrState::Pending);
        assert_eq!(state(Some(&status(&[], b""))), CsrState::Pending);
        assert_eq!(
            state(Some(&status(&[("Approved", "False")], b""))),
            CsrState::Pending
        );
    }

    #[test]
    fn an_approved_csr_is_done_only_once_the_certificate_is_issued() {
        assert_eq!(
            state(Some(&status(&[("Approved", "True")], b""))),
            CsrState::Approved
        );
        assert_eq!(
            state(Some(&status(&[("Approved", "True")], b"PEM"))),
            CsrState::Issued(b"PEM".to_vec())
        );
    }

    #[test]
    fn denied_and_failed_are_terminal_even_if_also_approved() {
        let denied = state(Some(&status(&[("Approved", "True"), ("Denied", "True")], b"")));
        assert_eq!(
            denied,
            CsrState::Denied {
                reason: "DeniedByTest".into(),
                message: "because".into()
            }
        );
        assert!(denied.is_terminal_failure());
        let failed = state(Some(&status(&[("Approved", "True"), ("Failed", "True")], b"")));
        assert!(matches!(failed, CsrState::Failed { .. }));
        assert!(failed.is_terminal_failure());
    }
}
