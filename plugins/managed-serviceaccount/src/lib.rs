//! OCM's managed-serviceaccount add-on as a Flotilla plugin.
//!
//! Mirrors open-cluster-management-io/managed-serviceaccount: on every managed cluster it
//! deploys an agent (`agent/`, a native program of its own) that, for each ManagedServiceAccount
//! in its cluster namespace on the hub, keeps a ServiceAccount of the same name in the install
//! namespace and writes that ServiceAccount's token, with the cluster's CA, into a Secret of the
//! same name beside the ManagedServiceAccount. The plugin renders
//!
//! ```text
//!   install namespace (addon.install_namespace)
//!   ├─ ServiceAccount   managed-serviceaccount
//!   ├─ Role, RoleBinding open-cluster-management:managed-serviceaccount:addon-agent
//!   │                      (serviceaccounts, serviceaccounts/token, its Lease: here only)
//!   └─ Deployment       managed-serviceaccount-addon-agent (mounts Secret <addon>-hub-kubeconfig)
//!   cluster scope
//!   ├─ ClusterRole        open-cluster-management:managed-serviceaccount:addon-agent (tokenreviews)
//!   └─ ClusterRoleBinding open-cluster-management:managed-serviceaccount:addon-agent → the ServiceAccount
//!   hub, cluster namespace (hub-permissions)
//!   ├─ Role        managed-serviceaccount-addon-agent
//!   │                (managedserviceaccounts: read, their status, secrets, leases)
//!   └─ RoleBinding managed-serviceaccount-addon-agent → the agent's default group
//! ```
//!
//! and registers one kube-client credential with the default subject; health comes from the
//! agent's lease. CSR approval uses the SDK default.
//!
//! The names are OCM's (chart `managed-serviceaccount-agent`, manager `pkg/addon/manager`). OCM's
//! agent is granted more on the managed cluster (configmaps and events for leader election and
//! recording, `tokenrequests`, and get/update/patch beyond what it uses); this one gets what it
//! calls and nothing else. On the hub, Secrets get `patch` and `delete` besides OCM's get, list,
//! watch, create and update; the agent uses neither today (a token Secret goes with its
//! ManagedServiceAccount through the garbage collector, by owner reference).

use flotilla_addon_sdk::k8s_openapi::api::apps::v1::Deployment;
use flotilla_addon_sdk::k8s_openapi::api::core::v1::ServiceAccount;
use flotilla_addon_sdk::manifest::{
    agent_container, agent_deployment, agent_group, agent_pod, cluster_role_bound_to, labels, meta,
    role_bound_to, rule, service_account, to_manifest,
};
use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, HealthMode, Manifest, Registration, ResolvedConfig, log,
};

/// Add-on name, as in OCM's ClusterManagementAddOn.
pub const ADDON_NAME: &str = "managed-serviceaccount";
/// The agent image: `agent/` of this add-on, as nodes know the local registry
/// (`flotilla.local`).
pub const AGENT_IMAGE: &str = "flotilla.local/addons/managed-serviceaccount-agent:0.1.0";
/// The agent program inside the image.
pub const AGENT_PROGRAM: &str = "/managed-serviceaccount-agent";
/// Name of the agent's Deployment, as in OCM's chart.
pub const AGENT_NAME: &str = "managed-serviceaccount-addon-agent";
/// Name of the agent's container, as in OCM's chart.
pub const CONTAINER_NAME: &str = "addon-agent";
/// Name of the agent's own ServiceAccount, as in OCM's chart. A ManagedServiceAccount of this
/// name gets no token: the agent only issues tokens for ServiceAccounts it labelled.
pub const SERVICE_ACCOUNT: &str = "managed-serviceaccount";
/// Name of the Role, ClusterRole and bindings on the managed cluster, as in OCM's chart.
pub const RBAC_NAME: &str = "open-cluster-management:managed-serviceaccount:addon-agent";
/// Name of the Role and RoleBinding on the hub, as OCM's manager names its permission.
pub const HUB_RBAC_NAME: &str = "managed-serviceaccount-addon-agent";
/// Seconds between the agent's passes over every ManagedServiceAccount (each reviews the token
/// on the managed cluster, so a revoked one is replaced within a period).
pub const CHECK_PERIOD_SECONDS: u32 = 60;
/// Where the hub credential secret is mounted in the agent's container.
pub const HUB_KUBECONFIG_DIR: &str = "/var/run/hub";
/// The API group of ManagedServiceAccount.
pub const GROUP: &str = "authentication.open-cluster-management.io";

