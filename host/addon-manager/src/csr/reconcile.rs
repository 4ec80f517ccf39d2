//! One reconcile of one add-on CSR (see the module docs for the flow). Reading and writing
//! are here; the host's rules are `flotilla_core::addon::registration::check_csr`, and
//! [`decide`] joins them with the plugin's verdict.

use std::sync::Arc;

use base64::Engine as _;
use flotilla_api::addon::consts::{
    ADDON_NAME_LABEL, KUBE_APISERVER_CLIENT_SIGNER, managed_cluster_addon::REASON_AUTO_APPROVED_BY_HUB,
};
use flotilla_api::addon::v1alpha1::{ManagedClusterAddOn, RegistrationConfig};
use flotilla_api::cluster::consts::CLUSTER_NAME_LABEL;
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_api::plugins::v1alpha1::AddOnPlugin;
use flotilla_core::addon::registration::{
    CUSTOM_SIGNER_LIFETIME, CsrFacts, CsrRefusal, check_csr, sign_client_certificate,
};
use flotilla_wasm::Plugin;
use flotilla_wasm::inputs;
use flotilla_wasm::types::{Addon, Cluster, Csr, CsrDecision};
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestCondition};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{PartialObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::Context;
use crate::error::{self, Result};
use crate::plugins::Served;

/// Event reasons on add-on CSRs.
pub(crate) mod reasons {
    /// The host's checks refused the CSR.
    pub(crate) const REFUSED_BY_HOST: &str = "AddOnCSRRefusedByHost";
    /// The plugin denied the CSR, failed, or is not loaded.
    pub(crate) const NOT_APPROVED_BY_PLUGIN: &str = "AddOnCSRNotApprovedByPlugin";
    /// The CSR was approved.
    pub(crate) const APPROVED: &str = "AddOnCSRApproved";
    /// The hub signed the CSR with the add-on's custom signer CA.
    pub(crate) const SIGNED: &str = "AddOnCSRSigned";
    /// The hub could not sign an approved custom-signer CSR.
    pub(crate) const NOT_SIGNED: &str = "AddOnCSRNotSigned";
    /// The CSR's request could not be read.
    pub(crate) const MALFORMED: &str = "AddOnCSRMalformed";
}

/// Why a CSR is not approved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// The host's checks failed.
    #[error("{0}")]
    Host(#[from] CsrRefusal),
    /// No plugin is loaded for the add-on.
    #[error("no plugin is loaded for add-on {0}")]
    NoPlugin(String),
    /// The plugin said no (or failed: a fault is a denial).
    #[error("the add-on's plugin did not approve: {0}")]
    Plugin(String),
}

impl Refusal {
    fn reason(&self) -> &'static str {
        match self {
            Refusal::Host(_) => reasons::REFUSED_BY_HOST,
            Refusal::NoPlugin(_) | Refusal::Plugin(_) => reasons::NOT_APPROVED_BY_PLUGIN,
        }
    }
}

/// The plugin revision and its inputs for one CSR.
pub(crate) struct PluginCall<'a> {
    pub(crate) plugin: &'a Plugin,
    pub(crate) cluster: &'a Cluster,
    pub(crate) addon: &'a Addon,
    pub(crate) csr: &'a Csr,
}

/// The verdict on an add-on CSR: the host's checks first (the plugin is not asked about a CSR
/// they refuse), then the plugin's `approve-csr`, where any fault is a denial.
pub(crate) async fn decide(
    facts: &CsrFacts<'_>,
    registrations: Option<&[RegistrationConfig]>,
    addon: &str,
    call: Option<PluginCall<'_>>,
) -> std::result::Result<(), Refusal> {
    check_csr(facts, registrations)?;
    let Some(call) = call else {
        return Err(Refusal::NoPlugin(addon.to_owned()));
    };
    match call.plugin.approve_csr(call.cluster, call.addon, call.csr).await {
        CsrDecision::Approve => Ok(()),
        CsrDecision::Deny(reason) => Err(Refusal::Plugin(reason)),
    }
}

fn condition_is_true(csr: &CertificateSigningRequest, type_: &str) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

fn issued(csr: &CertificateSigningRequest) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|c| !c.0.is_empty())
}

