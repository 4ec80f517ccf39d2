//! Acceptance of a ManagedCluster by the hub admin (`spec.hubAcceptsClient`), as OCM's
//! managed cluster controller decides it:
//!
//! ```text
//!  hubAcceptsClient  HubAcceptedManagedCluster         ⇒ action
//!  true              any                               ⇒ Accept (namespace, RBAC, lease; True)
//!  false             present, not False/Denied         ⇒ Revoke (read-only RBAC; False Denied)
//!  false             absent, or False/Denied           ⇒ nothing
//! ```
//!
//! A cluster's namespace is named after the cluster, so a name that is not a valid namespace
//! name cannot be accepted; the hub reports it as `False`/`Error` rather than failing forever.

use flotilla_api::cluster::consts::managed_cluster::{
    CONDITION_HUB_ACCEPTED, REASON_ERROR, REASON_HUB_CLUSTER_ADMIN_ACCEPTED as REASON_ACCEPTED,
    REASON_HUB_CLUSTER_ADMIN_DENIED as REASON_DENIED,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::conditions::{self, FALSE, NewCondition, TRUE};

/// Longest namespace name (an RFC 1123 label).
pub const MAX_NAMESPACE_NAME_LENGTH: usize = crate::names::MAX_DNS_LABEL_LENGTH;

/// What the hub does with a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acceptance {
    /// The admin accepts the cluster: ensure its namespace, RBAC and lease.
    Accept,
    /// The admin withdrew acceptance: reduce RBAC to read-only and report the denial.
    Revoke,
    /// Never accepted, or already revoked: nothing to do.
    Ignore,
}

/// Decides what to do from `spec.hubAcceptsClient` and the cluster's conditions.
pub fn acceptance(hub_accepts_client: bool, conditions: &[Condition]) -> Acceptance {
    if hub_accepts_client {
        return Acceptance::Accept;
    }
    match conditions::find(conditions, CONDITION_HUB_ACCEPTED) {
        Some(c) if c.status == FALSE && c.reason == REASON_DENIED => Acceptance::Ignore,
        Some(_) => Acceptance::Revoke,
        None => Acceptance::Ignore,
    }
}

/// Whether the cluster is accepted now: the admin accepts it and the hub has finished
/// accepting it (`HubAcceptedManagedCluster` True).
pub fn is_accepted(hub_accepts_client: bool, conditions: &[Condition]) -> bool {
    hub_accepts_client && conditions::is_true(conditions, CONDITION_HUB_ACCEPTED)
}

/// Checks that `name` can name the cluster's namespace (an RFC 1123 label); the error says
/// why not, in the apiserver's words.
pub fn validate_namespace_name(name: &str) -> Result<(), String> {
    match crate::names::dns_label_problem(name) {
        Some(reason) => Err(format!(
            "{name:?} is not a valid namespace name: a lowercase RFC 1123 label {reason}"
        )),
        None => Ok(()),
    }
}

/// `HubAcceptedManagedCluster` True.
pub fn accepted_condition() -> NewCondition<'static> {
    NewCondition {
        type_: CONDITION_HUB_ACCEPTED,
        status: TRUE,
        reason: REASON_ACCEPTED,
        message: "Accepted by hub cluster admin".to_owned(),
        observed_generation: None,
    }
}

/// `HubAcceptedManagedCluster` False after the admin withdrew acceptance.
pub fn denied_condition() -> NewCondition<'static> {
    NewCondition {
        type_: CONDITION_HUB_ACCEPTED,
        status: FALSE,
        reason: REASON_DENIED,
        message: "Denied by hub cluster admin".to_owned(),
        observed_generation: None,
    }
}

/// `HubAcceptedManagedCluster` False because accepting failed with `message`.
pub fn error_condition(message: String) -> NewCondition<'static> {
    NewCondition {
        type_: CONDITION_HUB_ACCEPTED,
        status: FALSE,
        reason: REASON_ERROR,
        message,
        observed_generation: None,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
    use rstest::rstest;

    use super::*;

    fn condition(status: &str, reason: &str) -> Vec<Condition> {
        vec![Condition {
            type_: CONDITION_HUB_ACCEPTED.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        }]
    }

    #[rstest]
    #[case::accepting_a_new_cluster(true, vec![], Acceptance::Accept)]
    #[case::accepting_again_after_a_denial(true, condition("False", REASON_DENIED), Acceptance::Accept)]
    #[case::never_accepted(false, vec![], Acceptance::Ignore)]
    #[case::withdrawn_after_acceptance(false, condition("True", REASON_ACCEPTED), Acceptance::Revoke)]
    #[case::withdrawn_after_a_failed_acceptance(false, condition("False", REASON_ERROR), Acceptance::Revoke)]
    #[case::already_revoked(false, condition("False", REASON_DENIED), Acceptance::Ignore)]
    fn acceptance_follows_the_admin_and_the_last_outcome(
        #[case] hub_accepts_client: bool,
        #[case] conditions: Vec<Condition>,
        #[case] expected: Acceptance,
    ) {
        assert_eq!(acceptance(hub_accepts_client, &conditions), expected);
    }

    #[test]
    fn a_cluster_is_accepted_only_once_the_hub_finished_accepting_it() {
        assert!(is_accepted(true, &condition("True", REASON_ACCEPTED)));
        assert!(!is_accepted(true, &[]));
        assert!(!is_accepted(true, &condition("False", REASON_ERROR)));
        assert!(!is_accepted(false, &condition("True", REASON_ACCEPTED)));
    }

    #[rstest]
    #[case::simple("cluster1")]
    #[case::dashes("cluster-a-1")]
    #[case::digits_only("1")]
    #[case::longest("a".repeat(63))]
    fn valid_namespace_names_pass(#[case] name: String) {
        assert_eq!(validate_namespace_name(&name), Ok(()));
    }

    #[rstest]
    #[case::empty("")]
    #[case::too_long("a".repeat(64))]
    #[case::uppercase("Cluster1")]
    #[case::dotted("cluster.one")]
    #[case::leading_dash("-cluster")]
    #[case::trailing_dash("cluster-")]
    #[case::underscore("cluster_1")]
    fn invalid_namespace_names_are_explained(#[case] name: String) {
        let error = validate_namespace_name(&name).unwrap_err();
        assert!(error.contains("namespace name"), "{error}");
    }
}
