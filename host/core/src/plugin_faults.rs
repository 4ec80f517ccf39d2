//! Runtime-fault bookkeeping of one plugin revision: counts over a recent window, the last
//! fault, and quarantine with backoff. Pure: every function takes the current time, so the whole
//! policy is tested without clocks or plugins.
//!
//! ```text
//!   call ─▶ admit(now) ── Refuse{until} ──▶ caller answers the hook's fail-safe result at once
//!             │ Call
//!             ▼
//!           run ─▶ record(now, outcome)
//!                    Answered          → consecutive := 0, backoff level := 0, quarantine lifted
//!                    AnsweredWithFault → counted in the window (log flood), otherwise Answered
//!                    Failed            → counted; consecutive += 1;
//!                                        consecutive ≥ threshold, or the first call after a
//!                                        quarantine ends also fails → quarantine for
//!                                        base × 2^(level−1), at most the maximum
//! ```
//!
//! A call made for a cluster is booked twice. The cluster's own streak quarantines that
//! cluster's calls by the rule above. The revision's streak counts the distinct clusters whose
//! calls failed since the revision last answered, not their calls: a managed cluster's data
//! (claims, labels, status) that makes the plugin fault quarantines the plugin for that cluster
//! only, while a revision that faults across `threshold` clusters is quarantined for all.
//!
//! A new revision starts with an empty book, which is how a new revision lifts a quarantine; the
//! end of the backoff lifts it by time, after which one call is let through on probation.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, SystemTime};

/// How faults are counted and when a revision is quarantined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultPolicy {
    /// Consecutive failed calls (any hook) that start a quarantine.
    pub threshold: u32,
    /// How far back the counts in status reach.
    pub window: Duration,
    /// The first quarantine's length; each further quarantine of the same revision without an
    /// answered call in between doubles it.
    pub quarantine: Duration,
    /// The longest quarantine.
    pub quarantine_max: Duration,
    /// Most fault events remembered (the oldest are forgotten first), bounding memory under a
    /// fault storm.
    pub max_events: usize,
}

impl FaultPolicy {
    /// Default [`FaultPolicy::threshold`]: a few faults in a row are a pattern, one is not.
    pub const DEFAULT_THRESHOLD: u32 = 5;
    /// Default [`FaultPolicy::window`].
    pub const DEFAULT_WINDOW: Duration = Duration::from_secs(300);
    /// Default [`FaultPolicy::quarantine`].
    pub const DEFAULT_QUARANTINE: Duration = Duration::from_secs(30);
    /// Default [`FaultPolicy::quarantine_max`].
    pub const DEFAULT_QUARANTINE_MAX: Duration = Duration::from_secs(600);
    /// Default [`FaultPolicy::max_events`].
    pub const DEFAULT_MAX_EVENTS: usize = 4096;
}

impl Default for FaultPolicy {
    fn default() -> Self {
        Self {
            threshold: Self::DEFAULT_THRESHOLD,
            window: Self::DEFAULT_WINDOW,
            quarantine: Self::DEFAULT_QUARANTINE,
            quarantine_max: Self::DEFAULT_QUARANTINE_MAX,
            max_events: Self::DEFAULT_MAX_EVENTS,
        }
    }
}

/// How long the `nth` quarantine (from 1) of a revision lasts: the base doubled per level,
/// capped at the maximum.
pub fn quarantine_length(policy: &FaultPolicy, nth: u32) -> Duration {
    let factor = 2u32.saturating_pow(nth.saturating_sub(1).min(20));
    policy
        .quarantine
        .saturating_mul(factor)
        .min(policy.quarantine_max)
}

/// One recorded fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The hook (`manifests`, `approve-csr`, ...).
    pub hook: &'static str,
    /// The fault kind (`timeout`, `memory`, `trap`, `stack_overflow`, ...).
    pub kind: &'static str,
    /// What happened, for people.
    pub message: String,
    /// When.
    pub at: SystemTime,
}

