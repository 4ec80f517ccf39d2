//! Renewing the hub client certificate before it expires (OCM's client-certificate
//! controller, after bootstrap):
//!
//! ```text
//!  valid ──(remaining life ≤ random 20–25 %)──▶ CSR with the CURRENT identity
//!    ▲                                             │ hub auto-approves (requester = agent)
//!    │                                             ▼
//!    └── swap identity ◀── write hub-kubeconfig-secret ◀── certificate issued
//! ```
//!
//! The old certificate stays in use until the new one is written, so there is no gap; every
//! later request uses the new one. `ClusterCertificateRotated` becomes True
//! `ClientCertificateUpdated`, or False `ClientCertificateUpdateFailed` while renewal fails
//! (retried with backoff). If the certificate expires before a new one is issued, the
//! identity is lost and [`run`] returns, which sends the agent back to bootstrap.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use flotilla_api::cluster::{consts::managed_cluster as mc, v1::ManagedCluster};
use flotilla_core::{
    conditions::{self, NewCondition},
    registration::agent::{
        backoff::Backoff,
        rotation::{self as rules, CertificateState},
    },
};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use tokio::sync::watch;

use super::{
    Context, Names,
    csr::request_certificate,
    error::{Error, Result},
    identity::HubIdentity,
    progress::Step,
};

/// Longest sleep between checks of a valid certificate.
const RECHECK: Duration = Duration::from_secs(300);

/// Keeps the identity fresh; returns only when it has been lost.
pub(crate) async fn run(ctx: &Context, names: &Names, identity: &watch::Sender<Arc<HubIdentity>>) -> Error {
    let mut backoff = Backoff::new(ctx.options.backoff_initial, ctx.options.backoff_max);
    loop {
        let current = identity.borrow().clone();
        let state = rules::assess(
            &current.info,
            &names.user(),
            SystemTime::now(),
            current.renewal_threshold,
        );
        match state {
            CertificateState::Valid { renew_at } => {
                let wait = renew_at
                    .duration_since(SystemTime::now())
                    .unwrap_or_default()
                    .min(RECHECK);
                tokio::time::sleep(wait).await;
                continue;
            }
            CertificateState::Expired | CertificateState::SubjectMismatch { .. } => {
                return Error::CertificateExpired {
                    not_after: current.info.not_after,
                };
            }
            CertificateState::RenewalDue => {}
        }
        let until_expiry = current
            .info
            .not_after
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        let attempt = tokio::time::timeout(until_expiry, renew(ctx, names, &current)).await;
        match attempt {
            Err(_elapsed) => {
                return Error::CertificateExpired {
                    not_after: current.info.not_after,
                };
            }
            Ok(Ok(renewed)) => {
                let message = format!(
                    "client certificate rotated starting from {} to {}",
                    timestamp(renewed.info.not_before),
                    timestamp(renewed.info.not_after)
                );
                let not_after = renewed.info.not_after;
                let renewed = Arc::new(renewed);
                identity.send_replace(renewed.clone());
                backoff.reset();
                ctx.options.status.succeeded(Step::Rotation);
                ctx.options.status.update(|s| {
                    s.rotations += 1;
                    s.certificate_not_after = Some(not_after);
                });
                tracing::info!(cluster = %names.cluster, %message);
                report(
                    names,
                    &renewed,
                    conditions::TRUE,
                    mc::REASON_CLIENT_CERTIFICATE_UPDATED,
                    message,
                )
                .await;
            }
            Ok(Err(error)) => {
                tracing::warn!(error = %error, "client certificate rotation");
                ctx.options.status.failed(Step::Rotation, error.to_string());
                let message = format!("Failed to rotate client certificate: {error}");
                report(
                    names,
                    &current,
                    conditions::FALSE,
                    mc::REASON_CLIENT_CERTIFICATE_UPDATE_FAILED,
                    message,
                )
                .await;
                let delay = backoff.next_delay().min(until_expiry);
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// One renewal with `current`'s identity: CSR, wait, write the secret.
async fn renew(ctx: &Context, names: &Names, current: &HubIdentity) -> Result<HubIdentity> {
    let issued = request_certificate(ctx, &current.client, names, |_| {}).await?;
    let renewed = HubIdentity::new(
        ctx,
        current.endpoint.clone(),
        issued.cert_pem,
        issued.key_pem,
        issued.info,
    )
    .await?;
    renewed.save(ctx, names).await?;
    Ok(renewed)
}

/// Sets `ClusterCertificateRotated` on the ManagedCluster; failures are only logged (the
/// condition is informational, and the next rotation writes it again).
async fn report(
    names: &Names,
    identity: &HubIdentity,
    status: &'static str,
    reason: &'static str,
    message: String,
) {
    let api: Api<ManagedCluster> = Api::all(identity.client.clone());
    let attempt = || async {
        let cluster = api
            .get(&names.cluster)
            .await
            .map_err(|source| Error::GetManagedCluster {
                cluster: names.cluster.clone(),
                source,
            })?;
        let mut desired = cluster.status.clone().unwrap_or_default();
        let mut list = desired.conditions.take().unwrap_or_default();
        conditions::set(
            &mut list,
            NewCondition {
                type_: mc::CONDITION_CLUSTER_CERTIFICATE_ROTATED,
                status,
                reason,
                message: message.clone(),
                observed_generation: None,
            },
            Timestamp::now(),
        );
        desired.conditions = Some(list);
        flotilla_kube::status::patch_if_changed(&api, &cluster, cluster.status.as_ref(), &desired)
            .await
            .map_err(|source| Error::PatchStatus {
                cluster: names.cluster.clone(),
                source: Box::new(source),
            })
    };
    // The status loop writes the same object; a conflict is retried from a fresh read.
    for _ in 0..3 {
        match attempt().await {
            Ok(_) => return,
            Err(error) if error.is_conflict() => continue,
            Err(error) => {
                tracing::warn!(error = %error, "could not set ClusterCertificateRotated");
                return;
            }
        }
    }
}

fn timestamp(time: SystemTime) -> String {
    Timestamp::try_from(time).map_or_else(|_| format!("{time:?}"), |t| t.to_string())
}
