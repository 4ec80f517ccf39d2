//! The cluster-proxy add-on's hub half: on every managed cluster it deploys the reverse-tunnel
//! agent (`tunnel/`, `flotilla-tunnel agent`), which dials out to the tunnel server beside the
//! hub so the hub can reach that cluster's kube-apiserver even without a route to it.
//!
//! ```text
//!   install namespace (addon.install_namespace)
//!   ├─ ServiceAccount cluster-proxy-agent-sa   (no token, no RBAC: the agent calls no API)
//!   ├─ ConfigMap      cluster-proxy-ca         ca.crt = TunnelServerCA
//!   └─ Deployment     cluster-proxy-agent
//!        flotilla-tunnel agent --hub-url=<TunnelServerURL>
//!                              --hub-ca=/etc/cluster-proxy/hub-ca/ca.crt      (the ConfigMap)
//!                              --cert=/var/run/hub/tls.crt --key=/var/run/hub/tls.key
//!                                         (Secret <addon>-hub-kubeconfig, the add-on credential)
//!   hub: nothing (hub-permissions is empty)
//!
//!   agent ──wss, client cert──▶ tunnel server (checks CN/O) ◀── hub gateway
//!     └──▶ KUBERNETES_SERVICE_HOST:PORT, and nothing else
//! ```
//!
//! * Configuration: an `AddOnDeploymentConfig` ([`settings`]) with `customizedVariables`
//!   `TunnelServerURL` and `TunnelServerCA`, both required; its `nodePlacement`, `registries`
//!   and `resourceRequirements` apply as in addon-framework. Its `proxyConfig` does not: the
//!   agent's websocket dialer uses no HTTP proxy.
//! * Registration: one kube-client credential with OCM's default subject, whose CN and groups
//!   are exactly what the tunnel server accepts (`tunnel/identity.go`). CSR approval is the SDK
//!   default.
//! * Health: [`HealthMode::DeploymentAvailability`] (see [`CLUSTER_PROXY_HEALTH`]).
//! * Security: the agent relays TCP and nothing more, so its pod runs non-root with a read-only
//!   root filesystem, no privilege escalation, no capabilities and no service account token.
//!
//! The agent re-reads its certificate, key and CA on every connection attempt, and mounted
//! Secrets and ConfigMaps (no `subPath`) are updated in place, so a rotated credential or a new
//! CA needs no restart; a new URL changes the arguments and so rolls the Deployment.

pub mod settings;

use flotilla_addon_sdk::config::{addon_deployment_config, addon_deployment_config_type};
use flotilla_addon_sdk::k8s_openapi::api::apps::v1::Deployment;
use flotilla_addon_sdk::k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapVolumeSource, Container, KeyToPath, PodSecurityContext, PodSpec,
    ResourceRequirements, SeccompProfile, SecretVolumeSource, SecurityContext, ServiceAccount, Volume,
};
use flotilla_addon_sdk::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use flotilla_addon_sdk::manifest::{
    agent_container, agent_deployment, hub_kubeconfig_secret, labels, meta, read_only_mount, to_manifest,
};
use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, FeedbackField, HealthMode, HealthResult, Manifest,
    Registration, ResolvedConfig, health, log,
};

use crate::settings::{TunnelSettings, tunnel_settings};

