//! Hostile plugins through the real host: each is contained — the process survives, the call
//! ends (checked against a generous outer bound, never a timing assertion), the hook's fail-safe
//! result comes back, and the error names the fault kind.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{addon, agent_csr, cluster, ends_within, hang_bound, hostile_limits, load};
use flotilla_test_plugins as plugins;
use flotilla_wasm::types::{CsrDecision, HealthStatus};
use flotilla_wasm::{
    AllocatorChoice, Error, Fault, Hook, Interruption, Limits, Plugin, Runtime, RuntimeConfig, TimeoutBy,
};

/// A runtime of its own with `interruption`, sharing the suite's artifact cache.
fn runtime_with(interruption: Interruption) -> Runtime {
    let cache_dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-wasm-artifacts");
    Runtime::new(RuntimeConfig {
        cache_dir: Some(cache_dir),
        interruption,
        ..RuntimeConfig::default()
    })
    .expect("runtime builds")
}

async fn load_into(runtime: &Runtime, addon: &str, path: &str, limits: Limits) -> Plugin {
    let bytes = std::fs::read(path).expect("plugin component was built");
    runtime.load(addon, bytes, limits).await.expect("plugin loads")
}

#[tokio::test]
async fn an_infinite_loop_times_out_in_every_hook_with_fail_safe_results() {
    let limits = hostile_limits();
    let plugin = load("loop", plugins::HOSTILE_LOOP, limits).await.unwrap();
    let (c, a) = (cluster("cluster1"), addon("loop"));
    let bound = hang_bound(&limits);

    let err = ends_within(bound, plugin.manifests(&c, &a, &[]))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::CallTimeout {
                hook: Hook::Manifests,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.fault(), Fault::Timeout);

    let CsrDecision::Deny(reason) =
        ends_within(bound, plugin.approve_csr(&c, &a, &agent_csr("cluster1", "loop"))).await
    else {
        panic!("a timed-out approve-csr approved");
    };
    assert!(reason.contains("timeout"), "{reason}");

    let health = ends_within(bound, plugin.probe_health(&c, &a, &[])).await;
    assert_eq!(health.status, HealthStatus::Unknown);
    assert!(health.message.contains("timeout"), "{}", health.message);

    let metrics = common::runtime().metrics().clone();
    assert!(metrics.fault_count("loop", Hook::Manifests, Fault::Timeout) >= 1);
}

