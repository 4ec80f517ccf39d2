//! Prints the time from `flotilla addon enable` to `Available` on two clusters, through the
//! real path: the hub's add-on manager, the plugin, the add-on CSR approved and signed, the
//! klusterlets writing the add-on credential and applying the works, and the stand-in agents
//! renewing their leases with that credential. Asserts nothing.
//!
//! It runs `flotilla up` (two clusters, helloworld; reused when already up in the state
//! directory), then ROUNDS times disables helloworld, waits until it is gone, enables it and
//! records when each milestone is reached on both clusters. The stand-in agents renew every
//! 10 s, so the last step includes up to one renewal period of waiting: the figures before it
//! are the product's own.
//!
//! `cargo build --release -p flotilla && cargo run --release -p flotilla-tests --bin bench-addon-enable -- [ROUNDS] [BASE_PORT]`
//! (defaults 3 and 27400; the environment is left running: `flotilla down --state-dir …`).

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use flotilla_api::{addon::v1alpha1::ManagedClusterAddOn, work::v1::ManifestWork};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client,
    api::ListParams,
    config::{KubeConfigOptions, Kubeconfig},
};

const ADDON: &str = "helloworld";
const CLUSTERS: [&str; 2] = ["cluster1", "cluster2"];
/// Where the klusterlet writes the add-on's hub credential (OCM's default install namespace).
const ADDON_NAMESPACE: &str = "open-cluster-management-agent-addon";

/// The milestones, in the order they are reached.
const MILESTONES: [&str; 5] = [
    "ManagedClusterAddOn created",
    "registrations set",
    "credential on the cluster",
    "works Applied",
    "Available",
];

async fn client(path: &Path) -> anyhow::Result<Client> {
    let kubeconfig = Kubeconfig::read_from(path).with_context(|| format!("read {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

fn flotilla(exe: &Path, state: &Path, kubeconfig: Option<&Path>, args: &[&str]) -> anyhow::Result<()> {
    let mut command = Command::new(exe);
    command.args(args).arg("--state-dir").arg(state);
    if let Some(kubeconfig) = kubeconfig {
        command.arg("--kubeconfig").arg(kubeconfig);
    }
    let out = command
        .output()
        .with_context(|| format!("run flotilla {args:?}"))?;
    if !out.status.success() {
        bail!("flotilla {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// How many milestones `cluster` has reached (0..=5).
async fn reached(hub: &Client, managed: &Client, cluster: &str) -> anyhow::Result<usize> {
    let Some(addon) = Api::<ManagedClusterAddOn>::namespaced(hub.clone(), cluster)
        .get_opt(ADDON)
        .await?
    else {
        return Ok(0);
    };
    let status = addon.status.unwrap_or_default();
    if status.registrations.is_empty() {
        return Ok(1);
    }
    let secret = format!("{ADDON}-hub-kubeconfig");
    if Api::<Secret>::namespaced(managed.clone(), ADDON_NAMESPACE)
        .get_opt(&secret)
        .await?
        .is_none()
    {
        return Ok(2);
    }
    let works = Api::<ManifestWork>::namespaced(hub.clone(), cluster)
        .list(&ListParams::default().labels(&format!("open-cluster-management.io/addon-name={ADDON}")))
        .await?;
    let applied = !works.items.is_empty()
        && works.items.iter().all(|w| {
            w.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Applied" && c.status == "True")
            })
        });
    if !applied {
        return Ok(3);
    }
    let available = status
        .conditions
        .iter()
        .any(|c| c.type_ == "Available" && c.status == "True");
    Ok(if available { 5 } else { 4 })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(3);
    let base_port: u16 = std::env::args()
        .nth(2)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(27400);
    let exe = std::env::current_exe()?.with_file_name("flotilla");
    if !exe.is_file() {
        bail!(
            "{} is missing: build it first with the same profile (cargo build --release -p flotilla)",
            exe.display()
        );
    }
    let state: PathBuf = std::env::temp_dir().join(format!("flotilla-bench-addon-enable-{base_port}"));
    let started = Instant::now();
    flotilla(&exe, &state, None, &["up", "--base-port", &base_port.to_string()])?;
    println!(
        "up (two clusters, helloworld Available): {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let cp = state.join("controlplanes");
    let hub_kubeconfig = cp.join("hub/pki/admin.kubeconfig");
    let hub = client(&hub_kubeconfig).await?;
    let mut managed = Vec::new();
    for cluster in CLUSTERS {
        managed.push(client(&cp.join(cluster).join("pki/admin.kubeconfig")).await?);
    }
    let names = CLUSTERS.join(",");
    let mut table: Vec<[f64; 5]> = Vec::new();
    for round in 1..=rounds {
        flotilla(
            &exe,
            &state,
            Some(&hub_kubeconfig),
            &["addon", "disable", "--names", ADDON, "--clusters", &names],
        )?;
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let mut gone = true;
            for (cluster, managed) in CLUSTERS.iter().zip(&managed) {
                gone &= reached(&hub, managed, cluster).await? == 0;
            }
            if gone {
                break;
            }
            if Instant::now() > deadline {
                bail!("round {round}: {ADDON} still present 300 s after disable");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // The credentials of the previous round go too; wait so they are not counted as new.
        for managed in &managed {
            let secrets = Api::<Secret>::namespaced(managed.clone(), ADDON_NAMESPACE);
            while secrets
                .get_opt(&format!("{ADDON}-hub-kubeconfig"))
                .await?
                .is_some()
            {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }

        let start = Instant::now();
        flotilla(
            &exe,
            &state,
            Some(&hub_kubeconfig),
            &["addon", "enable", "--names", ADDON, "--clusters", &names],
        )?;
        let mut times = [f64::NAN; 5];
        loop {
            let mut least = 5;
            for (cluster, managed) in CLUSTERS.iter().zip(&managed) {
                least = least.min(reached(&hub, managed, cluster).await?);
            }
            for time in times.iter_mut().take(least) {
                if time.is_nan() {
                    *time = start.elapsed().as_secs_f64();
                }
            }
            if least == 5 {
                break;
            }
            if start.elapsed() > Duration::from_secs(300) {
                bail!("round {round}: not Available on both clusters 300 s after enable");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        println!(
            "round {round}: Available on both clusters {:.2} s after enable",
            times[4]
        );
        table.push(times);
    }

    println!("\nseconds after `addon enable`, both clusters (median of {rounds} rounds):");
    for (i, milestone) in MILESTONES.iter().enumerate() {
        let mut column: Vec<f64> = table.iter().map(|row| row[i]).collect();
        column.sort_by(f64::total_cmp);
        let median = column.get(column.len() / 2).copied().unwrap_or(f64::NAN);
        println!("  {milestone:<28} {median:>6.2}");
    }
    println!(
        "\nthe environment stays up: flotilla down --state-dir {}",
        state.display()
    );
    Ok(())
}
