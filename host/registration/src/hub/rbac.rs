//! The RBAC the hub grants, with OCM's names and rules (`pkg/registration/hub/manifests/rbac/`
//! in OCM). Pure builders; the accept and deletion controllers apply and delete them.
//!
//! ```text
//!  hub-wide (installed by the admin)                 per accepted cluster <c>
//!  open-cluster-management:bootstrap                 ClusterRole + ClusterRoleBinding
//!    bootstrap identities: join, create CSRs           open-cluster-management:managedcluster:<c>
//!  flotilla:managedcluster:certificates                own ManagedCluster (+status)
//!    CSRs, renew                                     ClusterRoleBinding …:<c>:certificates ─▶ certificates
//!  open-cluster-management:managedcluster:
//!    registration  leases, add-on status, events     RoleBinding <c>/…:<c>:registration ─▶ registration
//!    work          ManifestWorks (+status), events   RoleBinding <c>/…:<c>:work         ─▶ work
//! ```
//!
//! The hub holds every rule of the per-cluster ClusterRole itself and may `bind` the hub-wide
//! roles by name only, so it grants clusters their rights without `escalate` on ClusterRoles
//! (OCM's hub has it): a hub that is taken over cannot write itself a ClusterRole it does not
//! hold. That is why the CSR rules, which the hub must not hold (with `approve` it could mint
//! any client identity), live in a hub-wide role rather than in each cluster's own as in OCM;
//! the agents get the same rights.
//!
//! Per-cluster objects carry the label `open-cluster-management.io/cluster-name=<c>`, so the
//! accept controller hears when someone changes them and puts them back. A denied cluster
//! keeps its ClusterRoleBinding, but its ClusterRole shrinks to reading its own ManagedCluster
//! and its certificates binding goes.

use std::collections::BTreeMap;

use flotilla_api::cluster::consts::CLUSTER_NAME_LABEL;
use k8s_openapi::{
    api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleBinding, RoleRef, Subject},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use crate::names;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const CLUSTER_GROUP: &str = "cluster.open-cluster-management.io";
const REGISTER_GROUP: &str = "register.open-cluster-management.io";
const WORK_GROUP: &str = "work.open-cluster-management.io";
const ADDON_GROUP: &str = "addon.open-cluster-management.io";
const CERTIFICATES_GROUP: &str = "certificates.k8s.io";
const COORDINATION_GROUP: &str = "coordination.k8s.io";
const EVENTS_GROUP: &str = "events.k8s.io";

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        verbs: strings(verbs),
        ..Default::default()
    }
}

fn named_rule(groups: &[&str], resources: &[&str], names: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        resource_names: Some(strings(names)),
        ..rule(groups, resources, verbs)
    }
}

fn metadata(name: &str, namespace: Option<&str>, cluster_label: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        labels: Some(BTreeMap::from([(
            CLUSTER_NAME_LABEL.to_owned(),
            cluster_label.to_owned(),
        )])),
        ..Default::default()
    }
}

fn group(name: String) -> Subject {
    Subject {
        api_group: Some(RBAC_GROUP.to_owned()),
        kind: "Group".to_owned(),
        name,
        namespace: None,
    }
}

fn cluster_role_ref(name: &str) -> RoleRef {
    RoleRef {
        api_group: RBAC_GROUP.to_owned(),
        kind: "ClusterRole".to_owned(),
        name: name.to_owned(),
    }
}

/// The hub-wide ClusterRoles: OCM's `open-cluster-management:bootstrap` (what a bootstrap
/// identity may do to join), and the `registration` and `work` roles that each accepted
/// cluster's agents get in their namespace; and Flotilla's `certificates` role (see the module
/// docs). `flotilla init` and deploy/hub install them.
pub fn hub_cluster_roles() -> Vec<ClusterRole> {
    vec![
        bootstrap_cluster_role(),
        registration_cluster_role(),
        work_cluster_role(),
        certificates_cluster_role(),
    ]
}

/// `open-cluster-management:bootstrap`: read config maps (the hub's cluster info), create and
/// watch CSRs, create and read ManagedClusters, and join cluster sets.
pub fn bootstrap_cluster_role() -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(names::BOOTSTRAP_CLUSTER_ROLE.to_owned()),
            ..Default::default()
        },
        rules: Some(vec![
            rule(&[""], &["configmaps"], &["get"]),
            rule(
                &[CERTIFICATES_GROUP],
                &["certificatesigningrequests"],
                &["create", "get", "list", "watch"],
            ),
            rule(
                &[CLUSTER_GROUP],
                &["managedclusters"],
                &["get", "create", "list", "watch"],
            ),
            rule(&[CLUSTER_GROUP], &["managedclustersets/join"], &["create"]),
        ]),
        ..Default::default()
    }
}

