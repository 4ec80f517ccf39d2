//! The work's status from what the apply found: per manifest `Applied`, `Available`,
//! `StatusFeedbackSynced` and the condition rules' conditions, with feedback values; then the
//! work's own conditions aggregated from them. Computed without a request (the condition rules
//! run off the async workers, charged to one budget per work), and written whole once, only if
//! it changed, with an Event for each reported condition that changed.
//!
//! The same pass decides how each object is watched: its changes wake the work when its
//! feedback is watched, or when the agent keeps it as written (drift); anything else polled is
//! looked at again after the status-sync interval.

use std::{collections::BTreeMap, sync::Arc};

use flotilla_api::work::{
    consts::manifest_work::{CONDITION_APPLIED, CONDITION_AVAILABLE},
    v1::{
        FeedbackValue, ManifestCondition, ManifestConfigOption, ManifestResourceStatus, ManifestWork,
        ManifestWorkStatus, StatusFeedbackResult,
    },
};
use flotilla_core::{
    cel_budget::Meter,
    work::agent::{
        conditions::{
            WorkCondition, feedback_synced, from_rule, manifest_applied, manifest_available, merge,
            work_conditions,
        },
        feedback, rules,
        watch::{Wake, WatchedObject},
    },
};
use flotilla_kube::events::{self, ConditionEvent};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Condition, jiff::Timestamp};
use kube::Api;

use super::apply::ManifestResult;
use super::manifest::{find_config, same_manifest, watched_object, watches_feedback};
use crate::agent::{Context, Result};

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

/// The work's status after an apply, and what follows from it.
pub(super) struct Desired {
    /// The status to write.
    pub(super) status: ManifestWorkStatus,
    /// The objects whose changes wake the work, and which changes.
    pub(super) watched: BTreeMap<WatchedObject, Wake>,
    /// Some status (feedback, condition rules) is polled rather than watched.
    pub(super) needs_polling: bool,
    /// The work is `Applied` and `Available`.
    pub(super) all_done: bool,
}

/// The status of `work` (as read: `status`) after the apply that gave `results`, at `now`.
pub(super) fn desired(
    work: &ManifestWork,
    status: &ManifestWorkStatus,
    results: &[ManifestResult],
    now: Timestamp,
) -> Desired {
    let generation = work.metadata.generation.unwrap_or_default();
    let mut manifests = Vec::with_capacity(results.len());
    let mut needs_polling = false;
    let mut watched = BTreeMap::new();
    // One budget for the condition rules of all the manifests (see `rules::RULES_DEADLINE`).
    let rules_meter = Arc::new(Meter::new(rules::RULES_DEADLINE));
    for result in results {
        let config = find_config(&work.spec.manifest_configs, &result.meta);
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
        let observed = observe(result, config, generation, &rules_meter);
        needs_polling |= observed.has_rules && !watch;
        let old = status
            .resource_status
            .manifests
            .iter()
            .find(|m| same_manifest(&m.resource_meta, &result.meta))
            .map(|m| m.conditions.as_slice())
            .unwrap_or_default();
        let mut desired = vec![
            manifest_applied(&result.outcome, generation),
            manifest_available(&result.availability, generation),
        ];
        desired.extend(observed.conditions);
        manifests.push(ManifestCondition {
            resource_meta: result.meta.clone(),
            status_feedbacks: StatusFeedbackResult {
                values: observed.values,
            },
            conditions: merge(old, &desired, now),
        });
    }
    let work_level = work_conditions(generation, &manifests);
    let all_done = work_level.iter().all(|c| match c.type_.as_str() {
        "Applied" | "Available" => c.status == "True",
        _ => true,
    });
    Desired {
        status: ManifestWorkStatus {
            conditions: merge(&status.conditions, &work_level, now),
            resource_status: ManifestResourceStatus { manifests },
        },
        watched,
        needs_polling,
        all_done,
    }
}

/// What a manifest's live object says through the work's rules.
#[derive(Default)]
struct Observed {
    /// Its feedback values.
    values: Vec<FeedbackValue>,
    /// `StatusFeedbackSynced` and the condition rules' conditions.
    conditions: Vec<WorkCondition>,
    /// The manifest has feedback or condition rules.
    has_rules: bool,
}

