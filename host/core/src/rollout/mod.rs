//! The rollout engine: given a rollout strategy, the clusters a placement chose (by decision
//! group) and the rollout state of each cluster that already has the workload, decide which
//! clusters to roll out to now, which timed out, which left the placement, whether failures
//! stopped the rollout, and when to look again.
//!
//! ```text
//!   RolloutStrategy ─┐
//!   ClusterGroups ───┼─► plan(…, now) ─► Rollout { to_rollout, timed_out, removed,
//!   [ClusterStatus] ─┘                            max_failure_breach, recheck_after }
//! ```
//!
//! It is shared by every user of a rollout strategy — the ManifestWorkReplicaSet controller and
//! the add-on manager — and knows nothing about the workload: the caller maps its workload to a
//! [`ClusterState`] per cluster (for example [`crate::work::replicaset::cluster_rollout_status`])
//! and acts on the answer. The answers equal those of OCM's rollout handler (sdk-go), checked by
//! the golden differential test `tests/rollout_golden.rs`:
//!
//! - `All`: every cluster; only `progressDeadline` matters.
//! - `Progressive`: mandatory decision groups first with no failure tolerated; then clusters in
//!   name order with at most `maxConcurrency` in flight (count or percentage of the non-mandatory
//!   clusters, rounded up; default all), no new cluster once Failed + TimeOut exceed `maxFailures`
//!   (count or percentage of all clusters; default 0).
//! - `ProgressivePerGroup`: mandatory groups, then group by group in index order, the next group
//!   only once the current one has nothing pending; `maxFailures` relative to each group.
//! - `minSuccessTime` keeps a Succeeded cluster in flight for a soak; `progressDeadline` turns a
//!   cluster Progressing or Failed for longer into TimeOut.
//!
//! Out-of-range numbers fall back to defaults; values that cannot be read at all (a deadline
//! `"soon"`, a size `"5"` without `%`) are a [`RolloutError`] naming the field, as in OCM.

mod groups;
mod settings;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use flotilla_api::cluster::v1alpha1::{MandatoryDecisionGroup, RolloutConfig, RolloutStrategy, RolloutType};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

pub use groups::{ClusterGroups, GroupKey};
use settings::Deadline;

/// Where a cluster stands in a rollout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClusterState {
    /// The desired workload is not applied yet.
    #[default]
    ToApply,
    /// Applied; the cluster has not finished converging.
    Progressing,
    /// Applied and converged.
    Succeeded,
    /// Applied and failing.
    Failed,
    /// Progressing or Failed for longer than `progressDeadline`.
    TimeOut,
    /// Not to be rolled out to.
    Skip,
}

impl ClusterState {
    /// OCM's name of the state.
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterState::ToApply => "ToApply",
            ClusterState::Progressing => "Progressing",
            ClusterState::Succeeded => "Succeeded",
            ClusterState::Failed => "Failed",
            ClusterState::TimeOut => "TimeOut",
            ClusterState::Skip => "Skip",
        }
    }

    /// Whether the state counts toward `maxFailures`.
    fn is_failure(self) -> bool {
        matches!(self, ClusterState::Failed | ClusterState::TimeOut)
    }
}

impl std::str::FromStr for ClusterState {
    type Err = RolloutError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "ToApply" => ClusterState::ToApply,
            "Progressing" => ClusterState::Progressing,
            "Succeeded" => ClusterState::Succeeded,
            "Failed" => ClusterState::Failed,
            "TimeOut" => ClusterState::TimeOut,
            "Skip" => ClusterState::Skip,
            other => {
                return Err(RolloutError::State {
                    value: other.to_owned(),
                });
            }
        })
    }
}

/// The rollout state of one cluster: an input (what the workload on the cluster says) and an
/// output (what the plan decided about it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterStatus {
    /// Cluster name.
    pub cluster: String,
    /// Decision group; on output, the group of a cluster that had no status yet.
    pub group: GroupKey,
    /// Rollout state.
    pub state: ClusterState,
    /// When the state last changed; the start of the deadline and of the soak.
    pub last_transition_time: Option<Timestamp>,
    /// Output only: when the cluster times out (Progressing/Failed) or its soak ends (Succeeded);
    /// `None` when there is no deadline.
    pub recheck_time: Option<Timestamp>,
}

impl ClusterStatus {
    /// A cluster in `state` since `since`.
    pub fn new(cluster: impl Into<String>, state: ClusterState, since: Option<Timestamp>) -> Self {
        Self {
            cluster: cluster.into(),
            state,
            last_transition_time: since,
            ..Self::default()
        }
    }
}