/// Reconciles one add-on CSR.
pub(crate) async fn reconcile(
    meta: Arc<PartialObjectMeta<CertificateSigningRequest>>,
    ctx: Arc<Context>,
) -> Result<Action> {
    let name = meta.name_any();
    let Some(csr) = Api::<CertificateSigningRequest>::all(ctx.client.clone())
        .get_opt(&name)
        .await
        .map_err(error::read(format!("CertificateSigningRequest {name}")))?
    else {
        return Ok(Action::await_change());
    };
    let denied_or_failed = condition_is_true(&csr, "Denied") || condition_is_true(&csr, "Failed");
    let approved = condition_is_true(&csr, "Approved");
    if denied_or_failed || issued(&csr) || (approved && csr.spec.signer_name == KUBE_APISERVER_CLIENT_SIGNER)
    {
        return Ok(Action::await_change());
    }
    let cluster_label = csr.labels().get(CLUSTER_NAME_LABEL).cloned();
    let addon_label = csr.labels().get(ADDON_NAME_LABEL).cloned().unwrap_or_default();
    let requester = csr.spec.username.as_deref().unwrap_or_default();
    if let Err(wait) = ctx.take(requester, &addon_label) {
        tracing::debug!(csr = %name, %requester, addon = %addon_label, ?wait, "requester over its CSR rate; CSR waits");
        return Ok(Action::requeue(wait));
    }
    let mca = match &cluster_label {
        Some(cluster) if !addon_label.is_empty() => {
            Api::<ManagedClusterAddOn>::namespaced(ctx.client.clone(), cluster)
                .get_opt(&addon_label)
                .await
                .map_err(error::read(format!(
                    "ManagedClusterAddOn {cluster}/{addon_label}"
                )))?
        }
        _ => None,
    };
    // Why nothing serves the add-on, when nothing does: said with the refusal.
    let (plugin, unserved) = match &mca {
        Some(mca) => match ctx.plugins.for_addon(&ctx.client, mca).await? {
            Served::By(plugin) => (Some(plugin), None),
            Served::Pending(why) | Served::Unavailable(why) => (None, Some(why)),
        },
        None => (None, None),
    };
    // Enabled: the add-on exists on the cluster, is not being deleted, and a plugin drives it.
    let enabled = mca
        .as_ref()
        .filter(|m| m.meta().deletion_timestamp.is_none() && plugin.is_some());
    let registrations = match (enabled, &plugin, &cluster_label) {
        (Some(mca), Some(plugin), Some(cluster)) => Some(hub_registrations(mca, plugin, cluster)),
        _ => None,
    };
    let request = match serde_json::to_value(&csr)
        .map_err(|e| e.to_string())
        .and_then(|v| inputs::csr(&v).map_err(|e| e.to_string()))
    {
        Ok(request) => request,
        Err(e) => {
            event(
                &ctx,
                &csr,
                EventType::Warning,
                reasons::MALFORMED,
                format!("not approved: {e}"),
            )
            .await;
            return Ok(Action::await_change());
        }
    };
    let groups = csr.spec.groups.clone().unwrap_or_default();
    let facts = CsrFacts {
        cluster_label: cluster_label.as_deref(),
        addon_label: (!addon_label.is_empty()).then_some(addon_label.as_str()),
        username: csr.spec.username.as_deref().unwrap_or_default(),
        groups: &groups,
        signer_name: &csr.spec.signer_name,
        common_name: &request.common_name,
        organizations: &request.organizations,
        organizational_units: &request.organizational_units,
    };

    if approved {
        // A custom signer's approved CSR: the hub signs it, after the same host checks.
        return match check_csr(&facts, registrations.as_deref()) {
            Ok(_) => sign(&ctx, &csr, &addon_label, mca.as_ref(), &request).await,
            Err(refusal) => {
                let message = format!("not signed: {refusal}{}", because(unserved.as_deref()));
                event(&ctx, &csr, EventType::Warning, reasons::NOT_SIGNED, message).await;
                Ok(Action::await_change())
            }
        };
    }

    let inputs = match (&cluster_label, enabled, &plugin) {
        (Some(cluster), Some(mca), Some(_)) => {
            let found = Api::<ManagedCluster>::all(ctx.client.clone())
                .get_opt(cluster)
                .await
                .map_err(error::read(format!("ManagedCluster {cluster}")))?;
            let namespace = match &plugin {
                Some(plugin) => {
                    crate::registration::expected_install_namespace(&ctx.client, &ctx.configs, mca, plugin)
                        .await?
                }
                None => String::new(),
            };
            found.map(|c| crate::registration::plugin_inputs(&c, mca, &namespace))
        }
        _ => None,
    };
    let call = match (&plugin, &inputs) {
        (Some(plugin), Some((cluster, addon))) => Some(PluginCall {
            plugin,
            cluster,
            addon,
            csr: &request,
        }),
        _ => None,
    };
    match decide(&facts, registrations.as_deref(), &addon_label, call).await {
        Ok(()) => {
            approve(&ctx, &csr).await?;
            tracing::info!(csr = %name, addon = %addon_label, cluster = ?cluster_label, "add-on CSR approved");
            let message =
                format!("approved for add-on {addon_label}: host checks passed and the plugin approved");
            event(&ctx, &csr, EventType::Normal, reasons::APPROVED, message).await;
            Ok(Action::await_change())
        }
        Err(refusal) => {
            let why = because(unserved.as_deref());
            tracing::info!(csr = %name, addon = %addon_label, %refusal, why, "add-on CSR not approved");
            event(
                &ctx,
                &csr,
                EventType::Warning,
                refusal.reason(),
                format!("not approved: {refusal}{why}"),
            )
            .await;
            // Whether the add-on is enabled, its plugin loaded or its verdict can change: look
            // again later; a forged request stays as it is.
            Ok(match refusal {
                Refusal::Host(CsrRefusal::AddonNotEnabled { .. }) | Refusal::NoPlugin(_) => {
                    Action::requeue(ctx.options.retry)
                }
                Refusal::Plugin(_) => Action::requeue(ctx.options.resync),
                Refusal::Host(_) => Action::await_change(),
            })
        }
    }
}

