//! One reconcile of a ManifestWork, in OCM's order of steps:
//!
//! 1. gone → nothing; deleting → `Deleting`, delete the AppliedManifestWork, wait for its
//!    clean-up, release the finalizer; `Complete` → leave it;
//! 2. no finalizer → add it, and at the same time ensure the AppliedManifestWork
//!    `<hubHash>-<work>` (finalizer, the work's labels; read from the store when it has it);
//! 3. apply every manifest in kind order with its strategy (executor checked first), the
//!    manifests of one rank at once;
//! 4. record the applied objects (sorted, with uids) and clean up those no longer in the spec;
//! 5. from each object as written or read: `Available`, feedback, condition rules; aggregate
//!    the work's conditions; write the record, then the status, each only if changed;
//! 6. watch the objects whose feedback is watched (`feedbackScrapeType: Watch`); requeue
//!    after the status-sync interval only when polled status needs it.
//!
//! A new work costs two requests on the hub (finalizer, status) and, on the managed cluster,
//! the record's create and status beside one write per object; in four round trips plus one
//! per rank. Statuses are written whole (`flotilla_kube::status::replace_if_changed`), which
//! costs the apiservers less than a merge patch.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use flotilla_api::work::{
    consts::{
        APPLIED_MANIFEST_WORK_FINALIZER, MANIFEST_WORK_FINALIZER,
        manifest_work::{CONDITION_APPLIED, CONDITION_AVAILABLE, CONDITION_COMPLETE},
    },
    v1::{
        AppliedManifestResourceMeta, AppliedManifestWork, AppliedManifestWorkSpec, AppliedManifestWorkStatus,
        FeedbackScrapeType, ManifestCondition, ManifestConfigOption, ManifestResourceMeta, ManifestWork,
        ManifestWorkStatus, StatusFeedbackResult, UpdateStrategyType,
    },
};
use flotilla_core::{
    cel_budget::Meter,
    conditions::is_true,
    resources::ResourceKey,
    work::agent::{
        conditions::{
            ApplyOutcome, Availability, deleting, feedback_synced, from_rule, manifest_applied,
            manifest_available, merge, work_conditions,
        },
        eviction, feedback, names,
        order::apply_waves,
        ownership::{
            owned_by_work, owner_reference, releases_pre_existing, required_owner, sort_applied, untracked,
        },
        rules,
        watch::{MetadataKeys, Wake, WatchedKind, WatchedObject},
    },
};
use flotilla_kube::events::{self, ConditionEvent};
use futures::{StreamExt as _, stream};
use k8s_openapi::{
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition, jiff::Timestamp,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, DynamicObject, ObjectMeta, PostParams},
    core::GroupVersionKind,
    runtime::{
        conditions::is_crd_established, controller::Action, reflector::ObjectRef, wait::await_condition,
    },
};
use serde_json::Value;

use crate::agent::{Context, Error, Result, apply, cleanup, executor};

/// The work conditions whose changes the agent reports as Events on the work, with OCM's
/// reasons (`AppliedManifestWorkComplete`/`AppliedManifestWorkFailed`, `ResourcesAvailable`/
/// `ResourcesNotAvailable`/`ResourcesStatusUnknown`).
const WORK_EVENTS: &[ConditionEvent] = &[
    ConditionEvent {
        type_: CONDITION_APPLIED,
        action: "Apply",
        warning: events::when_false,
    },
    ConditionEvent {
        type_: CONDITION_AVAILABLE,
        action: "Apply",
        warning: events::when_false,
    },
];

/// What happened to one manifest in this reconcile.
struct ManifestResult {
    meta: ManifestResourceMeta,
    outcome: ApplyOutcome,
    availability: Availability,
    live: Option<Value>,
    uid: Option<String>,
    /// Whether the group/resource is known (else the manifest's name blocks clean-up).
    resolved: bool,
    /// When the agent keeps the object as written (applied with Update or ServerSideApply),
    /// the manifest's label and annotation keys: a change of its content is drift.
    kept: Option<MetadataKeys>,
}