#[tokio::test]
async fn a_guest_parked_in_a_host_call_is_stopped_by_the_wall_clock_timeout() {
    // hub-permissions sleeps inside WASI `poll`, where epochs do not tick.
    let limits = hostile_limits();
    let plugin = load("loop", plugins::HOSTILE_LOOP, limits).await.unwrap();
    let err = ends_within(
        hang_bound(&limits),
        plugin.hub_permissions(&cluster("cluster1"), &addon("loop")),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::CallTimeout {
                hook: Hook::HubPermissions,
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn a_memory_bomb_hits_the_memory_limit() {
    let limits = Limits {
        memory_bytes: 32 << 20,
        ..hostile_limits()
    };
    let plugin = load("memory", plugins::HOSTILE_MEMORY, limits).await.unwrap();
    let (c, a) = (cluster("cluster1"), addon("memory"));
    let bound = hang_bound(&limits);

    let err = ends_within(bound, plugin.manifests(&c, &a, &[]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::MemoryExceeded { hook: Hook::Manifests, limit_bytes } if limit_bytes == 32 << 20),
        "{err}"
    );
    assert_eq!(err.fault(), Fault::Memory);

    let decision = ends_within(
        bound,
        plugin.approve_csr(&c, &a, &agent_csr("cluster1", "memory")),
    )
    .await;
    assert!(
        matches!(&decision, CsrDecision::Deny(r) if r.contains("memory")),
        "{decision:?}"
    );
    let health = ends_within(bound, plugin.probe_health(&c, &a, &[])).await;
    assert_eq!(health.status, HealthStatus::Unknown);
    assert!(health.message.contains("memory"), "{}", health.message);
}

#[tokio::test]
async fn traps_and_panics_are_reported_and_do_not_poison_the_next_call() {
    let limits = hostile_limits();
    let plugin = load("trap", plugins::HOSTILE_TRAP, limits).await.unwrap();
    let (c, a) = (cluster("cluster1"), addon("trap"));
    let bound = hang_bound(&limits);

    for _ in 0..3 {
        // Each call gets a fresh store, so the same trap is reported again rather than
        // "cannot enter component instance".
        let err = ends_within(bound, plugin.manifests(&c, &a, &[]))
            .await
            .unwrap_err();
        assert!(
            matches!(
                &err,
                Error::Trap {
                    hook: Hook::Manifests,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            !err.to_string().contains("cannot enter component instance"),
            "{err}"
        );
        // The panic message the guest printed is quoted, so a person can see why.
        assert!(
            err.to_string().contains("hostile-trap: panic in manifests"),
            "{err}"
        );
    }
    let err = ends_within(bound, plugin.hub_permissions(&c, &a))
        .await
        .unwrap_err();
    assert_eq!(err.fault(), Fault::Trap, "{err}");

    let decision = ends_within(bound, plugin.approve_csr(&c, &a, &agent_csr("cluster1", "trap"))).await;
    assert!(
        matches!(&decision, CsrDecision::Deny(r) if r.contains("trap")),
        "{decision:?}"
    );
    let health = ends_within(bound, plugin.probe_health(&c, &a, &[])).await;
    assert_eq!(health.status, HealthStatus::Unknown);
    assert!(health.message.contains("trap"), "{}", health.message);
}

#[tokio::test]
async fn unbounded_recursion_is_a_stack_overflow_with_the_fail_safe_result_in_every_hook() {
    let limits = hostile_limits();
    let plugin = load("stack", plugins::HOSTILE_STACK, limits).await.unwrap();
    let (c, a) = (cluster("cluster1"), addon("stack"));
    let bound = hang_bound(&limits);
    let err = ends_within(bound, plugin.manifests(&c, &a, &[]))
        .await
        .unwrap_err();
    let Error::Trap { code, .. } = &err else {
        panic!("not a trap: {err}")
    };
    assert!(code.contains("stack overflow"), "{err}");
    assert_eq!(err.fault(), Fault::StackOverflow);

    let err = ends_within(bound, plugin.hub_permissions(&c, &a))
        .await
        .unwrap_err();
    assert_eq!(err.fault(), Fault::StackOverflow, "{err}");
    // The guest would approve if its recursion ever ended: the fault denies.
    let decision = ends_within(bound, plugin.approve_csr(&c, &a, &agent_csr("cluster1", "stack"))).await;
    assert!(
        matches!(&decision, CsrDecision::Deny(r) if r.contains("stack_overflow")),
        "{decision:?}"
    );
    // The guest would say `available`: the fault says unknown.
    let health = ends_within(bound, plugin.probe_health(&c, &a, &[])).await;
    assert_eq!(health.status, HealthStatus::Unknown);
    assert!(health.message.contains("stack_overflow"), "{}", health.message);
}

#[tokio::test]
async fn a_trap_never_poisons_the_next_call_on_the_same_revision() {
    let limits = hostile_limits();
    let plugin = load("trap", plugins::HOSTILE_TRAP, limits).await.unwrap();
    let (trapping, answering, a) = (cluster("cluster1"), cluster("answers"), addon("trap"));
    let bound = hang_bound(&limits);
    for round in 0..5 {
        let err = ends_within(bound, plugin.manifests(&trapping, &a, &[]))
            .await
            .unwrap_err();
        assert_eq!(err.fault(), Fault::Trap, "round {round}: {err}");
        let objects = ends_within(bound, plugin.manifests(&answering, &a, &[]))
            .await
            .unwrap_or_else(|e| panic!("round {round}: the call after a trap failed: {e}"));
        assert_eq!(objects.len(), 1, "round {round}");
        assert_eq!(objects[0].name, "answered", "round {round}");
    }
}

/// The memory a process running the aliasing plugin may map writable, as a container's limit
/// would bound it: far below what copying the alias would take, far above what the host needs.
const ALIASED_MEMORY_LIMIT: u64 = 1 << 30;
/// Set in the child process that runs [`aliased_load_under_a_memory_limit`].
const ALIASED_CHILD: &str = "FLOTILLA_TEST_ALIASED_CHILD";

/// `describe` answering with 100 000 strings that alias one 8 MiB buffer (800 GB if every copy
/// were made) is refused at load as output too large, having copied no more than the call's
/// lift budget. The load runs in a child process under a 1 GiB data limit (RLIMIT_DATA): had
/// the host copied the answer, the allocation would have failed there and aborted the child.
#[test]
fn an_answer_whose_strings_alias_one_buffer_is_refused_before_it_is_copied() {
    if std::env::var_os(ALIASED_CHILD).is_some() {
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let child = std::process::Command::new(exe)
        .args([
            "--exact",
            "hostile::aliased_load_under_a_memory_limit",
            "--ignored",
            "--nocapture",
        ])
        .env(ALIASED_CHILD, "1")
        .output()
        .expect("run the child");
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&child.stdout),
        String::from_utf8_lossy(&child.stderr)
    );
    assert!(
        child.status.success(),
        "the child failed ({}):\n{output}",
        child.status
    );
    assert!(output.contains("1 passed"), "the child ran its test:\n{output}");
}

/// The load [`an_answer_whose_strings_alias_one_buffer_is_refused_before_it_is_copied`] runs in
/// its child process.
#[tokio::test]
#[ignore = "run in a child process under a memory limit by an_answer_whose_strings_alias_one_buffer_is_refused_before_it_is_copied"]
async fn aliased_load_under_a_memory_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_DATA).expect("read the data limit");
    setrlimit(Resource::RLIMIT_DATA, ALIASED_MEMORY_LIMIT.min(hard), hard).expect("lower the data limit");
    let limits = hostile_limits();
    let bytes = std::fs::read(plugins::HOSTILE_ALIASED).expect("plugin component was built");
    let loaded = ends_within(
        hang_bound(&limits),
        common::runtime().load("aliased", bytes, limits),
    )
    .await;
    let Err(error) = loaded else {
        panic!("the aliasing plugin loaded");
    };
    // A plugin whose describe fails is refused at load, naming why.
    assert_eq!(error.fault(), Fault::Validation, "{error}");
    let why = format!(
        "describe output too large: lifting it would copy more than {} bytes out of the guest",
        limits.lift_budget_bytes()
    );
    assert!(error.to_string().contains(&why), "{error}");
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let peak = status
        .lines()
        .find(|l| l.starts_with("VmHWM"))
        .unwrap_or("VmHWM unknown");
    println!("host peak memory while refusing the aliasing plugin: {peak}");
}

/// A plugin whose calls pile up (twenty endless loops at once) holds only its share of the call
/// slots: helloworld is answered while none of the loops has ended yet, instead of after the
/// first wave of them times out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_plugin_holds_only_its_share_of_the_call_slots() {
    let runtime = runtime_with_slots(8);
    let limits = Limits {
        timeout: Duration::from_secs(2),
        ..hostile_limits()
    };
    let looping = Arc::new(load_into(&runtime, "loop", plugins::HOSTILE_LOOP, limits).await);
    let helloworld = load_into(&runtime, "helloworld", plugins::HELLOWORLD, Limits::default()).await;
    let ended = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let calls: Vec<_> = (0..20)
        .map(|_| {
            let (looping, ended, asked) = (Arc::clone(&looping), Arc::clone(&ended), Arc::clone(&asked));
            tokio::spawn(async move {
                let (c, a) = (cluster("cluster1"), addon("loop"));
                let call = looping.manifests(&c, &a, &[]);
                asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let result = call.await;
                ended.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                result.map(drop).unwrap_err().fault()
            })
        })
        .collect();
    // Every loop asks for a slot before helloworld does (the queue is first come, first
    // served): all twenty calls made, then a moment for the last ones' first poll.
    while asked.load(std::sync::atomic::Ordering::SeqCst) < 20 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = std::time::Instant::now();
    let answer = ends_within(
        hang_bound(&limits),
        helloworld.manifests(&cluster("cluster1"), &addon("helloworld"), &[]),
    )
    .await
    .unwrap();
    let ended_before = ended.load(std::sync::atomic::Ordering::SeqCst);
    println!(
        "helloworld answered in {:?} beside 20 looping calls",
        started.elapsed()
    );
    assert!(!answer.is_empty());
    assert_eq!(ended_before, 0, "helloworld waited for looping calls to end");
    for call in calls {
        assert_eq!(
            ends_within(Duration::from_secs(120), call).await.unwrap(),
            Fault::Timeout
        );
    }
}

/// A plugin may not ask for more memory than its share of the budget.
#[tokio::test]
async fn a_plugin_asking_for_more_than_its_memory_share_is_refused() {
    let runtime = runtime_with_slots(8);
    let share = flotilla_wasm::DEFAULT_MEMORY_BUDGET_BYTES / flotilla_wasm::FAIR_SHARES;
    let bytes = std::fs::read(plugins::HELLOWORLD).unwrap();
    let refused = runtime
        .load(
            "helloworld",
            bytes,
            Limits {
                memory_bytes: share + (64 << 10),
                ..Limits::default()
            },
        )
        .await
        .map(drop)
        .unwrap_err();
    assert!(
        refused.to_string().contains(&format!("allowed 1..={share}")),
        "{refused}"
    );
}

/// A runtime of its own with `slots` call slots and the default memory budget.
fn runtime_with_slots(slots: u32) -> Runtime {
    let cache_dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-wasm-artifacts");
    Runtime::new(RuntimeConfig {
        cache_dir: Some(cache_dir),
        max_concurrent_calls: slots,
        faults: flotilla_wasm::FaultPolicy {
            threshold: 1000,
            ..flotilla_wasm::FaultPolicy::default()
        },
        ..RuntimeConfig::default()
    })
    .unwrap()
}

/// A cluster whose data makes the plugin fault (the trap plugin panics in `manifests` for any
/// cluster but `answers`) gets its own calls quarantined; the plugin keeps serving the others.
/// Faults on as many clusters as the threshold still quarantine the revision.
#[tokio::test]
async fn one_clusters_faults_quarantine_the_plugin_for_that_cluster_only() {
    let runtime = Runtime::new(RuntimeConfig {
        faults: flotilla_wasm::FaultPolicy {
            threshold: 3,
            ..flotilla_wasm::FaultPolicy::default()
        },
        ..RuntimeConfig::default()
    })
    .unwrap();
    let limits = hostile_limits();
    let plugin = load_into(&runtime, "trap", plugins::HOSTILE_TRAP, limits).await;
    let (poison, answering, a) = (cluster("poison"), cluster("answers"), addon("trap"));
    let bound = hang_bound(&limits);
    for round in 0..3 {
        let err = ends_within(bound, plugin.manifests(&poison, &a, &[]))
            .await
            .unwrap_err();
        assert_eq!(err.fault(), Fault::Trap, "round {round}: {err}");
    }
    let err = plugin.manifests(&poison, &a, &[]).await.unwrap_err();
    assert_eq!(err.fault(), Fault::Quarantined, "{err}");
    assert!(
        err.to_string().contains("quarantined for cluster poison"),
        "{err}"
    );
    let objects = ends_within(bound, plugin.manifests(&answering, &a, &[]))
        .await
        .expect("the other clusters are still served");
    assert_eq!(objects[0].name, "answered");
    assert!(
        plugin.faults().quarantined_until.is_none(),
        "the revision is not quarantined"
    );

    // Faults on three clusters in a row (no answer in between): the revision is quarantined
    // for all.
    for name in ["poison-2", "poison-3", "poison-4"] {
        let err = ends_within(bound, plugin.manifests(&cluster(name), &a, &[]))
            .await
            .unwrap_err();
        assert_eq!(err.fault(), Fault::Trap, "{name}: {err}");
    }
    let err = plugin.manifests(&answering, &a, &[]).await.unwrap_err();
    assert_eq!(err.fault(), Fault::Quarantined, "{err}");
    assert!(plugin.faults().quarantined_until.is_some());
}

#[tokio::test]
async fn the_epoch_deadline_alone_interrupts_a_loop_with_the_wall_clock_backstop_an_hour_away() {
    let runtime = runtime_with(Interruption {
        wall_clock_grace: Some(Duration::from_secs(3600)),
        ..Interruption::default()
    });
    let limits = hostile_limits();
    let plugin = load_into(&runtime, "loop", plugins::HOSTILE_LOOP, limits).await;
    let (c, a) = (cluster("cluster1"), addon("loop"));
    let err = ends_within(hang_bound(&limits), plugin.manifests(&c, &a, &[]))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::CallTimeout {
                by: TimeoutBy::EpochDeadline,
                ..
            }
        ),
        "{err}"
    );
    let health = ends_within(hang_bound(&limits), plugin.probe_health(&c, &a, &[])).await;
    assert!(health.message.contains("epoch deadline"), "{}", health.message);
}