/// `unserved` (why nothing serves the add-on) as the end of a refusal's message.
fn because(unserved: Option<&str>) -> String {
    unserved.map(|why| format!(" ({why})")).unwrap_or_default()
}

/// The registrations the hub computes for `mca` from `plugin`'s answer, the only ones a CSR is
/// checked against. `status.registrations` is not read for it: the cluster's agent may write
/// that status. When it differs from the hub's computation it is ignored (the registration
/// controller writes it again) and a warning says so; a plugin answer the hub refuses gives
/// no registrations at all.
fn hub_registrations(mca: &ManagedClusterAddOn, plugin: &Plugin, cluster: &str) -> Vec<RegistrationConfig> {
    let addon = mca.name_any();
    let expected = match crate::registration::expected_registrations(plugin, cluster, &addon) {
        Ok(expected) => expected,
        Err(refused) => {
            tracing::warn!(%addon, %cluster, %refused, "add-on has no registrations to approve CSRs for");
            Vec::new()
        }
    };
    let written = mca
        .status
        .as_ref()
        .map(|s| s.registrations.as_slice())
        .unwrap_or_default();
    if written != expected.as_slice() {
        tracing::warn!(
            %addon, %cluster,
            "status.registrations differ from the registrations the hub computes from the plugin; \
             CSRs are checked against the hub's, the status is ignored"
        );
    }
    expected
}

/// Publishes an Event about `csr`; failures are only logged (the decision stands either way).
async fn event(ctx: &Context, csr: &CertificateSigningRequest, type_: EventType, reason: &str, note: String) {
    const ACTION: &str = "ApproveAddOnCSR";
    match type_ {
        EventType::Normal => ctx.events.normal(csr, reason, ACTION, note).await,
        EventType::Warning => ctx.events.warning(csr, reason, ACTION, note).await,
    }
}

/// Adds `Approved` through an update of `/approval` (what the hub's role grants, as OCM's
/// approver does), guarded by the CSR's resourceVersion.
async fn approve(ctx: &Context, csr: &CertificateSigningRequest) -> Result<()> {
    let name = csr.name_any();
    let now = Time(Timestamp::now());
    let mut updated = csr.clone();
    let status = updated.status.get_or_insert_with(Default::default);
    status
        .conditions
        .get_or_insert_with(Vec::new)
        .push(CertificateSigningRequestCondition {
            type_: "Approved".to_owned(),
            status: "True".to_owned(),
            reason: Some(REASON_AUTO_APPROVED_BY_HUB.to_owned()),
            message: Some(
                "Auto approving addon agent certificate after the add-on's checks passed.".to_owned(),
            ),
            last_update_time: Some(now.clone()),
            last_transition_time: Some(now),
        });
    Api::<CertificateSigningRequest>::all(ctx.client.clone())
        .replace_subresource("approval", &name, &PostParams::default(), &updated)
        .await
        .map_err(error::write(format!("approval of CSR {name}")))?;
    Ok(())
}