/// Reconciles `work`.
pub(crate) async fn reconcile(work: Arc<ManifestWork>, ctx: Arc<Context>) -> Result<Action> {
    let works: Api<ManifestWork> = Api::namespaced(ctx.hub.clone(), &ctx.cluster);
    let applied_name = names::applied_manifest_work_name(&ctx.hub_hash, &work.name_any());
    let applied_api: Api<AppliedManifestWork> = Api::all(ctx.managed.clone());

    if work.meta().deletion_timestamp.is_some() {
        return finalize(&ctx, &work, &works, &applied_api, &applied_name).await;
    }
    let status = work.status.clone().unwrap_or_default();
    let complete = is_true(&status.conditions, CONDITION_COMPLETE);
    let has_finalizer = flotilla_kube::finalizer::has(work.as_ref(), MANIFEST_WORK_FINALIZER);
    if complete {
        ctx.watches.set(&work.name_any(), BTreeMap::new());
        if !has_finalizer {
            add_finalizer(&works, &work).await?;
        }
        return Ok(Action::await_change());
    }
    // A new work: add the finalizer and make sure of its AppliedManifestWork at once (nothing
    // is applied before both are written: a work deleted meanwhile leaves only an empty
    // record, which eviction removes), and go on with the object the finalizer write returned
    // (its resourceVersion guards the status write below).
    let (work, applied) = if has_finalizer {
        let applied = ensure_applied(&ctx, &work, &applied_api, &applied_name).await?;
        (work, applied)
    } else {
        let (work, applied) = futures::try_join!(
            add_finalizer(&works, &work),
            ensure_applied(&ctx, &work, &applied_api, &applied_name),
        )?;
        (Arc::new(work), applied)
    };
    if applied.meta().deletion_timestamp.is_some() {
        return Err(Error::Waiting(format!(
            "AppliedManifestWork {applied_name} to finish deleting"
        )));
    }
    let applied_uid = applied.uid().unwrap_or_default();
    let owner = owner_reference(&applied_name, &applied_uid);
    let generation = work.meta().generation.unwrap_or_default();

    let recorded = applied.status.clone().unwrap_or_default().applied_resources;
    let (results, executor_denied) = apply_all(&ctx, &work, &status, &owner, &recorded).await;

    // Record what exists now; clean up what the spec no longer holds.
    let previous = applied.status.clone().unwrap_or_default();
    let mut records: Vec<AppliedManifestResourceMeta> = Vec::new();
    let mut blocked = false;
    for result in &results {
        match (&result.uid, &result.availability) {
            (Some(uid), _) => records.push(record(&result.meta, uid)),
            (None, Availability::FetchFailed(_)) => blocked = true,
            _ => {}
        }
    }
    let mut kept_unresolved = Vec::new();
    for old in &previous.applied_resources {
        let unresolved_same_name = results.iter().any(|r| {
            !r.resolved
                && r.meta.name == old.name
                && (r.meta.namespace.is_empty() || r.meta.namespace == old.namespace)
        });
        if unresolved_same_name {
            kept_unresolved.push(old.clone());
        }
    }
    let dropped: Vec<_> = untracked(&previous.applied_resources, &records)
        .into_iter()
        .filter(|d| !kept_unresolved.contains(d))
        .collect();
    // A work the agent has not applied before (e.g. recreated on a new hub with the same URL)
    // keeps what was recorded until its first apply, as OCM does; an unreadable object blocks
    // clean-up until it can be read.
    let first_apply = status.conditions.iter().all(|c| c.type_ != "Applied");
    let mut pending = Vec::new();
    let mut cleanup_error = None;
    let cleanup_started = !dropped.is_empty() && !first_apply && !blocked;
    if !dropped.is_empty() {
        if !cleanup_started {
            pending = dropped;
        } else {
            let reason = format!("no longer in ManifestWork {}", work.name_any());
            match cleanup::cleanup_resources(&ctx.managed, &dropped, &applied_uid, &reason).await {
                Ok(still) => pending = still,
                Err(error) => {
                    pending = dropped;
                    cleanup_error = Some(error);
                }
            }
        }
    }
    records.extend(kept_unresolved);
    records.extend(pending.iter().cloned());
    sort_applied(&mut records);
    let desired_applied = AppliedManifestWorkStatus {
        applied_resources: records,
        eviction_start_time: previous.eviction_start_time.clone(),
    };
    // Status.
    let now = Timestamp::now();
    let mut manifests = Vec::with_capacity(results.len());
    let mut needs_polling = false;
    let mut watched = BTreeMap::new();
    // One budget for the condition rules of all the manifests (see `rules::RULES_DEADLINE`).
    let rules_meter = Arc::new(Meter::new(rules::RULES_DEADLINE));
    for result in &results {
        let config = find_config(&work.spec.manifest_configs, &result.meta);
        let mut desired = vec![
            manifest_applied(&result.outcome, generation),
            manifest_available(&result.availability, generation),
        ];
        let mut values = Vec::new();
        // Watched feedback: the object's changes (its creation too) wake the work instead of
        // the status-sync poll.
        // Drift: a change of an object the work keeps as written wakes it instead of the
        // resync.
        let watch = result.resolved && watches_feedback(config);
        if watch {
            watched.insert(watched_object(&result.meta), Wake::AnyChange);
        } else if let Some(keys) = &result.kept {
            watched.insert(watched_object(&result.meta), Wake::Content(keys.clone()));
        }
        if let Some(live) = &result.live {
            let feedback_rules = config.map(|c| c.feedback_rules.as_slice()).unwrap_or_default();
            let (found, errors) = feedback::values(
                feedback_rules,
                &result.meta.group,
                &result.meta.version,
                &result.meta.kind,
                live,
                false,
            );
            values = found;
            let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
            desired.push(feedback_synced(!feedback_rules.is_empty(), &errors, generation));
            let condition_rules = config.map(|c| c.condition_rules.as_slice()).unwrap_or_default();
            if !condition_rules.is_empty() {
                let evaluated = flotilla_kube::controller::off_the_async_workers(|| {
                    rules::evaluate(
                        condition_rules,
                        &result.meta.group,
                        &result.meta.version,
                        &result.meta.kind,
                        live,
                        &rules_meter,
                    )
                });
                desired.extend(evaluated.iter().map(|condition| from_rule(condition, generation)));
            }
            needs_polling |= (!feedback_rules.is_empty() || !condition_rules.is_empty()) && !watch;
        }
        let old = status
            .resource_status
            .manifests
            .iter()
            .find(|m| same_manifest(&m.resource_meta, &result.meta))
            .map(|m| m.conditions.as_slice())
            .unwrap_or_default();
        manifests.push(ManifestCondition {
            resource_meta: result.meta.clone(),
            status_feedbacks: StatusFeedbackResult { values },
            conditions: merge(old, &desired, now),
        });
    }
    let work_level = work_conditions(generation, &manifests);
    let conditions = merge(&status.conditions, &work_level, now);
    let all_done = work_level.iter().all(|c| match c.type_.as_str() {
        "Applied" | "Available" => c.status == "True",
        _ => true,
    });
    let desired_status = ManifestWorkStatus {
        conditions,
        resource_status: flotilla_api::work::v1::ManifestResourceStatus { manifests },
    };
    // The record first: the work reports Applied only once every object it applied is
    // recorded. Written at once, a failed record write (a conflict) beside a successful status
    // write let a spec change that followed at once forget a dropped object, left behind.
    crate::agent::appliedmanifestwork::patch_status(&applied_api, &applied, &desired_applied).await?;
    let after = desired_status.conditions.clone();
    flotilla_kube::status::replace_if_changed(
        &works,
        work.as_ref(),
        work.status.as_ref(),
        desired_status,
        |w, status| w.status = Some(status),
    )
    .await?;
    ctx.hub_events
        .conditions(work.as_ref(), &status.conditions, &after, WORK_EVENTS)
        .await;
    ctx.watches.set(&work.name_any(), watched);

    if let Some(error) = cleanup_error {
        return Err(error);
    }
    if cleanup_started && !pending.is_empty() {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    if executor_denied {
        return Ok(Action::requeue(ctx.options.executor_retry_interval));
    }
    if needs_polling || !all_done {
        return Ok(Action::requeue(ctx.options.status_sync_interval));
    }
    Ok(Action::requeue(jittered(ctx.options.resync_interval)))
}

/// `base` ±50 %.
fn jittered(base: Duration) -> Duration {
    base.mul_f64(0.5 + fastrand::f64())
}

/// The label and annotation keys `manifest` sets.
fn metadata_keys(manifest: &Value) -> MetadataKeys {
    let keys = |field: &str| {
        manifest
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_object)
            .map(|map| map.keys().cloned().collect())
            .unwrap_or_default()
    };
    MetadataKeys {
        labels: keys("labels"),
        annotations: keys("annotations"),
    }
}