#[tokio::test]
async fn the_wall_clock_backstop_alone_ends_a_loop_with_the_epoch_deadline_off() {
    let runtime = runtime_with(Interruption {
        epoch_deadline: false,
        ..Interruption::default()
    });
    let limits = hostile_limits();
    let plugin = load_into(&runtime, "loop", plugins::HOSTILE_LOOP, limits).await;
    let (c, a) = (cluster("cluster1"), addon("loop"));
    let err = ends_within(hang_bound(&limits), plugin.manifests(&c, &a, &[]))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::CallTimeout {
                by: TimeoutBy::WallClock,
                ..
            }
        ),
        "{err}"
    );
    let decision = ends_within(
        hang_bound(&limits),
        plugin.approve_csr(&c, &a, &agent_csr("cluster1", "loop")),
    )
    .await;
    assert!(
        matches!(&decision, CsrDecision::Deny(r) if r.contains("wall-clock")),
        "{decision:?}"
    );
}

/// Runs three looping plugins as separate tasks on the current (one-worker) runtime next to a
/// ticker task, and returns, per plugin, how many ticks the ticker made while that plugin's
/// call was in flight. No clock is compared: a tick either happened during a call or not.
async fn ticks_during_busy_calls(runtime: &Runtime) -> BTreeMap<usize, u32> {
    let limits = Limits {
        timeout: Duration::from_millis(500),
        ..hostile_limits()
    };
    let plugin = Arc::new(load_into(runtime, "loop", plugins::HOSTILE_LOOP, limits).await);
    // Plugin calls in flight, and the ticks each one saw.
    let in_flight: Arc<Mutex<BTreeMap<usize, u32>>> = Arc::default();
    let seen: Arc<Mutex<BTreeMap<usize, u32>>> = Arc::default();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ticker = {
        let (in_flight, done) = (Arc::clone(&in_flight), Arc::clone(&done));
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(Duration::from_millis(5));
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                interval.tick().await;
                for ticks in in_flight.lock().unwrap().values_mut() {
                    *ticks += 1;
                }
            }
        })
    };
    let calls: Vec<_> = (0..3)
        .map(|id| {
            let (plugin, in_flight, seen) = (Arc::clone(&plugin), Arc::clone(&in_flight), Arc::clone(&seen));
            tokio::spawn(async move {
                in_flight.lock().unwrap().insert(id, 0);
                let result = plugin.manifests(&cluster("cluster1"), &addon("loop"), &[]).await;
                let ticks = in_flight.lock().unwrap().remove(&id).unwrap_or_default();
                seen.lock().unwrap().insert(id, ticks);
                result.map(|_| ()).unwrap_err().fault()
            })
        })
        .collect();
    for call in calls {
        let fault = ends_within(hang_bound(&limits), call).await.unwrap();
        assert_eq!(fault, Fault::Timeout);
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    ends_within(Duration::from_secs(10), ticker).await.unwrap();
    seen.lock().unwrap().clone()
}

