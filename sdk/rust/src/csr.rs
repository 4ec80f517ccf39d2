//! OCM's default CSR approval rules and the default agent subject.
//!
//! [`default_approve`] is what [`crate::Addon::approve_csr`] does unless an add-on overrides it.
//! It follows addon-framework's `DefaultCSRApprover` (ocm-reference §5) — the request is for the
//! add-on agent's identity and was created by that cluster's registration agent
//! (`spec.username` = `system:open-cluster-management:<cluster>:<agent>`) — with three deliberate,
//! stricter differences, all fail-closed:
//!
//! - the identity is exactly the registered one: the common name is the subject's user, and the
//!   set of organizations (the certificate's groups on the hub) and of organizational units
//!   equals the subject's, nothing extra (OCM lets one more organization through, which would be
//!   one more group the agent's certificate carries);
//! - the username must name the cluster up to the next `:` (OCM's plain prefix check lets
//!   cluster `c1` match `c10`);
//! - the signer must be one the add-on registered.

use crate::types::{AddOn, AddonOptions, Cluster, Csr, CsrDecision, Registration, Subject};

/// Signer of hub kube-apiserver client certificates.
pub const KUBE_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// Placeholder for the cluster name in subject templates.
pub const CLUSTER_PLACEHOLDER: &str = "{cluster-name}";
/// Placeholder for the add-on name in subject templates.
pub const ADDON_PLACEHOLDER: &str = "{addon-name}";

/// OCM's default agent subject as a template: user
/// `system:open-cluster-management:cluster:{cluster-name}:addon:{addon-name}:agent:{addon-name}`,
/// groups `system:open-cluster-management:cluster:{cluster-name}:addon:{addon-name}` and
/// `system:open-cluster-management:addon:{addon-name}`.
pub fn default_subject_template() -> Subject {
    Subject {
        user: format!(
            "system:open-cluster-management:cluster:{CLUSTER_PLACEHOLDER}:addon:{ADDON_PLACEHOLDER}:agent:{ADDON_PLACEHOLDER}"
        ),
        groups: vec![
            format!("system:open-cluster-management:cluster:{CLUSTER_PLACEHOLDER}:addon:{ADDON_PLACEHOLDER}"),
            format!("system:open-cluster-management:addon:{ADDON_PLACEHOLDER}"),
        ],
        organization_units: Vec::new(),
    }
}

/// Replaces the placeholders in `template` for one cluster and add-on.
pub fn expand_subject(template: &Subject, cluster: &str, addon: &str) -> Subject {
    let expand = |s: &String| {
        s.replace(CLUSTER_PLACEHOLDER, cluster)
            .replace(ADDON_PLACEHOLDER, addon)
    };
    Subject {
        user: expand(&template.user),
        groups: template.groups.iter().map(expand).collect(),
        organization_units: template.organization_units.iter().map(expand).collect(),
    }
}

/// The subject `options` registers for `signer`, expanded for this cluster and add-on as the
/// host expands it (no subject: OCM's default; an empty user: the default user; a kube-client
/// subject without groups: the default groups); `None` if the add-on has no registration for
/// the signer.
pub fn expected_subject(options: &AddonOptions, signer: &str, cluster: &str, addon: &str) -> Option<Subject> {
    let (template, kube_client) = options.registrations.iter().find_map(|r| match r {
        Registration::KubeClient { subject } if signer == KUBE_CLIENT_SIGNER => Some((subject.clone(), true)),
        Registration::CustomSigner { signer_name, subject } if signer_name == signer => {
            Some((subject.clone(), false))
        }
        _ => None,
    })?;
    let default = expand_subject(&default_subject_template(), cluster, addon);
    let Some(template) = template else {
        return Some(default);
    };
    let mut subject = expand_subject(&template, cluster, addon);
    if subject.user.is_empty() {
        subject.user = default.user;
    }
    if kube_client && subject.groups.is_empty() {
        subject.groups = default.groups;
    }
    Some(subject)
}

/// OCM's `DefaultCSRApprover` for the registrations in `options`. See the module docs.
pub fn default_approve(options: &AddonOptions, cluster: &Cluster, addon: &AddOn, csr: &Csr) -> CsrDecision {
    let deny = |reason: String| CsrDecision::Deny(reason);
    let Some(expected) = expected_subject(options, &csr.signer_name, &cluster.name, &addon.name) else {
        return deny(format!(
            "add-on {} has no registration for signer {:?}",
            addon.name, csr.signer_name
        ));
    };
    if csr.common_name != expected.user {
        return deny(format!(
            "common name {:?} is not the agent user {:?}",
            csr.common_name, expected.user
        ));
    }
    if !same_set(&csr.organizations, &expected.groups) {
        return deny(format!(
            "organizations {:?} are not exactly the registered groups {:?}",
            csr.organizations, expected.groups
        ));
    }
    if !same_set(&csr.organizational_units, &expected.organization_units) {
        return deny(format!(
            "organizational units {:?} are not exactly the registered ones {:?}",
            csr.organizational_units, expected.organization_units
        ));
    }
    let agent_prefix = format!("system:open-cluster-management:{}:", cluster.name);
    let agent = csr.username.strip_prefix(&agent_prefix);
    if !agent.is_some_and(|a| !a.is_empty() && !a.contains(':')) {
        return deny(format!(
            "requested by {:?}, not by cluster {}'s registration agent ({agent_prefix}<agent>)",
            csr.username, cluster.name
        ));
    }
    CsrDecision::Approve
}

