//! One judgement of one add-on: return early when it is being deleted or not in Lease mode;
//! find its lease (managed cluster install namespace, else hub cluster namespace); decide purely
//! (`lease_verdict`); patch `Available` only if it changed; come back when the lease would go
//! stale.

use std::{sync::Arc, time::Duration};

use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_core::addon::health::{LeaseSeen, install_namespace, lease_verdict, uses_lease};
use flotilla_core::conditions;
use k8s_openapi::{
    api::coordination::v1::Lease, apimachinery::pkg::apis::meta::v1::OwnerReference, jiff::Timestamp,
};
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams, PostParams},
    runtime::controller::Action,
};

use super::{HealthContext, HealthError, RESYNC};

/// Slack added to the stale-time requeue so the next look is past that moment.
const STALE_SLACK: Duration = Duration::from_millis(200);

/// Judges one add-on by its lease (see the module docs).
pub(super) async fn reconcile(
    addon: Arc<ManagedClusterAddOn>,
    ctx: Arc<HealthContext>,
) -> Result<Action, HealthError> {
    if addon.metadata.deletion_timestamp.is_some() || !uses_lease(&addon) {
        return Ok(Action::await_change());
    }
    let name = addon.name_any();
    let namespace = install_namespace(&addon);
    let seen = match lease(&ctx.managed, "managed cluster", &namespace, &name).await? {
        Some(found) => seen(found),
        None => match lease(&ctx.hub, "hub", &ctx.cluster, &name).await? {
            Some(found) => {
                adopt(&ctx, &addon, found.clone()).await;
                seen(found)
            }
            None => LeaseSeen::Missing,
        },
    };
    let verdict = lease_verdict(&name, seen, ctx.lease_duration, Timestamp::now());
    let current = addon
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut desired = current.clone();
    if conditions::set(&mut desired, verdict.condition, Timestamp::now()) {
        // Only the conditions, guarded by the resourceVersion: the hub's controllers write the
        // rest of the status.
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": addon.resource_version()},
            "status": {"conditions": desired},
        });
        Api::<ManagedClusterAddOn>::namespaced(ctx.hub.clone(), &ctx.cluster)
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| HealthError::PatchAddon {
                namespace: ctx.cluster.clone(),
                name: name.clone(),
                source,
            })?;
        tracing::info!(addon = %name, cluster = %ctx.cluster, lease_namespace = %namespace, "add-on Available updated from its lease");
    }
    Ok(match verdict.recheck_in {
        Some(left) => Action::requeue((left + STALE_SLACK).min(RESYNC)),
        None => Action::requeue(RESYNC),
    })
}

/// What the verdict needs of a lease: when it was last renewed.
fn seen(lease: Lease) -> LeaseSeen {
    LeaseSeen::Found(lease.spec.and_then(|s| s.renew_time).map(|t| t.0))
}

/// Makes the add-on an owner of the lease its agent renews in the cluster namespace on the hub,
/// so the lease goes with the add-on (garbage collection) and nothing of a removed add-on stays
/// on the hub. A failure (say, a renewal in between) is only logged; the next look tries again.
async fn adopt(ctx: &HealthContext, addon: &ManagedClusterAddOn, mut lease: Lease) {
    use kube::Resource as _;
    let uid = addon.uid().unwrap_or_default();
    if uid.is_empty() || lease.owner_references().iter().any(|o| o.uid == uid) {
        return;
    }
    lease.owner_references_mut().push(OwnerReference {
        api_version: ManagedClusterAddOn::api_version(&()).into_owned(),
        kind: ManagedClusterAddOn::kind(&()).into_owned(),
        name: addon.name_any(),
        uid,
        ..OwnerReference::default()
    });
    let name = addon.name_any();
    match Api::<Lease>::namespaced(ctx.hub.clone(), &ctx.cluster)
        .replace(&name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => {
            tracing::info!(addon = %name, cluster = %ctx.cluster, "add-on lease on the hub owned by its add-on")
        }
        Err(error) => tracing::debug!(addon = %name, %error, "add-on lease on the hub not adopted yet"),
    }
}

/// Lease `name` in `namespace` through `client`: None when it does not exist.
async fn lease(
    client: &kube::Client,
    side: &'static str,
    namespace: &str,
    name: &str,
) -> Result<Option<Lease>, HealthError> {
    let found = Api::<Lease>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|source| HealthError::ReadLease {
            side,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        })?;
    Ok(found)
}
