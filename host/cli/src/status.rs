//! `flotilla status`: what a `flotilla up` state directory runs and how healthy each part is —
//! process alive (and still the recorded executable), its port, and a health probe where the
//! component has one (kube-apiserver `/readyz`, the registry's `/v2/`, a node's Ready
//! condition for its kubelet, a listening port).
//! Exits non-zero when anything is down.

use std::{
    net::{Ipv4Addr, SocketAddr, TcpStream},
    path::Path,
    time::Duration,
};

use anyhow::{Context as _, bail};
use flotilla_localenv::{
    processes::{self, ProcessRecord},
    up::{self, Environment},
};

use crate::cli::GlobalArgs;

/// The health of one recorded process.
#[derive(Debug)]
struct Health {
    running: bool,
    probe: Result<String, String>,
}

/// Runs `flotilla status`.
pub async fn status(global: &GlobalArgs) -> anyhow::Result<()> {
    use std::io::Write as _;
    let state = std::path::absolute(&global.state_dir)
        .with_context(|| format!("resolve {}", global.state_dir.display()))?;
    let records = processes::read_all(&state)?;
    let Some(env) = up::read_env(&state)? else {
        bail!(
            "nothing is up under {} (start it with `flotilla up`)",
            state.display()
        );
    };
    let mut table = tabwriter::TabWriter::new(Vec::new()).padding(3);
    writeln!(table, "COMPONENT\tPID\tPROCESS\tPORT\tHEALTH\tLOG")?;
    let mut down = Vec::new();
    for record in &records {
        let health = health(&env, record).await;
        let process = if health.running { "running" } else { "not running" };
        let probe = match &health.probe {
            Ok(ok) => ok.clone(),
            Err(problem) => format!("DOWN: {problem}"),
        };
        if !health.running || health.probe.is_err() {
            down.push(record.name.clone());
        }
        writeln!(
            table,
            "{}\t{}\t{process}\t{}\t{probe}\t{}",
            record.name,
            record.pid,
            record.port.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            record.log.display()
        )?;
    }
    for (name, health, log) in pods(&state, &env).await {
        let probe = match &health {
            Ok(ok) => ok.clone(),
            Err(problem) => {
                down.push(name.clone());
                format!("DOWN: {problem}")
            }
        };
        let process = if health.is_ok() { "running" } else { "not ready" };
        writeln!(table, "{name}	-	{process}	-	{probe}	{}", log.display())?;
    }
    table.flush()?;
    print!("{}", String::from_utf8(table.into_inner()?)?);
    if !env.complete {
        bail!("the last `flotilla up` under {} did not finish", state.display());
    }
    if records.is_empty() {
        bail!("no process is recorded under {}", state.display());
    }
    if !down.is_empty() {
        bail!(
            "down: {} (see their logs; `flotilla up` starts everything again)",
            down.join(", ")
        );
    }
    Ok(())
}

/// The problems of a running environment, empty when all is well (`up` reuses it then).
pub async fn unhealthy(state: &Path, env: &Environment) -> Vec<String> {
    let Ok(records) = processes::read_all(state) else {
        return vec!["the pid files cannot be read".into()];
    };
    let mut problems: Vec<String> = pods(state, env)
        .await
        .into_iter()
        .filter_map(|(name, health, _)| health.err().map(|problem| format!("{name}: {problem}")))
        .collect();
    for record in &records {
        let health = health(env, record).await;
        if !health.running {
            problems.push(format!("{} is not running", record.name));
        } else if let Err(problem) = health.probe {
            problems.push(format!("{}: {problem}", record.name));
        }
    }
    problems
}

/// With nodes, the hub and the klusterlets run as pods: their Deployments' readiness, and
/// where the pods' logs are (the node's pod-logs directory).
async fn pods(state: &Path, env: &Environment) -> Vec<(String, Result<String, String>, std::path::PathBuf)> {
    if !env.nodes {
        return Vec::new();
    }
    let mut found = Vec::new();
    let deployments = std::iter::once((
        up::HUB.to_owned(),
        "hub".to_owned(),
        up::HUB_NAMESPACE,
        up::HUB_DEPLOYMENT,
    ))
    .chain(env.clusters().into_iter().map(|cluster| {
        let name = format!("klusterlet-{cluster}");
        (cluster, name, up::KLUSTERLET_NAMESPACE, up::KLUSTERLET_DEPLOYMENT)
    }));
    for (cp, name, namespace, deployment) in deployments {
        let health = match admin_client(env, &cp).await {
            Ok(client) => match up::deployment_unready(&client, namespace, deployment).await {
                Ok(None) => Ok(format!("Deployment {namespace}/{deployment} ready")),
                Ok(Some(missing)) => Err(missing),
                Err(e) => Err(format!("read Deployment {namespace}/{deployment}: {e}")),
            },
            Err(e) => Err(e),
        };
        let log = state.join(up::NODES_DIR).join(&cp).join("pod-logs");
        found.push((name, health, log));
    }
    found
}