/// `open-cluster-management:managedcluster:registration`, bound in each cluster namespace for
/// the registration agent: its lease, its add-ons' status, events.
pub fn registration_cluster_role() -> ClusterRole {
    ClusterRole {
        metadata: metadata(names::REGISTRATION_CLUSTER_ROLE, None, ""),
        rules: Some(vec![
            rule(
                &[COORDINATION_GROUP],
                &["leases"],
                &["get", "list", "watch", "update"],
            ),
            rule(
                &[ADDON_GROUP],
                &["managedclusteraddons"],
                &["get", "list", "watch"],
            ),
            rule(
                &[ADDON_GROUP],
                &["managedclusteraddons/status"],
                &["patch", "update"],
            ),
            rule(&["", EVENTS_GROUP], &["events"], &["create", "patch", "update"]),
        ]),
        ..Default::default()
    }
}

/// `open-cluster-management:managedcluster:work`, bound in each cluster namespace for the work
/// agent: its ManifestWorks and their status, events.
pub fn work_cluster_role() -> ClusterRole {
    ClusterRole {
        metadata: metadata(names::WORK_CLUSTER_ROLE, None, ""),
        rules: Some(vec![
            rule(&["", EVENTS_GROUP], &["events"], &["create", "patch", "update"]),
            rule(
                &[WORK_GROUP],
                &["manifestworks"],
                &["get", "list", "watch", "update", "patch"],
            ),
            rule(&[WORK_GROUP], &["manifestworks/status"], &["patch", "update"]),
        ]),
        ..Default::default()
    }
}

/// [`names::CERTIFICATES_CLUSTER_ROLE`]: create and watch CSRs, renew a client certificate.
pub fn certificates_cluster_role() -> ClusterRole {
    ClusterRole {
        metadata: metadata(names::CERTIFICATES_CLUSTER_ROLE, None, ""),
        rules: Some(vec![
            rule(
                &[CERTIFICATES_GROUP],
                &["certificatesigningrequests"],
                &["create", "get", "list", "watch"],
            ),
            rule(
                &[REGISTER_GROUP],
                &["managedclusters/clientcertificates"],
                &["renew"],
            ),
        ]),
        ..Default::default()
    }
}

/// `open-cluster-management:managedcluster:<cluster>`. Accepted: read and update its own
/// ManagedCluster and its status (CSRs and renewal come from [`certificates_role_binding`]).
/// Denied: only read its own ManagedCluster.
pub fn cluster_role(cluster: &str, accepted: bool) -> ClusterRole {
    let own_cluster = named_rule(
        &[CLUSTER_GROUP],
        &["managedclusters"],
        &[cluster],
        if accepted {
            &["get", "list", "update", "watch"]
        } else {
            &["get", "list", "watch"]
        },
    );
    let rules = if accepted {
        vec![
            own_cluster,
            named_rule(
                &[CLUSTER_GROUP],
                &["managedclusters/status"],
                &[cluster],
                &["patch", "update"],
            ),
        ]
    } else {
        vec![own_cluster]
    };
    ClusterRole {
        metadata: metadata(&names::cluster_role(cluster), None, cluster),
        rules: Some(rules),
        ..Default::default()
    }
}

/// `open-cluster-management:managedcluster:<cluster>` binding the cluster's role to both
/// per-cluster groups.
pub fn cluster_role_binding(cluster: &str) -> ClusterRoleBinding {
    let name = names::cluster_role(cluster);
    ClusterRoleBinding {
        metadata: metadata(&name, None, cluster),
        role_ref: cluster_role_ref(&name),
        subjects: Some(vec![
            group(names::cluster_group(cluster)),
            group(names::cluster_group_alt(cluster)),
        ]),
    }
}

/// `open-cluster-management:managedcluster:<cluster>:certificates` → the hub-wide certificates
/// role, for both per-cluster groups. Only an accepted cluster has it.
pub fn certificates_role_binding(cluster: &str) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: metadata(&names::certificates_role_binding(cluster), None, cluster),
        role_ref: cluster_role_ref(names::CERTIFICATES_CLUSTER_ROLE),
        subjects: Some(vec![
            group(names::cluster_group(cluster)),
            group(names::cluster_group_alt(cluster)),
        ]),
    }
}

/// `<cluster>/open-cluster-management:managedcluster:<cluster>:registration` → the hub-wide
/// registration role, for both per-cluster groups.
pub fn registration_role_binding(cluster: &str) -> RoleBinding {
    RoleBinding {
        metadata: metadata(&names::registration_role_binding(cluster), Some(cluster), cluster),
        role_ref: cluster_role_ref(names::REGISTRATION_CLUSTER_ROLE),
        subjects: Some(vec![
            group(names::cluster_group(cluster)),
            group(names::cluster_group_alt(cluster)),
        ]),
    }
}

