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
