//! Holding the eviction of a record while the hub looks restored from a backup
//! ([`flotilla_core::work::agent::eviction`]): before the grace period of a gone work starts,
//! the hub's resourceVersion is compared with the record's; a hub older than the record holds
//! it ([`EVICTION_HELD_ANNOTATION`], with why, and a Warning Event). A held record is never
//! evicted: the hold ends when the work returns, or when an admin deletes the record.

use std::time::Duration;

use flotilla_api::work::v1::AppliedManifestWork;
use flotilla_core::work::agent::eviction::{self, EVICTION_HELD_ANNOTATION, HUB_RESOURCE_VERSION_ANNOTATION};
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
    runtime::controller::Action,
};

use crate::agent::{AgentOptions, Context, Error, Result};

/// Reason of the Event on an AppliedManifestWork whose eviction is held
/// ([`flotilla_core::work::agent::eviction`]).
const REASON_EVICTION_HELD: &str = "AppliedManifestWorkEvictionHeld";

/// What the hold asks of one reconcile of a record of this hub and agent.
#[derive(Debug, PartialEq)]
enum Step {
    /// The work is back on the hub: remove the held annotation.
    Release,
    /// The work is still gone: the record stays held.
    Keep,
    /// The work is gone and its grace period not started: ask the hub whether to hold.
    Ask,
    /// Nothing is held, nor to be asked: on to the grace period.
    Proceed,
}

/// The hold's step for a record that is `held`, whose work is `present` on the hub, and whose
/// grace period has (`eviction_started`) or has not started.
fn step(present: bool, held: bool, eviction_started: bool) -> Step {
    match (present, held) {
        (true, true) => Step::Release,
        (false, true) => Step::Keep,
        (false, false) if !eviction_started => Step::Ask,
        _ => Step::Proceed,
    }
}

/// How long a held record waits before it is looked at again: the work's return is looked for
/// every resync, at least every minute.
fn held_requeue(options: &AgentOptions) -> Duration {
    options.resync_interval.min(Duration::from_secs(60))
}

/// Holds, keeps or releases the eviction of `applied`, whose work `work_name` is `present` on
/// the hub or not; `Some` ends the reconcile with that action, `None` goes on to the grace
/// period.
pub(super) async fn hold(
    ctx: &Context,
    api: &Api<AppliedManifestWork>,
    applied: &AppliedManifestWork,
    work_name: &str,
    present: bool,
) -> Result<Option<Action>> {
    let name = applied.name_any();
    let held = applied.annotations().contains_key(EVICTION_HELD_ANNOTATION);
    let started = applied
        .status
        .as_ref()
        .is_some_and(|s| s.eviction_start_time.is_some());
    match step(present, held, started) {
        Step::Release => {
            annotate_held(api, &name, None).await?;
            Ok(Some(Action::requeue(Duration::from_secs(1))))
        }
        Step::Keep => Ok(Some(Action::requeue(held_requeue(&ctx.options)))),
        Step::Ask => {
            let current = crate::agent::hub_resource_version(ctx).await?;
            let recorded = applied.annotations().get(HUB_RESOURCE_VERSION_ANNOTATION);
            let Some(why) = eviction::hold(recorded.map(String::as_str), &current) else {
                return Ok(None);
            };
            tracing::warn!(applied = %name, %why, "eviction held");
            annotate_held(api, &name, Some(&why)).await?;
            ctx.managed_events
                .warning(
                    applied,
                    REASON_EVICTION_HELD,
                    "Evict",
                    format!(
                        "ManifestWork {work_name} is gone from the hub, but {why}; its resources are kept: \
                         create the work on the hub again, or delete this AppliedManifestWork to remove them"
                    ),
                )
                .await;
            Ok(Some(Action::requeue(held_requeue(&ctx.options))))
        }
        Step::Proceed => Ok(None),
    }
}

/// Sets (with why) or removes the held annotation of record `name`.
async fn annotate_held(api: &Api<AppliedManifestWork>, name: &str, why: Option<&str>) -> Result<()> {
    let patch = serde_json::json!({"metadata": {"annotations": {EVICTION_HELD_ANNOTATION: why}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!("annotate AppliedManifestWork {name}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::work_back_while_held(true, true, false, Step::Release)]
    #[case::work_back_while_held_after_a_start(true, true, true, Step::Release)]
    #[case::work_still_gone_while_held(false, true, false, Step::Keep)]
    #[case::held_records_never_reach_the_grace_period(false, true, true, Step::Keep)]
    #[case::work_just_gone(false, false, false, Step::Ask)]
    #[case::grace_period_already_running(false, false, true, Step::Proceed)]
    #[case::work_present(true, false, false, Step::Proceed)]
    #[case::work_back_during_the_grace_period(true, false, true, Step::Proceed)]
    fn the_hub_is_asked_only_before_a_grace_period_starts_and_a_held_record_waits_for_its_work(
        #[case] present: bool,
        #[case] held: bool,
        #[case] eviction_started: bool,
        #[case] expected: Step,
    ) {
        assert_eq!(step(present, held, eviction_started), expected);
    }

    #[test]
    fn a_held_record_is_looked_at_every_resync_but_at_least_every_minute() {
        let often = AgentOptions {
            resync_interval: Duration::from_secs(20),
            ..AgentOptions::default()
        };
        let rarely = AgentOptions {
            resync_interval: Duration::from_secs(600),
            ..AgentOptions::default()
        };
        assert_eq!(held_requeue(&often), Duration::from_secs(20));
        assert_eq!(held_requeue(&rarely), Duration::from_secs(60));
    }
}
