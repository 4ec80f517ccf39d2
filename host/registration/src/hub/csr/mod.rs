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

mod reconcile;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use flotilla_api::cluster::consts::CLUSTER_NAME_LABEL;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::{
    Api, Client,
    runtime::{Controller, watcher},
};

use super::{Context, HubOptions};

/// Runs the CSR controller until dropped. `client` needs `create` on SubjectAccessReviews and
/// `patch` on `certificatesigningrequests/approval` for the kube-apiserver-client signer.
pub(super) async fn run(client: Client, options: HubOptions) {
    let csrs = Api::<CertificateSigningRequest>::all(client.clone());
    let controller = Controller::new(csrs, watcher::Config::default().labels(CLUSTER_NAME_LABEL));
    let context = Arc::new(Context::new(client, options));
    flotilla_kube::controller::run("csr", controller, reconcile::reconcile, context).await;
}