/// Add-on name, as in OCM; the tunnel server accepts this add-on's credentials by default.
pub const ADDON_NAME: &str = "cluster-proxy";
/// The agent image, as nodes know the local registry (`flotilla.local`): the tunnel binary
/// built from `tunnel/`.
pub const AGENT_IMAGE: &str = "flotilla.local/addons/cluster-proxy-agent:0.1.0";
/// The tunnel binary inside the image (at the root, as in the other agent images).
pub const AGENT_PROGRAM: &str = "/flotilla-tunnel";
/// Name of the agent's Deployment (and its container).
pub const AGENT_NAME: &str = "cluster-proxy-agent";
/// Name of the agent's ServiceAccount: its own, so the pod never runs as the namespace's
/// `default` account, which other workloads may have been granted rights through.
pub const SERVICE_ACCOUNT: &str = "cluster-proxy-agent-sa";
/// Name of the ConfigMap holding the tunnel server's CA bundle.
pub const CA_CONFIG_MAP: &str = "cluster-proxy-ca";
/// The ConfigMap key (and file name) of the CA bundle.
pub const CA_KEY: &str = "ca.crt";
/// Where the CA ConfigMap is mounted.
pub const CA_DIR: &str = "/etc/cluster-proxy/hub-ca";
/// Where the add-on credential Secret is mounted (as helloworld mounts it).
pub const CREDENTIAL_DIR: &str = "/var/run/hub";
/// The Secret's certificate key, written by the registration agent.
pub const CERT_KEY: &str = "tls.crt";
/// The Secret's private key key.
pub const KEY_KEY: &str = "tls.key";
/// User and group the agent runs as: a fixed non-root id, so `runAsNonRoot` can be checked by
/// the kubelet whatever the image declares (65532 is distroless's `nonroot`).
pub const RUN_AS: i64 = 65532;
/// How health is decided, and why.
///
/// `DeploymentAvailability`: the host asks the work agent for the well-known status of every
/// Deployment in the add-on's ManifestWork and calls the add-on available once
/// `cluster-proxy-agent` has a ready replica. The agent renews no lease (it holds no API
/// access on either side to renew one with), so `Lease` would never turn available. Unlike a
/// `Customized` probe field, which names a fixed namespace, this follows the Deployment into
/// whatever install namespace the add-on is given. OCM's cluster-proxy, whose agent has no
/// lease either, is judged the same way.
pub const CLUSTER_PROXY_HEALTH: HealthMode = HealthMode::DeploymentAvailability;

/// The cluster-proxy add-on.
pub struct ClusterProxy;