/// Whether `config` asks for its status (feedback or condition rules) to be watched.
fn watches_feedback(config: Option<&ManifestConfigOption>) -> bool {
    config.is_some_and(|c| {
        c.feedback_scrape_type == Some(FeedbackScrapeType::Watch)
            && (!c.feedback_rules.is_empty() || !c.condition_rules.is_empty())
    })
}

fn watched_object(meta: &ManifestResourceMeta) -> WatchedObject {
    WatchedObject {
        kind: WatchedKind {
            group: meta.group.clone(),
            version: meta.version.clone(),
            resource: meta.resource.clone(),
            namespaced: !meta.namespace.is_empty(),
        },
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
    }
}

fn record(meta: &ManifestResourceMeta, uid: &str) -> AppliedManifestResourceMeta {
    AppliedManifestResourceMeta {
        group: meta.group.clone(),
        resource: meta.resource.clone(),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        version: meta.version.clone(),
        uid: uid.to_owned(),
    }
}

fn same_manifest(a: &ManifestResourceMeta, b: &ManifestResourceMeta) -> bool {
    a.group == b.group
        && a.kind == b.kind
        && a.name == b.name
        && a.namespace == b.namespace
        && a.ordinal == b.ordinal
}

fn find_config<'a>(
    configs: &'a [ManifestConfigOption],
    meta: &ManifestResourceMeta,
) -> Option<&'a ManifestConfigOption> {
    configs.iter().find(|c| {
        let id = &c.resource_identifier;
        id.group == meta.group
            && id.resource == meta.resource
            && id.name == meta.name
            && id.namespace == meta.namespace
    })
}

