//! One reconcile of one ManifestWorkReplicaSet:
//!
//! ```text
//!  deleting? ─▶ delete its works; Foreground: wait until they are gone; drop the finalizer
//!  no finalizer? ─▶ add work.open-cluster-management.io/manifest-work-cleanup
//!  owner label <ns>.<name> too long? ─▶ ManifestworkApplied False InvalidManifestWorkName
//!  works of placements no longer referenced ─▶ delete
//!  per placement ref: Placement missing ─▶ PlacementVerified False PlacementDecisionNotFound, stop
//!                     decisions → groups; current works → cluster states; rollout::plan
//!                     ToApply clusters ─▶ create (generateName) or update their work
//!                     clusters that left ─▶ delete their work
//!  status (summary, placementSummary, conditions) ─▶ one patch if changed
//!  requeue at the nearest rollout deadline or soak end
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use flotilla_api::cluster::consts::PLACEMENT_LABEL;
use flotilla_api::cluster::v1beta1::{Placement, PlacementDecision};
use flotilla_api::work::consts::{
    MANIFEST_WORK_REPLICA_SET_FINALIZER, MANIFEST_WORK_REPLICA_SET_LABEL, PLACEMENT_NAME_LABEL,
    manifest_work_replica_set::{
        CONDITION_MANIFESTWORK_APPLIED, CONDITION_PLACEMENT_ROLLED_OUT, CONDITION_PLACEMENT_VERIFIED,
        REASON_INVALID_MANIFEST_WORK_NAME, REASON_PROCESSING,
    },
};
use flotilla_api::work::v1::ManifestWork;
use flotilla_api::work::v1alpha1::{CascadeDeletionPolicy, ManifestWorkReplicaSet};
use flotilla_core::conditions::{self, FALSE, NewCondition};
use flotilla_core::rollout::{self, ClusterGroups, ClusterState};
use flotilla_core::work::replicaset::{self, PlacementOutcome};
use flotilla_kube::events::{self, ConditionEvent};
use flotilla_kube::{finalizer, status};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::Context;
use crate::hub::error::{Error, Result};

/// The conditions whose changes are reported as Events on the replica set, with OCM's reasons:
/// placements found or not, the rollout progressing and complete, works applied or failing.
const SET_EVENTS: &[ConditionEvent] = &[
    ConditionEvent {
        type_: CONDITION_PLACEMENT_VERIFIED,
        action: "VerifyPlacement",
        warning: events::when_false,
    },
    ConditionEvent {
        type_: CONDITION_PLACEMENT_ROLLED_OUT,
        action: "RollOut",
        warning: events::never,
    },
    ConditionEvent {
        type_: CONDITION_MANIFESTWORK_APPLIED,
        action: "Apply",
        warning: failed_not_processing,
    },
];

/// `ManifestworkApplied` False is a Warning unless the works are still being processed.
fn failed_not_processing(condition: &Condition) -> bool {
    events::when_false(condition) && condition.reason != REASON_PROCESSING
}