impl Addon for ClusterProxy {
    fn describe() -> AddonOptions {
        AddonOptions {
            // OCM's default subject: CN system:open-cluster-management:cluster:<c>:addon:
            // cluster-proxy:agent:cluster-proxy, O system:open-cluster-management:cluster:<c>:
            // addon:cluster-proxy — what the tunnel server checks.
            registrations: vec![Registration::KubeClient { subject: None }],
            health: CLUSTER_PROXY_HEALTH,
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
        let tunnel = tunnel_settings(&adc)?;
        let ns = addon.install_namespace.as_str();
        log::info(&format!(
            "rendering {} for cluster {} into {ns}, tunnel server {}",
            addon.name, cluster.name, tunnel.url
        ));

        let mut pod = pod_spec(addon, &tunnel, adc.image(AGENT_IMAGE));
        if let Some(resources) = adc.resources_for("deployments", AGENT_NAME, AGENT_NAME) {
            pod.containers[0].resources = Some(resources.clone());
        }
        adc.apply_node_placement(&mut pod);
        Ok(vec![
            to_manifest(&ServiceAccount {
                metadata: meta(SERVICE_ACCOUNT, ns),
                automount_service_account_token: Some(false),
                ..ServiceAccount::default()
            })?,
            to_manifest(&ConfigMap {
                metadata: meta(CA_CONFIG_MAP, ns),
                data: Some([(CA_KEY.to_owned(), tunnel.ca_pem)].into()),
                ..ConfigMap::default()
            })?,
            to_manifest(&deployment(ns, pod))?,
        ])
    }

    /// None. The agent never calls the hub's apiserver: its credential only authenticates it to
    /// the tunnel server (mutual TLS, checked by name and group, not by RBAC), so granting that
    /// identity anything on the hub would only widen what a stolen key could do.
    fn hub_permissions(_: &Cluster, _: &AddOn) -> Result<Vec<Manifest>, AddonError> {
        Ok(Vec::new())
    }

    /// Not called in `DeploymentAvailability` mode (the host applies the rule itself); if asked,
    /// the same rule over the feedback given.
    fn probe_health(_: &Cluster, _: &AddOn, fields: &[FeedbackField]) -> HealthResult {
        health::deployments_available(fields)
    }
}

flotilla_addon_sdk::export_addon!(ClusterProxy);

/// The agent's arguments: the tunnel server and its CA from the configuration, the add-on
/// credential from the mounted Secret; no `--target`, so the agent dials the in-cluster
/// kube-apiserver (`KUBERNETES_SERVICE_HOST:PORT`, set in every pod).
pub fn agent_args(tunnel: &TunnelSettings) -> Vec<String> {
    vec![
        "agent".to_owned(),
        format!("--hub-url={}", tunnel.url),
        format!("--hub-ca={CA_DIR}/{CA_KEY}"),
        format!("--cert={CREDENTIAL_DIR}/{CERT_KEY}"),
        format!("--key={CREDENTIAL_DIR}/{KEY_KEY}"),
    ]
}

/// Requests and limits unless the `AddOnDeploymentConfig` sets others: a TCP relay needs
/// little, but kube API traffic (watches, logs) passes through it, so the CPU limit leaves room.
pub fn default_resources() -> ResourceRequirements {
    let quantities = |cpu: &str, memory: &str| {
        Some(
            [
                ("cpu".to_owned(), Quantity(cpu.to_owned())),
                ("memory".to_owned(), Quantity(memory.to_owned())),
            ]
            .into(),
        )
    };
    ResourceRequirements {
        requests: quantities("10m", "32Mi"),
        limits: quantities("500m", "128Mi"),
        ..ResourceRequirements::default()
    }
}

fn pod_spec(addon: &AddOn, tunnel: &TunnelSettings, image: String) -> PodSpec {
    let file = |name: &str| KeyToPath {
        key: name.to_owned(),
        path: name.to_owned(),
        mode: None,
    };
    PodSpec {
        service_account_name: Some(SERVICE_ACCOUNT.to_owned()),
        automount_service_account_token: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(RUN_AS),
            run_as_group: Some(RUN_AS),
            // Mounted files are group-owned by this id, so the 0440 key is readable.
            fs_group: Some(RUN_AS),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_owned(),
                localhost_profile: None,
            }),
            ..PodSecurityContext::default()
        }),
        containers: vec![Container {
            resources: Some(default_resources()),
            security_context: Some(SecurityContext {
                run_as_non_root: Some(true),
                privileged: Some(false),
                allow_privilege_escalation: Some(false),
                read_only_root_filesystem: Some(true),
                capabilities: Some(Capabilities {
                    drop: Some(vec!["ALL".to_owned()]),
                    add: None,
                }),
                ..SecurityContext::default()
            }),
            volume_mounts: Some(vec![
                read_only_mount("hub-credential", CREDENTIAL_DIR),
                read_only_mount("hub-ca", CA_DIR),
            ]),
            ..agent_container(AGENT_NAME, image, AGENT_PROGRAM, agent_args(tunnel))
        }],
        volumes: Some(vec![
            Volume {
                name: "hub-credential".to_owned(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(hub_kubeconfig_secret(&addon.name)),
                    // Only the certificate and key: the agent has no use for the kubeconfig.
                    items: Some(vec![file(CERT_KEY), file(KEY_KEY)]),
                    default_mode: Some(0o440),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            },
            Volume {
                name: "hub-ca".to_owned(),
                config_map: Some(ConfigMapVolumeSource {
                    name: CA_CONFIG_MAP.to_owned(),
                    items: Some(vec![file(CA_KEY)]),
                    default_mode: Some(0o444),
                    ..ConfigMapVolumeSource::default()
                }),
                ..Volume::default()
            },
        ]),
        ..PodSpec::default()
    }
}

fn deployment(ns: &str, pod: PodSpec) -> Deployment {
    agent_deployment(AGENT_NAME, ns, labels([("app", AGENT_NAME)]), 1, pod)
}
