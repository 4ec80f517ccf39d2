//! The phases of `up`, in order: build what is needed, start the infrastructure (registry,
//! control planes, nodes, images), install Flotilla as a person would (`init`, the hub,
//! `join`, `accept`), enable the add-on, and wait until all of it runs. Each phase is a few
//! [`step`]s, so a failure names the step, its cause and the log to read.

use std::path::PathBuf;

use anyhow::{Context as _, anyhow};

use super::{
    ADDON, HUB, KLUSTERLET_DEPLOYMENT, KLUSTERLET_NAMESPACE, NODES_DIR, Plan,
    checks::{addons_available, await_ready, clusters_available, plugin_ready, works_applied},
    ecosystem::{self, Ecosystem, TunnelEndpoint, start_tunnel_server},
    progress::{Progress, step},
    start::{
        flotilla, hub_pods_ready, record_control_planes, start_addon_agents, start_control_planes, start_hub,
        start_nodes,
    },
};
use crate::{processes, registry::Registry};

/// What was built before anything starts.
pub(super) struct Built {
    /// The helloworld plugin, when the add-on is asked for.
    pub(super) plugin: Option<PathBuf>,
    /// The helloworld agent binary, when the add-on runs on nodes.
    pub(super) agent: Option<PathBuf>,
}

/// Builds the control-plane binary, the registry and, with the add-on, its plugin and agent.
pub(super) async fn build(plan: &Plan, progress: &Progress) -> anyhow::Result<Built> {
    step(progress, "build the control-plane binary", None, async {
        let path = tokio::task::spawn_blocking(crate::binary::controlplane_binary).await??;
        Ok(((), path.display().to_string()))
    })
    .await?;
    step(progress, "build the OCI registry", None, async {
        let path = tokio::task::spawn_blocking(crate::registry::registry_binary).await??;
        Ok(((), path.display().to_string()))
    })
    .await?;
    let plugin = if plan.addon {
        Some(
            step(progress, "build the helloworld plugin", None, async {
                let path = tokio::task::spawn_blocking(crate::plugins::helloworld).await??;
                Ok((path.clone(), path.display().to_string()))
            })
            .await?,
        )
    } else {
        None
    };
    let agent = if plan.addon && plan.nodes {
        Some(
            step(progress, "build the helloworld agent", None, async {
                let path = tokio::task::spawn_blocking(crate::plugins::helloworld_agent).await??;
                Ok((path.clone(), path.display().to_string()))
            })
            .await?,
        )
    } else {
        None
    };
    Ok(Built { plugin, agent })
}

/// What the infrastructure offers the later phases.
pub(super) struct Infrastructure {
    /// Where the hub's pods (with nodes) and this host reach the registry.
    pub(super) registry_address: String,
    /// The Flotilla image in the registry, with nodes.
    pub(super) flotilla_image: Option<String>,
    /// The cluster-proxy tunnel server, with that add-on.
    pub(super) tunnel: Option<TunnelEndpoint>,
}

