//! The OCM helloworld add-on, configurable: addon-framework's `helloworld` with its
//! `AddOnDeploymentConfig` support, plus a ConfigMap config, and health decided by the plugin
//! from the agent Deployment's status feedback (health mode `customized`).
//!
//! ```text
//!   AddOnDeploymentConfig (addon.open-cluster-management.io/addondeploymentconfigs)
//!     customizedVariables ─▶ container env (LOG_LEVEL also ─▶ --v=<n>)
//!     nodePlacement ───────▶ pod nodeSelector, tolerations
//!     registries ──────────▶ image mirror
//!     resourceRequirements ▶ container resources (deployments:helloworld-agent:<container>)
//!     proxyConfig ─────────▶ HTTP(S)_PROXY / NO_PROXY env
//!   ConfigMap (configmaps), data:
//!     image ─▶ the agent image (before mirroring)      replicas ─▶ Deployment replicas
//!     message ─▶ ConfigMap helloworld-config on the cluster, for the agent to read
//!
//!   RBAC: a Role for the agent's service account in the install namespace (ConfigMaps, its
//!         lease) and one on the hub for its credential (ConfigMaps of the cluster namespace)
//!   health: probe Deployment helloworld-agent (well-known status + Available condition);
//!           available when ReadyReplicas ≥ 1 or the Available condition is True
//! ```
//!
//! A ConfigMap config's `spec-json` is `{"data": {...}}` (the host's rule for kinds without a
//! `spec`); a bad value there is an `invalid-config` error the host shows in a condition.

use flotilla_addon_sdk::config::{addon_deployment_config, addon_deployment_config_type};
use flotilla_addon_sdk::k8s_openapi::api::core::v1::{
    ConfigMap, Container, EnvVar, PodSpec, SecretVolumeSource, ServiceAccount, Volume, VolumeMount,
};
use flotilla_addon_sdk::manifest::{
    agent_deployment, agent_group, labels, meta, role_bound_to, rule, service_account, to_manifest,
};
use flotilla_addon_sdk::serde_json::Value;
use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, ConfigType, FeedbackField, FeedbackRule, FeedbackValue,
    HealthMode, HealthResult, HealthStatus, JsonPath, Manifest, ProbeField, Registration, ResolvedConfig,
    ResourceIdentifier, log,
};

/// Add-on name.
pub const ADDON_NAME: &str = "helloworld-config";
/// The agent image unless the ConfigMap config names another.
pub const DEFAULT_IMAGE: &str = "flotilla.local/addons/helloworld-agent:0.1.0";
/// Name of the agent's Deployment (and its container).
pub const AGENT_NAME: &str = "helloworld-agent";
/// Name of the agent's ServiceAccount.
pub const SERVICE_ACCOUNT: &str = "helloworld-agent-sa";
/// Name of the agent's Role and RoleBinding in the install namespace and on the hub.
pub const RBAC_NAME: &str = "open-cluster-management:helloworld-config:agent";
/// Name of the ConfigMap carrying `message` to the agent.
pub const MESSAGE_CONFIG_MAP: &str = "helloworld-config";
/// The install namespace the probe field points at (the default one; OCM probe fields name a
/// fixed namespace too).
pub const PROBE_NAMESPACE: &str = "open-cluster-management-agent-addon";
/// Name of the JSONPath feedback value holding the Deployment's `Available` condition status.
pub const AVAILABLE_FIELD: &str = "isAvailable";
/// Most replicas the ConfigMap may ask for.
pub const MAX_REPLICAS: i32 = 10;

/// The configurable helloworld add-on.
pub struct HelloWorldConfig;

/// What the ConfigMap config sets.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// `data.image`.
    pub image: Option<String>,
    /// `data.replicas`.
    pub replicas: Option<i32>,
    /// `data.message`.
    pub message: Option<String>,
}

/// The last ConfigMap among `configs`, read into [`Settings`].
pub fn settings(configs: &[ResolvedConfig]) -> Result<Settings, AddonError> {
    let Some(config) = configs
        .iter()
        .rev()
        .find(|c| c.group.is_empty() && c.resource == "configmaps")
    else {
        return Ok(Settings::default());
    };
    let spec: Value = config.spec()?;
    let where_ = format!("ConfigMap {}/{}", config.namespace, config.name);
    let data = match spec.get("data") {
        None | Some(Value::Null) => return Ok(Settings::default()),
        Some(Value::Object(data)) => data,
        Some(_) => return Err(AddonError::InvalidConfig(format!("{where_}: data is not a map"))),
    };
    let text = |key: &str| data.get(key).and_then(Value::as_str).map(str::to_owned);
    let replicas = match text("replicas") {
        None => None,
        Some(r) => match r.trim().parse::<i32>() {
            Ok(n) if (0..=MAX_REPLICAS).contains(&n) => Some(n),
            _ => {
                return Err(AddonError::InvalidConfig(format!(
                    "{where_}: replicas {r:?} is not a number from 0 to {MAX_REPLICAS}"
                )));
            }
        },
    };
    Ok(Settings {
        image: text("image").filter(|i| !i.trim().is_empty()),
        replicas,
        message: text("message"),
    })
}

fn agent_resource() -> ResourceIdentifier {
    ResourceIdentifier {
        group: "apps".into(),
        resource: "deployments".into(),
        name: AGENT_NAME.into(),
        namespace: PROBE_NAMESPACE.into(),
    }
}

