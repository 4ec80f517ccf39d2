//! The AppliedManifestWork's list of applied resources after an apply: every object that
//! exists now, with its uid, plus what is still being cleaned up. Objects the spec no longer
//! holds are cleaned up ([`cleanup::cleanup_resources`]) unless that could remove something
//! the work still wants:
//!
//! - a manifest whose resource is unknown (its kind not served) keeps the records of its name:
//!   its object may be one of them;
//! - an object that could not be read blocks all clean-up until it can be;
//! - a work the agent has not applied before (e.g. recreated on a new hub with the same URL)
//!   keeps what was recorded until its first apply, as OCM does.

use flotilla_api::work::v1::{
    AppliedManifestResourceMeta, AppliedManifestWork, AppliedManifestWorkStatus, ManifestResourceMeta,
    ManifestWork, ManifestWorkStatus,
};
use flotilla_core::work::agent::{
    conditions::Availability,
    ownership::{sort_applied, untracked},
};
use kube::ResourceExt;

use super::apply::ManifestResult;
use crate::agent::{Context, Error, cleanup};

/// The record's status to write, and how the clean-up went.
pub(super) struct Pruned {
    /// The AppliedManifestWork status to write.
    pub(super) status: AppliedManifestWorkStatus,
    /// Dropped objects are still being deleted: look again shortly.
    pub(super) still_deleting: bool,
    /// Why a dropped object could not be cleaned up; it stays recorded.
    pub(super) error: Option<Error>,
}

/// Records `results` in `applied`'s list and cleans up what `work` (whose status as read is
/// `status`) dropped from its spec.
pub(super) async fn record_and_prune(
    ctx: &Context,
    work: &ManifestWork,
    status: &ManifestWorkStatus,
    applied: &AppliedManifestWork,
    results: &[ManifestResult],
) -> Pruned {
    let previous = applied.status.clone().unwrap_or_default();
    let plan = Plan::of(results, &previous.applied_resources);
    let first_apply = status.conditions.iter().all(|c| c.type_ != "Applied");
    let clean_up = !plan.dropped.is_empty() && !first_apply && !plan.blocked;
    let (pending, error) = if clean_up {
        let reason = format!("no longer in ManifestWork {}", work.name_any());
        let owner_uid = applied.uid().unwrap_or_default();
        match cleanup::cleanup_resources(&ctx.managed, &plan.dropped, &owner_uid, &reason).await {
            Ok(still) => (still, None),
            Err(error) => (plan.dropped, Some(error)),
        }
    } else {
        (plan.dropped, None)
    };
    let mut records = plan.records;
    records.extend(plan.kept_unresolved);
    records.extend(pending.iter().cloned());
    sort_applied(&mut records);
    Pruned {
        status: AppliedManifestWorkStatus {
            applied_resources: records,
            eviction_start_time: previous.eviction_start_time,
        },
        still_deleting: clean_up && !pending.is_empty(),
        error,
    }
}

/// What the record keeps and what it drops, before any clean-up.
#[derive(Debug, Default, PartialEq)]
struct Plan {
    /// The objects that exist now.
    records: Vec<AppliedManifestResourceMeta>,
    /// Earlier records with the name of a manifest whose kind is not served.
    kept_unresolved: Vec<AppliedManifestResourceMeta>,
    /// Earlier records of objects the spec no longer holds.
    dropped: Vec<AppliedManifestResourceMeta>,
    /// An object could not be read: nothing is cleaned up.
    blocked: bool,
}

impl Plan {
    /// The plan for `results` against the `previous` records.
    fn of(results: &[ManifestResult], previous: &[AppliedManifestResourceMeta]) -> Self {
        let mut plan = Self::default();
        for result in results {
            match (&result.uid, &result.availability) {
                (Some(uid), _) => plan.records.push(record(&result.meta, uid)),
                (None, Availability::FetchFailed(_)) => plan.blocked = true,
                _ => {}
            }
        }
        for old in previous {
            let unresolved_same_name = results.iter().any(|r| {
                !r.resolved
                    && r.meta.name == old.name
                    && (r.meta.namespace.is_empty() || r.meta.namespace == old.namespace)
            });
            if unresolved_same_name {
                plan.kept_unresolved.push(old.clone());
            }
        }
        plan.dropped = untracked(previous, &plan.records)
            .into_iter()
            .filter(|d| !plan.kept_unresolved.contains(d))
            .collect();
        plan
    }
}

/// The record of the object of manifest `meta`, whose uid is `uid`.
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

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn meta(name: &str) -> ManifestResourceMeta {
        ManifestResourceMeta {
            version: "v1".into(),
            kind: "ConfigMap".into(),
            resource: "configmaps".into(),
            name: name.into(),
            namespace: "apps".into(),
            ..ManifestResourceMeta::default()
        }
    }

    fn recorded(name: &str, uid: &str) -> AppliedManifestResourceMeta {
        record(&meta(name), uid)
    }

    fn result(meta: ManifestResourceMeta, uid: Option<&str>, availability: Availability) -> ManifestResult {
        ManifestResult {
            meta,
            outcome: flotilla_core::work::agent::conditions::ApplyOutcome::Applied,
            availability,
            live: None,
            uid: uid.map(str::to_owned),
            resolved: true,
            kept: None,
        }
    }

    #[test]
    fn objects_that_exist_are_recorded_and_earlier_records_of_others_dropped() {
        let results = [result(meta("a"), Some("uid-a"), Availability::Found)];
        let previous = [recorded("a", "uid-a"), recorded("b", "uid-b")];
        let plan = Plan::of(&results, &previous);
        assert_eq!(
            plan,
            Plan {
                records: vec![recorded("a", "uid-a")],
                dropped: vec![recorded("b", "uid-b")],
                ..Plan::default()
            }
        );
    }

    #[test]
    fn an_object_that_could_not_be_read_blocks_the_clean_up() {
        let results = [result(
            meta("a"),
            None,
            Availability::FetchFailed("timeout".into()),
        )];
        let plan = Plan::of(&results, &[recorded("a", "uid-a")]);
        assert!(plan.blocked);
        assert_eq!(plan.dropped, vec![recorded("a", "uid-a")]);
    }

    #[test]
    fn a_manifest_of_an_unknown_resource_keeps_the_records_of_its_name() {
        let unresolved = ManifestResult {
            resolved: false,
            ..result(
                ManifestResourceMeta {
                    name: "a".into(),
                    ..ManifestResourceMeta::default()
                },
                None,
                Availability::IncompleteMeta,
            )
        };
        let plan = Plan::of(&[unresolved], &[recorded("a", "uid-a")]);
        assert_eq!(plan.kept_unresolved, vec![recorded("a", "uid-a")]);
        assert!(plan.dropped.is_empty());
    }
}