/// How one call ended, as far as the book is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// The hook answered.
    Answered,
    /// The hook answered, but misbehaved on the way (a log flood): counted, not held against
    /// the revision's health streak.
    AnsweredWithFault {
        /// The hook.
        hook: &'static str,
        /// The fault kind.
        kind: &'static str,
        /// What happened.
        message: String,
    },
    /// The hook faulted; the caller got the fail-safe result.
    Failed {
        /// The hook.
        hook: &'static str,
        /// The fault kind.
        kind: &'static str,
        /// What happened.
        message: String,
    },
}

/// Whether a call may run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Run it.
    Call,
    /// The revision, or its calls for this cluster, are quarantined until the given time:
    /// answer the fail-safe result.
    Refuse {
        /// End of the quarantine.
        until: SystemTime,
        /// The cluster whose calls are quarantined; `None` when the whole revision is.
        cluster: Option<String>,
    },
}

/// Faults of one hook and kind in the window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultCount {
    /// The hook.
    pub hook: &'static str,
    /// The fault kind.
    pub kind: &'static str,
    /// Faults in the window.
    pub count: u64,
}

/// What status reports about a revision's faults at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultSummary {
    /// Faults in the window, by hook then kind.
    pub counts: Vec<FaultCount>,
    /// The most recent fault (also when it has left the window).
    pub last: Option<Fault>,
    /// Failed calls in a row, up to now.
    pub consecutive: u32,
    /// End of the quarantine in force, if any.
    pub quarantined_until: Option<SystemTime>,
    /// Quarantines of this revision since its last answered call.
    pub quarantines: u32,
    /// When the summary changes by time alone (a fault leaves the window, a quarantine ends).
    pub next_change: Option<SystemTime>,
}

impl FaultSummary {
    /// Whether there is anything to report: faults in the window or a quarantine in force.
    pub fn is_faulting(&self) -> bool {
        !self.counts.is_empty() || self.quarantined_until.is_some()
    }
}

/// A run of failed calls and the quarantine it led to.
#[derive(Clone, Debug, Default)]
struct Streak {
    consecutive: u32,
    /// Quarantines since the last answered call (the backoff level).
    quarantines: u32,
    /// End of the latest quarantine; in the past means "on probation".
    until: Option<SystemTime>,
}

impl Streak {
    fn in_force(&self, now: SystemTime) -> Option<SystemTime> {
        self.until.filter(|until| now < *until)
    }

    /// A failed call, after which the streak is `consecutive` long.
    fn failed(&mut self, policy: &FaultPolicy, now: SystemTime, consecutive: u32) {
        self.consecutive = consecutive;
        let on_probation = self.until.is_some_and(|until| until <= now);
        if self.in_force(now).is_none() && (on_probation || self.consecutive >= policy.threshold) {
            self.quarantines = self.quarantines.saturating_add(1);
            self.until = Some(now + quarantine_length(policy, self.quarantines));
        }
    }

    fn answered(&mut self) -> bool {
        let changed = self.consecutive != 0 || self.quarantines != 0 || self.until.is_some();
        *self = Self::default();
        changed
    }
}

/// The fault record of one plugin revision.
#[derive(Clone, Debug, Default)]
pub struct FaultBook {
    /// (time, hook, kind) of recent faults, oldest first.
    events: VecDeque<(SystemTime, &'static str, &'static str)>,
    last: Option<Fault>,
    revision: Streak,
    /// Clusters whose calls failed since the revision last answered: the revision's streak.
    failing: BTreeSet<String>,
    /// Streaks of the clusters whose calls are failing; a cluster leaves at its next answer,
    /// so this holds no more clusters than are faulting.
    clusters: BTreeMap<String, Streak>,
}

impl FaultBook {
    /// Whether a call of the revision as a whole (no cluster: `describe`) may run at `now`.
    pub fn admit(&self, now: SystemTime) -> Admission {
        self.admit_for(now, None)
    }

    /// Whether a call for `cluster` may run at `now`.
    pub fn admit_for(&self, now: SystemTime, cluster: Option<&str>) -> Admission {
        if let Some(until) = self.revision.in_force(now) {
            return Admission::Refuse { until, cluster: None };
        }
        match cluster.and_then(|c| Some((c, self.clusters.get(c)?.in_force(now)?))) {
            Some((cluster, until)) => Admission::Refuse {
                until,
                cluster: Some(cluster.to_owned()),
            },
            None => Admission::Call,
        }
    }

