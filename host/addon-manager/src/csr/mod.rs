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
//! Any cluster agent may create CSRs, as many and as large as it likes: the watch caches only
//! each CSR's name and labels (`flotilla_kube::controller::metadata_only`), a reconcile reads
//! its CSR, and one requester (the user the apiserver recorded) gets [`CSR_REQUESTER_BURST`]
//! decisions per add-on at once and then one per [`CSR_REQUESTER_REFILL`]; past that its CSRs wait,
//! and other requesters' go on at once.
//!
//! Fail closed: a missing label, an unknown add-on, a plugin that is not loaded, traps, times out
//! or denies — each leaves the CSR unapproved, with the reason in an Event.

mod reconcile;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::configs::ReleasedConfigs;
use crate::plugins::Plugins;
use flotilla_api::{addon::consts::ADDON_NAME_LABEL, cluster::consts::CLUSTER_NAME_LABEL};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::Client;
use kube::runtime::watcher;

use crate::Options;

/// What one reconcile needs.
pub(crate) struct Context {
    pub(crate) client: Client,
    pub(crate) plugins: Arc<Plugins>,
    /// Released config objects (the install namespace may come from one).
    pub(crate) configs: Arc<ReleasedConfigs>,
    pub(crate) options: Options,
    /// Publishes the Events that say why a CSR was or was not approved.
    pub(crate) events: flotilla_kube::events::Events,
    /// Decisions left per requester and add-on.
    requesters: Mutex<flotilla_core::rate::Buckets>,
}

/// Decisions (reads, the plugin's `approve-csr`, approval or signing) one requester gets at
/// once for one add-on: an agent asks once per add-on and certificate lifetime…
pub const CSR_REQUESTER_BURST: u32 = 16;
/// …and then one per this long.
pub const CSR_REQUESTER_REFILL: Duration = Duration::from_secs(10);

impl Context {
    /// A decision for `requester` on `addon`, or how long until it may have one.
    pub(crate) fn take(&self, requester: &str, addon: &str) -> Result<(), Duration> {
        // A poisoned lock only means another reconcile panicked mid-take; the counts stand.
        let mut buckets = self
            .requesters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        buckets.take(&format!("{requester}\n{addon}"), Instant::now())
    }
}

/// Runs the controller until dropped.
pub(crate) async fn run(
    client: Client,
    plugins: Arc<Plugins>,
    configs: Arc<ReleasedConfigs>,
    options: Options,
) {
    let controller = flotilla_kube::controller::metadata_only::<CertificateSigningRequest>(
        client.clone(),
        watcher::Config::default().labels(ADDON_NAME_LABEL),
        &[CLUSTER_NAME_LABEL, ADDON_NAME_LABEL],
    );
    let events = flotilla_kube::events::Events::new(client.clone(), crate::EVENT_REPORTER);
    let context = Arc::new(Context {
        client,
        plugins,
        configs,
        options,
        events,
        requesters: Mutex::new(flotilla_core::rate::Buckets::new(
            CSR_REQUESTER_BURST,
            CSR_REQUESTER_REFILL,
        )),
    });
    flotilla_kube::controller::run("addon-csr", controller, reconcile::reconcile, context).await;
}
