//! The add-on CSR controller: approves an add-on agent's CertificateSigningRequest only when
//! the host's own checks pass AND the add-on's plugin says yes through `approve-csr`, and signs
//! approved CSRs of an add-on's custom signer with the CA its `AddOnPlugin.spec.signers` names.
//!
//! ```text
//!  CSR labelled open-cluster-management.io/addon-name
//!    pending ─▶ host checks (flotilla_core::addon::registration::check_csr: labels, requester =
//!               the labelled cluster's agent, add-on enabled there, signer and subject = one of
//!               the registrations the hub computes from the plugin) ─▶ plugin approve-csr
//!               (any fault = no)
//!                 no  ─▶ left pending; Warning Event on the CSR saying why
//!                 yes ─▶ /approval Approved AutoApprovedByHubCSRApprovingController
//!    approved, custom signer, no certificate ─▶ checks again ─▶ sign with the spec.signers CA
//!                                               (24 h) ─▶ /status certificate
//!  kubernetes.io/kube-apiserver-client certificates are issued by kube-controller-manager.
//! ```
//!
//! The registrations and install namespace are computed again from the plugin's answer
//! (`crate::registration::expected_registrations`), never read from `status.registrations` or
//! `status.namespace`: the cluster's own agent may write the add-on's status, and what it
//! writes there must not decide which identities it gets.
//!
//! Fail closed: a missing label, an unknown add-on, a plugin that is not loaded, traps, times out
//! or denies — each leaves the CSR unapproved, with the reason in an Event.

mod reconcile;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use crate::configs::ReleasedConfigs;
use crate::plugins::Plugins;
use flotilla_api::addon::consts::ADDON_NAME_LABEL;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::{Controller, watcher};
use kube::{Api, Client};

use crate::Options;

/// What one reconcile needs.
pub(crate) struct Context {
    pub(crate) client: Client,
    pub(crate) plugins: Arc<Plugins>,
    /// Released config objects (the install namespace may come from one).
    pub(crate) configs: Arc<ReleasedConfigs>,
    pub(crate) options: Options,
    /// Publishes the Events that say why a CSR was or was not approved.
    pub(crate) recorder: Recorder,
}

/// Runs the controller until dropped.
pub(crate) async fn run(
    client: Client,
    plugins: Arc<Plugins>,
    configs: Arc<ReleasedConfigs>,
    options: Options,
) {
    let controller = Controller::new(
        Api::<CertificateSigningRequest>::all(client.clone()),
        watcher::Config::default().labels(ADDON_NAME_LABEL),
    );
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: crate::EVENT_REPORTER.into(),
            instance: None,
        },
    );
    let context = Arc::new(Context {
        client,
        plugins,
        configs,
        options,
        recorder,
    });
    flotilla_kube::controller::run("addon-csr", controller, reconcile::reconcile, context).await;
}