/// Starts the registry, the control planes and, with nodes, a node each and the images they
/// pull; records every process.
pub(super) async fn infrastructure(
    plan: &Plan,
    progress: &Progress,
    agent: Option<PathBuf>,
) -> anyhow::Result<Infrastructure> {
    let registry_log = plan.state.join("registry").join("registry.log");
    let registry = step(
        progress,
        "start the OCI registry",
        Some(registry_log.clone()),
        async {
            let registry = Registry::builder()
                .state_dir(plan.state.join("registry"))
                .port(plan.layout.registry())
                .detached(true)
                .start()
                .await?;
            Ok((registry, format!("127.0.0.1:{}", plan.layout.registry())))
        },
    )
    .await?;
    let names: Vec<String> = std::iter::once(HUB.to_owned())
        .chain(plan.clusters.iter().cloned())
        .collect();
    let control_planes = step(
        progress,
        &format!("start {} control planes ({})", names.len(), names.join(", ")),
        Some(plan.state.join("controlplanes")),
        start_control_planes(plan),
    )
    .await?;
    let mut registry_address = format!("127.0.0.1:{}", plan.layout.registry());
    let mut flotilla_image = None;
    // Where the tunnel server is reached: every node's pods reach this host at the hub
    // node's address; without nodes the agents are local processes, which use loopback, and
    // the hub's apiserver reaches the gateway at another address of this host.
    let mut tunnel_host = None;
    if plan.nodes {
        let hub_node;
        (registry_address, hub_node) = step(
            progress,
            &format!("start a node per control plane ({})", names.join(", ")),
            Some(plan.state.join(NODES_DIR)),
            start_nodes(plan, &control_planes, &registry),
        )
        .await?;
        for addon in &plan.ecosystem {
            step(
                progress,
                &format!("push the {addon} agent image"),
                Some(registry_log.clone()),
                async {
                    let pushed = crate::image::push_agent(&registry, addon.image()).await?;
                    Ok(((), pushed))
                },
            )
            .await?;
        }
        tunnel_host = Some(hub_node);
        let pushed = step(
            progress,
            "push the Flotilla image",
            Some(registry_log.clone()),
            async {
                let pushed = crate::image::push_flotilla(&registry, &plan.exe).await?;
                Ok((pushed.clone(), pushed))
            },
        )
        .await?;
        flotilla_image = Some(pushed);
    }
    if let Some(agent) = agent {
        step(
            progress,
            "push the helloworld agent image",
            Some(registry_log),
            async {
                let pushed = crate::image::push_helloworld_agent_binary(&registry, &agent).await?;
                Ok(((), pushed))
            },
        )
        .await?;
    }
    let mut tunnel = None;
    if plan.ecosystem.contains(&Ecosystem::ClusterProxy) {
        let host = tunnel_host.or_else(ecosystem::host_address).ok_or_else(|| {
            anyhow!("this host has no IPv4 address but loopback, where the hub's apiserver could reach the cluster gateway")
        })?;
        let hub = control_planes
            .first()
            .ok_or_else(|| anyhow!("no hub control plane"))?;
        tunnel = Some(
            step(
                progress,
                "start the cluster-proxy tunnel server",
                Some(plan.state.join("cluster-proxy").join("server.log")),
                async { start_tunnel_server(plan, hub, host.into()) },
            )
            .await?,
        );
    }
    record_control_planes(plan, control_planes)?;
    let (binary, log) = (registry.binary().to_path_buf(), registry.log_path());
    let pid = registry.detach()?;
    processes::record(
        &plan.state,
        "registry",
        pid,
        &binary,
        &log,
        Some(plan.layout.registry()),
    )?;
    Ok(Infrastructure {
        registry_address,
        flotilla_image,
        tunnel,
    })
}

/// `flotilla init` on the hub (deploying deploy/hub with `image`, with nodes), then the hub
/// running: its pods, or a local `flotilla hub`. Returns the join token.
pub(super) async fn install_hub(
    plan: &Plan,
    progress: &Progress,
    image: Option<&str>,
) -> anyhow::Result<String> {
    let hub_admin = plan.admin_kubeconfig(HUB);
    let token = step(
        progress,
        "prepare the hub (flotilla init)",
        Some(plan.steps_log()),
        async {
            let mut init = vec!["init"];
            if let Some(image) = image {
                init.extend(["--image", image]);
            }
            let out = flotilla(plan, &hub_admin, &init).await?;
            let token = out
                .split_whitespace()
                .skip_while(|w| *w != "--hub-token")
                .nth(1)
                .map(str::to_owned)
                .ok_or_else(|| anyhow!("`flotilla init` printed no join command: {out}"))?;
            Ok((token, String::new()))
        },
    )
    .await?;
    if plan.nodes {
        step(
            progress,
            "wait for flotilla hub's pods (deploy/hub: two replicas)",
            Some(plan.node_dir(HUB).join("pod-logs")),
            hub_pods_ready(plan),
        )
        .await?;
    } else {
        let hub_log = plan.logs().join("hub.log");
        step(
            progress,
            "start flotilla hub",
            Some(hub_log.clone()),
            start_hub(plan, &hub_log),
        )
        .await?;
    }
    Ok(token)
}

