//! The Placement scheduler, pure: plain API objects in, decisions, scores, groups and
//! conditions out. The placement controller gathers the inputs from its caches and writes
//! what [`schedule`] returns; everything that decides is here, so it is tested without a client.
//!
//! ```text
//!  candidates ─► predicates ─► taints/tolerations ─► prioritizers ─► selection ─► groups ─► decisions
//!  (sets,         (label, claim,  (NoSelect, ...,      (Balance, Steady,  (score desc,   (selectors,  (pages of ≤100,
//!   bindings)      CEL; ORed)      tolerationSeconds)   allocatable,       name asc;      per-group    `<p>-decision-<n>`)
//!                                                       AddOn; weights)    spread)        length)
//! ```
//!
//! Placements without `spreadPolicy` decide exactly as OCM's scheduler (same order of checks,
//! same integer formulas, same condition reasons); with it, selection additionally honours the
//! spread constraints (see [`spread`]).

pub mod candidates;
pub mod cel;
pub mod decisions;
pub mod groups;
pub mod index;
pub mod predicates;
pub mod prioritizers;
pub mod spread;
pub mod status;
pub mod taints;

#[cfg(test)]
pub(crate) mod testing;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use flotilla_api::cluster::{
    v1::ManagedCluster,
    v1alpha1::AddOnPlacementScoreStatus,
    v1beta1::{Placement, PlacementSpec},
    v1beta2::{ManagedClusterSet, ManagedClusterSetBinding},
};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::ObjectMeta, jiff::Timestamp};

use crate::conditions::NewCondition;

/// AddOnPlacementScore statuses by (cluster namespace, resource name).
pub type ScoreTable = BTreeMap<(String, String), AddOnPlacementScoreStatus>;

/// Everything one scheduling pass of one Placement reads.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    /// The placement.
    pub placement: &'a Placement,
    /// Every ManagedCluster.
    pub clusters: &'a [&'a ManagedCluster],
    /// Every ManagedClusterSet.
    pub cluster_sets: &'a [&'a ManagedClusterSet],
    /// The ManagedClusterSetBindings of the placement's namespace.
    pub bindings: &'a [&'a ManagedClusterSetBinding],
    /// AddOnPlacementScores.
    pub scores: &'a ScoreTable,
    /// Clusters in this placement's current PlacementDecisions.
    pub existing: &'a BTreeSet<String>,
    /// Per cluster, how many decisions of other placements (any namespace) name it.
    pub other_decisions: &'a BTreeMap<String, i64>,
    /// The current time (tolerations, score expiry).
    pub now: Timestamp,
}

/// A configuration problem, reported as `PlacementMisconfigured` with message `<plugin>:<message>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Misconfiguration {
    /// OCM's plugin name: `Predicate`, `TaintToleration`, or `""` for prioritizer and group settings.
    pub plugin: &'static str,
    /// What is wrong.
    pub message: String,
}

impl Misconfiguration {
    fn new(plugin: &'static str, message: impl Into<String>) -> Self {
        Self {
            plugin,
            message: message.into(),
        }
    }
}

/// One decision group: its index, name (`""` outside predefined groups) and clusters by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Group {
    /// Index from 0.
    pub index: usize,
    /// Name of the predefined group, or `""`.
    pub name: String,
    /// Cluster names, sorted.
    pub clusters: Vec<String>,
}

/// The outcome of one scheduling pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// Selected clusters, best first (score descending, then name).
    pub selected: Vec<String>,
    /// Total score of every feasible cluster.
    pub scores: BTreeMap<String, i64>,
    /// Decision groups in index order; empty only when the group settings are misconfigured.
    pub groups: Vec<Group>,
    /// `numberOfClusters` minus the selected count (0 without `numberOfClusters`).
    pub unscheduled: i64,
    /// The configuration problem, if any.
    pub misconfiguration: Option<Misconfiguration>,
    /// `PlacementSatisfied`.
    pub satisfied: NewCondition<'static>,
    /// `PlacementMisconfigured`.
    pub misconfigured: NewCondition<'static>,
    /// When to schedule again without any event: a toleration or an AddOn score expires.
    pub requeue_at: Option<Timestamp>,
    /// Non-fatal problems (expired AddOn scores), for the decision event.
    pub warnings: Vec<String>,
}

/// What the scheduler keeps per Placement generation: compiled predicates (CEL included).
#[derive(Debug)]
pub struct Compiled {
    predicates: Result<predicates::CompiledPredicates, String>,
}

/// Compiles the parts of `spec` that are expensive to prepare; call once per generation.
pub fn compile(spec: &PlacementSpec) -> Compiled {
    Compiled {
        predicates: predicates::compile(&spec.predicates),
    }
}