impl Addon for HelloWorldConfig {
    fn describe() -> AddonOptions {
        AddonOptions {
            registrations: vec![Registration::KubeClient { subject: None }],
            health: HealthMode::Customized(vec![ProbeField {
                resource: agent_resource(),
                rules: vec![
                    FeedbackRule::WellKnownStatus,
                    FeedbackRule::JsonPaths(vec![JsonPath {
                        name: AVAILABLE_FIELD.into(),
                        path: ".conditions[?(@.type==\"Available\")].status".into(),
                    }]),
                ],
            }]),
            supported_configs: vec![
                addon_deployment_config_type(),
                ConfigType {
                    group: String::new(),
                    resource: "configmaps".into(),
                    default_config: None,
                },
            ],
            default_install_namespace: None,
        }
    }

    fn manifests(
        cluster: &Cluster,
        addon: &AddOn,
        configs: &[ResolvedConfig],
    ) -> Result<Vec<Manifest>, AddonError> {
        let adc = addon_deployment_config(configs)?.unwrap_or_default();
        let settings = settings(configs)?;
        let ns = addon.install_namespace.as_str();
        let image = adc.image(settings.image.as_deref().unwrap_or(DEFAULT_IMAGE));
        log::info(&format!(
            "rendering {} for {} into {ns} with image {image}",
            addon.name, cluster.name
        ));

        let mut env: Vec<EnvVar> = adc
            .variables()
            .into_iter()
            .map(|(name, value)| EnvVar {
                name,
                value: Some(value),
                ..EnvVar::default()
            })
            .collect();
        env.extend(adc.proxy_env());
        let mut args = vec![
            "--hub-kubeconfig=/var/run/hub/kubeconfig".to_owned(),
            format!("--cluster-name={}", cluster.name),
            format!("--addon-namespace={ns}"),
            format!("--addon-name={}", addon.name),
        ];
        if let Some(level) = adc.variable("LOG_LEVEL") {
            args.push(format!("--v={level}"));
        }
        let mut pod = PodSpec {
            service_account_name: Some(SERVICE_ACCOUNT.to_owned()),
            containers: vec![Container {
                name: AGENT_NAME.to_owned(),
                image: Some(image),
                image_pull_policy: Some("IfNotPresent".to_owned()),
                command: Some(vec!["/helloworld-agent".to_owned()]),
                args: Some(args),
                env: (!env.is_empty()).then_some(env),
                resources: adc.resources_for("deployments", AGENT_NAME, AGENT_NAME).cloned(),
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
                    secret_name: Some(format!("{}-hub-kubeconfig", addon.name)),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            }]),
            ..PodSpec::default()
        };
        adc.apply_node_placement(&mut pod);

        let pod_labels = labels([("app", AGENT_NAME)]);
        let deployment = agent_deployment(AGENT_NAME, ns, pod_labels, settings.replicas.unwrap_or(1), pod);
        let mut objects = vec![
            to_manifest(&ServiceAccount {
                metadata: meta(SERVICE_ACCOUNT, ns),
                ..ServiceAccount::default()
            })?,
            to_manifest(&deployment)?,
        ];
        // The agent copies ConfigMaps into, and renews its lease in, the install namespace.
        objects.extend(role_bound_to(
            RBAC_NAME,
            ns,
            vec![
                rule(
                    "",
                    "configmaps",
                    &["get", "list", "watch", "create", "update", "patch", "delete"],
                ),
                rule("coordination.k8s.io", "leases", &["get", "create", "update"]),
            ],
            service_account(SERVICE_ACCOUNT, ns),
        )?);
        if let Some(message) = settings.message {
            objects.push(to_manifest(&ConfigMap {
                metadata: meta(MESSAGE_CONFIG_MAP, ns),
                data: Some([("message".to_owned(), message)].into()),
                ..ConfigMap::default()
            })?);
        }
        Ok(objects)
    }

    fn hub_permissions(cluster: &Cluster, addon: &AddOn) -> Result<Vec<Manifest>, AddonError> {
        // The agent reads the ConfigMaps of its cluster namespace with its hub credential.
        role_bound_to(
            RBAC_NAME,
            &cluster.name,
            vec![rule("", "configmaps", &["get", "list", "watch"])],
            agent_group(&cluster.name, &addon.name),
        )
    }

    fn probe_health(_: &Cluster, _: &AddOn, fields: &[FeedbackField]) -> HealthResult {
        let agent = agent_resource();
        let of_agent: Vec<&FeedbackField> = fields
            .iter()
            .filter(|f| f.resource.name == agent.name && f.resource.resource == agent.resource)
            .collect();
        if of_agent.is_empty() {
            return HealthResult::new(HealthStatus::Unknown, "no status feedback from the agent yet");
        }
        let int = |name: &str| {
            of_agent.iter().find_map(|f| match &f.value {
                FeedbackValue::Integer(v) if f.name == name => Some(*v),
                _ => None,
            })
        };
        let available = of_agent.iter().find_map(|f| match &f.value {
            FeedbackValue::Text(v) if f.name == AVAILABLE_FIELD => Some(v.as_str()),
            _ => None,
        });
        let ready = int("ReadyReplicas").unwrap_or(0);
        if available == Some("True") || ready >= 1 {
            HealthResult::new(
                HealthStatus::Available,
                format!("agent available ({ready} ready replicas)"),
            )
        } else if int("Replicas") == Some(0) {
            HealthResult::new(HealthStatus::Unavailable, "the agent is scaled to zero replicas")
        } else {
            HealthResult::new(
                HealthStatus::Unavailable,
                format!(
                    "the agent has no ready replicas (Available={})",
                    available.unwrap_or("unknown")
                ),
            )
        }
    }
}

flotilla_addon_sdk::export_addon!(HelloWorldConfig);
