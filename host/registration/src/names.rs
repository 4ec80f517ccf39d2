//! Names of objects that OCM's hub and agents agree on, exactly as OCM spells them. Labels,
//! annotations, finalizers and condition constants of the API kinds live in
//! `flotilla_api::cluster::consts`; these are the registration-specific ones.

use flotilla_core::registration::hub::acceptance;

/// Namespace of the hub's own components.
pub const HUB_NAMESPACE: &str = "open-cluster-management-hub";
/// The hub's Deployment in [`HUB_NAMESPACE`] (deploy/hub).
pub const HUB_DEPLOYMENT: &str = "flotilla-hub";
/// Namespace of the klusterlet's agents on a managed cluster.
pub const AGENT_NAMESPACE: &str = "open-cluster-management-agent";
/// The klusterlet's Deployment in [`AGENT_NAMESPACE`] (deploy/klusterlet).
pub const KLUSTERLET_DEPLOYMENT: &str = "klusterlet";
/// Default install namespace of add-on agents on a managed cluster.
pub const ADDON_NAMESPACE: &str = "open-cluster-management-agent-addon";
/// Namespace of the `agent-registration-bootstrap` service account on the hub.
pub const BOOTSTRAP_SA_NAMESPACE: &str = "open-cluster-management";
/// Service account a cluster may bootstrap with instead of a bootstrap token.
pub const BOOTSTRAP_SA_NAME: &str = "agent-registration-bootstrap";

/// Secret (agent namespace) holding the bootstrap kubeconfig, key [`KUBECONFIG_KEY`].
pub const BOOTSTRAP_SECRET: &str = "bootstrap-hub-kubeconfig";
/// Secret (agent namespace) the agent writes once its certificate is issued.
pub const HUB_KUBECONFIG_SECRET: &str = "hub-kubeconfig-secret";
/// Secret (agent namespace on the hosting cluster) holding, in hosted mode, the kubeconfig
/// the klusterlet reaches the managed cluster with, key [`KUBECONFIG_KEY`].
pub const EXTERNAL_MANAGED_KUBECONFIG_SECRET: &str = "external-managed-kubeconfig";
/// Key of a kubeconfig in the bootstrap and hub kubeconfig secrets.
pub const KUBECONFIG_KEY: &str = "kubeconfig";
/// Key of the client certificate in the hub kubeconfig secret.
pub const TLS_CERT_KEY: &str = "tls.crt";
/// Key of the client key in the hub kubeconfig secret.
pub const TLS_KEY_KEY: &str = "tls.key";
/// Key of the cluster name in the hub kubeconfig secret.
pub const CLUSTER_NAME_KEY: &str = "cluster-name";
/// Key of the agent name in the hub kubeconfig secret.
pub const AGENT_NAME_KEY: &str = "agent-name";

/// Lease (cluster namespace on the hub) the agent renews.
pub const CLUSTER_LEASE: &str = "managed-cluster-lease";

/// The signer of cluster and add-on client certificates.
pub const KUBE_APISERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// Group of every registered cluster's agent.
pub const MANAGED_CLUSTERS_GROUP: &str = "system:open-cluster-management:managed-clusters";
/// Group of bootstrap tokens for managed clusters.
pub const BOOTSTRAP_GROUP: &str = "system:bootstrappers:managedcluster";
/// User name prefix of bootstrap tokens.
pub const BOOTSTRAP_USER_PREFIX: &str = "system:bootstrap:";

/// ClusterRole bound to bootstrap identities.
pub const BOOTSTRAP_CLUSTER_ROLE: &str = "open-cluster-management:bootstrap";
/// ClusterRole a cluster's registration agent gets in its namespace.
pub const REGISTRATION_CLUSTER_ROLE: &str = "open-cluster-management:managedcluster:registration";
/// ClusterRole a cluster's work agent gets in its namespace.
pub const WORK_CLUSTER_ROLE: &str = "open-cluster-management:managedcluster:work";
/// ClusterRole every accepted cluster's agent gets cluster-wide: file CSRs and renew its
/// certificate. OCM writes these rules into each cluster's own ClusterRole; Flotilla keeps them
/// in one role the admin installs, so the hub can grant them by `bind` on this name alone
/// instead of `escalate` (it may not create CSRs itself).
pub const CERTIFICATES_CLUSTER_ROLE: &str = "flotilla:managedcluster:certificates";

