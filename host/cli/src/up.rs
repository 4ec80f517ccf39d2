//! `flotilla up`: reads the flags, decides from the state directory whether to reuse what
//! runs, clean up a stale run or build anew (what is built, and how: [`flotilla_localenv::up`]),
//! and prints the end state and what to type next.

use std::{path::Path, time::Duration};

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use flotilla_api::{
    addon::v1alpha1::ManagedClusterAddOn,
    cluster::{consts::managed_cluster as mc, v1::ManagedCluster},
    work::consts::manifest_work as mw,
};
use flotilla_localenv::{
    ports::Layout,
    processes,
    up::{
        self, ADDON, Environment, Found, HUB, Plan, Progress, StepFailed, addon_works, assess, read_env,
        status_of,
    },
};
use kube::{Api, Client};

use crate::cli::GlobalArgs;

#[derive(Debug, Args)]
pub struct UpArgs {
    /// How many managed clusters to start (named cluster1..N).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=20))]
    pub clusters: u16,
    /// Do not push, register and enable the helloworld add-on.
    #[arg(long)]
    pub no_addon: bool,
    /// The ecosystem add-ons to install on every cluster (comma-separated; `--addons ''` for
    /// none): cluster-proxy and managed-serviceaccount (together, the cluster gateway: kubectl
    /// through the hub to any cluster), resource-usage-collect (placement scores). Their agents
    /// run as pods, or as local processes with the same credentials without nodes.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "cluster-proxy,managed-serviceaccount,resource-usage-collect"
    )]
    pub addons: Vec<String>,
    /// First of the fixed loopback ports: hub base..base+4 (apiserver, etcd, etcd peer,
    /// registry, webhook), cluster i base+10i..base+10i+2.
    #[arg(long, default_value_t = 17400)]
    pub base_port: u16,
    /// Start no nodes: the hub, the klusterlets and stand-in add-on agents run as local
    /// processes (the fallback when the machine cannot run containers).
    #[arg(long)]
    pub no_nodes: bool,
    /// How long to wait for clusters, plugin and works to become ready.
    #[arg(long, default_value = "300s", value_parser = parse_seconds)]
    pub timeout: Duration,
}

/// The ecosystem add-ons named by `--addons`, each once; empty names are skipped.
fn ecosystem_of(names: &[String]) -> anyhow::Result<Vec<up::Ecosystem>> {
    let mut chosen = Vec::new();
    for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        let addon: up::Ecosystem = name.parse().map_err(|e: String| anyhow!("--addons: {e}"))?;
        if !chosen.contains(&addon) {
            chosen.push(addon);
        }
    }
    Ok(chosen)
}

/// `300s`, `5m` or a number of seconds.
fn parse_seconds(text: &str) -> Result<Duration, String> {
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let value: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 90s or 5m"))?;
    match unit {
        "" | "s" => Ok(Duration::from_secs(value)),
        "m" => Ok(Duration::from_secs(value * 60)),
        _ => Err(format!("{text:?} is not a duration like 90s or 5m")),
    }
}