/// `flotilla join` of every cluster: a klusterlet pod on its node (with `image`), or a local
/// klusterlet process.
pub(super) async fn join_clusters(
    plan: &Plan,
    progress: &Progress,
    token: &str,
    image: Option<&str>,
) -> anyhow::Result<()> {
    // With nodes, the hub as the add-on agents' pods reach it (and the host, through the same
    // route): the klusterlets hand their hub address on to the agents' kubeconfigs.
    let hub_server = if plan.nodes {
        let address = crate::controlplane::kubernetes_service_address(plan.layout.hub().apiserver);
        format!("https://{address}:443")
    } else {
        format!("https://127.0.0.1:{}", plan.layout.hub().apiserver)
    };
    for cluster in &plan.clusters {
        let managed = plan.admin_kubeconfig(cluster);
        let mut args = join_args(token, &hub_server, cluster);
        if let Some(image) = image {
            args.extend(["--image", image]);
            step(
                progress,
                &format!("join {cluster} (flotilla join: a klusterlet pod on its node)"),
                Some(plan.node_dir(cluster).join("pod-logs")),
                async {
                    flotilla(plan, &managed, &args).await?;
                    Ok((
                        (),
                        format!("Deployment {KLUSTERLET_NAMESPACE}/{KLUSTERLET_DEPLOYMENT}"),
                    ))
                },
            )
            .await?;
            continue;
        }
        args.push("--local");
        let log = plan
            .state
            .join("klusterlets")
            .join(cluster)
            .join("klusterlet.log");
        step(
            progress,
            &format!("join {cluster} (flotilla join --local)"),
            Some(log),
            async {
                flotilla(plan, &managed, &args).await?;
                let klusterlet = crate::klusterlets::read(&plan.state, cluster)
                    .ok_or_else(|| anyhow!("`flotilla join --local` recorded no klusterlet"))?;
                processes::record(
                    &plan.state,
                    &format!("klusterlet-{cluster}"),
                    klusterlet.pid,
                    &klusterlet.exe,
                    &klusterlet.log,
                    None,
                )?;
                Ok(((), format!("klusterlet process {}", klusterlet.pid)))
            },
        )
        .await?;
    }
    Ok(())
}

/// `flotilla join` with the token, the hub's address and the cluster's name.
fn join_args<'a>(token: &'a str, hub_server: &'a str, cluster: &'a str) -> Vec<&'a str> {
    vec![
        "join",
        "--hub-token",
        token,
        "--hub-apiserver",
        hub_server,
        "--cluster-name",
        cluster,
    ]
}

/// `flotilla accept` of every cluster, waiting until each is accepted.
pub(super) async fn accept(plan: &Plan, progress: &Progress) -> anyhow::Result<()> {
    let list = plan.clusters.join(",");
    step(
        progress,
        "accept the clusters (flotilla accept)",
        Some(plan.steps_log()),
        async {
            let timeout = format!("{}s", plan.timeout.as_secs());
            flotilla(
                plan,
                &plan.admin_kubeconfig(HUB),
                &["accept", "--wait", "--clusters", &list, "--timeout", &timeout],
            )
            .await?;
            Ok(((), list.clone()))
        },
    )
    .await
}

