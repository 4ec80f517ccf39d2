//! The ecosystem add-ons of `up --addons`, through which the hub reaches into its clusters:
//! cluster-proxy (a reverse tunnel from each cluster), managed-serviceaccount (a token of a
//! service account on each cluster, projected to the hub) and resource-usage-collect (scores
//! for placement). With the first two, the cluster gateway serves OCM's ClusterGateway API,
//! so hub users reach every cluster's kube-apiserver through the hub's.
//!
//! ```text
//!  host:  tunnel server  0.0.0.0:<base+6> (agents)  ◀─wss── cluster-proxy agent pods
//!           └─ unix socket ◀── flotilla cluster-gateway <hub node>:<base+7> ◀── hub kube-apiserver
//!                               (deploy/hub's identity; APIService v1alpha1.cluster.core.oam.dev)
//!  hub:   AddOnDeploymentConfig open-cluster-management-hub/cluster-proxy (tunnel URL and CA)
//!         ManagedServiceAccount <cluster>/cluster-gateway ─▶ Secret <cluster>/cluster-gateway
//! ```
//!
//! The agents are pods on the clusters' nodes with the credentials their klusterlets obtained;
//! the tunnel server and the gateway run on this host beside the hub, because the agents of
//! every cluster must reach the one server whose socket the gateway reads. Without nodes, each
//! agent is a local process with the same credentials: on the hub, its add-on's
//! `<addon>-hub-kubeconfig` mirrored as a mounted Secret is (`flotilla addon-agent --mount`); on
//! its cluster, a token of the service account its pod would run as.

use std::{net::IpAddr, path::PathBuf, str::FromStr};

use anyhow::{Context as _, anyhow};
use flotilla_api::{
    addon::v1alpha1::AddOnDeploymentConfig, authentication::v1beta1::ManagedServiceAccount,
    cluster::v1alpha1::AddOnPlacementScore,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{
    HUB, HUB_NAMESPACE, Plan,
    checks::{addons_available, await_ready},
    progress::{Progress, step},
    start::{flotilla, spawn_in_background},
    steps::publish_plugin,
};
use crate::{ControlPlane, processes, tunnel};

/// An ecosystem add-on `up` can install.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ecosystem {
    /// `cluster-proxy`: the reverse tunnel.
    ClusterProxy,
    /// `managed-serviceaccount`: tokens of a service account on each cluster.
    ManagedServiceAccount,
    /// `resource-usage-collect`: placement scores from the nodes' free resources.
    ResourceUsageCollect,
}

impl Ecosystem {
    /// Every ecosystem add-on, in the order `up` installs them.
    pub const ALL: [Self; 3] = [
        Self::ClusterProxy,
        Self::ManagedServiceAccount,
        Self::ResourceUsageCollect,
    ];

    /// The add-on's name (its ClusterManagementAddOn).
    pub fn addon(self) -> &'static str {
        match self {
            Self::ClusterProxy => "cluster-proxy",
            Self::ManagedServiceAccount => "managed-serviceaccount",
            Self::ResourceUsageCollect => "resource-usage-collect",
        }
    }

    /// The plugin crate of `plugins/`.
    fn plugin_package(self) -> &'static str {
        match self {
            Self::ClusterProxy => "cluster-proxy",
            Self::ManagedServiceAccount => "managed-serviceaccount",
            Self::ResourceUsageCollect => "resource-usage",
        }
    }

    /// The service account its agent's pod runs as (the plugin's), which a local agent uses.
    fn service_account(self) -> &'static str {
        match self {
            Self::ClusterProxy => "cluster-proxy-agent-sa",
            Self::ManagedServiceAccount => "managed-serviceaccount",
            Self::ResourceUsageCollect => "resource-usage-collect-agent-sa",
        }
    }

    /// Its agent's image.
    pub(super) fn image(self) -> (&'static str, &'static str) {
        match self {
            Self::ClusterProxy => crate::image::CLUSTER_PROXY_AGENT,
            Self::ManagedServiceAccount => crate::image::MANAGED_SERVICEACCOUNT_AGENT,
            Self::ResourceUsageCollect => crate::image::RESOURCE_USAGE_AGENT,
        }
    }
}

