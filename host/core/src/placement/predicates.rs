//! Step 2: predicates. A cluster passes when it matches at least one predicate; inside a
//! predicate the label selector, the claim selector (over `status.clusterClaims`) and every CEL
//! expression must all hold. Selectors are checked and CEL compiled once per Placement
//! generation by [`compile`]; a malformed one makes the whole placement misconfigured. CEL runs
//! metered (see [`cel`]): a cluster on which an expression runs over its cost limit does not
//! match, and a placement whose evaluation runs past its deadline is misconfigured for the rest
//! of its generation.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use flotilla_api::cluster::{v1::ManagedCluster, v1beta1::ClusterPredicate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use crate::{
    placement::{
        ScoreTable,
        cel::{self, CelProgram},
        claims_of, labels_of,
    },
    selector,
};

/// One compiled predicate.
#[derive(Debug)]
pub struct CompiledSelector {
    labels: LabelSelector,
    claims: Vec<LabelSelectorRequirement>,
    cel: Vec<CelProgram>,
}

/// The compiled predicates of a placement; an empty list selects every cluster.
#[derive(Debug, Default)]
pub struct CompiledPredicates {
    selectors: Vec<CompiledSelector>,
    /// Set once an evaluation ran past its deadline: why the generation is misconfigured.
    exhausted: OnceLock<String>,
}

/// The clusters the predicates select, and what the decision event should mention.
#[derive(Debug, Default)]
pub struct Filtered<'a> {
    /// Matching clusters, in their input order.
    pub clusters: Vec<&'a ManagedCluster>,
    /// Clusters left out because an expression ran over its cost limit on them.
    pub warnings: Vec<String>,
}

