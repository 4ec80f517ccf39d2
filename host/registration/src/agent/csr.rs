//! Asking the hub for a client certificate: one CSR per request, exactly as OCM's agent makes
//! it (`generateName: <cluster>-`, the cluster-name label, signer
//! `kubernetes.io/kube-apiserver-client`, usages digital signature + key encipherment + client
//! auth, an ECDSA P-256 key, subject `CN=system:open-cluster-management:<cluster>:<agent>`,
//! `O=system:open-cluster-management:<cluster>`, `O=system:open-cluster-management:managed-clusters`),
//! then waiting for approval and the signed certificate.
//!
//! The same function serves bootstrap (with the bootstrap identity; the hub admin approves)
//! and rotation (with the current identity; the hub auto-approves renewals whose requester
//! is the agent itself). The key never leaves the agent's memory until the certificate is
//! issued.

use std::collections::BTreeMap;

use flotilla_api::{addon::consts::ADDON_NAME_LABEL, cluster::consts::CLUSTER_NAME_LABEL};
use flotilla_core::{
    registration::agent::csr::{self as rules, CsrState},
    x509::{self, CertificateInfo},
};
use k8s_openapi::{
    ByteString,
    api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestSpec},
};
use kube::{
    Api,
    api::{ListParams, ObjectMeta, PostParams},
};

use super::{
    Context, Names,
    error::{Error, Result},
    identity::check_issued,
};
use crate::names::{KUBE_APISERVER_CLIENT_SIGNER, MANAGED_CLUSTERS_GROUP, cluster_group};

/// A certificate issued for a CSR, with its key.
pub(crate) struct Issued {
    /// The CSR's name.
    pub csr: String,
    /// The certificate, PEM.
    pub cert_pem: Vec<u8>,
    /// The private key, PEM (PKCS#8).
    pub key_pem: Vec<u8>,
    /// Subject and validity.
    pub info: CertificateInfo,
}

/// Creates a CSR for the agent with `hub` and waits until it is issued, denied or failed.
/// `created` is told the CSR's name once it exists.
pub(crate) async fn request_certificate(
    ctx: &Context,
    hub: &kube::Client,
    names: &Names,
    created: impl FnOnce(&str),
) -> Result<Issued> {
    let api: Api<CertificateSigningRequest> = Api::all(hub.clone());
    let existing = api
        .list(&ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={}", names.cluster)))
        .await
        .map_err(|source| Error::ListCsrs {
            cluster: names.cluster.clone(),
            source,
        })?;
    let count = existing
        .items
        .iter()
        .filter(|csr| {
            rules::counts_for_cluster(
                csr.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()),
                CLUSTER_NAME_LABEL,
                ADDON_NAME_LABEL,
                &names.cluster,
            )
        })
        .count();
    if !rules::may_create(count) {
        return Err(Error::TooManyCsrs {
            cluster: names.cluster.clone(),
            count,
        });
    }

    let group = cluster_group(&names.cluster);
    let made = x509::client_request(&names.user(), &[&group, MANAGED_CLUSTERS_GROUP], &[], &[])
        .map_err(Error::MakeRequest)?;
    let csr = CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", names.cluster)),
            labels: Some(BTreeMap::from([(
                CLUSTER_NAME_LABEL.to_owned(),
                names.cluster.clone(),
            )])),
            ..ObjectMeta::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(made.request_pem.into_bytes()),
            signer_name: KUBE_APISERVER_CLIENT_SIGNER.to_owned(),
            usages: Some(rules::CLIENT_USAGES.iter().map(|u| (*u).to_owned()).collect()),
            expiration_seconds: ctx.options.expiration_seconds,
            ..CertificateSigningRequestSpec::default()
        },
        status: None,
    };
    let created_csr = api
        .create(&PostParams::default(), &csr)
        .await
        .map_err(|source| Error::CreateCsr {
            cluster: names.cluster.clone(),
            source,
        })?;
    let name = created_csr.metadata.name.unwrap_or_default();
    tracing::info!(csr = %name, cluster = %names.cluster, "created CSR; waiting for approval");
    created(&name);

    let key_pem = made.key_pem.into_bytes();
    loop {
        tokio::time::sleep(ctx.options.csr_poll_interval).await;
        let current = api.get_opt(&name).await.map_err(|source| Error::GetCsr {
            name: name.clone(),
            source,
        })?;
        let Some(current) = current else {
            return Err(Error::CsrDeleted { name });
        };
        match rules::state(current.status.as_ref()) {
            CsrState::Pending | CsrState::Approved => {}
            CsrState::Denied { reason, message } => {
                return Err(Error::CsrDenied {
                    name,
                    reason,
                    message,
                });
            }
            CsrState::Failed { reason, message } => {
                return Err(Error::CsrFailed {
                    name,
                    reason,
                    message,
                });
            }
            CsrState::Issued(cert_pem) => {
                let info = check_issued(&name, &cert_pem, &key_pem, names)?;
                tracing::info!(csr = %name, not_after = ?info.not_after, "certificate issued");
                return Ok(Issued {
                    csr: name,
                    cert_pem,
                    key_pem,
                    info,
                });
            }
        }
    }
}