/// Runs `flotilla up`.
pub async fn up(global: &GlobalArgs, args: &UpArgs) -> anyhow::Result<()> {
    // Listen for interrupts before anything starts, so none of them kills `up` before it has
    // stopped what it started.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listen for SIGTERM")?;
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("listen for Ctrl-C")?;

    let state = std::path::absolute(&global.state_dir)
        .with_context(|| format!("resolve {}", global.state_dir.display()))?;
    let clusters: Vec<String> = (1..=args.clusters).map(|i| format!("cluster{i}")).collect();
    let layout = Layout::new(args.base_port, args.clusters)?;

    let _lock = crate::down::lock(&state)?;
    let env = read_env(&state)?;
    let records = processes::read_all(&state)?;
    let running: Vec<(String, bool)> = records
        .iter()
        .map(|r| (r.name.clone(), processes::is_running(r)))
        .collect();
    match assess(env.as_ref().map(|e| e.complete), &running) {
        Found::Nothing => {}
        Found::Running => {
            let env = env.ok_or_else(|| anyhow!("environment record vanished"))?;
            let unhealthy = crate::status::unhealthy(&state, &env).await;
            if unhealthy.is_empty() {
                eprintln!(
                    "Flotilla is already up under {} ({} processes running); reusing it",
                    state.display(),
                    records.len()
                );
                let asked = (clusters.len(), !args.no_addon, args.base_port);
                let running = (env.clusters().len(), env.addon, env.base_port);
                let ecosystem_differs = ecosystem_of(&args.addons)? != env.ecosystem;
                if asked != running || ecosystem_differs {
                    let installed: Vec<String> = env.ecosystem.iter().map(ToString::to_string).collect();
                    eprintln!(
                        "note: it runs {} cluster(s), add-on {}, base port {}, add-ons [{}], not what was asked; \
                         `flotilla down` first to change that",
                        running.0,
                        if running.1 { "on" } else { "off" },
                        running.2,
                        installed.join(", ")
                    );
                }
                let client = hub_client(&env).await?;
                print_end_state(&client, &env).await?;
                print_next_steps(&env, &state);
                return Ok(());
            }
            eprintln!(
                "Flotilla under {} runs but is not healthy ({}); stopping it and starting again",
                state.display(),
                unhealthy.join("; ")
            );
            crate::down::teardown(&state)?;
        }
        Found::Stale(why) => {
            eprintln!(
                "found a stale state directory {} ({why}); stopping what it recorded and starting again",
                state.display()
            );
            crate::down::teardown(&state)?;
        }
    }

    // Every port must be free before anything starts: a clash found later would leave a
    // half-built environment to take down again.
    let busy = flotilla_localenv::ports::busy(&layout.all());
    if !busy.is_empty() {
        let list: Vec<String> = busy
            .iter()
            .map(|(what, port)| format!("{port} ({what})"))
            .collect();
        bail!(
            "port(s) needed by `flotilla up` already in use: {}. Another program listens there \
             (perhaps a `flotilla up` with another --state-dir); stop it, or choose other ports \
             with --base-port",
            list.join(", ")
        );
    }

    // A control plane of `flotilla controlplane up` under the same names would have its
    // directory cleared under its feet.
    for name in std::iter::once(HUB).chain(clusters.iter().map(String::as_str)) {
        let dir = state.join("controlplanes").join(name);
        if let Ok(cp) = flotilla_localenv::controlplane::read_state(&dir)
            && cp.pids.iter().any(|(_, pid)| processes::runs(*pid, &cp.binary))
        {
            bail!(
                "a control plane named {name:?} already runs under {} (from `flotilla controlplane up`); \
                 stop it with `flotilla controlplane down --name {name}`, or choose another --state-dir",
                state.display()
            );
        }
    }

    std::fs::create_dir_all(state.join("logs")).with_context(|| format!("create {}", state.display()))?;
    let exe = std::env::current_exe().context("find the flotilla binary")?;
    let ecosystem = ecosystem_of(&args.addons)?;
    let progress = Progress::new();
    let nodes = !args.no_nodes && up::nodes_possible(&progress).await;
    let plan = Plan {
        state: state.clone(),
        exe,
        layout,
        clusters,
        timeout: args.timeout,
        addon: !args.no_addon,
        nodes,
        ecosystem,
    };
    let outcome = tokio::select! {
        result = flotilla_localenv::up::run(&plan, &progress) => result,
        _ = terminate.recv() => Err(anyhow!("interrupted by SIGTERM")),
        _ = interrupt.recv() => Err(anyhow!("interrupted (Ctrl-C)")),
    };
    match outcome {
        Ok(env) => {
            eprintln!(
                "\nFlotilla is up after {:.1}s (state and logs in {})\n",
                progress.elapsed().as_secs_f64(),
                state.display()
            );
            let client = hub_client(&env).await?;
            print_end_state(&client, &env).await?;
            print_next_steps(&env, &state);
            Ok(())
        }
        Err(error) => {
            eprintln!("{}", render(&error, global.verbose));
            eprintln!("stopping what this `flotilla up` started …");
            match crate::down::teardown(&state) {
                Ok(stopped) => eprintln!("stopped {} process(es); nothing is left running", stopped.len()),
                Err(e) => eprintln!("could not stop everything: {e:#}; run `flotilla down`"),
            }
            Err(anyhow!("`flotilla up` did not finish; see the error above"))
        }
    }
}

/// A failed `up` for standard error: a failed step with its cause as every command reports
/// one, and the log to read.
fn render(error: &anyhow::Error, verbose: bool) -> String {
    match error.downcast_ref::<StepFailed>() {
        Some(failed) => {
            let cause = crate::report::render(&failed.cause, verbose);
            let cause = cause.strip_prefix("error: ").unwrap_or(&cause);
            let log = failed
                .log
                .as_ref()
                .map(|l| format!("\n  log: {}", l.display()))
                .unwrap_or_default();
            format!("error: step {:?} failed: {cause}{log}", failed.step)
        }
        None => crate::report::render(error, verbose),
    }
}

async fn hub_client(env: &Environment) -> anyhow::Result<Client> {
    let path = env
        .hub_kubeconfig()
        .ok_or_else(|| anyhow!("the environment record names no hub"))?;
    let yaml = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    Ok(flotilla_localenv::kubeconfig::client_from_yaml(&yaml).await?)
}