    /// Records how a call of the revision as a whole ended ([`FaultBook::record_for`]).
    pub fn record(&mut self, policy: &FaultPolicy, now: SystemTime, outcome: CallOutcome) -> bool {
        self.record_for(policy, now, None, outcome)
    }

    /// Records how a call for `cluster` ended. Returns whether the summary changed (an
    /// answered call on a clean book changes nothing, so it needs no status write).
    pub fn record_for(
        &mut self,
        policy: &FaultPolicy,
        now: SystemTime,
        cluster: Option<&str>,
        outcome: CallOutcome,
    ) -> bool {
        match outcome {
            CallOutcome::Answered => self.answered(cluster),
            CallOutcome::AnsweredWithFault { hook, kind, message } => {
                self.push(policy, now, hook, kind, message);
                self.answered(cluster);
                true
            }
            CallOutcome::Failed { hook, kind, message } => {
                self.push(policy, now, hook, kind, message);
                let length = match cluster {
                    Some(cluster) => {
                        let streak = self.clusters.entry(cluster.to_owned()).or_default();
                        let consecutive = streak.consecutive.saturating_add(1);
                        streak.failed(policy, now, consecutive);
                        self.failing.insert(cluster.to_owned());
                        u32::try_from(self.failing.len()).unwrap_or(u32::MAX)
                    }
                    None => self.revision.consecutive.saturating_add(1),
                };
                self.revision.failed(policy, now, length);
                true
            }
        }
    }

    fn answered(&mut self, cluster: Option<&str>) -> bool {
        let cluster_changed = cluster
            .and_then(|c| self.clusters.remove(c))
            .is_some_and(|mut streak| streak.answered());
        self.failing.clear();
        self.revision.answered() || cluster_changed
    }

    fn push(
        &mut self,
        policy: &FaultPolicy,
        now: SystemTime,
        hook: &'static str,
        kind: &'static str,
        message: String,
    ) {
        self.events.push_back((now, hook, kind));
        while self.events.len() > policy.max_events.max(1) {
            self.events.pop_front();
        }
        self.last = Some(Fault {
            hook,
            kind,
            message,
            at: now,
        });
    }

