//! The eviction grace period of a record of this hub and agent: when its work is gone from the
//! hub, the record is marked (`evictionStartTime`, with an Event), and deleted once the work
//! stayed gone for the whole grace period (its finalizer then removes what it owns,
//! [`super::finalize`]). A work that returns clears the mark. The decision is [`eviction`],
//! pure; this file's I/O only carries it out.

use std::time::Duration;

use flotilla_api::work::v1::{AppliedManifestWork, AppliedManifestWorkStatus};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{Api, ResourceExt, api::DeleteParams, runtime::controller::Action};

use crate::agent::{Context, Error, Result};

/// Reason of the Event on an AppliedManifestWork whose work left the hub: the grace period
/// starts (OCM only logs it; the name is Flotilla's).
const REASON_EVICTION_STARTED: &str = "AppliedManifestWorkEvictionStarted";
/// Reason of the Event on an AppliedManifestWork deleted once the grace period ran out.
const REASON_EVICTED: &str = "AppliedManifestWorkEvicted";

/// The longest a record waits before it is looked at again.
const MAX_REQUEUE: Duration = Duration::from_secs(60);

/// What the grace period asks of a record.
#[derive(Debug, PartialEq)]
enum Eviction {
    /// The work stayed gone for the whole grace period: delete the record.
    Evict,
    /// Write `start` as the record's `evictionStartTime` (`None`: the work is on the hub) and
    /// look again after `requeue`.
    Track {
        /// The eviction start time to write.
        start: Option<Time>,
        /// When to look at the record again.
        requeue: Duration,
    },
}

/// The grace period's decision at `now` for a record whose eviction `started` (or not) and
/// whose work is `present` on the hub or not. A start ahead of `now` (another clock) counts as
/// just started.
fn eviction(started: Option<&Time>, present: bool, now: Timestamp, grace: Duration) -> Eviction {
    match (started, present) {
        (_, true) => Eviction::Track {
            start: None,
            requeue: MAX_REQUEUE,
        },
        (None, false) => Eviction::Track {
            start: Some(Time(now)),
            requeue: grace.min(MAX_REQUEUE),
        },
        (Some(start), false) => {
            let elapsed = now.duration_since(start.0);
            let elapsed = Duration::try_from(elapsed).unwrap_or_default();
            if elapsed >= grace {
                return Eviction::Evict;
            }
            Eviction::Track {
                start: Some(start.clone()),
                requeue: (grace - elapsed).min(MAX_REQUEUE),
            }
        }
    }
}

/// Starts, follows or clears the grace period of `applied`, whose work `work_name` is
/// `present` on the hub or not, and evicts the record once it ran out.
pub(super) async fn evict(
    ctx: &Context,
    api: &Api<AppliedManifestWork>,
    applied: &AppliedManifestWork,
    work_name: &str,
    present: bool,
) -> Result<Action> {
    let name = applied.name_any();
    let status = applied.status.clone().unwrap_or_default();
    let grace = ctx.options.eviction_grace_period;
    let (start, requeue) = match eviction(
        status.eviction_start_time.as_ref(),
        present,
        Timestamp::now(),
        grace,
    ) {
        Eviction::Evict => {
            tracing::info!(applied = %name, "evicting: the work is gone from the hub for the whole grace period");
            api.delete(&name, &DeleteParams::default())
                .await
                .map_err(Error::kube(format!("evict AppliedManifestWork {name}")))?;
            ctx.managed_events
                .warning(
                    applied,
                    REASON_EVICTED,
                    "Evict",
                    format!(
                        "ManifestWork {work_name} is gone from the hub for the whole eviction grace period ({}s); its resources are deleted",
                        grace.as_secs()
                    ),
                )
                .await;
            return Ok(Action::await_change());
        }
        Eviction::Track { start, requeue } => (start, requeue),
    };
    let starts = status.eviction_start_time.is_none() && start.is_some();
    let desired = AppliedManifestWorkStatus {
        eviction_start_time: start,
        ..status
    };
    super::patch_status(api, applied, &desired).await?;
    if starts {
        ctx.managed_events
            .normal(
                applied,
                REASON_EVICTION_STARTED,
                "Evict",
                format!(
                    "ManifestWork {work_name} is gone from the hub; its resources are deleted unless it returns within {}s",
                    grace.as_secs()
                ),
            )
            .await;
    }
    Ok(Action::requeue(requeue))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    const GRACE: Duration = Duration::from_secs(600);

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).expect("a valid timestamp")
    }

    /// An eviction started `secs` before [`now`] (after it, when negative).
    fn started(secs: i64) -> Time {
        Time(now() - k8s_openapi::jiff::SignedDuration::from_secs(secs))
    }

    #[test]
    fn a_work_on_the_hub_clears_the_start_and_is_looked_at_every_minute() {
        assert_eq!(
            eviction(Some(&started(30)), true, now(), GRACE),
            Eviction::Track {
                start: None,
                requeue: MAX_REQUEUE,
            }
        );
        assert_eq!(
            eviction(None, true, now(), GRACE),
            Eviction::Track {
                start: None,
                requeue: MAX_REQUEUE,
            }
        );
    }

    #[test]
    fn a_work_just_gone_starts_the_grace_period_now() {
        assert_eq!(
            eviction(None, false, now(), GRACE),
            Eviction::Track {
                start: Some(Time(now())),
                requeue: MAX_REQUEUE,
            }
        );
    }

    #[test]
    fn a_grace_period_shorter_than_a_minute_is_looked_at_when_it_runs_out() {
        assert_eq!(
            eviction(None, false, now(), Duration::from_secs(10)),
            Eviction::Track {
                start: Some(Time(now())),
                requeue: Duration::from_secs(10),
            }
        );
    }

    #[test]
    fn a_running_grace_period_keeps_its_start_and_is_looked_at_when_it_runs_out() {
        assert_eq!(
            eviction(Some(&started(570)), false, now(), GRACE),
            Eviction::Track {
                start: Some(started(570)),
                requeue: Duration::from_secs(30),
            }
        );
    }

    #[test]
    fn a_work_gone_for_the_whole_grace_period_is_evicted() {
        assert_eq!(
            eviction(Some(&started(600)), false, now(), GRACE),
            Eviction::Evict
        );
        assert_eq!(
            eviction(Some(&started(601)), false, now(), GRACE),
            Eviction::Evict
        );
    }

    #[test]
    fn a_start_ahead_of_the_clock_counts_as_just_started() {
        assert_eq!(
            eviction(Some(&started(-120)), false, now(), GRACE),
            Eviction::Track {
                start: Some(started(-120)),
                requeue: MAX_REQUEUE,
            }
        );
    }
}