/// Reconciles one ManifestWorkReplicaSet (see the module docs).
pub(super) async fn reconcile(set: Arc<ManifestWorkReplicaSet>, context: Arc<Context>) -> Result<Action> {
    let namespace = set.namespace().unwrap_or_default();
    let name = set.name_any();
    let client = &context.client;
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(client.clone(), &namespace);
    let owner = replicaset::owner_label_value(&namespace, &name);
    let works = list_works(&Api::all(client.clone()), &owner).await?;

    if set.metadata.deletion_timestamp.is_some() {
        if !finalizer::has(set.as_ref(), MANIFEST_WORK_REPLICA_SET_FINALIZER) {
            return Ok(Action::await_change());
        }
        for work in works.iter().filter(|w| w.metadata.deletion_timestamp.is_none()) {
            delete_work(client, work).await?;
        }
        // Foreground: the works' own deletion (the agents' clean-up) wakes this reconcile.
        if set.spec.cascade_deletion_policy == CascadeDeletionPolicy::Foreground && !works.is_empty() {
            return Ok(Action::await_change());
        }
        finalizer::remove(&sets, set.as_ref(), &[MANIFEST_WORK_REPLICA_SET_FINALIZER]).await?;
        return Ok(Action::await_change());
    }
    if finalizer::add(&sets, set.as_ref(), MANIFEST_WORK_REPLICA_SET_FINALIZER)
        .await?
        .is_some()
    {
        // The write changes the object and so comes back as a new reconcile.
        return Ok(Action::await_change());
    }

    let now = Timestamp::now();
    let previous = set.status.clone().unwrap_or_default();
    if let Some(problem) = replicaset::owner_label_problem(&namespace, &name) {
        let mut desired = previous.clone();
        let condition = NewCondition {
            type_: CONDITION_MANIFESTWORK_APPLIED,
            status: FALSE,
            reason: REASON_INVALID_MANIFEST_WORK_NAME,
            message: problem,
            observed_generation: None,
        };
        conditions::set(&mut desired.conditions, condition, now);
        status::patch_if_changed(&sets, set.as_ref(), set.status.as_ref(), &desired).await?;
        context
            .events
            .conditions(
                set.as_ref(),
                &previous.conditions,
                &desired.conditions,
                SET_EVENTS,
            )
            .await;
        return Ok(Action::await_change());
    }

    let mut errors = Vec::new();
    // Works deleted by this reconcile, by uid, left out of the status counts.
    let mut deleted: BTreeSet<String> = BTreeSet::new();
    let referenced: BTreeSet<&str> = set.spec.placement_refs.iter().map(|p| p.name.as_str()).collect();
    for work in &works {
        let placement = work.labels().get(PLACEMENT_NAME_LABEL).map(String::as_str);
        if !placement.is_some_and(|p| referenced.contains(p)) {
            match delete_work(client, work).await {
                Ok(()) => {
                    deleted.insert(work.uid().unwrap_or_default());
                }
                Err(error) => errors.push(error),
            }
        }
    }

    let template = &set.spec.manifest_work_template;
    let mut outcomes = Vec::new();
    let mut recheck: Option<SignedDuration> = None;
    for reference in &set.spec.placement_refs {
        let placement = Api::<Placement>::namespaced(client.clone(), &namespace)
            .get_opt(&reference.name)
            .await
            .map_err(|source| Error::Read {
                kind: "Placement",
                name: format!("{namespace}/{}", reference.name),
                source,
            })?;
        let Some(placement) = placement else {
            outcomes.push(PlacementOutcome::NotFound);
            break;
        };
        let decisions = Api::<PlacementDecision>::namespaced(client.clone(), &namespace)
            .list(&ListParams::default().labels(&format!("{PLACEMENT_LABEL}={}", reference.name)))
            .await
            .map_err(|source| Error::List {
                kind: "PlacementDecision",
                scope: namespace.clone(),
                source,
            })?;
        let groups = match ClusterGroups::from_decisions(&decisions.items) {
            Ok(groups) => groups,
            Err(error) => {
                outcomes.push(PlacementOutcome::Invalid(format!(
                    "placement {}: {error}",
                    reference.name
                )));
                continue;
            }
        };

        // This placement's works by cluster; only those carrying the current template have a
        // rollout state, the others are outdated and count as new clusters.
        let mine: BTreeMap<String, &ManifestWork> = works
            .iter()
            .filter(|w| w.labels().get(PLACEMENT_NAME_LABEL) == Some(&reference.name))
            .map(|w| (w.namespace().unwrap_or_default(), w))
            .collect();
        let mut with_work = BTreeSet::new();
        let mut succeeded = 0usize;
        let mut existing = Vec::new();
        for (cluster, work) in &mine {
            if !replicaset::work_is_current(work, template) {
                continue;
            }
            let state = replicaset::cluster_rollout_status(cluster, work);
            succeeded += usize::from(state.state == ClusterState::Succeeded);
            with_work.insert(cluster.clone());
            existing.push(state);
        }

        let plan = match rollout::plan(&reference.rollout_strategy, &groups, &existing, now) {
            Ok(plan) => plan,
            Err(error) => {
                outcomes.push(PlacementOutcome::Invalid(format!(
                    "placement {}: {error}",
                    reference.name
                )));
                continue;
            }
        };
        recheck = match (recheck, plan.recheck_after) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for cluster in plan
            .to_rollout
            .iter()
            .filter(|c| c.state == ClusterState::ToApply)
        {
            let existing_work = mine.get(&cluster.cluster).copied();
            let desired = replicaset::desired_work(
                &set,
                &cluster.cluster,
                &reference.name,
                existing_work.map(|w| w.name_any()).as_deref(),
            );
            match apply_work(client, &owner, desired, existing_work).await {
                Ok(()) => {
                    with_work.insert(cluster.cluster.clone());
                }
                Err(error) => errors.push(error),
            }
        }
        // Works of clusters the placement no longer chooses go, current or not.
        let chosen = groups.clusters();
        for (cluster, work) in &mine {
            if !chosen.contains(cluster.as_str()) {
                match delete_work(client, work).await {
                    Ok(()) => {
                        with_work.remove(cluster);
                        deleted.insert(work.uid().unwrap_or_default());
                    }
                    Err(error) => errors.push(error),
                }
            }
        }

        let placement_status = placement.status.unwrap_or_default();
        outcomes.push(PlacementOutcome::RolledOut {
            name: reference.name.clone(),
            decision_groups: placement_status.decision_groups.map_or(0, |g| g.len()),
            selected_clusters: placement_status.number_of_selected_clusters,
            clusters_with_work: with_work.len(),
            succeeded,
        });
    }

    // Counted from the same snapshot the rollout was planned from (works created just now have
    // no conditions yet), so a status always shows what the decisions were based on.
    let mut by_placement: BTreeMap<String, Vec<&ManifestWork>> = BTreeMap::new();
    for work in works
        .iter()
        .filter(|w| !deleted.contains(&w.uid().unwrap_or_default()))
    {
        if let Some(placement) = work.labels().get(PLACEMENT_NAME_LABEL) {
            by_placement.entry(placement.clone()).or_default().push(work);
        }
    }
    let desired = replicaset::status(&previous, &outcomes, &by_placement, template, now);
    status::patch_if_changed(&sets, set.as_ref(), set.status.as_ref(), &desired).await?;
    context
        .events
        .conditions(
            set.as_ref(),
            &previous.conditions,
            &desired.conditions,
            SET_EVENTS,
        )
        .await;
    if let Some(error) = errors.into_iter().next() {
        return Err(error);
    }
    let resync = context.options.resync;
    let after = recheck
        .and_then(|d| std::time::Duration::try_from(d).ok())
        .map_or(resync, |d| d.min(resync));
    Ok(Action::requeue(after))
}