/// What to do now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rollout {
    /// Clusters in flight: those to apply (state ToApply), those still Progressing or Failed
    /// within the deadline, and Succeeded ones still soaking. Ordered by cluster name.
    pub to_rollout: Vec<ClusterStatus>,
    /// Clusters that passed `progressDeadline` (state TimeOut), by name.
    pub timed_out: Vec<ClusterStatus>,
    /// Clusters with a status that the placement no longer chooses: remove their workload.
    pub removed: Vec<ClusterStatus>,
    /// Failures exceeded `maxFailures`, so no new cluster was started.
    pub max_failure_breach: bool,
    /// Plan again after this long (the nearest deadline or soak end), if anything is pending.
    pub recheck_after: Option<SignedDuration>,
}

/// A rollout strategy value that cannot be read.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum RolloutError {
    /// `progressDeadline` is neither `None` nor a duration like `90m`.
    #[error(
        "progressDeadline {value:?} is invalid: use \"None\" or a duration such as \"30s\", \"90m\", \"2h\""
    )]
    ProgressDeadline {
        /// The value given.
        value: String,
    },
    /// `minSuccessTime` is not a duration.
    #[error("minSuccessTime {value:?} is invalid: use a duration such as \"0s\", \"5m\"")]
    MinSuccessTime {
        /// The value given.
        value: String,
    },
    /// `maxConcurrency` or `maxFailures` is a string that is not a percentage.
    #[error("{field} {value:?} is invalid: use a number such as 2 or a percentage such as \"25%\"")]
    Size {
        /// The field.
        field: &'static str,
        /// The value given.
        value: String,
    },
    /// A PlacementDecision's `decision-group-index` label is not a number.
    #[error("PlacementDecision {decision:?} has decision-group-index label {value:?}, which is not a number")]
    DecisionGroupIndex {
        /// The decision's name.
        decision: String,
        /// The label value.
        value: String,
    },
    /// The strategy has no `type`.
    #[error("rollout strategy type is unset: use All, Progressive or ProgressivePerGroup")]
    Type,
    /// A rollout state name that does not exist.
    #[error("unknown rollout state {value:?}")]
    State {
        /// The value given.
        value: String,
    },
}

/// The effective settings of a strategy, with OCM's defaults filled in.
struct Settings<'a> {
    type_: RolloutType,
    config: RolloutConfig,
    mandatory: &'a [MandatoryDecisionGroup],
    max_concurrency: IntOrString,
}

impl<'a> Settings<'a> {
    fn of(strategy: &'a RolloutStrategy) -> Result<Self, RolloutError> {
        // The CRDs default the type to All, so an unset type never comes from the API server;
        // OCM refuses one, and so does the engine rather than guess.
        let type_ = strategy.type_.ok_or(RolloutError::Type)?;
        let (config, mandatory, max_concurrency): (_, &[MandatoryDecisionGroup], _) = match type_ {
            RolloutType::All => (
                strategy
                    .all
                    .as_ref()
                    .map(|a| a.config.clone())
                    .unwrap_or_default(),
                &[],
                IntOrString::Int(0),
            ),
            RolloutType::Progressive => match &strategy.progressive {
                Some(p) => (
                    p.config.clone(),
                    &p.mandatory.mandatory_decision_groups,
                    p.max_concurrency.clone(),
                ),
                None => (RolloutConfig::default(), &[], IntOrString::Int(0)),
            },
            RolloutType::ProgressivePerGroup => match &strategy.progressive_per_group {
                Some(p) => (
                    p.config.clone(),
                    &p.mandatory.mandatory_decision_groups,
                    IntOrString::Int(0),
                ),
                None => (RolloutConfig::default(), &[], IntOrString::Int(0)),
            },
        };
        Ok(Self {
            type_,
            config,
            mandatory,
            max_concurrency,
        })
    }
}

