//! `flotilla addon-agent` (hidden): a stand-in add-on agent that only renews its lease, the way
//! an OCM add-on agent's lease updater does, so add-on health can be shown without a container
//! runtime.
//!
//! ```text
//!  default:                   Lease <addon> in --namespace on the managed cluster (--kubeconfig)
//!  --hub-kubeconfig-secret:   secret <addon>-hub-kubeconfig in --namespace ──▶ temp dir (as a
//!                             mounted volume) ──▶ Lease <addon> in the cluster namespace on the
//!                             hub, with that credential only
//! ```
//!
//! It renews every `--lease-seconds` until stopped; a failed renewal is logged and retried at
//! the next period. In hub mode the secret is read again for every renewal, so a rotated
//! certificate is picked up as a remounted volume would be.
//!
//! With `--mount DIR -- PROGRAM ARGS…` it renews nothing itself: it runs a real add-on agent
//! where no node can run its pod, with the secret mirrored into DIR as the kubelet mounts a
//! Secret volume (each key a file, re-read every few seconds), and ends when the agent does.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context as _;
use clap::Args;
use flotilla_api::addon::consts::DEFAULT_INSTALL_NAMESPACE;
use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::Secret},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
    config::Kubeconfig,
};

use crate::cli::GlobalArgs;

/// Key of the cluster name in the add-on's hub kubeconfig secret.
const CLUSTER_NAME_KEY: &str = "cluster-name";
/// Key of the kubeconfig in the add-on's hub kubeconfig secret.
const KUBECONFIG_KEY: &str = "kubeconfig";

#[derive(Debug, Args)]
pub struct AddonAgentArgs {
    /// The add-on's name (the lease's name).
    #[arg(long)]
    pub addon: String,
    /// The add-on's install namespace on the managed cluster.
    #[arg(long, default_value = DEFAULT_INSTALL_NAMESPACE)]
    pub namespace: String,
    /// Seconds between renewals.
    #[arg(long, default_value_t = 60)]
    pub lease_seconds: u64,
    /// Renew the lease on the hub, in the cluster namespace, with only the credential of secret
    /// `<addon>-hub-kubeconfig` in the install namespace.
    #[arg(long)]
    pub hub_kubeconfig_secret: bool,
    /// Run the agent program given after `--` instead, with secret `<addon>-hub-kubeconfig`
    /// mirrored into this directory as a mounted Secret volume is.
    #[arg(long, requires = "program")]
    pub mount: Option<PathBuf>,
    /// The agent program and its arguments.
    #[arg(last = true)]
    pub program: Vec<String>,
}

/// How often a mirrored secret is read again (the kubelet's sync is about a minute; shorter
/// here, so a rotated credential reaches a local agent soon).
const MIRROR_PERIOD: Duration = Duration::from_secs(10);

/// Renews the lease until the process is stopped, or runs the agent program until it ends.
pub async fn run(global: &GlobalArgs, args: &AddonAgentArgs) -> anyhow::Result<()> {
    let (managed, _) = crate::kube::client(global)
        .await
        .context("connect to the managed cluster")?;
    if let Some(mount) = &args.mount {
        return run_mounted(&managed, args, mount).await;
    }
    let period = Duration::from_secs(args.lease_seconds.max(1));
    eprintln!(
        "flotilla addon-agent: renewing Lease {} every {}s {}",
        args.addon,
        period.as_secs(),
        if args.hub_kubeconfig_secret {
            "on the hub with the add-on's hub kubeconfig"
        } else {
            "on the managed cluster"
        }
    );
    loop {
        let result = match args.hub_kubeconfig_secret {
            false => renew(&managed, &args.namespace, &args.addon, period).await,
            true => renew_on_hub(&managed, args, period).await,
        };
        if let Err(error) = result {
            eprintln!("flotilla addon-agent: {}", crate::report::line(&error));
        }
        tokio::time::sleep(period).await;
    }
}