/// Verbs of the agent's Lease: read it, create it, renew it.
const LEASE_VERBS: &[&str] = &["get", "create", "update"];

/// The managed-serviceaccount add-on.
pub struct ManagedServiceAccount;

impl Addon for ManagedServiceAccount {
    fn describe() -> AddonOptions {
        AddonOptions {
            registrations: vec![Registration::KubeClient { subject: None }],
            health: HealthMode::Lease,
            supported_configs: Vec::new(),
            default_install_namespace: None,
        }
    }

    fn manifests(
        cluster: &Cluster,
        addon: &AddOn,
        _configs: &[ResolvedConfig],
    ) -> Result<Vec<Manifest>, AddonError> {
        let ns = addon.install_namespace.as_str();
        log::info(&format!(
            "rendering {} for cluster {} into {ns}",
            addon.name, cluster.name
        ));
        let mut manifests = vec![to_manifest(&ServiceAccount {
            metadata: meta(SERVICE_ACCOUNT, ns),
            ..ServiceAccount::default()
        })?];
        // TokenReviews are cluster-scoped: the one grant that cannot be confined to a namespace.
        manifests.extend(cluster_role_bound_to(
            RBAC_NAME,
            vec![rule("authentication.k8s.io", "tokenreviews", &["create"])],
            service_account(SERVICE_ACCOUNT, ns),
        )?);
        // Everything the agent writes on the managed cluster is in its install namespace.
        manifests.extend(role_bound_to(
            RBAC_NAME,
            ns,
            vec![
                // The ServiceAccounts of ManagedServiceAccounts: watched (labelled ones),
                // created, read when they exist, deleted with their ManagedServiceAccount ...
                rule(
                    "",
                    "serviceaccounts",
                    &["get", "list", "watch", "create", "delete"],
                ),
                // ... and their tokens requested (TokenRequest).
                rule("", "serviceaccounts/token", &["create"]),
                rule("coordination.k8s.io", "leases", LEASE_VERBS),
            ],
            service_account(SERVICE_ACCOUNT, ns),
        )?);
        manifests.push(to_manifest(&deployment(cluster, addon))?);
        Ok(manifests)
    }

    fn hub_permissions(cluster: &Cluster, addon: &AddOn) -> Result<Vec<Manifest>, AddonError> {
        role_bound_to(
            HUB_RBAC_NAME,
            &cluster.name,
            vec![
                // The agent watches the ManagedServiceAccounts of its cluster ...
                rule(GROUP, "managedserviceaccounts", &["get", "list", "watch"]),
                // ... reports on them through the status subresource ...
                rule(
                    GROUP,
                    "managedserviceaccounts/status",
                    &["get", "update", "patch"],
                ),
                // ... and keeps their token Secrets (watched to restore them when changed).
                // The agent creates and replaces token Secrets; it never patches or deletes
                // them (they go with their ManagedServiceAccount, by owner reference).
                rule("", "secrets", &["get", "list", "watch", "create", "update"]),
                // Lease `<addon>` here is where the klusterlet looks when the managed cluster
                // has none.
                rule("coordination.k8s.io", "leases", LEASE_VERBS),
            ],
            agent_group(&cluster.name, &addon.name),
        )
    }
}

flotilla_addon_sdk::export_addon!(ManagedServiceAccount);

fn deployment(cluster: &Cluster, addon: &AddOn) -> Deployment {
    let ns = addon.install_namespace.as_str();
    // OCM's chart selects its pods by this label.
    let pod_labels = labels([("addon-agent", ADDON_NAME)]);
    let container = agent_container(
        CONTAINER_NAME,
        AGENT_IMAGE,
        AGENT_PROGRAM,
        vec![
            format!("--hub-kubeconfig={HUB_KUBECONFIG_DIR}/kubeconfig"),
            format!("--cluster-name={}", cluster.name),
            format!("--addon-namespace={ns}"),
            format!("--addon-name={}", addon.name),
            format!("--check-period={CHECK_PERIOD_SECONDS}"),
        ],
    );
    agent_deployment(
        AGENT_NAME,
        ns,
        pod_labels,
        1,
        agent_pod(SERVICE_ACCOUNT, container, &addon.name, HUB_KUBECONFIG_DIR),
    )
}