impl FromStr for Ecosystem {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        Self::ALL.into_iter().find(|e| e.addon() == name).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|e| e.addon()).collect();
            format!("{name:?} is not an add-on `up` installs ({})", names.join(", "))
        })
    }
}

impl std::fmt::Display for Ecosystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.addon())
    }
}

/// Whether `plan` serves the cluster gateway: it needs the tunnels and the tokens.
pub(super) fn serves_gateway(plan: &Plan) -> bool {
    plan.ecosystem.contains(&Ecosystem::ClusterProxy)
        && plan.ecosystem.contains(&Ecosystem::ManagedServiceAccount)
}

/// The ManagedServiceAccount (and so the token Secret) the gateway uses in each cluster
/// namespace, named as OCM's cluster-gateway names it.
pub const GATEWAY_ACCOUNT: &str = "cluster-gateway";
/// The AddOnDeploymentConfig (in the hub namespace) telling the cluster-proxy agents where
/// the tunnel server is.
const TUNNEL_CONFIG: &str = "cluster-proxy";
/// How often the resource-usage agents score, in seconds: often, so a demo shows placement
/// follow the load.
const SCORE_PERIOD_SECONDS: u32 = 10;
/// The AddOnDeploymentConfig (in the hub namespace) of the resource-usage agents.
const SCORE_CONFIG: &str = "resource-usage-collect";
/// The field manager of what `up` applies.
const FIELD_MANAGER: &str = "flotilla-up";

/// The plugins of `plan`'s ecosystem add-ons, built.
pub(super) async fn build(plan: &Plan, progress: &Progress) -> anyhow::Result<Vec<(Ecosystem, PathBuf)>> {
    let mut built = Vec::new();
    for addon in &plan.ecosystem {
        let package = addon.plugin_package();
        let path = step(progress, &format!("build the {addon} plugin"), None, async {
            let path = tokio::task::spawn_blocking(move || crate::plugins::build(package)).await??;
            Ok((path.clone(), path.display().to_string()))
        })
        .await?;
        built.push((*addon, path));
    }
    if !plan.nodes {
        // Without nodes the agents run here; with nodes their images build them.
        for package in plan.ecosystem.iter().filter_map(|a| match a {
            Ecosystem::ManagedServiceAccount => Some("managed-serviceaccount-agent"),
            Ecosystem::ResourceUsageCollect => Some("resource-usage-agent"),
            Ecosystem::ClusterProxy => None,
        }) {
            step(progress, &format!("build the {package}"), None, async {
                let path = tokio::task::spawn_blocking(move || crate::plugins::agent(package)).await??;
                Ok(((), path.display().to_string()))
            })
            .await?;
        }
    }
    if plan.ecosystem.contains(&Ecosystem::ClusterProxy) {
        step(progress, "build the reverse tunnel", None, async {
            let path = tokio::task::spawn_blocking(tunnel::tunnel_binary).await??;
            Ok(((), path.display().to_string()))
        })
        .await?;
    }
    Ok(built)
}

/// Where the cluster-proxy tunnel server runs, once started.
pub(super) struct TunnelEndpoint {
    /// The URL agents dial.
    url: String,
    /// The CA agents verify it with.
    ca_pem: String,
    /// The hub-side socket.
    socket: PathBuf,
    /// The address of the hub's node, which the hub's apiserver reaches this host at.
    host: IpAddr,
}

