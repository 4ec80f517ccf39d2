//! `flotilla controlplane up|down|kubeconfig|build`: named local control planes that run in the
//! background under the state directory, `<state-dir>/controlplanes/<name>/`.

use std::{path::PathBuf, time::Instant};

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use flotilla_localenv::{ControlPlane, binary, controlplane};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, ResourceExt, api::ListParams};

use crate::cli::GlobalArgs;

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a named control plane in the background and print its admin kubeconfig path.
    Up(NameArgs),
    /// Stop a named control plane, free its ports and remove its files.
    Down(NameArgs),
    /// Print the admin kubeconfig path of a running control plane.
    Kubeconfig(NameArgs),
    /// Build the control-plane binary if it is not cached yet, and print its path.
    #[command(hide = true)]
    Build,
}

#[derive(Debug, Args)]
pub struct NameArgs {
    /// The control plane's name (also its kubeconfig context).
    #[arg(long, default_value = "hub", value_parser = parse_name)]
    pub name: String,
}

/// Names become directory names and kubeconfig contexts: keep them DNS-label-like.
fn parse_name(name: &str) -> Result<String, String> {
    match flotilla_core::names::dns_label_problem(name) {
        Some(reason) => Err(format!("{name:?} is not a valid name: it {reason}")),
        None => Ok(name.to_owned()),
    }
}

impl Command {
    pub async fn run(self, global: &GlobalArgs) -> anyhow::Result<()> {
        match self {
            Command::Up(args) => up(global, &args.name).await,
            Command::Down(args) => down(global, &args.name),
            Command::Kubeconfig(args) => kubeconfig(global, &args.name),
            Command::Build => {
                let path = tokio::task::spawn_blocking(binary::controlplane_binary).await??;
                println!("{}", path.display());
                Ok(())
            }
        }
    }
}

fn dir_of(global: &GlobalArgs, name: &str) -> PathBuf {
    global.state_dir.join("controlplanes").join(name)
}

/// Whether the control plane recorded in `dir` still answers.
async fn is_up(dir: &std::path::Path) -> bool {
    let Ok(state) = controlplane::read_state(dir) else {
        return false;
    };
    let Ok(yaml) = std::fs::read_to_string(&state.admin_kubeconfig) else {
        return false;
    };
    let Ok(client) = flotilla_localenv::kubeconfig::client_from_yaml(&yaml).await else {
        return false;
    };
    client.apiserver_version().await.is_ok()
}

async fn up(global: &GlobalArgs, name: &str) -> anyhow::Result<()> {
    let dir = dir_of(global, name);
    if is_up(&dir).await {
        let state = controlplane::read_state(&dir)?;
        eprintln!("control plane {name:?} is already up at {}", state.server);
        println!("{}", absolute(&state.admin_kubeconfig).display());
        return Ok(());
    }
    if dir.join("state.json").exists() {
        eprintln!("control plane {name:?} was recorded but does not answer; cleaning up and starting anew");
        controlplane::stop_detached(&dir)
            .with_context(|| format!("clean up stale control plane {name:?}"))?;
    }
    let started = Instant::now();
    eprintln!(
        "starting control plane {name:?} (etcd, kube-apiserver, kube-controller-manager) under {}",
        dir.display()
    );
    let cp = ControlPlane::builder(name)
        .state_dir(&dir)
        .detached(true)
        .start()
        .await
        .with_context(|| format!("start control plane {name:?}"))?;
    let client = cp.admin_client().await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    let mut names: Vec<String> = crds
        .list(&ListParams::default())
        .await
        .context("list CRDs")?
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    names.sort();
    let state = cp.detach()?;
    eprintln!(
        "control plane {name:?} is up at {} after {:.1?}",
        state.server,
        started.elapsed()
    );
    eprintln!("{} custom resource definitions installed:", names.len());
    for crd in &names {
        eprintln!("  {crd}");
    }
    eprintln!(
        "use it with: kubectl --kubeconfig {} get managedclusters",
        absolute(&state.admin_kubeconfig).display()
    );
    println!("{}", absolute(&state.admin_kubeconfig).display());
    Ok(())
}

fn down(global: &GlobalArgs, name: &str) -> anyhow::Result<()> {
    let dir = dir_of(global, name);
    if !dir.join("state.json").exists() {
        bail!(
            "no control plane named {name:?} under {} (start one with `flotilla controlplane up --name {name}`)",
            global.state_dir.display()
        );
    }
    let state = controlplane::stop_detached(&dir).with_context(|| format!("stop control plane {name:?}"))?;
    eprintln!("control plane {name:?} ({}) stopped", state.server);
    // A klusterlet of this cluster would otherwise retry against a dead address forever.
    for (cluster, pid) in flotilla_localenv::klusterlets::stop_attached(&global.state_dir, &state.server)? {
        eprintln!(
            "stopped the local klusterlet of cluster {cluster:?} (process {pid}), which served this control plane"
        );
    }
    Ok(())
}

fn kubeconfig(global: &GlobalArgs, name: &str) -> anyhow::Result<()> {
    let dir = dir_of(global, name);
    let state = controlplane::read_state(&dir).with_context(|| {
        format!("no control plane named {name:?} (start one with `flotilla controlplane up --name {name}`)")
    })?;
    println!("{}", absolute(&state.admin_kubeconfig).display());
    Ok(())
}

fn absolute(path: &std::path::Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::parse_name;

    #[test]
    fn control_plane_names_must_be_dns_labels() {
        assert!(parse_name("hub").is_ok());
        assert!(parse_name("cluster-1").is_ok());
        for bad in ["", "Hub", "-a", "a-", "a_b", "a/b", &"x".repeat(64)] {
            assert!(parse_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
