//! Prints how long one local control plane takes to start, phase by phase, and how much
//! memory its processes use once up. The binary build is done (or found cached) first and
//! not counted.
//!
//! `cargo run --release -p flotilla-tests --bin bench-controlplane-startup -- [RUNS]`

use std::time::{Duration, Instant};

use flotilla_testing::{ControlPlane, binary::controlplane_binary};

/// Resident memory of a process in KiB, from /proc.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(5);
    let build = Instant::now();
    let binary = tokio::task::spawn_blocking(controlplane_binary).await??;
    println!(
        "control-plane binary: {} (ready in {:.1?})",
        binary.display(),
        build.elapsed()
    );

    let mut totals = Vec::new();
    for run in 1..=runs {
        let started = Instant::now();
        let cp = ControlPlane::start(format!("bench-{run}")).await?;
        let total = started.elapsed();
        let phases: Vec<String> = cp
            .startup_timings()
            .iter()
            .map(|(phase, at)| format!("{phase} {:.2}s", at.as_secs_f64()))
            .collect();
        let rss: u64 = cp.pids().iter().map(|pid| rss_kib(*pid)).sum();
        println!(
            "run {run}: ready in {:.2}s ({}); resident memory {} MiB",
            total.as_secs_f64(),
            phases.join(", "),
            rss / 1024
        );
        totals.push(total);
    }
    totals.sort();
    let median = totals[totals.len() / 2];
    let sum: Duration = totals.iter().sum();
    println!(
        "start-up over {runs} runs: min {:.2}s, median {:.2}s, max {:.2}s, mean {:.2}s",
        totals[0].as_secs_f64(),
        median.as_secs_f64(),
        totals[totals.len() - 1].as_secs_f64(),
        sum.as_secs_f64() / runs as f64
    );
    Ok(())
}
