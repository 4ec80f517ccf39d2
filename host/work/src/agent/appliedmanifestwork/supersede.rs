//! Records of this hub made under a URL it is no longer reached at: the same hub, so the same
//! works, recorded again under the current URL's hub hash. The old record is deleted once the
//! new one exists, and kept until then: its clean-up ([`super::finalize`]) then only takes the
//! old record off what both own. Which work a record holds is known by the work's uid
//! ([`MANIFEST_WORK_UID_ANNOTATION`]); a record whose uid the agent does not see on its hub is
//! another hub's, and left alone.

use std::time::Duration;

use flotilla_api::work::v1::AppliedManifestWork;
use flotilla_core::work::agent::eviction::MANIFEST_WORK_UID_ANNOTATION;
use flotilla_core::work::agent::names::applied_manifest_work_name;
use kube::{
    Api, ResourceExt,
    api::DeleteParams,
    runtime::{controller::Action, reflector::ObjectRef},
};

use crate::agent::{Context, Error, Result};

/// Reason of the Event on an AppliedManifestWork of this hub made under another URL, removed
/// once the record under the current one exists.
const REASON_SUPERSEDED: &str = "AppliedManifestWorkSuperseded";

/// What supersedes a record of another hub hash.
#[derive(Debug, PartialEq)]
pub(super) enum Supersession {
    /// The record of the same work under this hub hash (its name), and the work's name.
    By(String, String),
    /// The work is this hub's, but its record under this hub hash is not made yet.
    Pending,
}

/// Whether `applied`, made under another hub hash by this agent's records, records a work this
/// agent sees on its hub (by the work's uid): the same hub reached under another URL. Read
/// from the agent's stores of works and records.
pub(super) fn superseded_by(ctx: &Context, applied: &AppliedManifestWork) -> Option<Supersession> {
    supersession(
        applied,
        &ctx.hub_hash,
        |uid| {
            ctx.works
                .state()
                .into_iter()
                .find(|w| w.metadata.uid.as_deref() == Some(uid))
                .map(|w| w.name_any())
        },
        |record| ctx.applied.get(&ObjectRef::new(record)).is_some(),
    )
}

/// What supersedes `applied` now that the hub's hash is `hub_hash`: `work_with_uid` names the
/// hub's work of a uid, if the agent sees it; `recorded` tells whether a record exists. Both
/// are asked only for a record of another hub hash that carries a work uid.
fn supersession(
    applied: &AppliedManifestWork,
    hub_hash: &str,
    work_with_uid: impl FnOnce(&str) -> Option<String>,
    recorded: impl FnOnce(&str) -> bool,
) -> Option<Supersession> {
    if applied.spec.hub_hash == hub_hash {
        return None;
    }
    let uid = applied.annotations().get(MANIFEST_WORK_UID_ANNOTATION)?;
    let work = work_with_uid(uid)?;
    let record = applied_manifest_work_name(hub_hash, &work);
    if recorded(&record) {
        Some(Supersession::By(record, work))
    } else {
        Some(Supersession::Pending)
    }
}

/// A record not named under this hub hash: deleted when `superseded` by the record under
/// it, looked at again shortly while that record is not made yet, else (another hub's or
/// another agent's) left alone.
pub(super) async fn supersede(
    ctx: &Context,
    api: &Api<AppliedManifestWork>,
    applied: &AppliedManifestWork,
    superseded: Option<Supersession>,
) -> Result<Action> {
    let name = applied.name_any();
    match superseded {
        Some(Supersession::By(record, work)) => {
            tracing::info!(applied = %name, by = %record, "record superseded: the hub is reached under another URL");
            api.delete(&name, &DeleteParams::default())
                .await
                .map_err(Error::kube(format!(
                    "delete superseded AppliedManifestWork {name}"
                )))?;
            ctx.managed_events
                .normal(
                    applied,
                    REASON_SUPERSEDED,
                    "Supersede",
                    format!(
                        "the hub of ManifestWork {work} is now reached under another URL; AppliedManifestWork \
                         {record} records it from now on, and this record is removed (what both record is kept)"
                    ),
                )
                .await;
            Ok(Action::await_change())
        }
        // The work is this hub's, but its record under the new URL is not made yet.
        Some(Supersession::Pending) => Ok(Action::requeue(Duration::from_secs(2))),
        None => Ok(Action::await_change()),
    }
}

#[cfg(test)]
mod tests {
    use flotilla_api::work::v1::AppliedManifestWorkSpec;
    use kube::api::ObjectMeta;

    use super::*;

    const OLD_HASH: &str = "old-hash";
    const NEW_HASH: &str = "new-hash";

    /// A record of work `web` (uid `uid-web` when given) made under hub hash `hub_hash`.
    fn record(hub_hash: &str, uid: Option<&str>) -> AppliedManifestWork {
        AppliedManifestWork {
            metadata: ObjectMeta {
                name: Some(applied_manifest_work_name(hub_hash, "web")),
                annotations: uid
                    .map(|uid| [(MANIFEST_WORK_UID_ANNOTATION.to_owned(), uid.to_owned())].into()),
                ..ObjectMeta::default()
            },
            spec: AppliedManifestWorkSpec {
                hub_hash: hub_hash.into(),
                agent_id: "agent".into(),
                manifest_work_name: "web".into(),
            },
            status: None,
        }
    }

    /// The hub holds work `web` with uid `uid-web`.
    fn hub_has_web(uid: &str) -> Option<String> {
        (uid == "uid-web").then(|| "web".to_owned())
    }

    #[test]
    fn a_record_under_the_current_hub_hash_is_never_superseded() {
        let applied = record(NEW_HASH, Some("uid-web"));
        let found = supersession(&applied, NEW_HASH, hub_has_web, |_| true);
        assert_eq!(found, None);
    }

    #[test]
    fn a_record_of_a_work_the_hub_does_not_hold_is_another_hubs() {
        let applied = record(OLD_HASH, Some("uid-other"));
        let found = supersession(&applied, NEW_HASH, hub_has_web, |_| true);
        assert_eq!(found, None);
    }

    #[test]
    fn a_record_without_a_work_uid_is_another_hubs() {
        let applied = record(OLD_HASH, None);
        let found = supersession(&applied, NEW_HASH, hub_has_web, |_| true);
        assert_eq!(found, None);
    }

    #[test]
    fn a_record_of_a_work_the_hub_holds_is_superseded_by_the_record_under_the_current_hash() {
        let applied = record(OLD_HASH, Some("uid-web"));
        let new_record = applied_manifest_work_name(NEW_HASH, "web");
        let found = supersession(&applied, NEW_HASH, hub_has_web, |r| r == new_record);
        assert_eq!(found, Some(Supersession::By(new_record, "web".into())));
    }

    #[test]
    fn a_record_of_a_work_the_hub_holds_waits_for_the_record_under_the_current_hash() {
        let applied = record(OLD_HASH, Some("uid-web"));
        let found = supersession(&applied, NEW_HASH, hub_has_web, |_| false);
        assert_eq!(found, Some(Supersession::Pending));
    }
}