/// Schedules `inputs.placement` with its compiled form.
pub fn schedule(inputs: &Inputs<'_>, compiled: &Compiled) -> Schedule {
    let spec = &inputs.placement.spec;
    let cands = candidates::candidates(
        &spec.cluster_sets,
        inputs.bindings,
        inputs.cluster_sets,
        inputs.clusters,
    );
    let mut requeue_at = None;
    let mut warnings = Vec::new();
    let outcome = filter_and_score(inputs, compiled, &cands.clusters, &mut requeue_at, &mut warnings);
    let (selected, scores, mut misconfiguration) = match outcome {
        Ok((selected, scores)) => (selected, scores, None),
        Err(m) => (Vec::new(), BTreeMap::new(), Some(m)),
    };
    let unscheduled = spec
        .number_of_clusters
        .map_or(0, |n| i64::from(n) - selected.len() as i64);
    let selected_clusters: Vec<&ManagedCluster> = {
        let by_name: BTreeMap<&str, &ManagedCluster> = cands
            .clusters
            .iter()
            .map(|c| (name_of(&c.metadata), *c))
            .collect();
        selected
            .iter()
            .filter_map(|n| by_name.get(n.as_str()).copied())
            .collect()
    };
    let groups = match groups::decision_groups(&spec.decision_strategy.group_strategy, &selected_clusters) {
        Ok(groups) => groups,
        Err(m) => {
            misconfiguration.get_or_insert(m);
            Vec::new()
        }
    };
    let satisfied = status::satisfied(&status::Counts {
        spec_sets: &spec.cluster_sets,
        eligible_sets: &cands.eligible_sets,
        bindings: cands.valid_bindings,
        available: cands.clusters.len(),
        selected: selected.len(),
        unscheduled,
    });
    let misconfigured = status::misconfigured(misconfiguration.as_ref());
    Schedule {
        selected,
        scores,
        groups,
        unscheduled,
        misconfiguration,
        satisfied,
        misconfigured,
        requeue_at,
        warnings,
    }
}

type Scored = (Vec<String>, BTreeMap<String, i64>);

fn filter_and_score(
    inputs: &Inputs<'_>,
    compiled: &Compiled,
    candidates: &[&ManagedCluster],
    requeue_at: &mut Option<Timestamp>,
    warnings: &mut Vec<String>,
) -> Result<Scored, Misconfiguration> {
    let spec = &inputs.placement.spec;
    // Predicates: OCM checks (and reports) them only when there are predicates and candidates.
    let mut feasible: Vec<&ManagedCluster> = candidates.to_vec();
    if !spec.predicates.is_empty() && !feasible.is_empty() {
        let predicates = compiled
            .predicates
            .as_ref()
            .map_err(|e| Misconfiguration::new("Predicate", e.clone()))?;
        let filtered = predicates
            .filter(&feasible, inputs.scores)
            .map_err(|e| Misconfiguration::new("Predicate", e))?;
        warnings.extend(filtered.warnings);
        feasible = filtered.clusters;
    }
    // Taints: tolerations are validated only when some cluster is left, as OCM does.
    if !feasible.is_empty() {
        taints::validate(&spec.tolerations).map_err(|e| Misconfiguration::new("TaintToleration", e))?;
        feasible.retain(|c| {
            let verdict = taints::tolerated(
                &c.spec.taints,
                &spec.tolerations,
                inputs.existing.contains(name_of(&c.metadata)),
                inputs.now,
            );
            verdict.tolerated
        });
    }
    // Requeue at the first expiry of a toleration of a cluster that is or stays decided.
    for cluster in candidates
        .iter()
        .filter(|c| inputs.existing.contains(name_of(&c.metadata)))
    {
        let verdict = taints::tolerated(&cluster.spec.taints, &spec.tolerations, true, inputs.now);
        if verdict.tolerated {
            *requeue_at = earliest(*requeue_at, verdict.expires);
        }
    }
    let weights = prioritizers::weights(&spec.prioritizer_policy)?;
    let scoring = prioritizers::score(&weights, &feasible, inputs);
    warnings.extend(scoring.warnings);
    *requeue_at = earliest(*requeue_at, scoring.next_expiry);
    // Score descending, then name; each total is looked up once, not once per comparison.
    let mut keyed: Vec<(i64, &str, &ManagedCluster)> = feasible
        .iter()
        .map(|c| {
            let name = name_of(&c.metadata);
            (scoring.totals.get(name).copied().unwrap_or_default(), name, *c)
        })
        .collect();
    keyed.sort_by(|(sa, na, _), (sb, nb, _)| sb.cmp(sa).then_with(|| na.cmp(nb)));
    let ranked: Vec<&ManagedCluster> = keyed.into_iter().map(|(_, _, c)| c).collect();
    let picked = spread::select(
        &ranked,
        spec.number_of_clusters,
        &spec.spread_policy.spread_constraints,
    );
    let selected_clusters: Vec<&ManagedCluster> = picked.iter().map(|&i| ranked[i]).collect();
    let selected = selected_clusters
        .iter()
        .map(|c| name_of(&c.metadata).to_owned())
        .collect();
    // The toleration clock also runs for clusters this pass newly selects.
    for cluster in selected_clusters {
        let verdict = taints::tolerated(&cluster.spec.taints, &spec.tolerations, true, inputs.now);
        *requeue_at = earliest(*requeue_at, verdict.expires);
    }
    Ok((selected, scoring.totals))
}

fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

static NO_LABELS: LazyLock<BTreeMap<String, String>> = LazyLock::new(BTreeMap::new);

/// An object's name (`""` when unset).
pub fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// An object's labels (empty when unset).
pub fn labels_of(meta: &ObjectMeta) -> &BTreeMap<String, String> {
    meta.labels.as_ref().unwrap_or(&NO_LABELS)
}

/// A cluster's claims by name, from `status.clusterClaims`.
pub fn claims_of(cluster: &ManagedCluster) -> BTreeMap<String, String> {
    cluster
        .status
        .iter()
        .flat_map(|s| s.cluster_claims.iter())
        .map(|c| (c.name.clone(), c.value.clone()))
        .collect()
}

#[cfg(test)]
mod tests;