/// Checks the selectors and compiles the CEL expressions of `predicates`; the error is the
/// message of the first problem.
pub fn compile(predicates: &[ClusterPredicate]) -> Result<CompiledPredicates, String> {
    let empty = BTreeMap::new();
    let mut selectors = Vec::with_capacity(predicates.len());
    for predicate in predicates {
        let s = &predicate.required_cluster_selector;
        selector::matches(&s.label_selector, &empty).map_err(|e| e.to_string())?;
        selector::requirements_match(&s.claim_selector.match_expressions, &empty)
            .map_err(|e| e.to_string())?;
        let cel = s
            .cel_selector
            .cel_expressions
            .iter()
            .map(|e| cel::compile(e).map_err(|err| err.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        selectors.push(CompiledSelector {
            labels: s.label_selector.clone(),
            claims: s.claim_selector.match_expressions.clone(),
            cel,
        });
    }
    Ok(CompiledPredicates {
        selectors,
        exhausted: OnceLock::new(),
    })
}

impl CompiledSelector {
    /// Whether the label and claim parts hold for `cluster`.
    fn matches_selectors(&self, cluster: &ManagedCluster) -> bool {
        selector::matches(&self.labels, labels_of(&cluster.metadata)).unwrap_or(false)
            && (self.claims.is_empty()
                || selector::requirements_match(&self.claims, &claims_of(cluster)).unwrap_or(false))
    }
}

impl CompiledPredicates {
    /// The clusters of `clusters` matching at least one predicate, in their order; the error is
    /// why the placement is misconfigured (its evaluation ran past [`cel::EVALUATION_DEADLINE`],
    /// now or earlier in this generation).
    pub fn filter<'a>(
        &self,
        clusters: &[&'a ManagedCluster],
        scores: &ScoreTable,
    ) -> Result<Filtered<'a>, String> {
        self.filter_within(clusters, scores, cel::EVALUATION_DEADLINE)
    }

    fn filter_within<'a>(
        &self,
        clusters: &[&'a ManagedCluster],
        scores: &ScoreTable,
        deadline: std::time::Duration,
    ) -> Result<Filtered<'a>, String> {
        if let Some(message) = self.exhausted.get() {
            return Err(message.clone());
        }
        if self.selectors.is_empty() {
            return Ok(Filtered {
                clusters: clusters.to_vec(),
                warnings: Vec::new(),
            });
        }
        let uses_cel = self.selectors.iter().any(|s| !s.cel.is_empty());
        let score_lists = if self
            .selectors
            .iter()
            .flat_map(|s| &s.cel)
            .any(CelProgram::uses_scores)
        {
            cel::score_lists(scores, clusters)
        } else {
            cel::ScoreLists::new()
        };
        let score_lists = Arc::new(score_lists);
        let meter = Arc::new(cel::Meter::new(deadline));
        let mut filtered = Filtered::default();
        for cluster in clusters {
            let value = if uses_cel {
                cel::cluster_value(cluster)
            } else {
                None
            };
            let mut matched = false;
            for (index, selector) in self.selectors.iter().enumerate() {
                if !selector.matches_selectors(cluster) {
                    continue;
                }
                if selector.cel.is_empty() {
                    matched = true;
                    break;
                }
                let Some(value) = &value else { continue };
                match cel::all_true(&selector.cel, value, &score_lists, &meter) {
                    Ok(true) => {
                        matched = true;
                        break;
                    }
                    Ok(false) => {}
                    Err(cel::Overrun::Cost) => filtered.warnings.push(format!(
                        "cluster {}: a CEL expression of predicate {index} ran over its cost limit of {} \
                         and does not match",
                        crate::placement::name_of(&cluster.metadata),
                        cel::COST_LIMIT
                    )),
                    Err(cel::Overrun::Deadline) => {
                        let message = format!(
                            "CEL expressions took longer than {:?} to evaluate over {} clusters; the placement \
                             stays misconfigured until its spec changes",
                            deadline,
                            clusters.len()
                        );
                        return Err(self.exhausted.get_or_init(|| message).clone());
                    }
                }
            }
            if matched {
                filtered.clusters.push(cluster);
            }
        }
        Ok(filtered)
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::*;
    use crate::placement::{name_of, testing::cluster};

    fn predicates(value: serde_json::Value) -> Vec<ClusterPredicate> {
        serde_json::from_value(value).unwrap()
    }

    fn run(value: serde_json::Value) -> Vec<String> {
        let clusters = [
            cluster("aws-prod")
                .label("env", "prod")
                .claim("platform.open-cluster-management.io", "AWS")
                .build(),
            cluster("gcp-dev")
                .label("env", "dev")
                .claim("platform.open-cluster-management.io", "GCP")
                .build(),
            cluster("bare").build(),
        ];
        let refs: Vec<&ManagedCluster> = clusters.iter().collect();
        compile(&predicates(value))
            .unwrap()
            .filter(&refs, &ScoreTable::new())
            .unwrap()
            .clusters
            .iter()
            .map(|c| name_of(&c.metadata).to_owned())
            .collect()
    }

    #[rstest]
    #[case::no_predicates(json!([]), &["aws-prod", "gcp-dev", "bare"])]
    #[case::empty_predicate_matches_all(json!([{"requiredClusterSelector": {}}]), &["aws-prod", "gcp-dev", "bare"])]
    #[case::label_selector(
        json!([{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "prod"}}}}]),
        &["aws-prod"]
    )]
    #[case::claim_selector(
        json!([{"requiredClusterSelector": {"claimSelector": {"matchExpressions": [
            {"key": "platform.open-cluster-management.io", "operator": "In", "values": ["GCP"]}]}}}]),
        &["gcp-dev"]
    )]
    #[case::label_and_claim_are_anded(
        json!([{"requiredClusterSelector": {
            "labelSelector": {"matchLabels": {"env": "prod"}},
            "claimSelector": {"matchExpressions": [
                {"key": "platform.open-cluster-management.io", "operator": "In", "values": ["GCP"]}]}}}]),
        &[]
    )]
    #[case::predicates_are_ored(
        json!([
            {"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "prod"}}}},
            {"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "dev"}}}}]),
        &["aws-prod", "gcp-dev"]
    )]
    #[case::cel_selector(
        json!([{"requiredClusterSelector": {"celSelector": {"celExpressions": [
            "managedCluster.metadata.name.startsWith('gcp')"]}}}]),
        &["gcp-dev"]
    )]
    #[case::cel_expressions_are_anded(
        json!([{"requiredClusterSelector": {"celSelector": {"celExpressions": [
            "managedCluster.metadata.name.startsWith('gcp')", "managedCluster.metadata.labels['env'] == 'prod'"]}}}]),
        &[]
    )]
    #[case::cel_and_labels_are_anded(
        json!([{"requiredClusterSelector": {
            "labelSelector": {"matchLabels": {"env": "prod"}},
            "celSelector": {"celExpressions": ["managedCluster.metadata.name.startsWith('aws')"]}}}]),
        &["aws-prod"]
    )]
    fn predicates_select_clusters(#[case] value: serde_json::Value, #[case] expected: &[&str]) {
        assert_eq!(run(value), expected);
    }

    #[rstest]
    #[case::bad_label_operator(json!([{"requiredClusterSelector": {"labelSelector": {"matchExpressions": [
        {"key": "env", "operator": "Near", "values": ["x"]}]}}}]))]
    #[case::bad_claim_values(json!([{"requiredClusterSelector": {"claimSelector": {"matchExpressions": [
        {"key": "k", "operator": "In"}]}}}]))]
    #[case::bad_cel(json!([{"requiredClusterSelector": {"celSelector": {"celExpressions": ["managedCluster.("]}}}]))]
    fn malformed_predicates_do_not_compile(#[case] value: serde_json::Value) {
        assert!(compile(&predicates(value)).is_err());
    }

    fn costly() -> Vec<ClusterPredicate> {
        predicates(
            json!([{"requiredClusterSelector": {"celSelector": {"celExpressions": [
                "lists.range(size(managedCluster.metadata.name) * 100000).all(i, \
                 lists.range(size(managedCluster.metadata.name) * 100000).all(j, true))"
            ]}}}]),
        )
    }

    #[test]
    fn a_cluster_over_the_cost_limit_does_not_match_and_is_named() {
        let c = cluster("c1").build();
        let filtered = compile(&costly())
            .unwrap()
            .filter(&[&c], &ScoreTable::new())
            .unwrap();
        assert!(filtered.clusters.is_empty());
        assert_eq!(filtered.warnings.len(), 1);
        assert!(
            filtered.warnings[0].starts_with("cluster c1: "),
            "{:?}",
            filtered.warnings
        );
    }

    #[test]
    fn a_placement_past_its_deadline_stays_misconfigured_for_its_generation() {
        let c = cluster("c1").build();
        let compiled = compile(&costly()).unwrap();
        let message = compiled
            .filter_within(&[&c], &ScoreTable::new(), std::time::Duration::ZERO)
            .unwrap_err();
        assert!(message.contains("until its spec changes"), "{message}");
        assert_eq!(
            compiled.filter(&[&c], &ScoreTable::new()).unwrap_err(),
            message,
            "not evaluated again"
        );
    }
}
