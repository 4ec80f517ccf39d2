//! The OCM helloworld add-on as a Flotilla plugin.
//!
//! Mirrors addon-framework's `examples/helloworld`: on every managed cluster it deploys an agent
//! that copies ConfigMaps from its cluster namespace on the hub. The plugin renders
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
use flotilla_addon_sdk::k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject as RbacSubject,
};
use flotilla_addon_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use flotilla_addon_sdk::manifest::{agent_deployment, labels, meta, to_manifest};
use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, HealthMode, Manifest, Registration, ResolvedConfig, log,
};

/// Add-on name, as in OCM.
pub const ADDON_NAME: &str = "helloworld";
/// The agent image of the OCM example.
pub const AGENT_IMAGE: &str = "quay.io/open-cluster-management/addon-examples:latest";
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
        let ns = cluster.name.as_str();
        let role = Role {
            metadata: meta(RBAC_NAME, ns),
            rules: Some(vec![
                rule("", "configmaps", &["get", "list", "watch"]),
                // The agent renews its hub-side lease `helloworld` in the cluster namespace.
                rule(
                    "coordination.k8s.io",
                    "leases",
                    &["get", "list", "watch", "create", "update", "patch"],
                ),
            ]),
        };
        let binding = RoleBinding {
            metadata: meta(RBAC_NAME, ns),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "Role".into(),
                name: RBAC_NAME.into(),
            },
            subjects: Some(vec![RbacSubject {
                kind: "Group".into(),
                api_group: Some("rbac.authorization.k8s.io".into()),
                name: format!(
                    "system:open-cluster-management:cluster:{}:addon:{}",
                    cluster.name, addon.name
                ),
                namespace: None,
            }]),
        };
        Ok(vec![to_manifest(&role)?, to_manifest(&binding)?])
    }
}

flotilla_addon_sdk::export_addon!(HelloWorld);

fn rule(group: &str, resource: &str, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(vec![resource.to_owned()]),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

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
        subjects: Some(vec![RbacSubject {
            kind: "ServiceAccount".into(),
            name: SERVICE_ACCOUNT.into(),
            namespace: Some(ns.to_owned()),
            api_group: None,
        }]),
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
                args: Some(vec![
                    "/helloworld".to_owned(),
                    "agent".to_owned(),
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
