//! The CSR controller (OCM's CSR renewal approver): approves a cluster agent's renewal of its
//! own client certificate, and nothing else. First-time requests from bootstrap identities are
//! the admin's to approve (`flotilla accept`); add-on CSRs are the add-on manager's.
//!
//! ```text
//!  CSR labelled open-cluster-management.io/cluster-name ─▶ reconcile ─▶ static rules (core)
//!                                                                 ─▶ SubjectAccessReview renew
//!                                                                 ─▶ /approval: Approved
//!                                                                    AutoApprovedByHubCSRApprovingController
//!  kube-controller-manager's signer then issues the certificate.
//! ```
//!
//! Any cluster agent may create CSRs, as many and as large as it likes. The watch therefore
//! caches only each CSR's name and labels (`flotilla_kube::controller::metadata_only`); a
//! reconcile reads its CSR, and the access reviews and approvals one requester (the user the
//! apiserver recorded) can cause are rate limited (`RENEWAL_BURST`, then one per
//! `RENEWAL_REFILL`), so one cluster's flood waits in its own bucket while other clusters'
//! renewals are approved at once.

mod reconcile;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use flotilla_api::{addon::consts::ADDON_NAME_LABEL, cluster::consts::CLUSTER_NAME_LABEL};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::{Client, runtime::watcher};

use super::{Context, HubOptions};

/// Renewal decisions (access review and approval) one requester gets at once…
pub const RENEWAL_BURST: u32 = 8;
/// …and then one per this long. An agent renews once per certificate lifetime.
pub const RENEWAL_REFILL: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs the CSR controller until dropped. `client` needs `create` on SubjectAccessReviews and
/// `patch` on `certificatesigningrequests/approval` for the kube-apiserver-client signer.
pub(super) async fn run(client: Client, options: HubOptions) {
    let controller = flotilla_kube::controller::metadata_only::<CertificateSigningRequest>(
        client.clone(),
        watcher::Config::default().labels(CLUSTER_NAME_LABEL),
        &[CLUSTER_NAME_LABEL, ADDON_NAME_LABEL],
    );
    let context = Arc::new(reconcile::CsrContext::new(Context::new(client, options)));
    flotilla_kube::controller::run("csr", controller, reconcile::reconcile, context).await;
}
