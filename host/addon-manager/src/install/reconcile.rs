//! One reconcile of a ClusterManagementAddOn's install strategy: read the placements' decisions
//! and the add-on's ManagedClusterAddOns, plan purely (`flotilla_core::addon::install`), create
//! and delete what the plan says; every add-on of the CMA's name gets the CMA as an owner.

use std::collections::BTreeSet;
use std::sync::Arc;

use flotilla_api::addon::v1alpha1::{ClusterManagementAddOn, ManagedClusterAddOn};
use flotilla_api::cluster::consts::PLACEMENT_LABEL;
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_api::cluster::v1beta1::{Placement, PlacementDecision};
use flotilla_core::addon::install::{
    ExistingAddon, OWNER_API_VERSION, install_plan, is_controlled_by, is_managed_by_addon_manager,
    new_managed_cluster_addon,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use futures::StreamExt;

use super::Context;
use crate::error::{self, Result};

/// Most add-on creations of one reconcile in flight at once.
const WRITES_IN_FLIGHT: usize = 16;

/// The clusters placement `namespace/name` selects, or None when it does not exist.
async fn decided_clusters(ctx: &Context, namespace: &str, name: &str) -> Result<Option<BTreeSet<String>>> {
    let placements: Api<Placement> = Api::namespaced(ctx.client.clone(), namespace);
    if placements
        .get_opt(name)
        .await
        .map_err(error::read(format!("Placement {namespace}/{name}")))?
        .is_none()
    {
        return Ok(None);
    }
    let decisions: Api<PlacementDecision> = Api::namespaced(ctx.client.clone(), namespace);
    let list = decisions
        .list(&ListParams::default().labels(&format!("{PLACEMENT_LABEL}={name}")))
        .await
        .map_err(error::read(format!("PlacementDecisions of {namespace}/{name}")))?;
    Ok(Some(
        list.items
            .iter()
            .filter_map(|d| d.status.as_ref())
            .flat_map(|s| s.decisions.iter().map(|d| d.cluster_name.clone()))
            .filter(|c| !c.is_empty())
            .collect(),
    ))
}

/// Makes the ClusterManagementAddOn an owner (not the controller) of `addon`, as OCM does for
/// every add-on of its name, so deleting the CMA (or the AddOnPlugin that owns it) removes the
/// add-on from every cluster by garbage collection, hand-made add-ons included.
async fn ensure_cma_owner(
    ctx: &Context,
    cma: &ClusterManagementAddOn,
    addon: &ManagedClusterAddOn,
) -> Result<()> {
    let uid = cma.uid().unwrap_or_default();
    if addon.owner_references().iter().any(|o| o.uid == uid) {
        return Ok(());
    }
    // An add-on owned by an earlier ClusterManagementAddOn of this name (deleted, then made again
    // by its AddOnPlugin) is being garbage-collected with it: adopting it would keep it alive.
    if addon
        .owner_references()
        .iter()
        .any(|o| o.kind == "ClusterManagementAddOn" && o.name == cma.name_any())
    {
        return Ok(());
    }
    let mut owners = addon.owner_references().to_vec();
    owners.push(OwnerReference {
        api_version: OWNER_API_VERSION.into(),
        kind: "ClusterManagementAddOn".into(),
        name: cma.name_any(),
        uid,
        controller: None,
        block_owner_deletion: None,
    });
    let namespace = addon.namespace().unwrap_or_default();
    let patch = serde_json::json!({"metadata": {
        "resourceVersion": addon.resource_version(),
        "ownerReferences": owners,
    }});
    Api::<ManagedClusterAddOn>::namespaced(ctx.client.clone(), &namespace)
        .patch(&addon.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(error::write(format!(
            "owner of ManagedClusterAddOn {namespace}/{}",
            addon.name_any()
        )))?;
    Ok(())
}

/// Creates and deletes the ManagedClusterAddOns of `cma`'s install strategy.
pub(crate) async fn reconcile(cma: Arc<ClusterManagementAddOn>, ctx: Arc<Context>) -> Result<Action> {
    let requeue = Action::requeue(ctx.options.resync);
    if cma.meta().deletion_timestamp.is_some()
        || !is_managed_by_addon_manager(cma.metadata.annotations.as_ref())
    {
        return Ok(Action::await_change());
    }
    let name = cma.name_any();
    let uid = cma.uid().unwrap_or_default();
    let mut decided = Vec::new();
    for strategy in &cma.spec.install_strategy.placements {
        let p = &strategy.placement;
        decided.push((p.clone(), decided_clusters(&ctx, &p.namespace, &p.name).await?));
    }
    // An add-on missing from a cache still listing would be created again for nothing.
    if !flotilla_kube::controller::cache_ready(&ctx.addons) {
        return Ok(Action::requeue(crate::CACHE_WAIT));
    }
    // From the cache: one just written and not seen yet is at worst created again (a 409,
    // ignored) or deleted again (a 404), and its watch event brings the next reconcile.
    let listed: Vec<Arc<ManagedClusterAddOn>> = ctx
        .addons
        .state()
        .into_iter()
        .filter(|a| a.name_any() == name)
        .collect();
    for addon in listed.iter().filter(|a| a.meta().deletion_timestamp.is_none()) {
        ensure_cma_owner(&ctx, &cma, addon).await?;
    }
    let existing: Vec<ExistingAddon> = listed
        .iter()
        .filter(|a| a.meta().deletion_timestamp.is_none())
        .map(|a| ExistingAddon {
            cluster: a.namespace().unwrap_or_default(),
            owned: is_controlled_by(a.owner_references(), &uid),
        })
        .collect();
    let plan = install_plan(
        &cma.spec.install_strategy,
        |placement| {
            decided
                .iter()
                .find(|(p, _)| p == placement)
                .and_then(|(_, c)| c.clone())
        },
        &existing,
    );
    for missing in &plan.missing_placements {
        tracing::warn!(addon = %name, placement = %format!("{}/{}", missing.namespace, missing.name),
            "install strategy names a Placement that does not exist");
    }
    // Creations go out a few at a time: a placement of a thousand clusters is a thousand add-ons.
    let mut creations = Vec::with_capacity(plan.create.len());
    // A cluster is read from the cache when it is there (nearly always), else from the apiserver.
    let cached = flotilla_kube::controller::cache_ready(&ctx.clusters);
    for cluster in &plan.create {
        let (client, name, uid) = (ctx.client.clone(), name.clone(), uid.clone());
        let known = if cached {
            ctx.clusters.get(&ObjectRef::new(cluster))
        } else {
            None
        };
        creations.push(async move {
            let cluster = cluster.as_str();
            let annotations = match known {
                Some(meta) => meta.metadata.annotations.clone(),
                None => {
                    let clusters: Api<ManagedCluster> = Api::all(client.clone());
                    // Decisions may name a cluster that is gone; its namespace is gone with it.
                    let Some(managed) = clusters
                        .get_opt(cluster)
                        .await
                        .map_err(error::read(format!("ManagedCluster {cluster}")))?
                    else {
                        return Ok(());
                    };
                    managed.metadata.annotations
                }
            };
            let addon = new_managed_cluster_addon(&name, &uid, cluster, annotations.as_ref());
            let api: Api<ManagedClusterAddOn> = Api::namespaced(client, cluster);
            match api.create(&PostParams::default(), &addon).await {
                Ok(_) => tracing::info!(addon = %name, %cluster, "ManagedClusterAddOn installed"),
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(error::write(format!("ManagedClusterAddOn {cluster}/{name}"))(e)),
            }
            Ok(())
        });
    }
    let created: Vec<Result<()>> = futures::stream::iter(creations)
        .buffer_unordered(WRITES_IN_FLIGHT)
        .collect()
        .await;
    created.into_iter().collect::<Result<Vec<()>>>()?;
    for cluster in &plan.delete {
        let api: Api<ManagedClusterAddOn> = Api::namespaced(ctx.client.clone(), cluster);
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(addon = %name, %cluster, "ManagedClusterAddOn uninstalled"),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(error::write(format!("ManagedClusterAddOn {cluster}/{name}"))(e)),
        }
    }
    Ok(requeue)
}
