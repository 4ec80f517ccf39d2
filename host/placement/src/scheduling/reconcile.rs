//! One reconcile of one Placement: gather the inputs from the caches, schedule with the pure
//! scheduler, write the PlacementDecisions that differ, delete the ones no longer wanted, patch
//! the status if it changed, and record the scores in an Event when the decisions changed.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use flotilla_api::cluster::{
    consts::PLACEMENT_DISABLE_ANNOTATION,
    v1::ManagedCluster,
    v1beta1::{Placement, PlacementDecision, PlacementDecisionStatus, PlacementStatus},
    v1beta2::{ManagedClusterSet, ManagedClusterSetBinding},
};
use flotilla_core::{
    conditions,
    placement::{Inputs, Schedule, decisions::Page, schedule},
};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::ObjectMeta, jiff::Timestamp};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::{controller::Action, events::Event, events::EventType, reflector::ObjectRef},
};
use serde_json::json;

use super::Context;
use crate::error::{Error, Result};

/// How soon to look again while the caches are still filling.
const NOT_READY_REQUEUE: Duration = Duration::from_millis(200);
/// Longest Event message, as OCM keeps it (an Event note holds at most 1 KiB).
const MAX_EVENT_MESSAGE: usize = 1000;

pub(super) async fn reconcile(placement: Arc<Placement>, ctx: Arc<Context>) -> Result<Action> {
    if !ctx.ready() {
        return Ok(Action::requeue(NOT_READY_REQUEUE));
    }
    if placement.metadata.deletion_timestamp.is_some() {
        // Its compiled form is forgotten when the deletion is seen.
        return Ok(Action::await_change());
    }
    if placement
        .annotations()
        .get(PLACEMENT_DISABLE_ANNOTATION)
        .is_some_and(|v| v == "true")
    {
        return Ok(Action::await_change());
    }
    let _pass = ctx.busy.enter();
    super::SCHEDULED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let namespace = placement.namespace().unwrap_or_default();
    let name = placement.name_any();

    // Read: every input from the caches and indexes.
    let clusters = ctx.clusters.state();
    let sets = ctx.sets.state();
    let bindings: Vec<Arc<ManagedClusterSetBinding>> = ctx
        .bindings
        .state()
        .into_iter()
        .filter(|b| b.namespace().as_deref() == Some(namespace.as_str()))
        .collect();
    let (own_names, others) = {
        let index = super::lock(&ctx.decision_index);
        (
            index.decisions_of(&namespace, &name),
            index.counts_without(&namespace, &name),
        )
    };
    let own: BTreeMap<String, Arc<PlacementDecision>> = own_names
        .into_iter()
        .filter_map(|n| {
            let decision = ctx.decisions.get(&ObjectRef::new(&n).within(&namespace))?;
            Some((n, decision))
        })
        .collect();
    let existing: BTreeSet<String> = own
        .values()
        .flat_map(|d| d.status.iter().flat_map(|s| s.decisions.iter()))
        .map(|d| d.cluster_name.clone())
        .collect();
    let scores = ctx.score_table();
    let cluster_refs: Vec<&ManagedCluster> = clusters.iter().map(Arc::as_ref).collect();
    let set_refs: Vec<&ManagedClusterSet> = sets.iter().map(Arc::as_ref).collect();
    let binding_refs: Vec<&ManagedClusterSetBinding> = bindings.iter().map(Arc::as_ref).collect();
    let now = Timestamp::now();

    // Decide.
    let compiled = ctx.compiled(&placement);
    let outcome = flotilla_kube::controller::off_the_async_workers(|| {
        schedule(
            &Inputs {
                placement: &placement,
                clusters: &cluster_refs,
                cluster_sets: &set_refs,
                bindings: &binding_refs,
                scores: &scores,
                existing: &existing,
                other_decisions: &others,
                now,
            },
            &compiled,
        )
    });
    let (pages, group_status) = flotilla_core::placement::decisions::pages(&name, &outcome.groups);

    // Apply: decisions first, so that status never names a decision that does not exist.
    let api: Api<PlacementDecision> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut changed = false;
    for page in &pages {
        let key = format!("{namespace}/{}", page.name);
        let clusters: Vec<String> = page.decisions.iter().map(|d| d.cluster_name.clone()).collect();
        let expected = vec![(page.labels.clone(), Vec::new()), (page.labels.clone(), clusters)];
        super::lock(&ctx.written).insert(key, expected);
        changed |= write_page(&api, &placement, page, own.get(&page.name).map(Arc::as_ref)).await?;
    }
    let wanted: BTreeSet<&str> = pages.iter().map(|p| p.name.as_str()).collect();
    for extra in own.keys().filter(|n| !wanted.contains(n.as_str())) {
        super::lock(&ctx.written).insert(format!("{namespace}/{extra}"), Vec::new());
        match api.delete(extra, &DeleteParams::default()).await {
            Ok(_) => changed = true,
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(source) => {
                return Err(Error::DeleteDecision {
                    name: format!("{namespace}/{extra}"),
                    source,
                });
            }
        }
    }

    // The status follows from a background writer, after these decisions (see `background`).
    // Queued even when the cache shows it already: it replaces any older status still waiting.
    let current = placement.status.clone().unwrap_or_default();
    let desired = desired_status(&current, &outcome, group_status, now);
    ctx.statuses
        .publish(ObjectRef::from_obj(placement.as_ref()), desired);

    if changed {
        record_scores(&ctx, &placement, &outcome);
    }

    Ok(match outcome.requeue_at {
        Some(at) => {
            let wait = at.duration_since(now).unsigned_abs();
            Action::requeue(wait.min(ctx.options.resync) + Duration::from_millis(50))
        }
        None => Action::requeue(ctx.options.resync),
    })
}