/// Plans one step of a rollout at time `now`.
///
/// `existing` holds the state of every cluster that already has (some version of) the workload;
/// clusters of `groups` without an entry are new and count as ToApply. The answer does not depend
/// on the order of `existing`.
pub fn plan(
    strategy: &RolloutStrategy,
    groups: &ClusterGroups,
    existing: &[ClusterStatus],
    now: Timestamp,
) -> Result<Rollout, RolloutError> {
    let settings = Settings::of(strategy)?;
    let deadline = settings::progress_deadline(&settings.config.progress_deadline)?;
    let min_success = match settings.type_ {
        RolloutType::All => SignedDuration::ZERO,
        _ => settings::min_success_time(&settings.config.min_success_time)?,
    };
    let timing = Timing {
        now,
        min_success,
        deadline,
    };

    let all = groups.besides(&[]);
    let all_clusters = all.clusters();
    let mut existing: Vec<ClusterStatus> = existing.to_vec();
    // A stable sort by name makes every step below independent of the input order.
    existing.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    let (current, removed): (Vec<_>, Vec<_>) = existing
        .into_iter()
        .partition(|s| all_clusters.contains(s.cluster.as_str()));

    let mut rollout = match settings.type_ {
        RolloutType::All => {
            let n = all_clusters.len();
            per_cluster(&all, n, n, &timing, &current)
        }
        RolloutType::Progressive => {
            let max_failures = settings::size(
                &settings.config.max_failures,
                all_clusters.len(),
                0,
                "maxFailures",
            )?;
            match mandatory_first(groups, settings.mandatory, &timing, &current) {
                Some(rollout) => rollout,
                None => {
                    let rest = groups.besides(settings.mandatory);
                    let n = rest.clusters().len();
                    let size = settings::size(&settings.max_concurrency, n, n, "maxConcurrency")?;
                    per_cluster(&rest, size, max_failures, &timing, &current)
                }
            }
        }
        RolloutType::ProgressivePerGroup => {
            settings::check_size(&settings.config.max_failures, "maxFailures")?;
            match mandatory_first(groups, settings.mandatory, &timing, &current) {
                Some(rollout) => rollout,
                None => {
                    let rest = groups.besides(settings.mandatory);
                    per_group(&rest, &settings.config.max_failures, &timing, &current)
                }
            }
        }
    };
    rollout.removed = removed;
    rollout.to_rollout.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    rollout.timed_out.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    Ok(rollout)
}

/// The strategy as the add-on manager applies it: a Progressive strategy whose
/// `maxConcurrency` is unset (`0` or `""`) takes the placement's `clustersPerDecisionGroup`
/// (OCM's add-on manager does this before planning; the ManifestWorkReplicaSet controller
/// does not). Other strategies are returned unchanged.
pub fn with_group_size_as_max_concurrency(
    strategy: &RolloutStrategy,
    clusters_per_decision_group: &IntOrString,
) -> RolloutStrategy {
    let mut strategy = strategy.clone();
    if strategy.type_ == Some(RolloutType::Progressive) {
        let progressive = strategy.progressive.get_or_insert_with(Default::default);
        let unset = match &progressive.max_concurrency {
            IntOrString::Int(n) => *n == 0,
            IntOrString::String(s) => s.is_empty(),
        };
        if unset {
            progressive.max_concurrency = clusters_per_decision_group.clone();
        }
    }
    strategy
}

/// The clock and the two durations every state decision needs.
struct Timing {
    now: Timestamp,
    min_success: SignedDuration,
    deadline: Deadline,
}

impl Timing {
    /// `start + duration`, from now when there is no start; `None` if it overflows (never).
    fn after(&self, start: Option<Timestamp>, duration: SignedDuration) -> Option<Timestamp> {
        start.unwrap_or(self.now).checked_add(duration).ok()
    }

    /// Sorts one existing status into in-flight or timed-out (or neither: TimeOut, Skip, and
    /// Succeeded past its soak), setting its recheck time and turning it TimeOut past the deadline.
    fn classify(
        &self,
        status: &mut ClusterStatus,
        to_rollout: &mut Vec<ClusterStatus>,
        timed_out: &mut Vec<ClusterStatus>,
    ) {
        match status.state {
            ClusterState::ToApply => to_rollout.push(status.clone()),
            ClusterState::Succeeded => {
                let soak_end = self.after(status.last_transition_time, self.min_success);
                if let Some(end) = soak_end.filter(|end| self.now < *end) {
                    status.recheck_time = Some(end);
                    to_rollout.push(status.clone());
                }
            }
            ClusterState::TimeOut | ClusterState::Skip => {}
            ClusterState::Progressing | ClusterState::Failed => {
                let timeout_at = self
                    .deadline
                    .and_then(|d| self.after(status.last_transition_time, d));
                status.recheck_time = timeout_at;
                match timeout_at {
                    Some(at) if self.now >= at => {
                        status.state = ClusterState::TimeOut;
                        timed_out.push(status.clone());
                    }
                    _ => to_rollout.push(status.clone()),
                }
            }
        }
    }