async fn health(env: &Environment, record: &ProcessRecord) -> Health {
    let running = processes::is_running(record);
    if !running {
        return Health {
            running,
            probe: Err("process gone".into()),
        };
    }
    let probe = if let Some(cp) = record.name.strip_suffix("-kube-apiserver") {
        readyz(env, cp).await
    } else if record.name == "hub" {
        match record.port {
            Some(port) => hub_readyz(port).await,
            None => Err("no port recorded".into()),
        }
    } else if let Some(cluster) = record.name.strip_suffix("-node-kubelet") {
        node_ready(env, cluster).await
    } else if record.name == "registry" {
        match record.port {
            Some(port) => registry_v2(port).await,
            None => Err("no port recorded".into()),
        }
    } else {
        match record.port {
            Some(port) => listening(port),
            None => Ok("-".into()),
        }
    };
    Health { running, probe }
}

fn listening(port: u16) -> Result<String, String> {
    TcpStream::connect_timeout(
        &SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        Duration::from_millis(500),
    )
    .map(|_| "listening".to_owned())
    .map_err(|e| format!("port {port}: {e}"))
}

/// A client for control plane `cp` as its admin.
async fn admin_client(env: &Environment, cp: &str) -> Result<kube::Client, String> {
    let path = env
        .control_planes
        .iter()
        .find(|(name, _)| name == cp)
        .map(|(_, path)| path.clone())
        .ok_or_else(|| format!("control plane {cp} is not in the environment record"))?;
    let yaml = std::fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
    flotilla_localenv::kubeconfig::client_from_yaml(&yaml)
        .await
        .map_err(|e| e.to_string())
}

/// The kube-apiserver's `/readyz` as the control plane's admin.
async fn readyz(env: &Environment, cp: &str) -> Result<String, String> {
    let client = admin_client(env, cp).await?;
    let request = http::Request::get("/readyz")
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    let answer = tokio::time::timeout(Duration::from_secs(5), client.request_text(request)).await;
    match answer {
        Ok(Ok(body)) if body.trim() == "ok" => Ok("/readyz ok".into()),
        Ok(Ok(body)) => Err(format!("/readyz: {}", body.trim())),
        Ok(Err(e)) => Err(format!("/readyz: {e}")),
        Err(_) => Err("/readyz: no answer within 5s".into()),
    }
}

/// Whether `cluster`'s node is Ready, as its kubelet reports to the cluster.
async fn node_ready(env: &Environment, cluster: &str) -> Result<String, String> {
    let client = admin_client(env, cluster).await?;
    let name = format!("{cluster}-node");
    let node = kube::Api::<k8s_openapi::api::core::v1::Node>::all(client)
        .get_opt(&name)
        .await
        .map_err(|e| format!("read node {name}: {e}"))?
        .ok_or_else(|| format!("node {name} is not registered"))?;
    let ready = node
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready");
    match ready {
        Some(c) if c.status == "True" => Ok(format!("node {name} Ready")),
        Some(c) => Err(format!(
            "node {name} Ready={}: {}",
            c.status,
            c.message.unwrap_or_default()
        )),
        None => Err(format!("node {name} reports no Ready condition")),
    }
}

/// The hub's own `/readyz`: its apiserver answers and its caches have synced.
async fn hub_readyz(port: u16) -> Result<String, String> {
    let url = format!("http://127.0.0.1:{port}/readyz");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())?;
    match client.get(&url).send().await {
        Ok(response) if response.status().is_success() => Ok("/readyz ok".into()),
        Ok(response) => {
            let status = response.status();
            let why = response.text().await.unwrap_or_default();
            Err(format!("{url}: {status} {}", why.trim()))
        }
        Err(e) => Err(format!("{url}: {e}")),
    }
}

/// The registry answers the distribution API's base endpoint.
async fn registry_v2(port: u16) -> Result<String, String> {
    let url = format!("http://127.0.0.1:{port}/v2/");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())?;
    match client.get(&url).send().await {
        Ok(response) if response.status().is_success() => Ok("/v2/ ok".into()),
        Ok(response) => Err(format!("{url}: {}", response.status())),
        Err(e) => Err(format!("{url}: {e}")),
    }
}