/// The status the placement should have.
fn desired_status(
    current: &PlacementStatus,
    outcome: &Schedule,
    groups: Vec<flotilla_api::cluster::v1beta1::DecisionGroupStatus>,
    now: Timestamp,
) -> PlacementStatus {
    let mut conds = current.conditions.clone().unwrap_or_default();
    conditions::set(&mut conds, outcome.misconfigured.clone(), now);
    conditions::set(&mut conds, outcome.satisfied.clone(), now);
    PlacementStatus {
        number_of_selected_clusters: i32::try_from(outcome.selected.len()).unwrap_or(i32::MAX),
        decision_groups: Some(groups),
        conditions: Some(conds),
        last_score_update_time: current.last_score_update_time.clone(),
    }
}

/// Creates or updates one PlacementDecision; returns whether its decisions changed.
async fn write_page(
    api: &Api<PlacementDecision>,
    placement: &Placement,
    page: &Page,
    current: Option<&PlacementDecision>,
) -> Result<bool> {
    let full_name = format!("{}/{}", placement.namespace().unwrap_or_default(), page.name);
    let desired_status = PlacementDecisionStatus {
        decisions: page.decisions.clone(),
    };
    let created;
    let current = match current {
        Some(current) => current,
        None => {
            let decision = PlacementDecision {
                metadata: ObjectMeta {
                    name: Some(page.name.clone()),
                    namespace: placement.namespace(),
                    labels: Some(page.labels.clone()),
                    owner_references: placement.controller_owner_ref(&()).map(|o| vec![o]),
                    ..Default::default()
                },
                spec: Default::default(),
                status: None,
            };
            created = match api.create(&PostParams::default(), &decision).await {
                Ok(created) => created,
                // Created by an earlier pass whose watch event has not arrived yet.
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    api.get(&page.name)
                        .await
                        .map_err(|source| Error::CreateDecision {
                            name: full_name.clone(),
                            source,
                        })?
                }
                Err(source) => {
                    return Err(Error::CreateDecision {
                        name: full_name.clone(),
                        source,
                    });
                }
            };
            &created
        }
    };
    if current.metadata.labels.as_ref() != Some(&page.labels) {
        let patch = json!({"metadata": {"labels": page.labels}});
        api.patch(&page.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| Error::PatchDecision {
                what: "labels",
                name: full_name.clone(),
                source,
            })?;
    }
    if current.status.as_ref() == Some(&desired_status) {
        return Ok(false);
    }
    let patch = json!({"status": desired_status});
    api.patch_status(&page.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::PatchDecision {
            what: "status",
            name: full_name,
            source,
        })?;
    Ok(true)
}

/// The `ScoreUpdate` Event: `<cluster>:<score>` of each selected cluster, by name.
pub(crate) fn score_message(outcome: &Schedule) -> String {
    let mut names: Vec<&String> = outcome.selected.iter().collect();
    names.sort();
    let mut message = String::new();
    for name in names {
        let item = format!(
            "{name}:{} ",
            outcome.scores.get(name).copied().unwrap_or_default()
        );
        if message.len() + item.len() > MAX_EVENT_MESSAGE {
            message.push_str("......");
            break;
        }
        message.push_str(&item);
    }
    message
}

/// Queues the `DecisionUpdate` and `ScoreUpdate` Events of a pass that changed decisions.
fn record_scores(ctx: &Context, placement: &Placement, outcome: &Schedule) {
    let reference = placement.object_ref(&());
    super::events::publish(
        &ctx.events,
        reference.clone(),
        Event {
            type_: if outcome.warnings.is_empty() {
                EventType::Normal
            } else {
                EventType::Warning
            },
            reason: "DecisionUpdate".into(),
            note: Some(if outcome.warnings.is_empty() {
                format!("Decisions of placement {} updated", placement.name_any())
            } else {
                format!(
                    "Decisions of placement {} updated: {}",
                    placement.name_any(),
                    outcome.warnings.join(", ")
                )
            }),
            action: "DecisionUpdated".into(),
            secondary: None,
        },
    );
    let message = score_message(outcome);
    if !message.is_empty() {
        super::events::publish(
            &ctx.events,
            reference,
            Event {
                type_: EventType::Normal,
                reason: "ScoreUpdate".into(),
                note: Some(message),
                action: "ScoreUpdated".into(),
                secondary: None,
            },
        );
    }
}