/// `<cluster>/open-cluster-management:managedcluster:<cluster>:work` → the hub-wide work role,
/// for the agent group. It carries the finalizer
/// `cluster.open-cluster-management.io/manifest-work-cleanup`, which the hub removes once no
/// ManifestWork is left, so the work agent can still finish its works while the cluster goes.
pub fn work_role_binding(cluster: &str) -> RoleBinding {
    let mut metadata = metadata(&names::work_role_binding(cluster), Some(cluster), cluster);
    metadata.finalizers = Some(vec![names::MANIFEST_WORK_CLEANUP_FINALIZER.to_owned()]);
    RoleBinding {
        metadata,
        role_ref: cluster_role_ref(names::WORK_CLUSTER_ROLE),
        subjects: Some(vec![group(names::cluster_group(cluster))]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verbs_for<'a>(role: &'a ClusterRole, resource: &str) -> Vec<&'a str> {
        role.rules
            .iter()
            .flatten()
            .filter(|r| r.resources.iter().flatten().any(|x| x == resource))
            .flat_map(|r| r.verbs.iter().map(String::as_str))
            .collect()
    }

    #[test]
    fn hub_roles_have_ocm_names() {
        let names: Vec<_> = hub_cluster_roles()
            .into_iter()
            .filter_map(|r| r.metadata.name)
            .collect();
        assert_eq!(
            names,
            names::HUB_CLUSTER_ROLES,
            "the reserved cluster names derive from these"
        );
        assert_eq!(
            names,
            [
                "open-cluster-management:bootstrap",
                "open-cluster-management:managedcluster:registration",
                "open-cluster-management:managedcluster:work",
                "flotilla:managedcluster:certificates"
            ]
        );
    }

    #[test]
    fn bootstrap_identities_may_join_and_nothing_more() {
        let role = bootstrap_cluster_role();
        assert_eq!(verbs_for(&role, "configmaps"), ["get"]);
        assert_eq!(
            verbs_for(&role, "certificatesigningrequests"),
            ["create", "get", "list", "watch"]
        );
        assert_eq!(
            verbs_for(&role, "managedclusters"),
            ["get", "create", "list", "watch"]
        );
        assert_eq!(verbs_for(&role, "managedclustersets/join"), ["create"]);
        assert!(verbs_for(&role, "secrets").is_empty());
    }

    #[test]
    fn an_accepted_cluster_may_renew_and_update_only_itself() {
        let role = cluster_role("c1", true);
        assert_eq!(
            role.metadata.name.as_deref(),
            Some("open-cluster-management:managedcluster:c1")
        );
        assert_eq!(verbs_for(&role, "managedclusters/status"), ["patch", "update"]);
        for r in role.rules.iter().flatten() {
            assert_eq!(r.resource_names, Some(vec!["c1".to_owned()]), "{r:?}");
        }
        let certificates = certificates_cluster_role();
        assert_eq!(
            verbs_for(&certificates, "managedclusters/clientcertificates"),
            ["renew"]
        );
        assert_eq!(
            verbs_for(&certificates, "certificatesigningrequests"),
            ["create", "get", "list", "watch"]
        );
        let binding = certificates_role_binding("c1");
        assert_eq!(
            binding.metadata.name.as_deref(),
            Some("open-cluster-management:managedcluster:c1:certificates")
        );
        assert_eq!(binding.role_ref.name, "flotilla:managedcluster:certificates");
    }

    #[test]
    fn a_denied_cluster_may_only_read_itself() {
        let role = cluster_role("c1", false);
        assert_eq!(role.rules.as_ref().map(Vec::len), Some(1));
        assert_eq!(verbs_for(&role, "managedclusters"), ["get", "list", "watch"]);
        assert!(verbs_for(&role, "certificatesigningrequests").is_empty());
    }

    #[test]
    fn bindings_name_the_cluster_groups_and_carry_the_cluster_label() {
        let binding = cluster_role_binding("c1");
        let subjects: Vec<_> = binding
            .subjects
            .iter()
            .flatten()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(
            subjects,
            ["system:open-cluster-management:c1", "open-cluster-management:c1"]
        );
        assert_eq!(
            binding
                .metadata
                .labels
                .unwrap()
                .get(CLUSTER_NAME_LABEL)
                .map(String::as_str),
            Some("c1")
        );
        let work = work_role_binding("c1");
        assert_eq!(work.metadata.namespace.as_deref(), Some("c1"));
        assert_eq!(
            work.metadata.finalizers,
            Some(vec![
                "cluster.open-cluster-management.io/manifest-work-cleanup".to_owned()
            ])
        );
        assert_eq!(work.role_ref.name, "open-cluster-management:managedcluster:work");
        let registration = registration_role_binding("c1");
        assert_eq!(
            registration.metadata.name.as_deref(),
            Some("open-cluster-management:managedcluster:c1:registration")
        );
        assert_eq!(
            registration.role_ref.name,
            "open-cluster-management:managedcluster:registration"
        );
    }
}