/// Prints clusters, add-ons and works with their conditions, read from the hub.
pub async fn print_end_state(client: &Client, env: &Environment) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut table = tabwriter::TabWriter::new(Vec::new()).padding(3);
    writeln!(table, "CLUSTER\tJOINED\tAVAILABLE")?;
    let clusters = Api::<ManagedCluster>::all(client.clone());
    for name in env.clusters() {
        let conds = clusters
            .get_opt(&name)
            .await?
            .and_then(|c| c.status)
            .and_then(|s| s.conditions)
            .unwrap_or_default();
        writeln!(
            table,
            "{name}\t{}\t{}",
            status_of(&conds, mc::CONDITION_JOINED),
            status_of(&conds, mc::CONDITION_AVAILABLE)
        )?;
    }
    if env.addon {
        writeln!(table, "\nADD-ON\tCLUSTER\tMANIFESTAPPLIED\tAVAILABLE")?;
        for cluster in env.clusters() {
            let addon = Api::<ManagedClusterAddOn>::namespaced(client.clone(), &cluster)
                .get_opt(ADDON)
                .await?;
            let conds = addon
                .and_then(|a| a.status)
                .map(|s| s.conditions)
                .unwrap_or_default();
            writeln!(
                table,
                "{ADDON}\t{cluster}\t{}\t{}",
                status_of(&conds, "ManifestApplied"),
                status_of(&conds, "Available")
            )?;
        }
        writeln!(table, "\nWORK\tCLUSTER\tAPPLIED\tAVAILABLE")?;
        for cluster in env.clusters() {
            for work in addon_works(client, &cluster).await? {
                let conds = work.status.map(|s| s.conditions).unwrap_or_default();
                writeln!(
                    table,
                    "{}\t{cluster}\t{}\t{}",
                    work.metadata.name.unwrap_or_default(),
                    status_of(&conds, mw::CONDITION_APPLIED),
                    status_of(&conds, mw::CONDITION_AVAILABLE)
                )?;
            }
        }
    }
    if !env.ecosystem.is_empty() {
        writeln!(table, "\nADD-ON\tCLUSTER\tAVAILABLE")?;
        for addon in &env.ecosystem {
            for cluster in env.clusters() {
                let conds = Api::<ManagedClusterAddOn>::namespaced(client.clone(), &cluster)
                    .get_opt(addon.addon())
                    .await?
                    .and_then(|a| a.status)
                    .map(|s| s.conditions)
                    .unwrap_or_default();
                writeln!(table, "{addon}\t{cluster}\t{}", status_of(&conds, "Available"))?;
            }
        }
    }
    table.flush()?;
    let text = String::from_utf8(table.into_inner()?)?;
    print!("{text}");
    Ok(())
}

fn print_next_steps(env: &Environment, state: &Path) {
    let kubeconfig = env
        .hub_kubeconfig()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let state_flag = if state == std::path::absolute(".flotilla").unwrap_or_default() {
        String::new()
    } else {
        format!(" --state-dir {}", state.display())
    };
    println!("\nNext, talk to the hub:");
    println!("  export KUBECONFIG={kubeconfig}");
    println!("  kubectl get managedclusters");
    // The control-plane binary carries a kubectl of the same version, for machines without one.
    if let Ok(hub) = flotilla_localenv::controlplane::read_state(&state.join("controlplanes").join(HUB)) {
        println!(
            "  # no kubectl? {} kubectl get managedclusters",
            hub.binary.display()
        );
    }
    println!("  flotilla get addons");
    let gateway = [up::Ecosystem::ClusterProxy, up::Ecosystem::ManagedServiceAccount];
    if let (true, Some(cluster)) = (
        gateway.iter().all(|a| env.ecosystem.contains(a)),
        env.clusters().first(),
    ) {
        println!("Reach a cluster's kube-apiserver through the hub (the cluster gateway):");
        println!(
            "  kubectl get --raw {}",
            flotilla_api::gateway::consts::proxy_path(cluster, "/healthz")
        );
    }
    println!("What runs, and stopping it:");
    println!("  flotilla status{state_flag}");
    println!("  flotilla down{state_flag}");
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[test]
    fn addons_are_named_once_each_and_an_unknown_one_is_refused_naming_the_known() {
        let names = |list: &[&str]| list.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            ecosystem_of(&names(&[
                "resource-usage-collect",
                " cluster-proxy",
                "resource-usage-collect"
            ]))
            .unwrap(),
            [up::Ecosystem::ResourceUsageCollect, up::Ecosystem::ClusterProxy]
        );
        assert!(ecosystem_of(&names(&[""])).unwrap().is_empty());
        let refused = ecosystem_of(&names(&["cluster-gateway"]))
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("\"cluster-gateway\"") && refused.contains("managed-serviceaccount"),
            "{refused}"
        );
    }

    #[rstest]
    #[case("300s", 300)]
    #[case("5m", 300)]
    #[case("42", 42)]
    fn timeouts_read_seconds_or_minutes(#[case] text: &str, #[case] seconds: u64) {
        assert_eq!(parse_seconds(text), Ok(Duration::from_secs(seconds)));
    }
}