/// Starts the tunnel server on every address of this host, agents verified by the hub's CA
/// (which signs the add-on credentials the klusterlets obtain), serving a certificate for the
/// hub node's address: the one every node's pods reach this host at.
pub(super) fn start_tunnel_server(
    plan: &Plan,
    hub: &ControlPlane,
    host: IpAddr,
) -> anyhow::Result<(TunnelEndpoint, String)> {
    let serving = hub
        .issue_serving("cluster-proxy-tunnel", &[host])
        .context("issue the tunnel server's certificate")?;
    let port = plan.layout.tunnel();
    let dir = plan.state.join("cluster-proxy");
    let server = tunnel::start_detached_server(
        &dir,
        (std::net::Ipv4Addr::UNSPECIFIED, port).into(),
        hub.ca_pem(),
        &serving,
        tunnel::ADDON,
    )?;
    processes::record(
        &plan.state,
        "tunnel-server",
        server.pid,
        &server.binary,
        &server.log,
        Some(port),
    )?;
    let url = format!("wss://{host}:{port}{}", tunnel::CONNECT_PATH);
    Ok((
        TunnelEndpoint {
            url: url.clone(),
            ca_pem: hub.ca_pem().to_owned(),
            socket: server.socket,
            host,
        },
        format!("process {}, agents at {url}", server.pid),
    ))
}

/// An IPv4 address of this host other than loopback (the apiserver refuses loopback endpoints
/// for the gateway's Service): where the hub's apiserver reaches the gateway without nodes.
pub fn host_address() -> Option<std::net::Ipv4Addr> {
    let output = std::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&output.stdout).lines().find_map(|line| {
        let mut words = line.split_whitespace();
        words.find(|w| *w == "inet")?;
        words.next()?.split('/').next()?.parse().ok()
    })
}

/// Registers and enables `plan`'s ecosystem add-ons on every cluster, with their configs; the
/// managed service accounts and the cluster gateway when both its add-ons are there.
pub(super) async fn enable(
    plan: &Plan,
    progress: &Progress,
    plugins: &[(Ecosystem, PathBuf)],
    registry_address: &str,
    tunnel: Option<&TunnelEndpoint>,
) -> anyhow::Result<()> {
    let client = hub_client(plan).await?;
    let list = plan.clusters.join(",");
    for (addon, plugin) in plugins {
        publish_plugin(plan, progress, addon.addon(), plugin, registry_address).await?;
        let config = match addon {
            Ecosystem::ClusterProxy => {
                let tunnel = tunnel.ok_or_else(|| anyhow!("cluster-proxy needs the tunnel server"))?;
                Some(
                    apply_config(
                        &client,
                        TUNNEL_CONFIG,
                        &[
                            ("TunnelServerURL", tunnel.url.as_str()),
                            ("TunnelServerCA", tunnel.ca_pem.as_str()),
                        ],
                    )
                    .await?,
                )
            }
            Ecosystem::ResourceUsageCollect => {
                let period = SCORE_PERIOD_SECONDS.to_string();
                Some(apply_config(&client, SCORE_CONFIG, &[("PERIOD_SECONDS", period.as_str())]).await?)
            }
            Ecosystem::ManagedServiceAccount => None,
        };
        let mut enable = vec!["addon", "enable", "--names", addon.addon(), "--clusters", &list];
        if let Some(config) = &config {
            enable.extend(["--config", config]);
        }
        step(
            progress,
            &format!("enable {addon} on every cluster"),
            Some(plan.steps_log()),
            async {
                flotilla(plan, &plan.admin_kubeconfig(HUB), &enable).await?;
                Ok(((), config.clone().unwrap_or_default()))
            },
        )
        .await?;
    }
    if plan.ecosystem.contains(&Ecosystem::ManagedServiceAccount) {
        step(
            progress,
            &format!("create ManagedServiceAccount {GATEWAY_ACCOUNT} in every cluster namespace"),
            None,
            async {
                for cluster in &plan.clusters {
                    apply_managed_service_account(&client, cluster).await?;
                }
                Ok(((), list.clone()))
            },
        )
        .await?;
    }
    if !plan.nodes {
        step(
            progress,
            "start the add-ons' agents as local processes (no nodes)",
            Some(plan.logs()),
            start_local_agents(plan, tunnel),
        )
        .await?;
    }
    if let (true, Some(tunnel)) = (serves_gateway(plan), tunnel) {
        let log = plan.logs().join("cluster-gateway.log");
        step(
            progress,
            "start flotilla cluster-gateway",
            Some(log.clone()),
            start_gateway(plan, tunnel, &log),
        )
        .await?;
    }
    Ok(())
}