/// Every hub-wide ClusterRole (the ones [`crate::hub::hub_cluster_roles`] builds): no object
/// the hub names after a cluster may ever be one of them.
pub const HUB_CLUSTER_ROLES: [&str; 4] = [
    BOOTSTRAP_CLUSTER_ROLE,
    REGISTRATION_CLUSTER_ROLE,
    WORK_CLUSTER_ROLE,
    CERTIFICATES_CLUSTER_ROLE,
];

/// Finalizer the hub keeps on a cluster's ManifestWorks until no works remain.
pub const MANIFEST_WORK_CLEANUP_FINALIZER: &str = "cluster.open-cluster-management.io/manifest-work-cleanup";

/// The per-cluster group: `system:open-cluster-management:<cluster>`.
pub fn cluster_group(cluster: &str) -> String {
    format!("system:open-cluster-management:{cluster}")
}

/// The per-cluster group OCM also binds: `open-cluster-management:<cluster>`.
pub fn cluster_group_alt(cluster: &str) -> String {
    format!("open-cluster-management:{cluster}")
}

/// The agent's user: `system:open-cluster-management:<cluster>:<agent>`.
pub fn agent_user(cluster: &str, agent: &str) -> String {
    format!("system:open-cluster-management:{cluster}:{agent}")
}

/// The per-cluster ClusterRole and ClusterRoleBinding: `open-cluster-management:managedcluster:<cluster>`.
pub fn cluster_role(cluster: &str) -> String {
    format!("open-cluster-management:managedcluster:{cluster}")
}

/// The ClusterRoleBinding of the cluster's groups to [`CERTIFICATES_CLUSTER_ROLE`].
pub fn certificates_role_binding(cluster: &str) -> String {
    format!("open-cluster-management:managedcluster:{cluster}:certificates")
}

/// The registration RoleBinding in the cluster namespace.
pub fn registration_role_binding(cluster: &str) -> String {
    format!("open-cluster-management:managedcluster:{cluster}:registration")
}

/// The work RoleBinding in the cluster namespace.
pub fn work_role_binding(cluster: &str) -> String {
    format!("open-cluster-management:managedcluster:{cluster}:work")
}

/// The cluster-scoped objects the hub names after a cluster: its ClusterRole and
/// ClusterRoleBinding.
pub fn cluster_scoped_names(cluster: &str) -> Vec<String> {
    vec![cluster_role(cluster)]
}

/// Checks that the hub may act for a cluster named `cluster`
/// ([`flotilla_core::registration::hub::acceptance::validate_reserved_name`] with the hub's
/// own names); the error names the rule broken.
pub fn validate_cluster_name(cluster: &str) -> Result<(), String> {
    acceptance::validate_reserved_name(cluster, &cluster_scoped_names(cluster), &HUB_CLUSTER_ROLES)
}

/// The cluster names whose ClusterRole would be a hub-wide role (`registration`, `work`):
/// what admission refuses besides the protected namespaces, derived from the same names.
pub fn hub_role_cluster_names() -> Vec<String> {
    let prefix = cluster_role("");
    HUB_CLUSTER_ROLES
        .iter()
        .filter_map(|role| role.strip_prefix(&prefix))
        .filter(|name| flotilla_core::names::dns_label_problem(name).is_none())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_named_after_a_hub_role_are_refused() {
        assert_eq!(hub_role_cluster_names(), ["registration", "work"]);
        for name in hub_role_cluster_names() {
            assert!(validate_cluster_name(&name).is_err(), "{name}");
        }
        assert!(validate_cluster_name("kube-system").is_err());
        assert!(validate_cluster_name(HUB_NAMESPACE).is_err());
        assert!(validate_cluster_name(AGENT_NAMESPACE).is_err());
        assert!(validate_cluster_name(BOOTSTRAP_SA_NAMESPACE).is_err());
        assert_eq!(validate_cluster_name("cluster1"), Ok(()));
    }

    #[test]
    fn per_cluster_names_follow_ocm() {
        assert_eq!(cluster_group("c1"), "system:open-cluster-management:c1");
        assert_eq!(agent_user("c1", "a1"), "system:open-cluster-management:c1:a1");
        assert_eq!(cluster_role("c1"), "open-cluster-management:managedcluster:c1");
        assert_eq!(
            registration_role_binding("c1"),
            "open-cluster-management:managedcluster:c1:registration"
        );
        assert_eq!(
            work_role_binding("c1"),
            "open-cluster-management:managedcluster:c1:work"
        );
    }
}
