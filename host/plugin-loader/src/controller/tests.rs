//! Unit tests of the pure parts: status from an outcome, backoff, limits mapping. Behaviour
//! against a real API server, registry and plugins is in `host/wasm/tests/controller_*.rs`.

use flotilla_api::plugins::v1alpha1::{
    AddOnPlugin, AddOnPluginSpec, ConfigMapSource, PluginLimits, PluginSource,
};
use flotilla_core::conditions::find;
use k8s_openapi::jiff::Timestamp;

use super::reconcile::limits_of;
use super::status::{Outcome, desired_status};
use crate::FetchError;

fn plugin(generation: i64) -> AddOnPlugin {
    let mut p = AddOnPlugin::new(
        "hello",
        AddOnPluginSpec {
            source: PluginSource {
                config_map: Some(ConfigMapSource {
                    namespace: "ns".into(),
                    name: "cm".into(),
                    key: "plugin.wasm".into(),
                }),
                oci: None,
            },
            ..AddOnPluginSpec::default()
        },
    );
    p.metadata.generation = Some(generation);
    p
}

fn reason_of(status: &flotilla_api::plugins::v1alpha1::AddOnPluginStatus, type_: &str) -> (String, String) {
    let c = find(&status.conditions, type_).expect("condition set");
    (c.status.clone(), c.reason.clone())
}

#[test]
fn a_failed_fetch_with_nothing_serving_is_not_ready_and_degraded() {
    let outcome = Outcome::FetchFailed(FetchError::RegistryUnreachable {
        registry: "127.0.0.1:1".into(),
        message: "connection refused".into(),
    });
    let status = desired_status(&plugin(3), &outcome, None, Timestamp::UNIX_EPOCH);
    assert_eq!(status.observed_generation, Some(3));
    assert_eq!(status.digest, None);
    assert_eq!(
        reason_of(&status, "Fetched"),
        ("False".into(), "RegistryUnreachable".into())
    );
    assert_eq!(
        reason_of(&status, "Validated"),
        ("Unknown".into(), "FetchFailed".into())
    );
    assert_eq!(reason_of(&status, "Ready"), ("False".into(), "NotFetched".into()));
    assert_eq!(
        reason_of(&status, "Degraded"),
        ("True".into(), "RevisionRejected".into())
    );
    let degraded = find(&status.conditions, "Degraded").unwrap();
    assert!(
        degraded.message.contains("no revision is serving"),
        "{}",
        degraded.message
    );
}

#[test]
fn recomputing_the_same_outcome_changes_nothing_so_no_status_write_happens() {
    let outcome = || {
        Outcome::FetchFailed(FetchError::ConfigMapNotFound {
            namespace: "ns".into(),
            name: "cm".into(),
        })
    };
    let mut p = plugin(1);
    let first = desired_status(&p, &outcome(), None, Timestamp::UNIX_EPOCH);
    p.status = Some(first.clone());
    let later = Timestamp::UNIX_EPOCH + std::time::Duration::from_secs(60);
    assert_eq!(desired_status(&p, &outcome(), None, later), first);
}

#[test]
fn an_add_on_name_conflict_names_the_owner() {
    let outcome = Outcome::Conflict {
        owner: "first".into(),
    };
    let status = desired_status(&plugin(1), &outcome, None, Timestamp::UNIX_EPOCH);
    let ready = find(&status.conditions, "Ready").unwrap();
    assert_eq!(ready.reason, "AddOnNameConflict");
    assert!(ready.message.contains("first"), "{}", ready.message);
}

#[test]
fn spec_limits_map_to_runtime_limits() {
    let mut p = plugin(1);
    p.spec.limits = PluginLimits {
        timeout_millis: 250,
        memory_mib: 16,
        max_output_bytes: 4096,
    };
    let l = limits_of(&p);
    assert_eq!(l.timeout, std::time::Duration::from_millis(250));
    assert_eq!(l.memory_bytes, 16 << 20);
    assert_eq!(l.max_output_bytes, 4096);
    assert_eq!(limits_of(&plugin(1)), crate::Limits::default());
}

// === runtime faults in status ===

use std::time::{Duration, SystemTime};

use flotilla_api::plugins::v1alpha1::AddOnPluginStatus;
use flotilla_core::conditions::{NewCondition, set};
use flotilla_core::plugin_faults::{Fault, FaultCount, FaultSummary};

use super::status::apply_faults;

/// A status as the reconcile leaves it when the newest revision serves, or when it was rejected.
fn serving_status(degraded: (&str, &str)) -> AddOnPluginStatus {
    let mut status = AddOnPluginStatus {
        digest: Some("sha256:aa".into()),
        ..AddOnPluginStatus::default()
    };
    set(
        &mut status.conditions,
        NewCondition {
            type_: "Degraded",
            status: degraded.0,
            reason: degraded.1,
            message: String::new(),
            observed_generation: Some(1),
        },
        Timestamp::UNIX_EPOCH,
    );
    status
}

fn summary(quarantined: bool) -> FaultSummary {
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    FaultSummary {
        counts: vec![FaultCount {
            hook: "probe-health",
            kind: "stack_overflow",
            count: 5,
        }],
        last: Some(Fault {
            hook: "probe-health",
            kind: "stack_overflow",
            message: "call stack exhausted".into(),
            at,
        }),
        consecutive: 5,
        quarantined_until: quarantined.then(|| at + Duration::from_secs(30)),
        quarantines: u32::from(quarantined),
        next_change: None,
    }
}

#[rstest::rstest]
#[case::faulting(false, "ProbeHealthStackOverflow", false)]
#[case::quarantined(true, "ProbeHealthStackOverflow", true)]
fn faults_make_degraded_true_with_the_hook_and_kind_as_reason(
    #[case] quarantined: bool,
    #[case] reason: &str,
    #[case] says_until: bool,
) {
    let mut status = serving_status(("False", "AsExpected"));
    apply_faults(
        &mut status,
        Some(&summary(quarantined)),
        300,
        Some(1),
        Timestamp::UNIX_EPOCH,
    );
    assert_eq!(reason_of(&status, "Degraded"), ("True".into(), reason.into()));
    let message = &find(&status.conditions, "Degraded").unwrap().message;
    assert!(message.contains("call stack exhausted"), "{message}");
    assert!(message.contains("probe-health stack_overflow×5"), "{message}");
    assert_eq!(
        message.contains("quarantined until 1970-01-01T00:17:10Z"),
        says_until,
        "{message}"
    );
    let faults = status.faults.unwrap();
    assert_eq!((faults.window_seconds, faults.consecutive), (300, 5));
    assert_eq!(faults.quarantined_until.is_some(), quarantined);
}

#[test]
fn a_quiet_window_clears_a_fault_degraded_but_never_a_rejected_revision() {
    let mut status = serving_status(("True", "ManifestsTimeout"));
    status.faults = Some(Default::default());
    apply_faults(
        &mut status,
        Some(&FaultSummary::default()),
        300,
        Some(1),
        Timestamp::UNIX_EPOCH,
    );
    assert_eq!(
        reason_of(&status, "Degraded"),
        ("False".into(), "AsExpected".into())
    );
    assert!(status.faults.is_none());

    let mut status = serving_status(("True", "RevisionRejected"));
    apply_faults(
        &mut status,
        Some(&summary(true)),
        300,
        Some(1),
        Timestamp::UNIX_EPOCH,
    );
    assert_eq!(
        reason_of(&status, "Degraded"),
        ("True".into(), "RevisionRejected".into()),
        "the rejected newer revision is the more urgent news"
    );
    assert!(status.faults.is_some(), "the faults are still reported");
}