/// Signs an approved custom-signer CSR with the CA that the AddOnPlugin driving the add-on
/// (the one that won the claim on its name; another naming it supplies nothing) lists for the
/// signer, or, when no AddOnPlugin drives it, the one the add-on's own AddOnTemplate names.
async fn sign(
    ctx: &Context,
    csr: &CertificateSigningRequest,
    addon: &str,
    mca: Option<&ManagedClusterAddOn>,
    request: &Csr,
) -> Result<Action> {
    let name = csr.name_any();
    let signer = &csr.spec.signer_name;
    let reference = match (ctx.plugins.owner(addon), mca) {
        (Some(owner), _) => Api::<AddOnPlugin>::all(ctx.client.clone())
            .get_opt(&owner)
            .await
            .map_err(error::read(format!("AddOnPlugin {owner}")))?
            .filter(|p| crate::plugin::addon_name(p) == addon)
            .and_then(|p| p.spec.signers.into_iter().find(|s| &s.signer_name == signer))
            .map(|s| (s.ca_secret_ref.namespace, s.ca_secret_ref.name)),
        (None, Some(mca)) => crate::plugins::Plugins::template_signing_ca(&ctx.client, mca, signer).await?,
        (None, None) => None,
    };
    // A signing CA is read only from the plugins' namespace, whoever names it: an AddOnPlugin's
    // caSecretRef or an AddOnTemplate's signingCA (OCM reads the latter from any namespace;
    // here a template author cannot have the hub sign with another team's CA).
    if let Some((ca_namespace, _)) = &reference
        && *ca_namespace != ctx.options.plugin_secrets_namespace
    {
        let message = format!(
            "not signed: add-on {addon}'s CA for signer {signer:?} is in namespace {ca_namespace:?}; \
             signing CAs must be in namespace {:?}",
            ctx.options.plugin_secrets_namespace
        );
        event(ctx, csr, EventType::Warning, reasons::NOT_SIGNED, message).await;
        return Ok(Action::requeue(ctx.options.retry));
    }
    let Some((ca_namespace, ca_name)) = reference else {
        let message = format!(
            "not signed: the AddOnPlugin driving add-on {addon} lists no signer {signer:?} in spec.signers, \
             or no AddOnTemplate of the add-on names a signingCA for it"
        );
        event(ctx, csr, EventType::Warning, reasons::NOT_SIGNED, message).await;
        return Ok(Action::requeue(ctx.options.retry));
    };
    let secret = Api::<Secret>::namespaced(ctx.client.clone(), &ca_namespace)
        .get_opt(&ca_name)
        .await
        .map_err(error::read(format!("Secret {ca_namespace}/{ca_name}")))?;
    let data = |key: &str| {
        secret
            .as_ref()
            .and_then(|s| s.data.as_ref())
            .and_then(|d| d.get(key))
            .map(|b| b.0.clone())
            .unwrap_or_default()
    };
    let signed = sign_client_certificate(
        request.request_pem.as_bytes(),
        &data("tls.crt"),
        &data("tls.key"),
        std::time::SystemTime::now(),
        CUSTOM_SIGNER_LIFETIME,
    );
    let certificate = match signed {
        Ok(pem) => pem,
        Err(e) => {
            let message = format!("not signed: CA secret {ca_namespace}/{ca_name} of signer {signer:?}: {e}");
            event(ctx, csr, EventType::Warning, reasons::NOT_SIGNED, message).await;
            return Ok(Action::requeue(ctx.options.retry));
        }
    };
    let patch = json!({
        "metadata": { "resourceVersion": csr.metadata.resource_version },
        "status": { "certificate": base64::engine::general_purpose::STANDARD.encode(certificate.as_bytes()) },
    });
    Api::<CertificateSigningRequest>::all(ctx.client.clone())
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(error::write(format!("certificate of CSR {name}")))?;
    tracing::info!(csr = %name, %addon, %signer, "custom-signer certificate issued");
    let message = format!("signed by {signer} for add-on {addon}, valid 24h");
    event(ctx, csr, EventType::Normal, reasons::SIGNED, message).await;
    Ok(Action::await_change())
}