/// Adds the work finalizer; returns the work as written.
async fn add_finalizer(works: &Api<ManifestWork>, work: &ManifestWork) -> Result<ManifestWork> {
    let written = flotilla_kube::finalizer::add(works, work, MANIFEST_WORK_FINALIZER).await?;
    Ok(written.unwrap_or_else(|| work.clone()))
}

/// The AppliedManifestWork `name` as the agent's store holds it, if the store has been filled
/// (`None` while it is being listed, or when it does not hold the record).
fn stored_applied(ctx: &Context, name: &str) -> Option<AppliedManifestWork> {
    if !flotilla_kube::controller::cache_ready(&ctx.applied) {
        return None;
    }
    ctx.applied
        .get(&ObjectRef::new(name))
        .map(|applied| applied.as_ref().clone())
}

/// The AppliedManifestWork `name`, created when missing: read from the store (the watch has
/// it), else created first (the usual case: a new work) and read from the server only if it
/// exists (the store was behind).
async fn ensure_applied(
    ctx: &Context,
    work: &ManifestWork,
    api: &Api<AppliedManifestWork>,
    name: &str,
) -> Result<AppliedManifestWork> {
    if let Some(existing) = stored_applied(ctx, name) {
        return Ok(existing);
    }
    let applied = AppliedManifestWork {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: work.metadata.labels.clone(),
            // What a later eviction compares with the hub's state (a restored hub is older),
            // and which work this is should the hub be reached under another URL.
            annotations: Some(
                [
                    (
                        eviction::HUB_RESOURCE_VERSION_ANNOTATION,
                        &work.metadata.resource_version,
                    ),
                    (eviction::MANIFEST_WORK_UID_ANNOTATION, &work.metadata.uid),
                ]
                .into_iter()
                .filter_map(|(key, value)| Some((key.to_owned(), value.clone()?)))
                .collect(),
            ),
            finalizers: Some(vec![APPLIED_MANIFEST_WORK_FINALIZER.to_owned()]),
            ..ObjectMeta::default()
        },
        spec: AppliedManifestWorkSpec {
            hub_hash: ctx.hub_hash.clone(),
            agent_id: ctx.agent_id.clone(),
            manifest_work_name: work.name_any(),
        },
        status: None,
    };
    match api.create(&PostParams::default(), &applied).await {
        Ok(created) => Ok(created),
        Err(kube::Error::Api(status)) if status.code == 409 => api
            .get(name)
            .await
            .map_err(Error::kube(format!("read AppliedManifestWork {name}"))),
        Err(source) => Err(Error::Kube {
            action: format!("create AppliedManifestWork {name}"),
            source,
        }),
    }
}

