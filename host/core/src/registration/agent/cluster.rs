//! Rules about the agent's own ManagedCluster: when the hub has accepted it, which
//! annotations the agent may put on it, and which client configs to add.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// Prefix of the annotations an agent may set on its ManagedCluster; OCM drops any other.
pub const AGENT_ANNOTATION_PREFIX: &str = "agent.open-cluster-management.io/";
/// The hub's acceptance condition type (`HubAcceptedManagedCluster`).
pub const HUB_ACCEPTED_CONDITION: &str = "HubAcceptedManagedCluster";

/// Whether the hub accepts the cluster. OCM's agent follows the hub's
/// `HubAcceptedManagedCluster` condition, which the hub sets once the cluster namespace and
/// RBAC exist; when no hub controller has written that condition yet, `spec.hubAcceptsClient`
/// decides. A condition that is present but not `True` (denied, or an error) means no.
pub fn hub_accepted(hub_accepts_client: bool, conditions: &[Condition]) -> bool {
    match conditions.iter().find(|c| c.type_ == HUB_ACCEPTED_CONDITION) {
        Some(condition) => condition.status == "True",
        None => hub_accepts_client,
    }
}

/// The annotations of `annotations` the agent may set: those starting with
/// [`AGENT_ANNOTATION_PREFIX`].
pub fn agent_annotations(annotations: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    annotations
        .iter()
        .filter(|(key, _)| key.starts_with(AGENT_ANNOTATION_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `existing` plus the entries of `wanted` whose key (URL) is not in it yet, or `None` when
/// nothing is missing. Existing entries are never changed or removed, as in OCM.
pub fn merge_by_key<T: Clone>(existing: &[T], wanted: &[T], key: impl Fn(&T) -> &str) -> Option<Vec<T>> {
    let mut merged = existing.to_vec();
    for entry in wanted {
        if !merged.iter().any(|e| key(e) == key(entry)) {
            merged.push(entry.clone());
        }
    }
    (merged.len() != existing.len()).then_some(merged)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};

    use super::*;

    fn accepted(status: &str) -> Condition {
        Condition {
            type_: HUB_ACCEPTED_CONDITION.into(),
            status: status.into(),
            reason: "HubClusterAdminAccepted".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        }
    }

    #[test]
    fn the_hubs_condition_decides_when_present() {
        assert!(hub_accepted(true, &[accepted("True")]));
        assert!(hub_accepted(false, &[accepted("True")]));
        assert!(!hub_accepted(true, &[accepted("False")]));
        assert!(!hub_accepted(true, &[accepted("Unknown")]));
    }

    #[test]
    fn without_the_condition_the_spec_decides() {
        assert!(hub_accepts(true));
        assert!(!hub_accepts(false));
    }

    fn hub_accepts(spec: bool) -> bool {
        hub_accepted(spec, &[])
    }

    #[test]
    fn only_agent_annotations_are_kept() {
        let annotations: BTreeMap<String, String> = [
            ("agent.open-cluster-management.io/owner", "team-a"),
            ("open-cluster-management.io/other", "x"),
            ("example.com/agent.open-cluster-management.io/", "y"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let kept = agent_annotations(&annotations);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept["agent.open-cluster-management.io/owner"], "team-a");
    }

    #[test]
    fn missing_urls_are_appended_and_existing_ones_kept() {
        let existing = vec![("https://a", "ca-old")];
        let wanted = vec![("https://a", "ca-new"), ("https://b", "ca-b")];
        assert_eq!(
            merge_by_key(&existing, &wanted, |e| e.0),
            Some(vec![("https://a", "ca-old"), ("https://b", "ca-b")])
        );
        assert_eq!(merge_by_key(&existing, &existing, |e| e.0), None);
        assert_eq!(merge_by_key(&existing, &[], |e| e.0), None);
    }
}