    /// The nearest future recheck time among in-flight clusters, as a duration from now.
    fn recheck_after(&self, to_rollout: &[ClusterStatus]) -> Option<SignedDuration> {
        to_rollout
            .iter()
            .filter_map(|s| s.recheck_time)
            .map(|t| t.duration_since(self.now))
            .filter(|d| d.is_positive())
            .min()
    }

    fn result(&self, to_rollout: Vec<ClusterStatus>, timed_out: Vec<ClusterStatus>, breach: bool) -> Rollout {
        Rollout {
            recheck_after: self.recheck_after(&to_rollout),
            to_rollout,
            timed_out,
            removed: Vec::new(),
            max_failure_breach: breach,
        }
    }
}

/// Mandatory decision groups, group by group with no failure tolerated; `Some` while they still
/// have anything in flight or timed out, `None` once the rest may start.
fn mandatory_first(
    groups: &ClusterGroups,
    mandatory: &[MandatoryDecisionGroup],
    timing: &Timing,
    current: &[ClusterStatus],
) -> Option<Rollout> {
    let mandatory_groups = groups.only(mandatory);
    if mandatory_groups.is_empty() {
        return None;
    }
    let rollout = per_group(&mandatory_groups, &IntOrString::Int(0), timing, current);
    (!rollout.to_rollout.is_empty() || !rollout.timed_out.is_empty()).then_some(rollout)
}

/// Cluster by cluster in name order: existing states first, then new clusters, until `size` are
/// in flight; no new cluster once Failed + TimeOut exceed `max_failures`.
fn per_cluster(
    groups: &ClusterGroups,
    size: usize,
    max_failures: usize,
    timing: &Timing,
    current: &[ClusterStatus],
) -> Rollout {
    let mut to_rollout = Vec::new();
    let mut timed_out = Vec::new();
    let mut seen = BTreeSet::new();
    let mut failures = 0usize;
    let mut breach = false;

    for status in current {
        if status.cluster.is_empty() {
            continue;
        }
        seen.insert(status.cluster.as_str());
        let mut status = status.clone();
        // After a breach only clusters that already have the workload are still followed.
        if !breach || status.state != ClusterState::ToApply {
            timing.classify(&mut status, &mut to_rollout, &mut timed_out);
        }
        if status.state.is_failure() {
            failures += 1;
            breach = failures > max_failures;
        }
        if to_rollout.len() >= size {
            return timing.result(to_rollout, timed_out, breach);
        }
    }
    if breach {
        return timing.result(to_rollout, timed_out, breach);
    }

    let group_of = groups.group_of_clusters();
    for (cluster, group) in group_of {
        if seen.contains(cluster) {
            continue;
        }
        to_rollout.push(ClusterStatus {
            cluster: cluster.to_owned(),
            group: group.clone(),
            ..Default::default()
        });
        if to_rollout.len() >= size {
            break;
        }
    }
    timing.result(to_rollout, timed_out, false)
}

/// Group by group in index order: every cluster of a group without a state (or ToApply) is
/// started; the next group only once nothing of this one is pending, or not at all once a
/// group's Failed + TimeOut exceed `max_failures` (count or percentage of the group).
fn per_group(
    groups: &ClusterGroups,
    max_failures: &IntOrString,
    timing: &Timing,
    current: &[ClusterStatus],
) -> Rollout {
    let mut to_rollout = Vec::new();
    let mut timed_out = Vec::new();
    // States of every cluster that has the workload, whichever group it is in: all of them stay
    // in flight (or time out) whatever group is being started.
    let mut states: BTreeMap<&str, ClusterState> = BTreeMap::new();
    for original in current {
        if original.cluster.is_empty() || original.state == ClusterState::ToApply {
            continue;
        }
        let mut status = original.clone();
        timing.classify(&mut status, &mut to_rollout, &mut timed_out);
        states.insert(original.cluster.as_str(), status.state);
    }

    let mut total_failures = 0usize;
    let mut breach = false;
    for (key, clusters) in groups.iter() {
        let allowed = settings::size(max_failures, clusters.len(), 0, "maxFailures").unwrap_or(0);
        let mut group_failures = 0usize;
        for cluster in clusters {
            if let Some(state) = states.get(cluster.as_str()) {
                if state.is_failure() {
                    group_failures += 1;
                    breach = group_failures > allowed;
                }
                continue;
            }
            to_rollout.push(ClusterStatus {
                cluster: cluster.clone(),
                group: key.clone(),
                ..Default::default()
            });
        }
        total_failures += group_failures;
        if to_rollout.len() > total_failures || breach {
            return timing.result(to_rollout, timed_out, breach);
        }
    }
    timing.result(to_rollout, timed_out, breach)
}