/// Runs the agent program with the add-on's hub credential mirrored into `mount`, once the
/// klusterlet has written it, until the program ends.
async fn run_mounted(managed: &Client, args: &AddonAgentArgs, mount: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(mount).with_context(|| format!("create {}", mount.display()))?;
    while let Err(error) = mirror(managed, args, mount).await {
        eprintln!(
            "flotilla addon-agent: waiting for the credential: {}",
            crate::report::line(&error)
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let (program, program_args) = args.program.split_first().context("no agent program after --")?;
    // Killed with this process: `down` stops what it recorded, this process.
    let mut agent = tokio::process::Command::from(flotilla_localenv::processes::killed_with_parent(program))
        .args(program_args)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("start {program}"))?;
    eprintln!(
        "flotilla addon-agent: {program} runs with secret {}-hub-kubeconfig mirrored into {}",
        args.addon,
        mount.display()
    );
    // Stopped (as `flotilla down` stops what it recorded: this process), it stops the agent.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listen for SIGTERM")?;
    let mut ticks = tokio::time::interval(MIRROR_PERIOD);
    loop {
        tokio::select! {
            status = agent.wait() => {
                let status = status.with_context(|| format!("wait for {program}"))?;
                anyhow::bail!("{program} ended with {status}");
            }
            _ = terminate.recv() => {
                agent.kill().await.with_context(|| format!("stop {program}"))?;
                return Ok(());
            }
            _ = ticks.tick() => {
                if let Err(error) = mirror(managed, args, mount).await {
                    eprintln!("flotilla addon-agent: {}", crate::report::line(&error));
                }
            }
        }
    }
}

/// Writes each key of secret `<addon>-hub-kubeconfig` as a file of `dir` (renamed into place, so
/// a reader never sees half of one); returns the secret's names of its keys.
async fn mirror(managed: &Client, args: &AddonAgentArgs, dir: &Path) -> anyhow::Result<Vec<String>> {
    let name = format!("{}-hub-kubeconfig", args.addon);
    let secret = Api::<Secret>::namespaced(managed.clone(), &args.namespace)
        .get(&name)
        .await
        .with_context(|| format!("read secret {}/{name}", args.namespace))?;
    let mut keys = Vec::new();
    for (key, value) in secret.data.iter().flatten() {
        // A key is a file name in the volume, never a path.
        anyhow::ensure!(
            !key.is_empty() && !key.contains('/') && key != "." && key != "..",
            "secret {name} has key {key:?}, which is no file name"
        );
        let partial = dir.join(format!(".{key}.partial"));
        std::fs::write(&partial, &value.0).with_context(|| format!("write key {key} of secret {name}"))?;
        std::fs::rename(&partial, dir.join(key))
            .with_context(|| format!("move key {key} of secret {name} into place"))?;
        keys.push(key.clone());
    }
    Ok(keys)
}

/// One renewal on the hub with the add-on's own hub credential.
async fn renew_on_hub(managed: &Client, args: &AddonAgentArgs, period: Duration) -> anyhow::Result<()> {
    let name = format!("{}-hub-kubeconfig", args.addon);
    let mount = tempfile::tempdir().context("create a directory for the secret")?;
    let keys = mirror(managed, args, mount.path()).await?;
    let cluster = std::fs::read_to_string(mount.path().join(CLUSTER_NAME_KEY))
        .with_context(|| format!("secret {name} has no {CLUSTER_NAME_KEY}"))?;
    // Files the kubeconfig names must be keys of the secret, written beside it just now.
    let text = std::fs::read_to_string(mount.path().join(KUBECONFIG_KEY))
        .with_context(|| format!("secret {name} has no {KUBECONFIG_KEY}"))?;
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    flotilla_kube::kubeconfig::check_from_secret(
        &Kubeconfig::from_yaml(&text).with_context(|| format!("parse the kubeconfig of secret {name}"))?,
        &keys,
    )
    .with_context(|| format!("refuse the kubeconfig of secret {}/{name}", args.namespace))?;
    let hub = hub_client(&mount.path().join(KUBECONFIG_KEY))
        .await
        .with_context(|| format!("use the kubeconfig of secret {name}"))?;
    renew(&hub, cluster.trim(), &args.addon, period).await
}

/// A client from a kubeconfig file whose relative paths (`tls.crt`, `tls.key`) are beside it.
async fn hub_client(path: &Path) -> anyhow::Result<Client> {
    let kubeconfig = Kubeconfig::read_from(path).context("read kubeconfig")?;
    Ok(flotilla_registration::agent::kubeconfig::client_from_kubeconfig(
        kubeconfig,
        "add-on kubeconfig",
        None,
    )
    .await?)
}

/// Sets `renewTime` of Lease `name` in `namespace` to now, creating the lease if needed.
async fn renew(client: &Client, namespace: &str, name: &str, period: Duration) -> anyhow::Result<()> {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let now = MicroTime(Timestamp::now());
    match api
        .get_opt(name)
        .await
        .with_context(|| format!("read Lease {namespace}/{name}"))?
    {
        Some(mut lease) => {
            lease.spec.get_or_insert_with(Default::default).renew_time = Some(now);
            api.replace(name, &PostParams::default(), &lease)
                .await
                .with_context(|| format!("renew Lease {namespace}/{name}"))?;
        }
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    namespace: Some(namespace.to_owned()),
                    ..ObjectMeta::default()
                },
                spec: Some(k8s_openapi::api::coordination::v1::LeaseSpec {
                    holder_identity: Some(name.to_owned()),
                    lease_duration_seconds: i32::try_from(period.as_secs()).ok(),
                    renew_time: Some(now),
                    ..Default::default()
                }),
            };
            api.create(&PostParams::default(), &lease)
                .await
                .with_context(|| format!("create Lease {namespace}/{name}"))?;
        }
    }
    Ok(())
}