/// The install namespace of the add-ons' agents on their clusters.
const INSTALL_NAMESPACE: &str = flotilla_api::addon::consts::DEFAULT_INSTALL_NAMESPACE;

/// Starts each add-on's agent of each cluster as a process of this host: `flotilla addon-agent
/// --mount` runs it with the add-on's hub credential mirrored, and it reaches its cluster as the
/// service account its pod would run as, whose RBAC the plugin installed.
async fn start_local_agents(plan: &Plan, tunnel: Option<&TunnelEndpoint>) -> anyhow::Result<((), String)> {
    let mut started = Vec::new();
    for (index, cluster) in plan.clusters.iter().enumerate() {
        let admin = plan.admin_kubeconfig(cluster);
        let managed = crate::kubeconfig::client_from_yaml(
            &std::fs::read_to_string(&admin).with_context(|| format!("read {}", admin.display()))?,
        )
        .await?;
        let dir = plan.state.join("agents").join(cluster);
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let port = plan.layout.cluster(u16::try_from(index + 1)?).apiserver;
        for addon in &plan.ecosystem {
            let mount = dir.join(addon.addon());
            let hub_kubeconfig = mount.join("kubeconfig").display().to_string();
            let program: Vec<String> = match addon {
                Ecosystem::ClusterProxy => {
                    let tunnel = tunnel.ok_or_else(|| anyhow!("cluster-proxy needs the tunnel server"))?;
                    let ca = dir.join("tunnel-server-ca.crt");
                    std::fs::write(&ca, &tunnel.ca_pem).with_context(|| format!("write {}", ca.display()))?;
                    vec![
                        tunnel::tunnel_binary()?.display().to_string(),
                        "agent".into(),
                        format!(
                            "--hub-url=wss://127.0.0.1:{}{}",
                            plan.layout.tunnel(),
                            tunnel::CONNECT_PATH
                        ),
                        format!("--hub-ca={}", ca.display()),
                        format!("--cert={}", mount.join("tls.crt").display()),
                        format!("--key={}", mount.join("tls.key").display()),
                        format!("--target=127.0.0.1:{port}"),
                    ]
                }
                Ecosystem::ManagedServiceAccount | Ecosystem::ResourceUsageCollect => {
                    let identity = dir.join(format!("{}.kubeconfig", addon.addon()));
                    let yaml =
                        service_account_kubeconfig(&managed, &admin, addon.service_account(), plan).await?;
                    std::fs::write(&identity, yaml)
                        .with_context(|| format!("write {}", identity.display()))?;
                    let package = match addon {
                        Ecosystem::ManagedServiceAccount => "managed-serviceaccount-agent",
                        _ => "resource-usage-agent",
                    };
                    let mut args = vec![
                        crate::plugins::agent(package)?.display().to_string(),
                        format!("--hub-kubeconfig={hub_kubeconfig}"),
                        format!("--cluster-name={cluster}"),
                        format!("--addon-namespace={INSTALL_NAMESPACE}"),
                        format!("--kubeconfig={}", identity.display()),
                    ];
                    if *addon == Ecosystem::ResourceUsageCollect {
                        args.push(format!("--period={SCORE_PERIOD_SECONDS}"));
                    }
                    args
                }
            };
            let name = format!("{}-agent-{cluster}", addon.addon());
            let log = plan.logs().join(format!("{name}.log"));
            let mut command = std::process::Command::new(&plan.exe);
            command
                .args(["addon-agent", "--addon", addon.addon(), "--kubeconfig"])
                .arg(&admin)
                .arg("--mount")
                .arg(&mount)
                .arg("--")
                .args(&program);
            let child = spawn_in_background(command, &log).with_context(|| format!("start {name}"))?;
            processes::record(&plan.state, &name, child.id(), &plan.exe, &log, None)?;
            started.push(format!("{name}: process {}", child.id()));
            drop(child);
        }
    }
    Ok(((), started.join(", ")))
}