/// The works labelled as belonging to the replica set `owner` (`<ns>.<name>`), in every cluster.
async fn list_works(api: &Api<ManifestWork>, owner: &str) -> Result<Vec<ManifestWork>> {
    let params = ListParams::default().labels(&format!("{MANIFEST_WORK_REPLICA_SET_LABEL}={owner}"));
    let list = api.list(&params).await.map_err(|source| Error::List {
        kind: "ManifestWork",
        scope: "all namespaces".into(),
        source,
    })?;
    Ok(list.items)
}

/// Creates `desired` (by `generateName`) or, when `existing` differs from it in spec or labels,
/// replaces the existing work's spec and labels, guarded by its `resourceVersion`.
async fn apply_work(
    client: &kube::Client,
    owner: &str,
    desired: ManifestWork,
    existing: Option<&ManifestWork>,
) -> Result<()> {
    let cluster = desired.namespace().unwrap_or_default();
    let api: Api<ManifestWork> = Api::namespaced(client.clone(), &cluster);
    let Some(existing) = existing else {
        api.create(&PostParams::default(), &desired)
            .await
            .map_err(|source| Error::CreateWork {
                owner: owner.to_owned(),
                cluster,
                source,
            })?;
        return Ok(());
    };
    let same_labels = existing.metadata.labels == desired.metadata.labels;
    if same_labels && replicaset::work_is_current(existing, &desired.spec) {
        return Ok(());
    }
    let name = existing.name_any();
    let patch = replace_spec_and_labels(existing, &desired)?;
    api.patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map_err(|source| Error::UpdateWork {
            cluster,
            name,
            source,
        })?;
    Ok(())
}

/// Deletes one work (already gone is fine).
async fn delete_work(client: &kube::Client, work: &ManifestWork) -> Result<()> {
    let cluster = work.namespace().unwrap_or_default();
    let name = work.name_any();
    match Api::<ManifestWork>::namespaced(client.clone(), &cluster)
        .delete(&name, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(Error::DeleteWork {
            cluster,
            name,
            source,
        }),
    }
}

/// `test` the resourceVersion (a concurrent change fails and is retried), then replace `/spec`
/// and `/metadata/labels` whole, as OCM's patch of the difference does.
fn replace_spec_and_labels(existing: &ManifestWork, desired: &ManifestWork) -> Result<json_patch::Patch> {
    let ops = json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": existing.metadata.resource_version},
        {"op": "add", "path": "/spec", "value": desired.spec},
        {"op": "add", "path": "/metadata/labels", "value": desired.metadata.labels},
    ]);
    serde_json::from_value(ops).map_err(|source| Error::EncodePatch {
        name: existing.name_any(),
        source,
    })
}