/// Deleting work: `Deleting`, then the AppliedManifestWork (whose own finalizer removes the
/// objects), then the work's finalizer once the record is gone. Its watches stop at once.
async fn finalize(
    ctx: &Context,
    work: &ManifestWork,
    works: &Api<ManifestWork>,
    applied_api: &Api<AppliedManifestWork>,
    applied_name: &str,
) -> Result<Action> {
    ctx.watches.set(&work.name_any(), BTreeMap::new());
    if !flotilla_kube::finalizer::has(work, MANIFEST_WORK_FINALIZER) {
        return Ok(Action::await_change());
    }
    let applied = applied_api
        .get_opt(applied_name)
        .await
        .map_err(Error::kube(format!("read AppliedManifestWork {applied_name}")))?;
    let Some(applied) = applied else {
        flotilla_kube::finalizer::remove(works, work, &[MANIFEST_WORK_FINALIZER]).await?;
        return Ok(Action::await_change());
    };
    let status = work.status.clone().unwrap_or_default();
    let remaining = applied.status.as_ref().map_or(0, |s| s.applied_resources.len());
    let generation = work.meta().generation.unwrap_or_default();
    let mut conditions = status.conditions.clone();
    flotilla_core::conditions::set(
        &mut conditions,
        deleting(generation, remaining).as_new(),
        Timestamp::now(),
    );
    let desired = ManifestWorkStatus { conditions, ..status };
    // The work may be gone by the time the status is written; that is fine.
    if let Err(error) =
        flotilla_kube::status::patch_if_changed(works, work, work.status.as_ref(), &desired).await
    {
        tracing::debug!(%error, "could not set Deleting");
    }
    if applied.meta().deletion_timestamp.is_none() {
        applied_api
            .delete(applied_name, &DeleteParams::default())
            .await
            .map_err(Error::kube(format!("delete AppliedManifestWork {applied_name}")))?;
    }
    Ok(Action::requeue(Duration::from_secs(1)))
}

/// Manifests of one wave applied at once, at most.
const WAVE_CONCURRENCY: usize = 8;