/// A kubeconfig of `cluster`'s service account `account` in the install namespace (waiting
/// until the add-on's manifests made it): the admin kubeconfig's server and CA, and a token of
/// that account, which a local agent acts with as its pod would.
async fn service_account_kubeconfig(
    managed: &Client,
    admin: &std::path::Path,
    account: &str,
    plan: &Plan,
) -> anyhow::Result<String> {
    use k8s_openapi::api::{authentication::v1::TokenRequest, core::v1::ServiceAccount};
    let accounts: Api<ServiceAccount> = Api::namespaced(managed.clone(), INSTALL_NAMESPACE);
    crate::wait::until(
        &format!("ServiceAccount {INSTALL_NAMESPACE}/{account}"),
        plan.timeout,
        || async { accounts.get_opt(account).await.map(|a| a.map(|_| ())) },
    )
    .await?;
    // A month: the token of a local agent is not rotated as a pod's projected one is.
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"expirationSeconds": 30 * 24 * 3600}}))?;
    let token = accounts
        .create_token_request(account, &Default::default(), &request)
        .await
        .with_context(|| format!("request a token of ServiceAccount {INSTALL_NAMESPACE}/{account}"))?
        .status
        .context("the token request has no status")?
        .token;
    let mut config: serde_json::Value = serde_yaml::from_str(
        &std::fs::read_to_string(admin).with_context(|| format!("read {}", admin.display()))?,
    )?;
    config["users"] = json!([{"name": account, "user": {"token": token}}]);
    if let Some(contexts) = config["contexts"].as_array_mut() {
        for context in contexts {
            context["context"]["user"] = json!(account);
        }
    }
    Ok(serde_yaml::to_string(&config)?)
}

/// Applies AddOnDeploymentConfig `name` in the hub namespace with `variables`; returns its
/// reference for `flotilla addon enable --config`.
async fn apply_config(client: &Client, name: &str, variables: &[(&str, &str)]) -> anyhow::Result<String> {
    let variables: Vec<serde_json::Value> = variables
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    let config = json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnDeploymentConfig",
        "metadata": {"name": name, "namespace": HUB_NAMESPACE},
        "spec": {"customizedVariables": variables},
    });
    Api::<AddOnDeploymentConfig>::namespaced(client.clone(), HUB_NAMESPACE)
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(config),
        )
        .await
        .with_context(|| format!("apply AddOnDeploymentConfig {HUB_NAMESPACE}/{name}"))?;
    Ok(format!(
        "addon.open-cluster-management.io/addondeploymentconfigs/{HUB_NAMESPACE}/{name}"
    ))
}

/// Applies ManagedServiceAccount [`GATEWAY_ACCOUNT`] in `cluster`'s namespace.
async fn apply_managed_service_account(client: &Client, cluster: &str) -> anyhow::Result<()> {
    let account = json!({
        "apiVersion": "authentication.open-cluster-management.io/v1beta1", "kind": "ManagedServiceAccount",
        "metadata": {"name": GATEWAY_ACCOUNT, "namespace": cluster},
        "spec": {"rotation": {"enabled": true, "validity": "8640h0m0s"}},
    });
    Api::<ManagedServiceAccount>::namespaced(client.clone(), cluster)
        .patch(
            GATEWAY_ACCOUNT,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(account),
        )
        .await
        .with_context(|| format!("apply ManagedServiceAccount {cluster}/{GATEWAY_ACCOUNT}"))?;
    Ok(())
}

/// Starts `flotilla cluster-gateway` as deploy/hub's service account, on every address of
/// this host, registered at the hub node's address.
async fn start_gateway(
    plan: &Plan,
    tunnel: &TunnelEndpoint,
    log: &std::path::Path,
) -> anyhow::Result<((), String)> {
    let mut gateway = std::process::Command::new(&plan.exe);
    gateway
        .arg("cluster-gateway")
        .arg("--kubeconfig")
        .arg(plan.state.join("hub-sa.kubeconfig"))
        .arg("--cluster-gateway-tunnel-socket")
        .arg(&tunnel.socket)
        .arg("--cluster-gateway-bind")
        .arg(format!("0.0.0.0:{}", plan.layout.gateway()))
        .arg("--cluster-gateway-address")
        .arg(tunnel.host.to_string())
        .arg("--ops-bind")
        .arg(format!("127.0.0.1:{}", plan.layout.gateway_ops()));
    let child = spawn_in_background(gateway, log).context("start flotilla cluster-gateway")?;
    let record = processes::record(
        &plan.state,
        "cluster-gateway",
        child.id(),
        &plan.exe,
        log,
        Some(plan.layout.gateway_ops()),
    )?;
    drop(child);
    Ok(((), format!("process {}", record.pid)))
}