/// Pushes the helloworld plugin to the registry, registers it by digest and enables it on
/// every cluster; without nodes, starts the stand-in agents.
pub(super) async fn enable_addon(
    plan: &Plan,
    progress: &Progress,
    plugin: &std::path::Path,
    registry_address: &str,
) -> anyhow::Result<()> {
    let hub_admin = plan.admin_kubeconfig(HUB);
    let list = plan.clusters.join(",");
    publish_plugin(plan, progress, ADDON, plugin, registry_address).await?;
    let enable = ["addon", "enable", "--names", ADDON, "--clusters", &list];
    step(
        progress,
        "enable helloworld on every cluster",
        Some(plan.steps_log()),
        async {
            flotilla(plan, &hub_admin, &enable).await?;
            Ok(((), list.clone()))
        },
    )
    .await?;
    if !plan.nodes {
        step(
            progress,
            "start the stand-in add-on agents (no nodes)",
            None,
            start_addon_agents(plan),
        )
        .await?;
    }
    Ok(())
}

/// Pushes plugin `addon` to the registry and registers its AddOnPlugin by digest, as its
/// author and the hub admin do.
pub(super) async fn publish_plugin(
    plan: &Plan,
    progress: &Progress,
    addon: &str,
    plugin: &std::path::Path,
    registry_address: &str,
) -> anyhow::Result<()> {
    let hub_admin = plan.admin_kubeconfig(HUB);
    let reference = format!("{registry_address}/addons/{addon}:v1");
    let plugin = plugin.display().to_string();
    let push = ["plugin", "push", &plugin, &reference, "--insecure"];
    let digest = step(
        progress,
        &format!("push {addon} to the registry"),
        Some(plan.steps_log()),
        async {
            let out = flotilla(plan, &hub_admin, &push).await?;
            let digest = out
                .lines()
                .find_map(|l| l.strip_prefix("digest:"))
                .and_then(|rest| rest.split_whitespace().next())
                .map(str::to_owned)
                .ok_or_else(|| anyhow!("`flotilla plugin push` printed no digest: {out}"))?;
            Ok((digest, reference.clone()))
        },
    )
    .await?;
    let register = [
        "plugin",
        "register",
        addon,
        "--oci",
        &reference,
        "--digest",
        &digest,
        "--insecure",
    ];
    step(
        progress,
        &format!("register the {addon} AddOnPlugin"),
        Some(plan.steps_log()),
        async {
            flotilla(plan, &hub_admin, &register).await?;
            Ok(((), digest.clone()))
        },
    )
    .await
}

/// Waits until the clusters are Available and, with the add-on, its plugin is loaded, its
/// works are Applied and it is Available on every cluster.
pub(super) async fn await_running(plan: &Plan, progress: &Progress) -> anyhow::Result<()> {
    let hub_admin = plan.admin_kubeconfig(HUB);
    let client = crate::kubeconfig::client_from_yaml(
        &std::fs::read_to_string(&hub_admin).context("read the hub admin kubeconfig")?,
    )
    .await?;
    let hub_log = plan.logs().join("hub.log");
    step(
        progress,
        "wait until the clusters are Available",
        Some(hub_log.clone()),
        async {
            await_ready(&client, plan.timeout, |c| clusters_available(c, &plan.clusters)).await?;
            Ok(((), String::new()))
        },
    )
    .await?;
    if !plan.addon {
        return Ok(());
    }
    step(
        progress,
        "wait until the helloworld plugin is loaded",
        Some(hub_log),
        async {
            await_ready(&client, plan.timeout, plugin_ready).await?;
            Ok(((), String::new()))
        },
    )
    .await?;
    step(
        progress,
        "wait until each cluster's helloworld work is Applied",
        Some(plan.state.join("klusterlets")),
        async {
            await_ready(&client, plan.timeout, |c| works_applied(c, &plan.clusters)).await?;
            Ok(((), String::new()))
        },
    )
    .await?;
    step(
        progress,
        if plan.nodes {
            "wait until helloworld is Available on every cluster (its agent pods' leases)"
        } else {
            "wait until helloworld is Available on every cluster (its agents' leases)"
        },
        Some(plan.logs()),
        async {
            await_ready(&client, plan.timeout, |c| {
                addons_available(c, &plan.clusters, ADDON)
            })
            .await?;
            Ok(((), String::new()))
        },
    )
    .await
}