#[tokio::test(flavor = "current_thread")]
async fn a_busy_guest_never_starves_other_tasks_on_a_one_worker_runtime() {
    let ticks = ticks_during_busy_calls(&runtime_with(Interruption::default())).await;
    assert_eq!(ticks.len(), 3);
    for (call, n) in &ticks {
        assert!(*n > 0, "the ticker never ran during call {call}: {ticks:?}");
    }
}

/// The control for the test above: without the yielding epoch callback the same three calls
/// hold the only worker from start to end, and the ticker never runs during any of them.
#[tokio::test(flavor = "current_thread")]
async fn without_yielding_a_busy_guest_starves_the_ticker_which_the_test_above_detects() {
    let ticks = ticks_during_busy_calls(&runtime_with(Interruption {
        yield_every_tick: false,
        ..Interruption::default()
    }))
    .await;
    assert_eq!(ticks.len(), 3);
    assert!(ticks.values().all(|n| *n == 0), "{ticks:?}");
}

#[tokio::test]
async fn oversized_output_is_refused_by_count_and_by_bytes() {
    let limits = hostile_limits();
    let plugin = load("output", plugins::HOSTILE_OUTPUT, limits).await.unwrap();
    let (c, a) = (cluster("cluster1"), addon("output"));
    let bound = hang_bound(&limits);

    let err = ends_within(bound, plugin.manifests(&c, &a, &[]))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::OutputTooLarge {
                what: "manifests",
                actual: 5_000,
                limit: 1000,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.fault(), Fault::OutputTooLarge);

    let err = ends_within(bound, plugin.hub_permissions(&c, &a))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::OutputTooLarge { what: "bytes", .. }),
        "{err}"
    );

    let decision = ends_within(
        bound,
        plugin.approve_csr(&c, &a, &agent_csr("cluster1", "output")),
    )
    .await;
    let CsrDecision::Deny(reason) = decision else {
        panic!("approved")
    };
    assert!(
        reason.contains("output_too_large") && reason.len() < 4096,
        "{}",
        &reason[..reason.len().min(200)]
    );

    // A huge message with status `available` must not come through as available.
    let health = ends_within(bound, plugin.probe_health(&c, &a, &[])).await;
    assert_eq!(health.status, HealthStatus::Unknown);
}

