//! OCM's resource-usage-collect add-on as a Flotilla plugin.
//!
//! Mirrors addon-contrib's `resource-usage-collect-addon`: on every managed cluster it deploys
//! an agent (`agent/`, a native program of its own) that scores the CPU, memory, GPUs and TPUs
//! the cluster's nodes have left free and writes the scores into AddOnPlacementScore
//! `resource-usage-score` in its cluster namespace on the hub, where placements read them
//! through a prioritizer `scoreCoordinate` of type AddOn. The plugin renders
//!
//! ```text
//!   install namespace (addon.install_namespace)
//!   ├─ ServiceAccount   resource-usage-collect-agent-sa
//!   ├─ Role, RoleBinding open-cluster-management:resource-usage-collect:agent (its Lease only)
//!   └─ Deployment       resource-usage-collect-agent  (mounts Secret <addon>-hub-kubeconfig)
//!   cluster scope
//!   ├─ ClusterRole        open-cluster-management:resource-usage-collect:agent (nodes, pods: read)
//!   └─ ClusterRoleBinding open-cluster-management:resource-usage-collect:agent → the ServiceAccount
//!   hub, cluster namespace (hub-permissions)
//!   ├─ Role        open-cluster-management:resource-usage-collect:agent
//!   │                (addonplacementscores and their status, leases)
//!   └─ RoleBinding open-cluster-management:resource-usage-collect:agent → the agent's default group
//! ```
//!
//! and registers one kube-client credential with the default subject; health comes from the
//! agent's lease. CSR approval uses the SDK default. An AddOnDeploymentConfig may set how often
//! the agent scores (customized variable [`PERIOD_VARIABLE`]: placements see a change of load
//! no sooner), as well as the usual image mirrors, node placement and resources.
//!
//! OCM's agent is granted more on the managed cluster (write access to nodes, pods, configmaps
//! and events, and leases everywhere); this one only reads what it scores, records no events,
//! and writes leases in its install namespace only.

use flotilla_addon_sdk::config::{
    AddOnDeploymentConfigSpec, addon_deployment_config, addon_deployment_config_type,
};
use flotilla_addon_sdk::k8s_openapi::api::apps::v1::Deployment;
use flotilla_addon_sdk::k8s_openapi::api::core::v1::ServiceAccount;
use flotilla_addon_sdk::manifest::{
    agent_container, agent_deployment, agent_group, agent_pod, cluster_role_bound_to, labels, meta,
    role_bound_to, rule, service_account, to_manifest,
};
use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, HealthMode, Manifest, Registration, ResolvedConfig, log,
};

/// Add-on name, as in OCM's AddOnTemplate and ClusterManagementAddOn.
pub const ADDON_NAME: &str = "resource-usage-collect";
/// The agent image: `agent/` of this add-on, as nodes know the local registry
/// (`flotilla.local`).
pub const AGENT_IMAGE: &str = "flotilla.local/addons/resource-usage-agent:0.1.0";
/// The agent program inside the image.
pub const AGENT_PROGRAM: &str = "/resource-usage-agent";
/// Name of the agent's Deployment (and its container), as in OCM's template.
pub const AGENT_NAME: &str = "resource-usage-collect-agent";
/// Name of the agent's ServiceAccount, as in OCM's template.
pub const SERVICE_ACCOUNT: &str = "resource-usage-collect-agent-sa";
/// Name of every Role, ClusterRole and binding, on both sides (OCM's hub ClusterRole name).
pub const RBAC_NAME: &str = "open-cluster-management:resource-usage-collect:agent";
/// Seconds between the agent's scorings unless configured: OCM's agent resyncs every minute.
pub const PERIOD_SECONDS: u32 = 60;
/// The AddOnDeploymentConfig customized variable that sets the seconds between scorings (a
/// whole number, at least 1).
pub const PERIOD_VARIABLE: &str = "PERIOD_SECONDS";
/// Where the hub credential secret is mounted in the agent's container.
pub const HUB_KUBECONFIG_DIR: &str = "/var/run/hub";

