//! One reconcile of one cluster CSR:
//!
//! ```text
//!  add-on CSR (addon-name label)? or already decided/issued? ─▶ leave it
//!  static rules (flotilla_core::registration::hub::csr::check)
//!    rejected ─▶ leave it pending; look again at resync only if the cluster's standing
//!                could change it (not found / not accepted)
//!    eligible ─▶ SubjectAccessReview: may spec.username (with its groups) renew
//!                managedclusters/clientcertificates <cluster>?
//!                  no  ─▶ leave it pending (look again at resync)
//!                  yes ─▶ /approval: Approved True AutoApprovedByHubCSRApprovingController
//! ```

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flotilla_api::{
    addon::consts::{ADDON_NAME_LABEL, managed_cluster_addon::REASON_AUTO_APPROVED_BY_HUB},
    cluster::{consts::CLUSTER_NAME_LABEL, v1::ManagedCluster},
};
use flotilla_core::registration::hub::{
    acceptance,
    csr::{self, ClusterStanding, ExpectedGroups, RenewalRequest},
};
use k8s_openapi::{
    api::{
        authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
        certificates::v1::{CertificateSigningRequest, CertificateSigningRequestCondition},
    },
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::Timestamp,
};
use kube::{
    Api, Client, ResourceExt,
    api::{PartialObjectMeta, Patch, PatchParams, PostParams},
    runtime::controller::Action,
};
use serde_json::json;

use super::{RENEWAL_BURST, RENEWAL_REFILL};
use crate::hub::Context;
use crate::{
    hub::{
        error::{Error, Result},
        write,
    },
    names,
};

/// The API group, resource and subresource of the renewal permission.
const RENEW_GROUP: &str = "register.open-cluster-management.io";
const RENEW_RESOURCE: &str = "managedclusters";
const RENEW_SUBRESOURCE: &str = "clientcertificates";
const RENEW_VERB: &str = "renew";

/// What one reconcile needs: the hub's context and the requesters' buckets.
pub(super) struct CsrContext {
    hub: Context,
    requesters: Mutex<flotilla_core::rate::Buckets>,
}

impl CsrContext {
    pub(super) fn new(hub: Context) -> Self {
        Self {
            hub,
            requesters: Mutex::new(flotilla_core::rate::Buckets::new(RENEWAL_BURST, RENEWAL_REFILL)),
        }
    }

    /// A token of `requester`'s bucket, or how long until there is one.
    fn take(&self, requester: &str) -> std::result::Result<(), Duration> {
        // A poisoned lock only means another reconcile panicked mid-take; the counts stand.
        let mut buckets = self
            .requesters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        buckets.take(requester, Instant::now())
    }
}

/// Reconciles one CSR (see the module docs).
pub(super) async fn reconcile(
    meta: Arc<PartialObjectMeta<CertificateSigningRequest>>,
    csr_context: Arc<CsrContext>,
) -> Result<Action> {
    let context = &csr_context.hub;
    if meta.labels().contains_key(ADDON_NAME_LABEL) {
        return Ok(Action::await_change());
    }
    let name = meta.name_any();
    let api: Api<CertificateSigningRequest> = Api::all(context.client.clone());
    let Some(csr) = write::get_opt(&api, &name).await? else {
        return Ok(Action::await_change());
    };
    if csr.labels().contains_key(ADDON_NAME_LABEL) || is_settled(&csr) {
        return Ok(Action::await_change());
    }
    let cluster_label = csr.labels().get(CLUSTER_NAME_LABEL).map(String::as_str);
    let standing = match cluster_label {
        Some(cluster) => standing(&context.client, cluster).await?,
        None => ClusterStanding::NotFound,
    };
    let cluster_group = names::cluster_group(cluster_label.unwrap_or_default());
    let request = RenewalRequest {
        signer_name: &csr.spec.signer_name,
        cluster_label,
        request: &csr.spec.request.0,
        username: csr.spec.username.as_deref().unwrap_or_default(),
        usages: csr.spec.usages.as_deref().unwrap_or_default(),
        cluster: standing,
    };
    let expected = ExpectedGroups {
        cluster_group: &cluster_group,
        managed_clusters_group: names::MANAGED_CLUSTERS_GROUP,
    };
    let eligible = match csr::check(&request, expected) {
        Ok(eligible) => eligible,
        Err(rejection) => {
            if matches!(rejection, csr::Rejection::MalformedRequest(_)) {
                tracing::warn!(csr = %name, %rejection, "ignoring CSR");
            } else {
                tracing::debug!(csr = %name, %rejection, "not auto-approving CSR");
            }
            return Ok(if rejection.may_change() {
                Action::requeue(context.options.resync)
            } else {
                Action::await_change()
            });
        }
    };
    let requester = csr.spec.username.as_deref().unwrap_or_default();
    if let Err(wait) = csr_context.take(requester) {
        tracing::debug!(csr = %name, %requester, ?wait, "requester over its renewal rate; CSR waits");
        return Ok(Action::requeue(wait));
    }
    if !may_renew(&context.client, &csr, &eligible.cluster).await? {
        tracing::info!(csr = %name, requester = %eligible.common_name, "requester may not renew; CSR left pending");
        return Ok(Action::requeue(context.options.resync));
    }
    approve(&context.client, &csr).await?;
    tracing::info!(csr = %name, cluster = %eligible.cluster, agent = %eligible.common_name, "renewal CSR approved");
    context
        .events
        .normal(
            &csr,
            "ManagedClusterCSRAutoApproved",
            "Approve",
            format!(
                "managed cluster {} renewal CSR {name} is auto approved by the hub CSR controller",
                eligible.cluster
            ),
        )
        .await;
    Ok(Action::await_change())
}

