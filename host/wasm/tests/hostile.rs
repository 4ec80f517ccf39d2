//! Hostile plugins through the real host: each is contained — the process survives, the call
//! ends (checked against a generous outer bound, never a timing assertion), the hook's fail-safe
//! result comes back, and the error names the fault kind.

mod common;

use common::{addon, agent_csr, cluster, ends_within, hang_bound, hostile_limits, load};
use flotilla_test_plugins as plugins;
use flotilla_wasm::types::{CsrDecision, HealthStatus};
use flotilla_wasm::{Error, Fault, Hook, Limits};

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
async fn unbounded_recursion_traps_cleanly_as_a_stack_overflow() {
    let limits = hostile_limits();
    let plugin = load("stack", plugins::HOSTILE_STACK, limits).await.unwrap();
    let err = ends_within(
        hang_bound(&limits),
        plugin.manifests(&cluster("cluster1"), &addon("stack"), &[]),
    )
    .await
    .unwrap_err();
    let Error::Trap { code, .. } = &err else {
        panic!("not a trap: {err}")
    };
    assert!(code.contains("stack overflow"), "{err}");
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
    assert_eq!(objects[0]["metadata"]["name"], "still-here");
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
    let seen = &objects[0]["data"];
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
async fn a_healthy_plugin_is_unaffected_by_hostile_ones_running_at_the_same_time() {
    let limits = hostile_limits();
    let healthy = load("helloworld", plugins::HELLOWORLD, Limits::default())
        .await
        .unwrap();
    let spinner = load("loop", plugins::HOSTILE_LOOP, limits).await.unwrap();
    let hog = load("memory", plugins::HOSTILE_MEMORY, limits).await.unwrap();
    let (c, a) = (cluster("cluster1"), addon("helloworld"));
    let expected = healthy.manifests(&c, &a, &[]).await.unwrap();

    let (spinner, hog, c_ref) = (&spinner, &hog, &c);
    let hostile = async {
        let calls = (0..4).map(|i| async move {
            let result = if i % 2 == 0 {
                spinner.manifests(c_ref, &addon("loop"), &[]).await
            } else {
                hog.manifests(c_ref, &addon("memory"), &[]).await
            };
            result.map(|_| ()).unwrap_err().fault()
        });
        futures::future::join_all(calls).await
    };
    let good = async {
        let calls = (0..16).map(|_| healthy.manifests(c_ref, &a, &[]));
        futures::future::join_all(calls).await
    };
    let (faults, results) = ends_within(hang_bound(&limits), async { tokio::join!(hostile, good) }).await;

    assert_eq!(
        faults,
        [Fault::Timeout, Fault::Memory, Fault::Timeout, Fault::Memory]
    );
    for result in results {
        assert_eq!(result.unwrap(), expected);
    }
}
