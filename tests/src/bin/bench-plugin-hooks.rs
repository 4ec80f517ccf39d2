//! Prints what a plugin hook costs: helloworld's `manifests` through the host runtime — cold
//! (compile + first call), warm (pre-instantiated component, fresh store per call) with the
//! pooling and the on-demand allocator — against the same Rust function compiled natively, in
//! the same run, and beside it a call that answers nothing (the sandbox's fixed cost per
//! call); calls per second on this machine's cores; memory per concurrent call; loading from
//! the compiled-artifact cache (hit) against compiling (miss); and, per fault kind of the
//! hostile plugins, how long a faulting call takes and by how much a timed-out call
//! overshoots its limit (call end − limit) with each interruption mechanism alone. Asserts
//! nothing.
//!
//! `cargo run --release -p flotilla-tests --bin bench-plugin-hooks -- [WARM_CALLS | faults]`

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use flotilla_addon_sdk::Addon as _;
use flotilla_wasm::types::{Addon, Cluster, KeyValue};
use flotilla_wasm::{
    AllocatorChoice, AllocatorKind, FaultPolicy, Interruption, Limits, Plugin, Runtime, RuntimeConfig,
};

fn cluster() -> Cluster {
    Cluster {
        name: "cluster1".into(),
        labels: vec![KeyValue {
            key: "cluster.open-cluster-management.io/clusterset".into(),
            value: "default".into(),
        }],
        annotations: Vec::new(),
        claims: Vec::new(),
        kubernetes_version: "v1.33.0".into(),
    }
}

fn addon() -> Addon {
    Addon {
        name: "helloworld".into(),
        install_namespace: "open-cluster-management-agent-addon".into(),
        annotations: Vec::new(),
    }
}

/// p50 and p99 of `samples` (sorted in place), in microseconds.
fn percentiles(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1e6
    };
    (at(0.50), at(0.99))
}

fn runtime(allocator: AllocatorChoice, cache_dir: Option<std::path::PathBuf>) -> anyhow::Result<Runtime> {
    Ok(Runtime::new(RuntimeConfig {
        allocator,
        cache_dir,
        ..RuntimeConfig::default()
    })?)
}

/// Resident memory of this process in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// The native baseline: the helloworld crate's `manifests`, serialized to the JSON strings the
/// component returns and parsed back as the host does.
fn native_call() -> usize {
    let c = flotilla_addon_sdk::Cluster::new("cluster1")
        .label("cluster.open-cluster-management.io/clusterset", "default")
        .kubernetes_version("v1.33.0");
    let a = flotilla_addon_sdk::AddOn::new("helloworld", "open-cluster-management-agent-addon");
    let objects = helloworld::HelloWorld::manifests(&c, &a, &[]).unwrap_or_default();
    let strings: Vec<String> = objects.iter().map(|o| o.to_string()).collect();
    let parsed: Vec<serde_json::Value> = strings
        .iter()
        .filter_map(|s| serde_json::from_str(s).ok())
        .collect();
    parsed.len()
}

/// `calls` timed `manifests` calls of `plugin`, each answering `objects` objects.
async fn warm_answering(plugin: &Plugin, calls: usize, objects: usize) -> Vec<Duration> {
    let (c, a) = (cluster(), addon());
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        let answer = plugin.manifests(&c, &a, &[]).await.expect("manifests");
        samples.push(t.elapsed());
        assert_eq!(answer.len(), objects);
    }
    samples
}

/// `calls` timed calls of helloworld's `manifests` (four objects).
async fn warm(plugin: &Plugin, calls: usize) -> Vec<Duration> {
    warm_answering(plugin, calls, 4).await
}

