//! Golden differential test of the rollout engine: every case in `tests/golden/rollout.json` was
//! answered by OCM's own rollout handler (sdk-go `RolloutHandler.GetRolloutCluster`, run by the
//! generator named in the file); the engine must give the same answer. Lists are compared as
//! sets keyed by cluster name, as OCM's own tests compare them.

use std::collections::BTreeMap;

use flotilla_api::cluster::v1alpha1::RolloutStrategy;
use flotilla_core::rollout::{ClusterGroups, ClusterState, ClusterStatus, GroupKey, Rollout, plan};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::Deserialize;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/rollout.json");

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Fixture {
    seed: i64,
    ocm_commit: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Case {
    name: String,
    now: Time,
    /// Kept raw: a type outside the CRD's enum (which the API server would refuse) does not
    /// parse into the typed strategy, and counts as refused.
    strategy: serde_json::Value,
    #[serde(default)]
    decision_groups: Vec<DecisionGroup>,
    #[serde(default)]
    existing_cluster_status: Option<Vec<Status>>,
    expected: Expected,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DecisionGroup {
    #[serde(default)]
    group_index: i32,
    #[serde(default)]
    group_name: String,
    #[serde(default)]
    clusters: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Key {
    #[serde(default)]
    group_index: i32,
    #[serde(default)]
    group_name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    cluster_name: String,
    status: String,
    #[serde(default)]
    group_key: Option<Key>,
    #[serde(default)]
    last_transition_time: Option<Time>,
    #[serde(default, alias = "recheckTime")]
    time_out_time: Option<Time>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Expected {
    #[serde(default)]
    clusters_to_rollout: Option<Vec<Status>>,
    #[serde(default)]
    clusters_time_out: Option<Vec<Status>>,
    #[serde(default)]
    clusters_removed: Option<Vec<Status>>,
    #[serde(default)]
    max_failure_breach: bool,
    #[serde(default)]
    recheck_after: Option<String>,
    /// Set when OCM answered with an error.
    #[serde(default)]
    error: Option<String>,
}

/// A comparable view of one cluster's entry: state, group, times.
type Entry = (String, (i32, String), Option<Timestamp>, Option<Timestamp>);

fn expected_entries(list: &Option<Vec<Status>>) -> BTreeMap<String, Entry> {
    list.iter()
        .flatten()
        .map(|s| {
            let key = s
                .group_key
                .as_ref()
                .map(|k| (k.group_index, k.group_name.clone()))
                .unwrap_or_default();
            (
                s.cluster_name.clone(),
                (
                    s.status.clone(),
                    key,
                    s.last_transition_time.as_ref().map(|t| t.0),
                    s.time_out_time.as_ref().map(|t| t.0),
                ),
            )
        })
        .collect()
}

fn actual_entries(list: &[ClusterStatus]) -> BTreeMap<String, Entry> {
    list.iter()
        .map(|s| {
            let entry = (
                s.state.as_str().to_owned(),
                (s.group.index, s.group.name.clone()),
                s.last_transition_time,
                s.recheck_time,
            );
            (s.cluster.clone(), entry)
        })
        .collect()
}

fn go_duration(value: &str) -> SignedDuration {
    value
        .parse()
        .unwrap_or_else(|e| panic!("recheckAfter {value:?} is not a duration: {e}"))
}

/// Every difference between OCM's answer and the engine's for one case.
fn differences(case: &Case) -> Vec<String> {
    let groups = ClusterGroups::new(case.decision_groups.iter().map(|g| {
        (
            GroupKey::new(g.group_name.clone(), g.group_index),
            g.clusters.clone().unwrap_or_default(),
        )
    }));
    let existing: Vec<ClusterStatus> = case
        .existing_cluster_status
        .iter()
        .flatten()
        .map(|s| {
            let state: ClusterState = s
                .status
                .parse()
                .unwrap_or_else(|e| panic!("case {}: {e}", case.name));
            let mut status = ClusterStatus::new(
                s.cluster_name.clone(),
                state,
                s.last_transition_time.as_ref().map(|t| t.0),
            );
            if let Some(k) = &s.group_key {
                status.group = GroupKey::new(k.group_name.clone(), k.group_index);
            }
            status
        })
        .collect();

    let answer = serde_json::from_value::<RolloutStrategy>(case.strategy.clone())
        .map_err(|e| e.to_string())
        .and_then(|strategy| plan(&strategy, &groups, &existing, case.now.0).map_err(|e| e.to_string()));
    let mut diffs = Vec::new();
    let result: Rollout = match (answer, &case.expected.error) {
        (Err(_), Some(_)) => return diffs,
        (Err(e), None) => return vec![format!("engine refused a strategy OCM accepted: {e}")],
        (Ok(_), Some(err)) => return vec![format!("engine accepted a strategy OCM refused ({err})")],
        (Ok(r), None) => r,
    };
    let lists = [
        (
            "clustersToRollout",
            &case.expected.clusters_to_rollout,
            &result.to_rollout,
        ),
        (
            "clustersTimeOut",
            &case.expected.clusters_time_out,
            &result.timed_out,
        ),
        (
            "clustersRemoved",
            &case.expected.clusters_removed,
            &result.removed,
        ),
    ];
    for (field, expected, actual) in lists {
        let (expected, actual) = (expected_entries(expected), actual_entries(actual));
        if expected != actual {
            diffs.push(format!("{field}: OCM {expected:?}\n      engine {actual:?}"));
        }
    }
    if case.expected.max_failure_breach != result.max_failure_breach {
        diffs.push(format!(
            "maxFailureBreach: OCM {} engine {}",
            case.expected.max_failure_breach, result.max_failure_breach
        ));
    }
    let expected_recheck = case.expected.recheck_after.as_deref().map(go_duration);
    if expected_recheck != result.recheck_after {
        diffs.push(format!(
            "recheckAfter: OCM {expected_recheck:?} engine {:?}",
            result.recheck_after
        ));
    }
    diffs
}

#[test]
fn every_golden_case_gets_ocms_answer() {
    let text = std::fs::read_to_string(FIXTURE).unwrap_or_else(|e| {
        panic!("{FIXTURE}: {e} (the fixture comes from the golden generator, tests/ocm-golden)")
    });
    let fixture: Fixture = serde_json::from_str(&text).expect("rollout.json parses");
    assert!(!fixture.cases.is_empty(), "the fixture has cases");
    let failures: Vec<String> = fixture
        .cases
        .iter()
        .filter_map(|case| {
            let diffs = differences(case);
            (!diffs.is_empty()).then(|| format!("case {:?}:\n  {}", case.name, diffs.join("\n  ")))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from OCM {} (seed {}):\n{}",
        failures.len(),
        fixture.cases.len(),
        fixture.ocm_commit,
        fixture.seed,
        failures.join("\n")
    );
}
