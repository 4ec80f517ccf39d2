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
use flotilla_addon_sdk::k8s_openapi::api::core::v1::{
    Container, PodSpec, SecretVolumeSource, ServiceAccount, Volume, VolumeMount,
};
use flotilla_addon_sdk::k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleRef};
use flotilla_addon_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use flotilla_addon_sdk::manifest::{
    agent_deployment, agent_group, labels, meta, role_bound_to, rule,
    service_account as service_account_subject, to_manifest,
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
        Ok(vec![
            to_manifest(&service_account(ns))?,
            to_manifest(&cluster_role())?,
            to_manifest(&cluster_role_binding(ns))?,
            to_manifest(&deployment(cluster, addon))?,
        ])
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

fn service_account(ns: &str) -> ServiceAccount {
    ServiceAccount {
        metadata: meta(SERVICE_ACCOUNT, ns),
        ..ServiceAccount::default()
    }
}

fn cluster_role() -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(RBAC_NAME.to_owned()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![
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
        ]),
        ..ClusterRole::default()
    }
}

fn cluster_role_binding(ns: &str) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(RBAC_NAME.to_owned()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: RBAC_NAME.into(),
        },
        subjects: Some(vec![service_account_subject(SERVICE_ACCOUNT, ns)]),
    }
}

fn deployment(cluster: &Cluster, addon: &AddOn) -> Deployment {
    let ns = addon.install_namespace.as_str();
    let pod_labels = labels([("app", AGENT_NAME)]);
    let kubeconfig_secret = format!("{}-hub-kubeconfig", addon.name);
    agent_deployment(
        AGENT_NAME,
        ns,
        pod_labels,
        1,
        PodSpec {
            service_account_name: Some(SERVICE_ACCOUNT.to_owned()),
            containers: vec![Container {
                name: AGENT_NAME.to_owned(),
                image: Some(AGENT_IMAGE.to_owned()),
                image_pull_policy: Some("IfNotPresent".to_owned()),
                command: Some(vec!["/helloworld-agent".to_owned()]),
                args: Some(vec![
                    "--hub-kubeconfig=/var/run/hub/kubeconfig".to_owned(),
                    format!("--cluster-name={}", cluster.name),
                    format!("--addon-namespace={ns}"),
                ]),
                volume_mounts: Some(vec![VolumeMount {
                    name: "hub-config".to_owned(),
                    mount_path: "/var/run/hub".to_owned(),
                    ..VolumeMount::default()
                }]),
                ..Container::default()
            }],
            volumes: Some(vec![Volume {
                name: "hub-config".to_owned(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(kubeconfig_secret),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            }]),
            ..PodSpec::default()
        },
    )
}