/// Waits until every ecosystem add-on is Available on every cluster, each cluster has scores,
/// and its ClusterGateway is healthy.
pub(super) async fn await_running(plan: &Plan, progress: &Progress) -> anyhow::Result<()> {
    let client = hub_client(plan).await?;
    for addon in &plan.ecosystem {
        // Its health is its agent Deployment's availability, which needs a node; without one,
        // the healthy ClusterGateways show the tunnels instead.
        if *addon == Ecosystem::ClusterProxy && !plan.nodes {
            continue;
        }
        step(
            progress,
            &format!("wait until {addon} is Available on every cluster"),
            Some(plan.logs()),
            async {
                await_ready(&client, plan.timeout, |c| {
                    addons_available(c, &plan.clusters, addon.addon())
                })
                .await?;
                Ok(((), String::new()))
            },
        )
        .await?;
    }
    if plan.ecosystem.contains(&Ecosystem::ResourceUsageCollect) {
        step(
            progress,
            "wait until every cluster has resource scores",
            None,
            async {
                await_ready(&client, plan.timeout, |c| scores_missing(c, &plan.clusters)).await?;
                Ok(((), String::new()))
            },
        )
        .await?;
    }
    if serves_gateway(plan) {
        step(
            progress,
            "wait until every cluster is reachable through the cluster gateway",
            Some(plan.logs().join("cluster-gateway.log")),
            async {
                await_ready(&client, plan.timeout, |c| gateways_unhealthy(c, &plan.clusters)).await?;
                Ok(((), String::new()))
            },
        )
        .await?;
    }
    Ok(())
}

/// The clusters without an AddOnPlacementScore yet.
async fn scores_missing(client: Client, clusters: &[String]) -> anyhow::Result<Option<String>> {
    let mut missing = Vec::new();
    for cluster in clusters {
        let scores = Api::<AddOnPlacementScore>::namespaced(client.clone(), cluster)
            .get_opt(SCORE_NAME)
            .await?;
        if scores.and_then(|s| s.status).is_none_or(|s| s.scores.is_empty()) {
            missing.push(cluster.clone());
        }
    }
    Ok((!missing.is_empty()).then(|| format!("no scores yet: {}", missing.join(", "))))
}

/// The AddOnPlacementScore the resource-usage agents write.
pub const SCORE_NAME: &str = "resource-usage-score";

/// The clusters whose ClusterGateway is not healthy yet, with its reason.
async fn gateways_unhealthy(client: Client, clusters: &[String]) -> anyhow::Result<Option<String>> {
    use flotilla_api::gateway::v1alpha1::ClusterGateway;
    let gateways: Api<ClusterGateway> = Api::all(client);
    let mut unhealthy = Vec::new();
    for cluster in clusters {
        match gateways.get_opt(cluster).await {
            Ok(Some(gateway)) if gateway.status.healthy => {}
            Ok(Some(gateway)) => unhealthy.push(format!("{cluster}: {}", gateway.status.healthy_reason)),
            Ok(None) => unhealthy.push(format!("{cluster}: no ClusterGateway")),
            // Until the gateway serves, its API group is not there.
            Err(e) => unhealthy.push(format!("{cluster}: {e}")),
        }
    }
    Ok((!unhealthy.is_empty()).then(|| unhealthy.join(", ")))
}

async fn hub_client(plan: &Plan) -> anyhow::Result<Client> {
    crate::kubeconfig::client_from_yaml(
        &std::fs::read_to_string(plan.admin_kubeconfig(HUB)).context("read the hub admin kubeconfig")?,
    )
    .await
    .map_err(Into::into)
}
