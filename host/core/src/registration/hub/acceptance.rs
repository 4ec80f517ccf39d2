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
//!
//! Accepting a cluster grants its agents RoleBindings in the namespace named after it and
//! writes cluster-scoped RBAC named after it, so some names are never acted on, even when
//! admission (which refuses them first) was bypassed:
//!
//! ```text
//!  default, kube-*, open-cluster-management*   namespaces of Kubernetes and of the hub itself
//!  registration, work                          their ClusterRole would be a hub-wide role
//!  a namespace that exists without the label   someone else's namespace: never adopted
//!    open-cluster-management.io/cluster-name=<c>
//! ```

use flotilla_api::cluster::consts::managed_cluster::{
    CONDITION_HUB_ACCEPTED, REASON_ERROR, REASON_HUB_CLUSTER_ADMIN_ACCEPTED as REASON_ACCEPTED,
    REASON_HUB_CLUSTER_ADMIN_DENIED as REASON_DENIED,
};
use std::collections::BTreeMap;

use flotilla_api::cluster::consts::CLUSTER_NAME_LABEL;
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

/// Namespaces no cluster may be named after, besides [`PROTECTED_NAMESPACE_PREFIXES`].
pub const PROTECTED_NAMESPACES: [&str; 1] = ["default"];
/// Prefixes of namespaces no cluster may be named after: Kubernetes reserves `kube-`
/// (`kube-system`, `kube-public`, `kube-node-lease`), and the hub and OCM's agents and add-ons
/// live in `open-cluster-management*`. A cluster's agents there could take over leader leases.
pub const PROTECTED_NAMESPACE_PREFIXES: [&str; 2] = ["kube-", "open-cluster-management"];

/// Checks that the hub may act for a cluster named `name`: its namespace is none of
/// Kubernetes' or the hub's own, and none of the cluster-scoped names the hub derives from it
/// (`derived`) is one of the hub-wide objects (`hub_wide`) every cluster's agents are bound to.
/// The error says which rule the name breaks.
pub fn validate_reserved_name(name: &str, derived: &[String], hub_wide: &[&str]) -> Result<(), String> {
    if is_protected_namespace(name) {
        return Err(format!(
            "{name:?} is reserved: it names a namespace of Kubernetes or of the hub \
             (default, kube-*, open-cluster-management*), where a cluster's agents must get no RoleBindings"
        ));
    }
    if let Some(object) = derived.iter().find(|d| hub_wide.contains(&d.as_str())) {
        return Err(format!(
            "{name:?} is reserved: the hub would name this cluster's RBAC {object:?}, \
             a hub-wide role every cluster's agents are bound to"
        ));
    }
    Ok(())
}

/// Whether `name` is one of [`PROTECTED_NAMESPACES`] or starts with a
/// [`PROTECTED_NAMESPACE_PREFIXES`] prefix.
pub fn is_protected_namespace(name: &str) -> bool {
    PROTECTED_NAMESPACES.contains(&name) || PROTECTED_NAMESPACE_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Whose the namespace named after a cluster is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterNamespace {
    /// No such namespace: the hub creates it, labelled.
    Absent,
    /// The hub made it for this cluster: labelled `open-cluster-management.io/cluster-name=<c>`.
    Ours,
    /// It exists without that label: made by someone else, for something else.
    Foreign,
}

/// Whose the namespace of `cluster` is, from its labels (`None` when it does not exist).
pub fn cluster_namespace(
    cluster: &str,
    existing: Option<Option<&BTreeMap<String, String>>>,
) -> ClusterNamespace {
    match existing {
        None => ClusterNamespace::Absent,
        Some(labels)
            if labels.and_then(|l| l.get(CLUSTER_NAME_LABEL)).map(String::as_str) == Some(cluster) =>
        {
            ClusterNamespace::Ours
        }
        Some(_) => ClusterNamespace::Foreign,
    }
}

/// Why the hub does not accept `cluster` whose namespace is [`ClusterNamespace::Foreign`].
pub fn foreign_namespace_message(cluster: &str) -> String {
    format!(
        "namespace {cluster:?} exists and was not created by the hub for this cluster (no label \
         {CLUSTER_NAME_LABEL}={cluster}): the hub grants nothing there; rename the cluster, or label the \
         namespace if it is meant to be the cluster's"
    )
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

    const HUB_WIDE: [&str; 2] = [
        "open-cluster-management:managedcluster:registration",
        "open-cluster-management:managedcluster:work",
    ];

    fn derived(name: &str) -> Vec<String> {
        vec![format!("open-cluster-management:managedcluster:{name}")]
    }

    #[rstest]
    #[case::kube_system("kube-system")]
    #[case::kube_public("kube-public")]
    #[case::kube_node_lease("kube-node-lease")]
    #[case::default_namespace("default")]
    #[case::the_hubs_namespace("open-cluster-management-hub")]
    #[case::ocms_namespace("open-cluster-management")]
    #[case::an_agent_namespace("open-cluster-management-agent-addon")]
    #[case::the_registration_role("registration")]
    #[case::the_work_role("work")]
    fn names_of_hub_objects_are_reserved(#[case] name: &str) {
        let error = validate_reserved_name(name, &derived(name), &HUB_WIDE).unwrap_err();
        assert!(error.contains("reserved"), "{error}");
    }

    #[rstest]
    #[case::cluster("cluster1")]
    #[case::containing_kube("my-kube-system")]
    #[case::containing_work("work1")]
    #[case::registration_prefix("registration-east")]
    fn other_names_are_free(#[case] name: &str) {
        assert_eq!(validate_reserved_name(name, &derived(name), &HUB_WIDE), Ok(()));
    }

    #[test]
    fn only_a_namespace_labelled_for_the_cluster_is_the_clusters() {
        let labels = |value: &str| BTreeMap::from([(CLUSTER_NAME_LABEL.to_owned(), value.to_owned())]);
        assert_eq!(cluster_namespace("c1", None), ClusterNamespace::Absent);
        assert_eq!(
            cluster_namespace("c1", Some(Some(&labels("c1")))),
            ClusterNamespace::Ours
        );
        assert_eq!(cluster_namespace("c1", Some(None)), ClusterNamespace::Foreign);
        assert_eq!(
            cluster_namespace("c1", Some(Some(&BTreeMap::new()))),
            ClusterNamespace::Foreign
        );
        assert_eq!(
            cluster_namespace("c1", Some(Some(&labels("c2")))),
            ClusterNamespace::Foreign
        );
        assert!(foreign_namespace_message("c1").contains("open-cluster-management.io/cluster-name=c1"));
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