#[tokio::test]
async fn hub_permissions_other_than_roles_and_role_bindings_are_invalid_output_naming_the_kind() {
    let limits = hostile_limits();
    let plugin = load("grabby", plugins::HOSTILE_GRABBY, limits).await.unwrap();
    let err = ends_within(
        hang_bound(&limits),
        plugin.hub_permissions(&cluster("cluster1"), &addon("grabby")),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidOutput {
                hook: Hook::HubPermissions,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("ClusterRole"), "{err}");
}

#[tokio::test]
async fn manifests_that_are_not_kubernetes_objects_are_invalid_output_naming_what_is_wrong() {
    let limits = hostile_limits();
    let plugin = load("malformed", plugins::HOSTILE_MALFORMED, limits)
        .await
        .unwrap();
    let (c, bound) = (cluster("cluster1"), hang_bound(&limits));
    // The plugin picks its answer by the add-on's name.
    for (name, reason) in [
        ("m-not-json", "manifest 0 is not JSON"),
        ("m-no-kind", "manifest 0 has no kind"),
        ("m-no-name", "manifest 0 has no metadata.name"),
        ("m-array", "manifest 0 is not a JSON object"),
    ] {
        let err = ends_within(bound, plugin.manifests(&c, &addon(name), &[]))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidOutput {
                    hook: Hook::Manifests,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(err.fault(), Fault::InvalidOutput);
        assert!(err.to_string().contains(reason), "{name}: {err}");
    }
}

#[tokio::test]
async fn a_log_flood_is_bounded_and_the_answer_still_arrives() {
    let limits = hostile_limits();
    let plugin = load(
        "log-flood",
        plugins::HOSTILE_LOG_FLOOD,
        Limits {
            timeout: std::time::Duration::from_secs(5),
            ..limits
        },
    )
    .await
    .unwrap();
    let objects = ends_within(
        hang_bound(&limits),
        plugin.manifests(&cluster("cluster1"), &addon("log-flood"), &[]),
    )
    .await
    .unwrap();
    assert_eq!(objects.len(), 1);
    assert_eq!(objects[0].name, "still-here");
    let text = common::runtime().render_metrics();
    let dropped = text
        .lines()
        .find(|l| l.starts_with("flotilla_plugin_log_lines_dropped_total{addon=\"log-flood\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse::<f64>().ok())
        .unwrap_or_default();
    assert!(
        dropped >= 19_000.0,
        "log lines over the budget are dropped and counted: {dropped}"
    );
}

#[tokio::test]
async fn wasi_grants_nothing_no_files_environment_arguments_or_network() {
    let plugin = load("wasi", plugins::HOSTILE_WASI, hostile_limits())
        .await
        .unwrap();
    let objects = plugin
        .manifests(&cluster("cluster1"), &addon("wasi"), &[])
        .await
        .unwrap();
    let seen = &objects[0].object["data"];
    for probe in [
        "read-dir-root",
        "read-passwd",
        "create-file",
        "read-dir-cwd",
        "tcp-connect",
        "udp-bind",
        "dns-lookup",
    ] {
        let outcome = seen[probe].as_str().unwrap_or_default();
        assert!(outcome.starts_with("err:"), "{probe} got through: {outcome}");
    }
    assert_eq!(seen["env-count"], "0");
    assert_eq!(seen["args-count"], "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_plugin_is_unaffected_by_every_hostile_plugin_running_at_the_same_time() {
    let limits = hostile_limits();
    let healthy = load("helloworld", plugins::HELLOWORLD, Limits::default())
        .await
        .unwrap();
    let hostile: [(&str, &str, Option<Fault>); 7] = [
        ("loop", plugins::HOSTILE_LOOP, Some(Fault::Timeout)),
        ("memory", plugins::HOSTILE_MEMORY, Some(Fault::Memory)),
        ("trap", plugins::HOSTILE_TRAP, Some(Fault::Trap)),
        ("stack", plugins::HOSTILE_STACK, Some(Fault::StackOverflow)),
        ("output", plugins::HOSTILE_OUTPUT, Some(Fault::OutputTooLarge)),
        // These two answer: the flood is bounded, WASI grants nothing.
        ("log-flood", plugins::HOSTILE_LOG_FLOOD, None),
        ("wasi", plugins::HOSTILE_WASI, None),
    ];
    let mut loaded = Vec::new();
    for (name, path, fault) in hostile {
        let limits = Limits {
            memory_bytes: 32 << 20,
            // Only the loop needs the timeout; the others end by their own fault, however slowly
            // a loaded machine runs them.
            timeout: if name == "loop" {
                limits.timeout
            } else {
                Duration::from_secs(10)
            },
            ..limits
        };
        loaded.push((name, load(name, path, limits).await.unwrap(), fault));
    }
    let (c, a) = (cluster("cluster1"), addon("helloworld"));
    let expected = healthy.manifests(&c, &a, &[]).await.unwrap();

    let c_ref = &c;
    let hostile = async {
        let calls = loaded.iter().flat_map(|(name, plugin, fault)| {
            (0..2).map(move |_| async move {
                let outcome = plugin.manifests(c_ref, &addon(name), &[]).await;
                (*name, outcome.map(|_| ()).err().map(|e| e.fault()), *fault)
            })
        });
        futures::future::join_all(calls).await
    };
    let good = async {
        let calls = (0..16).map(|_| healthy.manifests(c_ref, &a, &[]));
        futures::future::join_all(calls).await
    };
    let (outcomes, results) =
        ends_within(hang_bound(&limits) * 2, async { tokio::join!(hostile, good) }).await;

    for (name, got, want) in outcomes {
        assert_eq!(got, want, "{name}");
    }
    for result in results {
        assert_eq!(result.unwrap(), expected);
    }
}

#[tokio::test]
async fn a_customized_plugin_whose_probe_health_traps_is_unknown_naming_the_fault() {
    let limits = hostile_limits();
    let plugin = load("probe-trap", plugins::HOSTILE_PROBE_TRAP, limits)
        .await
        .unwrap();
    assert!(
        matches!(
            plugin.options().health,
            flotilla_wasm::types::HealthMode::Customized(_)
        ),
        "describe answers with a customized prober"
    );
    let (c, a) = (cluster("cluster1"), addon("probe-trap"));
    let health = ends_within(hang_bound(&limits), plugin.probe_health(&c, &a, &[])).await;
    assert_eq!(health.status, HealthStatus::Unknown);
    assert!(health.message.contains("trap"), "{}", health.message);
    assert!(
        health.message.contains("probe-health panics"),
        "{}",
        health.message
    );
}

#[tokio::test]
async fn no_call_finds_what_an_earlier_call_left_in_memory() {
    let cache_dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-wasm-artifacts");
    for allocator in [AllocatorChoice::Pooling, AllocatorChoice::OnDemand] {
        // One call slot: every call reuses the slot, and the memory, of the one before it.
        let runtime = Runtime::new(RuntimeConfig {
            allocator,
            max_concurrent_calls: 1,
            cache_dir: Some(cache_dir.clone()),
            ..RuntimeConfig::default()
        })
        .expect("runtime builds");
        let plugin = load_into(&runtime, "snoop", plugins::HOSTILE_SNOOP, hostile_limits()).await;
        let bound = hang_bound(&hostile_limits());
        for tenant in ["tenant-a-secret", "tenant-b", "tenant-c"] {
            let answer = ends_within(bound, plugin.manifests(&cluster(tenant), &addon("snoop"), &[]))
                .await
                .expect("snoop answers");
            let data = &answer[0].object["data"];
            assert_eq!(data["zeroed"], "", "{allocator:?}: {tenant}'s call found {data}");
            assert_eq!(
                data["initialised"], "as-shipped......",
                "{allocator:?}: {tenant}'s call found {data}"
            );
        }
    }
}