    /// The summary at `now`: counts of the faults no older than the window.
    pub fn summary(&self, policy: &FaultPolicy, now: SystemTime) -> FaultSummary {
        let in_window = |at: &SystemTime| now.duration_since(*at).map_or(true, |age| age < policy.window);
        let mut counts: BTreeMap<(&'static str, &'static str), u64> = BTreeMap::new();
        let mut oldest: Option<SystemTime> = None;
        for (at, hook, kind) in self.events.iter().filter(|(at, _, _)| in_window(at)) {
            *counts.entry((hook, kind)).or_default() += 1;
            oldest = Some(oldest.map_or(*at, |o| o.min(*at)));
        }
        let quarantined_until = self.revision.in_force(now);
        let leaves_window = oldest.map(|at| at + policy.window);
        let next_change = match (leaves_window, quarantined_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        FaultSummary {
            counts: counts
                .into_iter()
                .map(|((hook, kind), count)| FaultCount { hook, kind, count })
                .collect(),
            last: self.last.clone(),
            consecutive: self.revision.consecutive,
            quarantined_until,
            quarantines: self.revision.quarantines,
            next_change,
        }
    }
}

/// The condition reason naming a fault: hook and kind in CamelCase, e.g. `manifests` +
/// `stack_overflow` → `ManifestsStackOverflow`, `approve-csr` + `timeout` → `ApproveCsrTimeout`.
pub fn fault_reason(hook: &str, kind: &str) -> String {
    let mut reason = String::with_capacity(hook.len() + kind.len());
    for word in hook.split(['-', '_']).chain(kind.split(['-', '_'])) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            reason.extend(first.to_uppercase());
            reason.push_str(chars.as_str());
        }
    }
    reason
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + secs)
    }

    fn policy() -> FaultPolicy {
        FaultPolicy {
            threshold: 3,
            window: Duration::from_secs(60),
            quarantine: Duration::from_secs(10),
            quarantine_max: Duration::from_secs(35),
            max_events: 100,
        }
    }

    fn failed(kind: &'static str) -> CallOutcome {
        CallOutcome::Failed {
            hook: "manifests",
            kind,
            message: format!("{kind} happened"),
        }
    }

    #[rstest]
    #[case::first(1, 10)]
    #[case::second_doubles(2, 20)]
    #[case::third_is_capped(3, 35)]
    #[case::huge_level_stays_capped(1000, 35)]
    fn quarantine_length_doubles_up_to_the_maximum(#[case] nth: u32, #[case] secs: u64) {
        assert_eq!(quarantine_length(&policy(), nth), Duration::from_secs(secs));
    }

    #[rstest]
    #[case::plain("manifests", "timeout", "ManifestsTimeout")]
    #[case::dashed_hook("approve-csr", "trap", "ApproveCsrTrap")]
    #[case::underscored_kind("probe-health", "stack_overflow", "ProbeHealthStackOverflow")]
    #[case::log_flood("hub-permissions", "log_flood", "HubPermissionsLogFlood")]
    fn the_reason_names_hook_and_kind_in_camel_case(
        #[case] hook: &str,
        #[case] kind: &str,
        #[case] want: &str,
    ) {
        assert_eq!(fault_reason(hook, kind), want);
    }

    #[test]
    fn faults_below_the_threshold_are_counted_but_do_not_quarantine() {
        let (p, mut book) = (policy(), FaultBook::default());
        assert!(book.record(&p, t(0), failed("timeout")));
        assert!(book.record(&p, t(1), failed("trap")));
        assert_eq!(book.admit(t(2)), Admission::Call);
        let s = book.summary(&p, t(2));
        assert_eq!(s.consecutive, 2);
        assert_eq!(s.quarantined_until, None);
        assert_eq!(
            s.counts,
            [
                FaultCount {
                    hook: "manifests",
                    kind: "timeout",
                    count: 1
                },
                FaultCount {
                    hook: "manifests",
                    kind: "trap",
                    count: 1
                },
            ]
        );
        assert_eq!(s.last.map(|f| f.kind), Some("trap"));
        assert_eq!(s.next_change, Some(t(60)), "the oldest fault leaves the window");
    }

    #[test]
    fn the_threshold_quarantines_and_calls_are_refused_until_it_ends() {
        let (p, mut book) = (policy(), FaultBook::default());
        for i in 0..3 {
            book.record(&p, t(i), failed("timeout"));
        }
        assert_eq!(
            book.admit(t(3)),
            Admission::Refuse {
                until: t(12),
                cluster: None
            }
        );
        assert_eq!(
            book.admit(t(11)),
            Admission::Refuse {
                until: t(12),
                cluster: None
            }
        );
        assert_eq!(
            book.admit(t(12)),
            Admission::Call,
            "the end of the backoff lifts it"
        );
        let s = book.summary(&p, t(5));
        assert_eq!(s.quarantined_until, Some(t(12)));
        assert_eq!(s.next_change, Some(t(12)));
        assert!(book.summary(&p, t(12)).quarantined_until.is_none());
    }

    #[test]
    fn a_fault_on_probation_quarantines_again_for_twice_as_long() {
        let (p, mut book) = (policy(), FaultBook::default());
        for i in 0..3 {
            book.record(&p, t(i), failed("memory"));
        }
        // Quarantined until 12; the first call after it faults again.
        book.record(&p, t(13), failed("memory"));
        assert_eq!(
            book.admit(t(14)),
            Admission::Refuse {
                until: t(33),
                cluster: None
            }
        );
        book.record(&p, t(33), failed("memory"));
        assert_eq!(
            book.admit(t(34)),
            Admission::Refuse {
                until: t(68),
                cluster: None
            },
            "capped at 35 s"
        );
        assert_eq!(book.summary(&p, t(34)).quarantines, 3);
    }

    #[test]
    fn an_answered_call_resets_the_streak_and_the_backoff() {
        let (p, mut book) = (policy(), FaultBook::default());
        for i in 0..3 {
            book.record(&p, t(i), failed("trap"));
        }
        assert!(book.record(&p, t(13), CallOutcome::Answered));
        let s = book.summary(&p, t(13));
        assert_eq!((s.consecutive, s.quarantines, s.quarantined_until), (0, 0, None));
        assert_eq!(s.counts.len(), 1, "the faults stay counted in the window");
        // Back to needing the full threshold.
        book.record(&p, t(14), failed("trap"));
        book.record(&p, t(15), failed("trap"));
        assert_eq!(book.admit(t(16)), Admission::Call);
        // An answered call on a clean book changes nothing.
        let mut clean = FaultBook::default();
        assert!(!clean.record(&p, t(0), CallOutcome::Answered));
    }

    #[test]
    fn a_log_flood_is_counted_but_never_quarantines() {
        let (p, mut book) = (policy(), FaultBook::default());
        for i in 0..10 {
            let outcome = CallOutcome::AnsweredWithFault {
                hook: "manifests",
                kind: "log_flood",
                message: "lines dropped".into(),
            };
            assert!(book.record(&p, t(i), outcome));
        }
        assert_eq!(book.admit(t(10)), Admission::Call);
        let s = book.summary(&p, t(10));
        assert_eq!(s.counts[0].count, 10);
        assert_eq!(s.consecutive, 0);
        assert!(s.is_faulting());
    }

    #[test]
    fn faults_leave_the_window_and_the_summary_goes_quiet() {
        let (p, mut book) = (policy(), FaultBook::default());
        book.record(&p, t(0), failed("timeout"));
        book.record(&p, t(30), CallOutcome::Answered);
        assert!(book.summary(&p, t(59)).is_faulting());
        let later = book.summary(&p, t(60));
        assert!(!later.is_faulting());
        assert_eq!(later.next_change, None);
        assert!(later.last.is_some(), "the last fault is still known");
    }

    #[test]
    fn the_event_memory_is_bounded() {
        let p = FaultPolicy {
            max_events: 4,
            threshold: u32::MAX,
            ..policy()
        };
        let mut book = FaultBook::default();
        for i in 0..50 {
            book.record(&p, t(i), failed("trap"));
        }
        assert_eq!(book.summary(&p, t(50)).counts[0].count, 4);
    }

    #[test]
    fn one_clusters_faults_quarantine_its_calls_only() {
        let (p, mut book) = (policy(), FaultBook::default());
        for i in 0..10 {
            book.record_for(&p, t(i), Some("poison"), failed("trap"));
            // The other clusters keep answering in between, or not: neither lets one cluster
            // quarantine the revision.
        }
        assert_eq!(
            book.admit_for(t(10), Some("poison")),
            Admission::Refuse {
                until: t(12),
                cluster: Some("poison".into())
            }
        );
        assert_eq!(book.admit_for(t(10), Some("healthy")), Admission::Call);
        assert_eq!(book.admit(t(10)), Admission::Call);
        let s = book.summary(&p, t(10));
        assert_eq!((s.consecutive, s.quarantined_until), (1, None));
        assert_eq!(s.counts[0].count, 10, "every fault is still counted");
    }

    #[test]
    fn faults_across_threshold_clusters_quarantine_the_revision() {
        let (p, mut book) = (policy(), FaultBook::default());
        for (i, cluster) in ["c1", "c2", "c3"].into_iter().enumerate() {
            book.record_for(&p, t(i as u64), Some(cluster), failed("trap"));
        }
        assert_eq!(
            book.admit_for(t(3), Some("c4")),
            Admission::Refuse {
                until: t(12),
                cluster: None
            }
        );
    }

    #[test]
    fn an_answer_clears_the_revisions_streak_and_forgets_that_cluster() {
        let (p, mut book) = (policy(), FaultBook::default());
        book.record_for(&p, t(0), Some("c1"), failed("trap"));
        book.record_for(&p, t(1), Some("c2"), failed("trap"));
        assert!(book.record_for(&p, t(2), Some("c2"), CallOutcome::Answered));
        assert_eq!(book.clusters.keys().collect::<Vec<_>>(), ["c1"]);
        // Two distinct clusters again, not three: the streak started over.
        book.record_for(&p, t(3), Some("c3"), failed("trap"));
        book.record_for(&p, t(4), Some("c1"), failed("trap"));
        assert_eq!(book.admit_for(t(5), Some("c9")), Admission::Call);
    }
}