/// Applies every manifest in kind order, the manifests of one rank at once
/// ([`apply_waves`]); returns results in spec order and whether an executor was denied.
async fn apply_all(
    ctx: &Context,
    work: &ManifestWork,
    status: &ManifestWorkStatus,
    owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    recorded: &[AppliedManifestResourceMeta],
) -> (Vec<ManifestResult>, bool) {
    let manifests = &work.spec.workload.manifests;
    let kinds: Vec<Option<&str>> = manifests
        .iter()
        .map(|m| m.0.get("kind").and_then(Value::as_str))
        .collect();
    let executor_user = executor::executor_user(work.spec.executor.as_ref());
    let mut results: BTreeMap<usize, ManifestResult> = BTreeMap::new();
    let mut flags = Flags::default();
    for wave in apply_waves(&kinds) {
        let crd_applied = flags.crd_applied;
        let applied: Vec<(usize, ManifestResult, Flags)> = stream::iter(wave)
            .map(|index| {
                let ordinal = i32::try_from(index).unwrap_or(i32::MAX);
                let executor_user = executor_user.as_deref();
                async move {
                    let (result, flags) = apply_one(
                        ctx,
                        work,
                        status,
                        owner,
                        &manifests[index].0,
                        ordinal,
                        executor_user,
                        recorded,
                        crd_applied,
                    )
                    .await;
                    (index, result, flags)
                }
            })
            .buffered(WAVE_CONCURRENCY)
            .collect()
            .await;
        for (index, result, wave_flags) in applied {
            flags.denied |= wave_flags.denied;
            flags.crd_applied |= wave_flags.crd_applied;
            results.insert(index, result);
        }
    }
    (results.into_values().collect(), flags.denied)
}

/// What one manifest's apply tells the later ones.
#[derive(Default)]
struct Flags {
    /// An executor was denied.
    denied: bool,
    /// A CRD was applied in this pass: its kind may take a moment to show in discovery.
    crd_applied: bool,
}