/// Calls per second with `concurrency` tasks for `duration`, and the peak extra resident memory
/// while they run.
async fn throughput(plugin: Arc<Plugin>, concurrency: usize, duration: Duration) -> (f64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let peak = Arc::new(AtomicU64::new(0));
    let idle = rss_kib();
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (plugin, stop, count) = (plugin.clone(), stop.clone(), count.clone());
            tokio::spawn(async move {
                let (c, a) = (cluster(), addon());
                while !stop.load(Ordering::Relaxed) {
                    plugin.manifests(&c, &a, &[]).await.expect("manifests");
                    count.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = started.elapsed();
    let _ = sampler.join();
    let per_sec = count.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64();
    (per_sec, peak.load(Ordering::Relaxed).saturating_sub(idle))
}

/// A faulting call of the hostile plugins: what it is, how to load it, and the hook to call.
struct FaultCase {
    label: &'static str,
    path: &'static str,
    interruption: Interruption,
    limits: Limits,
    hub_permissions: bool,
}

/// Per fault kind: p50 and max of the call's duration and of its overshoot past the timeout.
async fn fault_overshoot(runs: usize) -> anyhow::Result<()> {
    let timeout = Duration::from_millis(200);
    let base = Limits {
        timeout,
        memory_bytes: 32 << 20,
        ..Limits::default()
    };
    let epoch_only = Interruption {
        wall_clock_grace: Some(Duration::from_secs(3600)),
        ..Interruption::default()
    };
    let cases = [
        FaultCase {
            label: "timeout, epoch deadline alone (loop)",
            path: flotilla_test_plugins::HOSTILE_LOOP,
            interruption: epoch_only,
            limits: base,
            hub_permissions: false,
        },
        FaultCase {
            label: "timeout, wall clock alone, epochs off (loop)",
            path: flotilla_test_plugins::HOSTILE_LOOP,
            interruption: Interruption {
                epoch_deadline: false,
                ..Interruption::default()
            },
            limits: base,
            hub_permissions: false,
        },
        FaultCase {
            label: "timeout, parked in a host call (loop sleep)",
            path: flotilla_test_plugins::HOSTILE_LOOP,
            interruption: Interruption::default(),
            limits: base,
            hub_permissions: true,
        },
        FaultCase {
            label: "memory (32 MiB bomb)",
            path: flotilla_test_plugins::HOSTILE_MEMORY,
            interruption: Interruption::default(),
            limits: base,
            hub_permissions: false,
        },
        FaultCase {
            label: "trap (panic)",
            path: flotilla_test_plugins::HOSTILE_TRAP,
            interruption: Interruption::default(),
            limits: base,
            hub_permissions: false,
        },
        FaultCase {
            label: "stack overflow",
            path: flotilla_test_plugins::HOSTILE_STACK,
            interruption: Interruption::default(),
            limits: base,
            hub_permissions: false,
        },
        FaultCase {
            label: "output too large (5000 manifests)",
            path: flotilla_test_plugins::HOSTILE_OUTPUT,
            interruption: Interruption::default(),
            limits: base,
            hub_permissions: false,
        },
    ];
    println!(
        "\n{:<48} {:>10} {:>10} {:>14} {:>14}   (timeout {} ms, {runs} calls each)",
        "faulting call",
        "p50 ms",
        "max ms",
        "overshoot p50",
        "overshoot max",
        timeout.as_millis()
    );
    for case in cases {
        let rt = Runtime::new(RuntimeConfig {
            interruption: case.interruption,
            faults: FaultPolicy {
                threshold: u32::MAX,
                ..FaultPolicy::default()
            },
            ..RuntimeConfig::default()
        })?;
        let plugin = rt.load("hostile", std::fs::read(case.path)?, case.limits).await?;
        let (c, a) = (cluster(), addon());
        let mut samples = Vec::with_capacity(runs);
        let mut kind = String::new();
        for _ in 0..runs {
            let t = Instant::now();
            let result = if case.hub_permissions {
                plugin.hub_permissions(&c, &a).await.map(drop)
            } else {
                plugin.manifests(&c, &a, &[]).await.map(drop)
            };
            samples.push(t.elapsed());
            kind = result.map_or_else(|e| e.fault().to_string(), |_| "answered".to_owned());
        }
        samples.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (p50, max) = (samples[samples.len() / 2], samples[samples.len() - 1]);
        let overshoot = |d: Duration| ms(d) - ms(case.limits.timeout);
        let timed = kind == "timeout";
        println!(
            "{:<48} {:>10.1} {:>10.1} {:>14} {:>14}   ({kind})",
            case.label,
            ms(p50),
            ms(max),
            if timed {
                format!("{:.1} ms", overshoot(p50))
            } else {
                "-".into()
            },
            if timed {
                format!("{:.1} ms", overshoot(max))
            } else {
                "-".into()
            },
        );
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    // `faults`: only the faulting-call figures.
    if std::env::args().nth(1).as_deref() == Some("faults") {
        return fault_overshoot(20).await;
    }
    let warm_calls: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(2000);
    let bytes = std::fs::read(flotilla_test_plugins::HELLOWORLD)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "helloworld component: {} bytes; {cores} cores; {warm_calls} warm calls per configuration",
        bytes.len()
    );

    // Native baseline.
    for _ in 0..200 {
        native_call();
    }
    let mut native: Vec<Duration> = (0..warm_calls)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(native_call());
            t.elapsed()
        })
        .collect();
    let (native_p50, native_p99) = percentiles(&mut native);
    println!(
        "\n{:<44} {:>12} {:>12}",
        "manifests (helloworld)", "p50 µs", "p99 µs"
    );
    println!(
        "{:<44} {native_p50:>12.1} {native_p99:>12.1}",
        "native (same Rust, serde round trip)"
    );

    // Cold: a fresh runtime (no artifact cache), compile + describe + first call.
    let mut cold = Vec::new();
    let mut compile_only = Vec::new();
    for _ in 0..5 {
        let rt = runtime(AllocatorChoice::Auto, None)?;
        let t = Instant::now();
        let plugin = rt.load("helloworld", bytes.clone(), Limits::default()).await?;
        compile_only.push(t.elapsed());
        plugin.manifests(&cluster(), &addon(), &[]).await?;
        cold.push(t.elapsed());
    }
    let (cold_p50, cold_p99) = percentiles(&mut cold);
    let (load_p50, _) = percentiles(&mut compile_only);
    println!(
        "{:<44} {cold_p50:>12.0} {cold_p99:>12.0}   (load alone p50 {load_p50:.0} µs; 5 runs)",
        "cold: compile + describe + first call"
    );

    // Warm, per allocator.
    let mut loaded = Vec::new();
    for (label, choice) in [
        ("pooling", AllocatorChoice::Pooling),
        ("on-demand", AllocatorChoice::OnDemand),
    ] {
        let rt = match runtime(choice, None) {
            Ok(rt) => rt,
            Err(e) => {
                println!("{:<44} unavailable: {e}", format!("warm, {label}"));
                continue;
            }
        };
        let plugin = Arc::new(rt.load("helloworld", bytes.clone(), Limits::default()).await?);
        warm(&plugin, 50).await;
        let mut samples = warm(&plugin, warm_calls).await;
        let (p50, p99) = percentiles(&mut samples);
        println!(
            "{:<44} {p50:>12.1} {p99:>12.1}   ({:.1}× native at p50)",
            format!("warm, fresh store per call, {label}"),
            p50 / native_p50.max(0.001)
        );
        // The sandbox's own cost per call: the same SDK's component answering nothing, so
        // what is left of helloworld's call is its work, lifting and lowering its answer,
        // and the host's reading of it.
        let empty = std::fs::read(flotilla_test_plugins::HOSTILE_GRABBY)?;
        let empty = Arc::new(rt.load("empty", empty, Limits::default()).await?);
        warm_answering(&empty, 50, 0).await;
        let mut samples = warm_answering(&empty, warm_calls, 0).await;
        let (floor_p50, floor_p99) = percentiles(&mut samples);
        println!(
            "{:<44} {floor_p50:>12.1} {floor_p99:>12.1}   (helloworld less this: {:.1}× native)",
            format!("  of which an empty answer, {label}"),
            (p50 - floor_p50) / native_p50.max(0.001)
        );
        loaded.push((label, rt, plugin));
    }

    // Throughput and memory per concurrent call.
    println!(
        "\n{:<44} {:>12} {:>16}",
        "throughput (3 s each)", "calls/s", "extra RSS/call"
    );
    for (label, rt, plugin) in &loaded {
        let mut one = None;
        // 1, 2 and 8 calls at once, and loads of several per core.
        let mut levels = vec![1, 2, 8, cores, 4 * cores, 16 * cores];
        levels.sort_unstable();
        levels.dedup();
        for concurrency in levels {
            let (per_sec, extra_kib) = throughput(plugin.clone(), concurrency, Duration::from_secs(3)).await;
            let single = *one.get_or_insert(per_sec);
            println!(
                "{:<44} {per_sec:>12.0} {:>13} KiB   ({:.2}× one)",
                format!("{label}, {concurrency} concurrent"),
                extra_kib / concurrency as u64,
                per_sec / single.max(f64::MIN_POSITIVE)
            );
        }
        let kind = match rt.allocator() {
            AllocatorKind::Pooling => "pooling",
            AllocatorKind::OnDemand => "on-demand",
        };
        debug_assert_eq!(&kind, label);
    }

    // Compiled-artifact cache: miss (compile + write) vs hit (verify + deserialize).
    let dir = tempfile::tempdir()?;
    let (mut miss, mut hit) = (Vec::new(), Vec::new());
    for i in 0..3 {
        let cache = dir.path().join(format!("run-{i}"));
        let rt = runtime(AllocatorChoice::Auto, Some(cache.clone()))?;
        let t = Instant::now();
        rt.load("helloworld", bytes.clone(), Limits::default()).await?;
        miss.push(t.elapsed());
        let rt = runtime(AllocatorChoice::Auto, Some(cache))?;
        let t = Instant::now();
        rt.load("helloworld", bytes.clone(), Limits::default()).await?;
        hit.push(t.elapsed());
    }
    let (miss_p50, _) = percentiles(&mut miss);
    let (hit_p50, _) = percentiles(&mut hit);
    println!(
        "\nload (validate + compile or cache + describe): cache miss p50 {:.1} ms, cache hit p50 {:.1} ms ({:.0}× faster)",
        miss_p50 / 1000.0,
        hit_p50 / 1000.0,
        miss_p50 / hit_p50.max(0.001)
    );

    fault_overshoot(10).await?;
    Ok(())
}
