//! The OCM helloworld add-on as a Flotilla plugin.
//!
//! Mirrors addon-framework's `examples/helloworld`: on every managed cluster it deploys an agent
//! (`agent/`, a native program of its own) that copies ConfigMaps from its cluster namespace on
//! the hub. The plugin renders
//!
//! ```text
//!   install namespace (addon.install_namespace)
//!   ├─ ServiceAccount   helloworld-agent-sa
//!   ├─ Deployment       helloworld-agent   (mounts Secret helloworld-hub-kubeconfig)
//!   cluster scope
//!   ├─ ClusterRole        open-cluster-management:helloworld:agent
//!   └─ ClusterRoleBinding open-cluster-management:helloworld:agent → the ServiceAccount
//!   hub, cluster namespace (hub-permissions)
//!   ├─ Role        open-cluster-management:helloworld:agent  (configmaps read, leases)
//!   └─ RoleBinding open-cluster-management:helloworld:agent  → the agent's default group
//! ```
//!
//! and registers one kube-client credential with the default subject; health comes from the
//! agent's lease. CSR approval and health use the SDK defaults.

use flotilla_addon_sdk::k8s_openapi::api::apps::v1::Deployment;
use flotilla_addon_sdk::k8s_openapi::api::core::v1::{Container, PodSpec, ServiceAccount, VolumeMount};
use flotilla_addon_sdk::manifest::{
    agent_container, agent_deployment, agent_group, cluster_role_bound_to, hub_kubeconfig_volume, labels,
    meta, role_bound_to, rule, service_account, to_manifest,
};
use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, HealthMode, Manifest, Registration, ResolvedConfig, log,
};

/// Add-on name, as in OCM.
pub const ADDON_NAME: &str = "helloworld";
/// The agent image: `agent/` of this add-on, built and pushed by `flotilla up` and the tests to
/// the local registry that nodes know as `flotilla.local`.
pub const AGENT_IMAGE: &str = "flotilla.local/addons/helloworld-agent:0.1.0";
/// Name of the agent's Deployment.
pub const AGENT_NAME: &str = "helloworld-agent";
/// Name of the agent's ServiceAccount.
pub const SERVICE_ACCOUNT: &str = "helloworld-agent-sa";
/// Name of the ClusterRole, ClusterRoleBinding, hub Role and hub RoleBinding.
pub const RBAC_NAME: &str = "open-cluster-management:helloworld:agent";

/// The helloworld add-on.
pub struct HelloWorld;

impl Addon for HelloWorld {
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
        manifests.extend(cluster_role_bound_to(
            RBAC_NAME,
            vec![
                rule(
                    "",
                    "configmaps",
                    &["get", "list", "watch", "create", "update", "patch", "delete"],
                ),
                rule("", "events", &["create", "patch", "update"]),
                rule(
                    "coordination.k8s.io",
                    "leases",
                    &["get", "list", "watch", "create", "update", "patch"],
                ),
            ],
            service_account(SERVICE_ACCOUNT, ns),
        )?);
        manifests.push(to_manifest(&deployment(cluster, addon))?);
        Ok(manifests)
    }

    fn hub_permissions(cluster: &Cluster, addon: &AddOn) -> Result<Vec<Manifest>, AddonError> {
        role_bound_to(
            RBAC_NAME,
            &cluster.name,
            vec![
                rule("", "configmaps", &["get", "list", "watch"]),
                // The agent renews its hub-side lease `helloworld` in the cluster namespace.
                rule(
                    "coordination.k8s.io",
                    "leases",
                    &["get", "list", "watch", "create", "update", "patch"],
                ),
            ],
            agent_group(&cluster.name, &addon.name),
        )
    }
}

flotilla_addon_sdk::export_addon!(HelloWorld);

fn deployment(cluster: &Cluster, addon: &AddOn) -> Deployment {
    let ns = addon.install_namespace.as_str();
    let (volume, mount) = hub_kubeconfig_volume(&addon.name, "/var/run/hub");
    // This agent's mount has always been rendered without `readOnly` (a Secret volume is
    // read-only all the same); kept so that existing ManifestWorks do not change.
    let mount = VolumeMount {
        read_only: None,
        ..mount
    };
    let container = agent_container(
        AGENT_NAME,
        AGENT_IMAGE,
        "/helloworld-agent",
        vec![
            "--hub-kubeconfig=/var/run/hub/kubeconfig".to_owned(),
            format!("--cluster-name={}", cluster.name),
            format!("--addon-namespace={ns}"),
        ],
    );
    agent_deployment(
        AGENT_NAME,
        ns,
        labels([("app", AGENT_NAME)]),
        1,
        PodSpec {
            service_account_name: Some(SERVICE_ACCOUNT.to_owned()),
            containers: vec![Container {
                volume_mounts: Some(vec![mount]),
                ..container
            }],
            volumes: Some(vec![volume]),
            ..PodSpec::default()
        },
    )
}