#[expect(clippy::too_many_arguments, reason = "one manifest's inputs, passed once")]
async fn apply_one(
    ctx: &Context,
    work: &ManifestWork,
    status: &ManifestWorkStatus,
    owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    manifest: &Value,
    ordinal: i32,
    executor_user: Option<&str>,
    recorded: &[AppliedManifestResourceMeta],
    crd_applied: bool,
) -> (ManifestResult, Flags) {
    let mut flags = Flags::default();
    let mut meta = ManifestResourceMeta {
        ordinal,
        ..ManifestResourceMeta::default()
    };
    let failed = |meta: ManifestResourceMeta, message: String, resolved: bool| {
        let result = ManifestResult {
            meta,
            outcome: ApplyOutcome::Failed(message),
            availability: Availability::IncompleteMeta,
            live: None,
            uid: None,
            resolved,
            kept: None,
        };
        (result, Flags::default())
    };
    let Some(key) = ResourceKey::of(manifest) else {
        return failed(
            meta,
            "the manifest needs apiVersion, kind and metadata.name".into(),
            false,
        );
    };
    let (group, version) = key.group_version();
    let (group, version) = (group.to_owned(), version.to_owned());
    let ResourceKey {
        kind,
        name,
        namespace,
        ..
    } = key;
    meta.group.clone_from(&group);
    meta.version.clone_from(&version);
    meta.kind.clone_from(&kind);
    meta.name.clone_from(&name);
    meta.namespace.clone_from(&namespace);
    let gvk = GroupVersionKind::gvk(&group, &version, &kind);
    let mut resolved = ctx.discovery.resolve(&gvk).await;
    // Discovery serves a just-Established CRD's kind a moment later.
    let mut attempts = if crd_applied { 10 } else { 0 };
    while resolved.is_err() && attempts > 0 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        resolved = ctx.discovery.resolve(&gvk).await;
        attempts -= 1;
    }
    let resolved = match resolved {
        Ok(resolved) => resolved,
        Err(message) => return failed(meta, message, false),
    };
    meta.resource.clone_from(&resolved.resource.plural);
    if !resolved.namespaced {
        meta.namespace.clear();
    } else if namespace.is_empty() {
        return failed(
            meta,
            format!("{kind} is namespaced: set metadata.namespace"),
            true,
        );
    }
    let api: Api<DynamicObject> = if resolved.namespaced {
        Api::namespaced_with(ctx.managed.clone(), &meta.namespace, &resolved.resource)
    } else {
        Api::all_with(ctx.managed.clone(), &resolved.resource)
    };

    let config = find_config(&work.spec.manifest_configs, &meta);
    let strategy = config
        .and_then(|c| c.update_strategy.as_ref())
        .map(|s| s.type_)
        .unwrap_or_default();
    let ssa = config
        .and_then(|c| c.update_strategy.as_ref())
        .and_then(|s| s.server_side_apply.as_ref());
    let owned = owned_by_work(
        work.spec.delete_option.as_ref(),
        &meta.group,
        &meta.resource,
        &meta.namespace,
        &meta.name,
    );
    let required = required_owner(owner, owned && strategy != UpdateStrategyType::ReadOnly);

    // A manifest that completed is not touched again.
    let complete = status
        .resource_status
        .manifests
        .iter()
        .find(|m| same_manifest(&m.resource_meta, &meta))
        .is_some_and(|m| is_true(&m.conditions, CONDITION_COMPLETE));

    let mut desired = manifest.clone();
    if let Some(meta_map) = desired.get_mut("metadata").and_then(Value::as_object_mut) {
        meta_map.remove("uid");
        meta_map.remove("resourceVersion");
        if resolved.namespaced {
            meta_map.insert("namespace".into(), Value::String(meta.namespace.clone()));
        }
    }

    let mut outcome = ApplyOutcome::Applied;
    let mut live = None;
    if complete {
        // Read only.
    } else if let Some(user) = executor_user
        && let Err(message) = executor::check(
            &ctx.managed,
            user,
            &meta.group,
            &meta.resource,
            &meta.namespace,
            &meta.name,
            owned,
        )
        .await
    {
        flags.denied = true;
        outcome = ApplyOutcome::Failed(message);
    } else if let Some(user) = executor_user
        && executor::escalation_checked(&meta.group, &meta.resource)
        && let Err(message) =
            executor::check_escalation(&ctx.managed, user, &resolved.resource, &meta.namespace, &desired)
                .await
    {
        flags.denied = true;
        outcome = ApplyOutcome::Failed(message);
    } else {
        let known = recorded.iter().any(|r| {
            r.group == meta.group
                && r.resource == meta.resource
                && r.namespace == meta.namespace
                && r.name == meta.name
        });
        let release = releases_pre_existing(work.metadata.annotations.as_ref());
        match apply::apply(&api, &name, desired, strategy, ssa, &required, known, release).await {
            Ok(object) => live = Some(object),
            Err(failure) => outcome = failure,
        }
    }

    if outcome == ApplyOutcome::Applied
        && kind == "CustomResourceDefinition"
        && group == "apiextensions.k8s.io"
    {
        let crds: Api<CustomResourceDefinition> = Api::all(ctx.managed.clone());
        let established = await_condition(crds, &name, is_crd_established());
        match tokio::time::timeout(ctx.options.crd_established_timeout, established).await {
            Ok(Ok(_)) => flags.crd_applied = true,
            Ok(Err(error)) => {
                outcome = ApplyOutcome::Failed(format!("waiting for the CRD to be Established: {error}"))
            }
            Err(_) => {
                outcome = ApplyOutcome::Failed(format!(
                    "the CRD is not Established after {:?}; check its conditions",
                    ctx.options.crd_established_timeout
                ));
            }
        }
    }

    let live = match live {
        Some(object) => Ok(Some(object)),
        None => api.get_opt(&name).await,
    };
    let (availability, live) = match live {
        Ok(Some(object)) => (Availability::Found, Some(object)),
        Ok(None) => (Availability::NotFound, None),
        Err(error) => (Availability::FetchFailed(error.to_string()), None),
    };
    let kept = !complete
        && outcome == ApplyOutcome::Applied
        && matches!(
            strategy,
            UpdateStrategyType::Update | UpdateStrategyType::ServerSideApply
        );
    if let Some(object) = &live
        && (kept || watches_feedback(config))
    {
        ctx.watches.observed(watched_object(&meta), &object.metadata);
    }
    let uid = live.as_ref().and_then(|o| o.metadata.uid.clone());
    let live = live.and_then(|o| serde_json::to_value(o).ok());
    let kept = (kept && live.is_some()).then(|| metadata_keys(manifest));
    let result = ManifestResult {
        meta,
        outcome,
        availability,
        live,
        uid,
        resolved: true,
        kept,
    };
    (result, flags)
}