/// The resource-usage-collect add-on.
pub struct ResourceUsage;

impl Addon for ResourceUsage {
    fn describe() -> AddonOptions {
        AddonOptions {
            registrations: vec![Registration::KubeClient { subject: None }],
            health: HealthMode::Lease,
            supported_configs: vec![addon_deployment_config_type()],
            default_install_namespace: None,
        }
    }

    fn manifests(
        cluster: &Cluster,
        addon: &AddOn,
        configs: &[ResolvedConfig],
    ) -> Result<Vec<Manifest>, AddonError> {
        let adc = addon_deployment_config(configs)?.unwrap_or_default();
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
                rule("", "nodes", &["get", "list", "watch"]),
                rule("", "pods", &["get", "list", "watch"]),
            ],
            service_account(SERVICE_ACCOUNT, ns),
        )?);
        // The agent renews Lease `<addon>` in its install namespace, and no other lease.
        manifests.extend(role_bound_to(
            RBAC_NAME,
            ns,
            vec![rule(
                "coordination.k8s.io",
                "leases",
                &["get", "list", "watch", "create", "update", "patch"],
            )],
            service_account(SERVICE_ACCOUNT, ns),
        )?);
        manifests.push(to_manifest(&deployment(cluster, addon, &adc)?)?);
        Ok(manifests)
    }

    fn hub_permissions(cluster: &Cluster, addon: &AddOn) -> Result<Vec<Manifest>, AddonError> {
        role_bound_to(
            RBAC_NAME,
            &cluster.name,
            vec![
                // The agent reads AddOnPlacementScore resource-usage-score, creates it when
                // missing (server-side apply: patch, or create when absent) ...
                rule(
                    "cluster.open-cluster-management.io",
                    "addonplacementscores",
                    &["get", "list", "watch", "create", "update", "patch"],
                ),
                // ... and writes the scores through the status subresource.
                rule(
                    "cluster.open-cluster-management.io",
                    "addonplacementscores/status",
                    &["update", "patch"],
                ),
                // Lease `<addon>` here is where the klusterlet looks when the managed cluster
                // has none (an agent holding only its hub credential renews it on the hub).
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

flotilla_addon_sdk::export_addon!(ResourceUsage);

/// The seconds between scorings `adc` sets, else [`PERIOD_SECONDS`].
fn period(adc: &AddOnDeploymentConfigSpec) -> Result<u32, AddonError> {
    let Some(value) = adc.variable(PERIOD_VARIABLE) else {
        return Ok(PERIOD_SECONDS);
    };
    value.parse().ok().filter(|seconds| *seconds > 0).ok_or_else(|| {
        AddonError::InvalidConfig(format!(
            "{PERIOD_VARIABLE} is {value:?}, not a whole number of seconds above 0"
        ))
    })
}

fn deployment(
    cluster: &Cluster,
    addon: &AddOn,
    adc: &AddOnDeploymentConfigSpec,
) -> Result<Deployment, AddonError> {
    let ns = addon.install_namespace.as_str();
    let pod_labels = labels([("app", AGENT_NAME)]);
    let mut container = agent_container(
        AGENT_NAME,
        adc.image(AGENT_IMAGE),
        AGENT_PROGRAM,
        vec![
            format!("--hub-kubeconfig={HUB_KUBECONFIG_DIR}/kubeconfig"),
            format!("--cluster-name={}", cluster.name),
            format!("--addon-namespace={ns}"),
            format!("--addon-name={}", addon.name),
            format!("--period={}", period(adc)?),
        ],
    );
    container.resources = adc.resources_for("deployments", AGENT_NAME, AGENT_NAME).cloned();
    let mut pod = agent_pod(SERVICE_ACCOUNT, container, &addon.name, HUB_KUBECONFIG_DIR);
    adc.apply_node_placement(&mut pod);
    Ok(agent_deployment(AGENT_NAME, ns, pod_labels, 1, pod))
}
