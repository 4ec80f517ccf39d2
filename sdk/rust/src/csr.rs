//! OCM's default CSR approval rules and the default agent subject.
//!
//! [`default_approve`] is what [`crate::Addon::approve_csr`] does unless an add-on overrides it.
//! It follows addon-framework's `DefaultCSRApprover` (ocm-reference §5): the request's common name
//! is the add-on agent's user, its organizations contain the agent's groups (OCM: 2–3 orgs
//! including both default groups), and it was created by that cluster's registration agent
//! (`spec.username` = `system:open-cluster-management:<cluster>:<agent>`). Two deliberate, stricter
//! differences, both fail-closed: the username must match the cluster name up to the next `:`
//! (OCM's plain prefix check lets cluster `c1` match `c10`), and the signer must be one the add-on
//! registered.

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

/// The subject `options` registers for `signer`, expanded for this cluster and add-on; `None` if
/// the add-on has no registration for the signer.
pub fn expected_subject(options: &AddonOptions, signer: &str, cluster: &str, addon: &str) -> Option<Subject> {
    let template = options.registrations.iter().find_map(|r| match r {
        Registration::KubeClient { subject } if signer == KUBE_CLIENT_SIGNER => Some(subject.clone()),
        Registration::CustomSigner { signer_name, subject } if signer_name == signer => Some(subject.clone()),
        _ => None,
    })?;
    Some(expand_subject(
        &template.unwrap_or_else(default_subject_template),
        cluster,
        addon,
    ))
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
    if let Some(missing) = expected.groups.iter().find(|g| !csr.organizations.contains(g)) {
        return deny(format!(
            "organizations {:?} lack the agent group {missing:?}",
            csr.organizations
        ));
    }
    if csr.organizations.len() > expected.groups.len() + 1 {
        return deny(format!(
            "{} organizations, at most {} (the agent groups plus one)",
            csr.organizations.len(),
            expected.groups.len() + 1
        ));
    }
    let agent_prefix = format!("system:open-cluster-management:{}:", cluster.name);
    if !csr.username.starts_with(&agent_prefix) {
        return deny(format!(
            "requested by {:?}, not by cluster {}'s registration agent ({agent_prefix}<agent>)",
            csr.username, cluster.name
        ));
    }
    CsrDecision::Approve
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
}