/// Whether the CSR was already approved, denied or failed, or carries a certificate.
pub(super) fn is_settled(csr: &CertificateSigningRequest) -> bool {
    csr.status.as_ref().is_some_and(|status| {
        status.certificate.as_ref().is_some_and(|c| !c.0.is_empty())
            || status
                .conditions
                .iter()
                .flatten()
                .any(|c| matches!(c.type_.as_str(), "Approved" | "Denied" | "Failed"))
    })
}

/// The labelled cluster's standing: accepted only while `hubAcceptsClient` is on, the hub has
/// accepted it and it is not being deleted.
async fn standing(client: &Client, cluster: &str) -> Result<ClusterStanding> {
    let api: Api<ManagedCluster> = Api::all(client.clone());
    Ok(match write::get_opt(&api, cluster).await? {
        None => ClusterStanding::NotFound,
        Some(found) => {
            let conditions = found
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_deref())
                .unwrap_or_default();
            if found.metadata.deletion_timestamp.is_none()
                && acceptance::is_accepted(found.spec.hub_accepts_client, conditions)
            {
                ClusterStanding::Accepted
            } else {
                ClusterStanding::NotAccepted
            }
        }
    })
}

/// The access review for the requester recorded in the CSR (user, uid, groups, extra).
pub(super) fn renew_review(csr: &CertificateSigningRequest, cluster: &str) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: csr.spec.username.clone(),
            uid: csr.spec.uid.clone(),
            groups: csr.spec.groups.clone(),
            extra: csr.spec.extra.clone(),
            resource_attributes: Some(ResourceAttributes {
                group: Some(RENEW_GROUP.to_owned()),
                resource: Some(RENEW_RESOURCE.to_owned()),
                subresource: Some(RENEW_SUBRESOURCE.to_owned()),
                verb: Some(RENEW_VERB.to_owned()),
                name: Some(cluster.to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Asks the apiserver whether the requester may renew the cluster's client certificates.
async fn may_renew(client: &Client, csr: &CertificateSigningRequest, cluster: &str) -> Result<bool> {
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let review = api
        .create(&PostParams::default(), &renew_review(csr, cluster))
        .await
        .map_err(|source| Error::AccessReview {
            user: csr.spec.username.clone().unwrap_or_default(),
            cluster: cluster.to_owned(),
            source,
        })?;
    Ok(review.status.is_some_and(|s| s.allowed))
}

/// Adds the `Approved` condition through the `/approval` subresource, guarded by the CSR's
/// `resourceVersion` so a concurrent decision is not overwritten.
async fn approve(client: &Client, csr: &CertificateSigningRequest) -> Result<()> {
    let name = csr.name_any();
    let mut conditions = csr
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    conditions.push(approved_condition(Timestamp::now()));
    let patch = json!({
        "metadata": { "resourceVersion": csr.metadata.resource_version },
        "status": { "conditions": conditions },
    });
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    api.patch_approval(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::Approve { name, source })?;
    Ok(())
}

/// The condition the hub approves renewals with.
pub(super) fn approved_condition(now: Timestamp) -> CertificateSigningRequestCondition {
    CertificateSigningRequestCondition {
        type_: "Approved".to_owned(),
        status: "True".to_owned(),
        reason: Some(REASON_AUTO_APPROVED_BY_HUB.to_owned()),
        message: Some(
            "Auto approving managed cluster agent certificate after SubjectAccessReview.".to_owned(),
        ),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}