/// The feedback values and rule conditions of `result`'s live object under `config` (nothing
/// when the object is not there).
fn observe(
    result: &ManifestResult,
    config: Option<&ManifestConfigOption>,
    generation: i64,
    rules_meter: &Arc<Meter>,
) -> Observed {
    let Some(live) = &result.live else {
        return Observed::default();
    };
    let meta = &result.meta;
    let feedback_rules = config.map(|c| c.feedback_rules.as_slice()).unwrap_or_default();
    let (values, errors) = feedback::values(
        feedback_rules,
        &meta.group,
        &meta.version,
        &meta.kind,
        live,
        false,
    );
    let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let mut conditions = vec![feedback_synced(!feedback_rules.is_empty(), &errors, generation)];
    let condition_rules = config.map(|c| c.condition_rules.as_slice()).unwrap_or_default();
    if !condition_rules.is_empty() {
        let evaluated = flotilla_kube::controller::off_the_async_workers(|| {
            rules::evaluate(
                condition_rules,
                &meta.group,
                &meta.version,
                &meta.kind,
                live,
                rules_meter,
            )
        });
        conditions.extend(evaluated.iter().map(|condition| from_rule(condition, generation)));
    }
    Observed {
        values,
        conditions,
        has_rules: !feedback_rules.is_empty() || !condition_rules.is_empty(),
    }
}

/// Writes `desired` as the status of `work` if it changed, whole, then reports the changes
/// of its conditions since `before` as Events.
pub(super) async fn write(
    ctx: &Context,
    works: &Api<ManifestWork>,
    work: &ManifestWork,
    before: &[Condition],
    desired: ManifestWorkStatus,
) -> Result<()> {
    let after = desired.conditions.clone();
    flotilla_kube::status::replace_if_changed(works, work, work.status.as_ref(), desired, |w, status| {
        w.status = Some(status)
    })
    .await?;
    ctx.hub_events.conditions(work, before, &after, WORK_EVENTS).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use flotilla_api::work::v1::{
        FeedbackRule, FeedbackScrapeType, ManifestResourceMeta, ManifestWorkSpec, ResourceIdentifier,
    };
    use flotilla_core::work::agent::{
        conditions::{ApplyOutcome, Availability},
        watch::MetadataKeys,
    };
    use serde_json::json;

    use super::*;

    fn result(kept: Option<MetadataKeys>) -> ManifestResult {
        ManifestResult {
            meta: ManifestResourceMeta {
                version: "v1".into(),
                kind: "ConfigMap".into(),
                resource: "configmaps".into(),
                name: "settings".into(),
                namespace: "apps".into(),
                ..ManifestResourceMeta::default()
            },
            outcome: ApplyOutcome::Applied,
            availability: Availability::Found,
            live: Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}})),
            uid: Some("uid-1".into()),
            resolved: true,
            kept,
        }
    }

    fn work(scrape: Option<FeedbackScrapeType>) -> ManifestWork {
        let mut work = ManifestWork::new("web", ManifestWorkSpec::default());
        work.spec.manifest_configs = vec![ManifestConfigOption {
            resource_identifier: ResourceIdentifier {
                group: String::new(),
                resource: "configmaps".into(),
                name: "settings".into(),
                namespace: "apps".into(),
            },
            feedback_rules: vec![FeedbackRule::default()],
            feedback_scrape_type: scrape,
            ..ManifestConfigOption::default()
        }];
        work
    }

    #[test]
    fn watched_feedback_wakes_the_work_on_any_change_instead_of_a_poll() {
        let results = [result(None)];
        let desired = desired(
            &work(Some(FeedbackScrapeType::Watch)),
            &ManifestWorkStatus::default(),
            &results,
            Timestamp::now(),
        );
        assert_eq!(
            desired.watched.into_values().collect::<Vec<_>>(),
            vec![Wake::AnyChange]
        );
        assert!(!desired.needs_polling);
    }

    #[test]
    fn polled_feedback_of_an_object_kept_as_written_is_polled_and_watched_for_drift() {
        let keys = MetadataKeys::default();
        let results = [result(Some(keys.clone()))];
        let desired = desired(
            &work(None),
            &ManifestWorkStatus::default(),
            &results,
            Timestamp::now(),
        );
        assert_eq!(
            desired.watched.into_values().collect::<Vec<_>>(),
            vec![Wake::Content(keys)]
        );
        assert!(desired.needs_polling);
    }
}