/// Whether `a` and `b` hold the same values, in any order (a repeated value counts once, as
/// Kubernetes reads groups).
fn same_set(a: &[String], b: &[String]) -> bool {
    a.iter().all(|x| b.contains(x)) && b.iter().all(|x| a.contains(x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::csr_for;

    fn options() -> AddonOptions {
        AddonOptions {
            registrations: vec![Registration::KubeClient { subject: None }],
            ..AddonOptions::default()
        }
    }

    #[test]
    fn the_registration_agents_default_csr_is_approved() {
        let (cluster, addon) = (Cluster::new("c1"), AddOn::new("hello", "ns"));
        assert_eq!(
            default_approve(&options(), &cluster, &addon, &csr_for(&cluster, &addon)),
            CsrDecision::Approve
        );
    }

    #[test]
    fn csrs_for_another_cluster_or_from_another_requester_are_denied() {
        let (cluster, addon) = (Cluster::new("c1"), AddOn::new("hello", "ns"));
        let other = csr_for(&Cluster::new("c2"), &addon);
        assert!(matches!(
            default_approve(&options(), &cluster, &addon, &other),
            CsrDecision::Deny(_)
        ));

        let mut csr = csr_for(&cluster, &addon);
        csr.username = "system:open-cluster-management:c10:agent".into();
        assert!(matches!(
            default_approve(&options(), &cluster, &addon, &csr),
            CsrDecision::Deny(_)
        ));

        let mut csr = csr_for(&cluster, &addon);
        csr.organizations.pop();
        assert!(matches!(
            default_approve(&options(), &cluster, &addon, &csr),
            CsrDecision::Deny(_)
        ));

        let mut csr = csr_for(&cluster, &addon);
        csr.signer_name = "example.com/unregistered".into();
        assert!(matches!(
            default_approve(&options(), &cluster, &addon, &csr),
            CsrDecision::Deny(_)
        ));
    }

    fn denied(csr: &Csr) -> bool {
        let (cluster, addon) = (Cluster::new("c1"), AddOn::new("hello", "ns"));
        matches!(
            default_approve(&options(), &cluster, &addon, csr),
            CsrDecision::Deny(_)
        )
    }

    #[test]
    fn an_identity_beyond_the_registered_one_is_denied() {
        let (cluster, addon) = (Cluster::new("c1"), AddOn::new("hello", "ns"));
        let mut one_more_group = csr_for(&cluster, &addon);
        one_more_group
            .organizations
            .push("system:open-cluster-management:cluster:c2:addon:hello".into());
        assert!(denied(&one_more_group), "one organization more than registered");

        let mut a_unit = csr_for(&cluster, &addon);
        a_unit.organizational_units.push("admins".into());
        assert!(denied(&a_unit), "an organizational unit not registered");

        let mut an_agent_with_a_colon = csr_for(&cluster, &addon);
        an_agent_with_a_colon.username = "system:open-cluster-management:c1:agent:x".into();
        assert!(denied(&an_agent_with_a_colon), "no agent of cluster c1");

        let mut reordered = csr_for(&cluster, &addon);
        reordered.organizations.reverse();
        assert!(!denied(&reordered), "the order of organizations does not matter");
    }

    #[test]
    fn a_custom_subject_is_expected_as_the_host_expands_it() {
        let options = AddonOptions {
            registrations: vec![
                Registration::KubeClient {
                    subject: Some(Subject {
                        user: String::new(),
                        groups: Vec::new(),
                        organization_units: vec!["{cluster-name}".into()],
                    }),
                },
                Registration::CustomSigner {
                    signer_name: "example.com/s".into(),
                    subject: Some(Subject {
                        user: "agent:{cluster-name}".into(),
                        groups: Vec::new(),
                        organization_units: Vec::new(),
                    }),
                },
            ],
            ..AddonOptions::default()
        };
        let kube = expected_subject(&options, KUBE_CLIENT_SIGNER, "c1", "hello").unwrap();
        let default = expand_subject(&default_subject_template(), "c1", "hello");
        assert_eq!(kube.user, default.user);
        assert_eq!(kube.groups, default.groups);
        assert_eq!(kube.organization_units, ["c1"]);
        let custom = expected_subject(&options, "example.com/s", "c1", "hello").unwrap();
        assert_eq!(custom.user, "agent:c1");
        assert!(
            custom.groups.is_empty(),
            "a custom signer's groups are not defaulted"
        );
    }
}
