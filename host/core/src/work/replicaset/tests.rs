//! Cases for the replica set's cluster state, template comparison, work shape and status.

use super::*;
use flotilla_api::work::v1::ManifestWorkStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rstest::rstest;
use serde_json::json;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).expect("valid time")
}

/// `(type, status, observedGeneration, lastTransition secs)`.
fn work(generation: i64, conds: &[(&str, &str, i64, i64)]) -> ManifestWork {
    let mut w = ManifestWork::new("w", ManifestWorkSpec::default());
    w.metadata.namespace = Some("c1".into());
    w.metadata.generation = Some(generation);
    w.status = Some(ManifestWorkStatus {
        conditions: conds
            .iter()
            .map(|(t, s, g, ltt)| Condition {
                type_: (*t).into(),
                status: (*s).into(),
                observed_generation: Some(*g),
                last_transition_time: Time(at(*ltt)),
                reason: "R".into(),
                message: String::new(),
            })
            .collect(),
        ..Default::default()
    });
    w
}

#[rstest]
#[case::no_status_yet(work(1, &[]), ClusterState::ToApply, None)]
#[case::applied_at_an_old_generation(
    work(2, &[("Applied", "True", 1, 0), ("Progressing", "False", 2, 0)]), ClusterState::ToApply, None)]
#[case::applied_false(work(1, &[("Applied", "False", 1, 0), ("Progressing", "False", 1, 0)]), ClusterState::ToApply, None)]
#[case::applying_failed_is_a_failure_from_the_degraded_time(
    work(1, &[("Applied", "False", 1, 0), ("Progressing", "True", 1, 2), ("Degraded", "True", 1, 6)]), ClusterState::Failed, Some(6))]
#[case::applying_failed_at_an_old_generation(
    work(2, &[("Applied", "False", 2, 0), ("Progressing", "True", 2, 2), ("Degraded", "True", 1, 6)]), ClusterState::ToApply, None)]
#[case::applied_false_without_degraded(
    work(1, &[("Applied", "False", 1, 0), ("Progressing", "True", 1, 2)]), ClusterState::ToApply, None)]
#[case::no_progressing_condition(work(1, &[("Applied", "True", 1, 0)]), ClusterState::ToApply, None)]
#[case::progressing_at_an_old_generation(
    work(2, &[("Applied", "True", 2, 0), ("Progressing", "False", 1, 0)]), ClusterState::ToApply, None)]
#[case::degraded_at_an_old_generation(
    work(2, &[("Applied", "True", 2, 0), ("Progressing", "False", 2, 0), ("Degraded", "True", 1, 0)]), ClusterState::ToApply, None)]
#[case::progressing(work(1, &[("Applied", "True", 1, 0), ("Progressing", "True", 1, 7)]), ClusterState::Progressing, Some(7))]
#[case::done(work(1, &[("Applied", "True", 1, 0), ("Progressing", "False", 1, 9)]), ClusterState::Succeeded, Some(9))]
#[case::progressing_and_degraded_fails_from_the_degraded_time(
    work(1, &[("Applied", "True", 1, 0), ("Progressing", "True", 1, 3), ("Degraded", "True", 1, 5)]), ClusterState::Failed, Some(5))]
#[case::unknown_progressing_counts_as_progressing(
    work(1, &[("Applied", "True", 1, 0), ("Progressing", "Unknown", 1, 4)]), ClusterState::Progressing, Some(4))]
fn a_works_conditions_give_its_clusters_rollout_state(
    #[case] work: ManifestWork,
    #[case] state: ClusterState,
    #[case] since: Option<i64>,
) {
    let status = cluster_rollout_status("c1", &work);
    assert_eq!(
        (status.cluster.as_str(), status.state, status.last_transition_time),
        ("c1", state, since.map(at))
    );
}

fn spec(manifest: serde_json::Value) -> ManifestWorkSpec {
    serde_json::from_value(json!({"workload": {"manifests": [manifest]}})).expect("valid spec")
}

#[test]
fn creation_timestamps_added_by_go_clients_do_not_make_a_work_outdated() {
    let template = spec(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}));
    let mut w = ManifestWork::new(
        "w",
        spec(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "a", "creationTimestamp": null}})),
    );
    assert!(work_is_current(&w, &template));
    w.spec = spec(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}));
    assert!(!work_is_current(&w, &template));
}

fn replica_set() -> ManifestWorkReplicaSet {
    let mut rs = ManifestWorkReplicaSet::new("mwrs", Default::default());
    rs.metadata.namespace = Some("default".into());
    rs.metadata.labels = Some([("team".to_owned(), "a".to_owned())].into());
    rs
}

#[test]
fn a_new_work_is_generated_from_the_replica_set_name_with_ocms_labels() {
    let w = desired_work(&replica_set(), "c1", "p1", None);
    assert_eq!(w.metadata.generate_name.as_deref(), Some("mwrs"));
    assert_eq!(w.metadata.name, None);
    assert_eq!(w.metadata.namespace.as_deref(), Some("c1"));
    let labels = w.metadata.labels.expect("labels");
    assert_eq!(
        labels.get(MANIFEST_WORK_REPLICA_SET_LABEL).map(String::as_str),
        Some("default.mwrs")
    );
    assert_eq!(labels.get(PLACEMENT_NAME_LABEL).map(String::as_str), Some("p1"));
    assert_eq!(labels.get("team").map(String::as_str), Some("a"));
}

#[test]
fn an_existing_work_keeps_its_name() {
    let w = desired_work(&replica_set(), "c1", "p1", Some("mwrs-x7k2p"));
    assert_eq!(w.metadata.name.as_deref(), Some("mwrs-x7k2p"));
    assert_eq!(w.metadata.generate_name, None);
}

#[rstest]
#[case::well_formed("default.mwrs", Some(("default", "mwrs")))]
#[case::dotted_name("default.my.set", None)]
#[case::empty_part(".mwrs", None)]
fn the_owner_label_names_namespace_and_name(#[case] value: &str, #[case] expected: Option<(&str, &str)>) {
    assert_eq!(owner_of_label(value), expected);
}

fn reason(status: &ManifestWorkReplicaSetStatus, type_: &str) -> (String, String) {
    let c = conditions::find(&status.conditions, type_).expect("condition set");
    (c.status.clone(), c.reason.clone())
}

fn rolled_out(works: usize, selected: i32, succeeded: usize) -> PlacementOutcome {
    PlacementOutcome::RolledOut {
        name: "p1".into(),
        decision_groups: 1,
        selected_clusters: selected,
        clusters_with_work: works,
        succeeded,
    }
}

#[rstest]
#[case::all_available_and_done(&[("Applied", "True"), ("Available", "True"), ("Progressing", "False")], 1, 1, "True", "Complete", "True", "AsExpected")]
#[case::still_progressing(&[("Applied", "True"), ("Progressing", "True")], 1, 0, "False", "Progressing", "False", "Processing")]
#[case::degraded(&[("Applied", "True"), ("Progressing", "True"), ("Degraded", "True")], 1, 0, "False", "Progressing", "False", "NotAsExpected")]
fn status_follows_the_works(
    #[case] work_conds: &[(&str, &str)],
    #[case] selected: i32,
    #[case] succeeded: usize,
    #[case] rolled_status: &str,
    #[case] rolled_reason: &str,
    #[case] applied_status: &str,
    #[case] applied_reason: &str,
) {
    let works = [work(
        1,
        &work_conds.iter().map(|(t, s)| (*t, *s, 1, 0)).collect::<Vec<_>>(),
    )];
    let by_placement = BTreeMap::from([("p1".to_owned(), works.iter().collect::<Vec<_>>())]);
    let outcomes = [rolled_out(works.len(), selected, succeeded)];
    let s = status(
        &Default::default(),
        &outcomes,
        &by_placement,
        &ManifestWorkSpec::default(),
        at(0),
    );
    assert_eq!(
        reason(&s, CONDITION_PLACEMENT_VERIFIED),
        ("True".into(), "AsExpected".into())
    );
    assert_eq!(
        reason(&s, CONDITION_PLACEMENT_ROLLED_OUT),
        (rolled_status.into(), rolled_reason.into())
    );
    assert_eq!(
        reason(&s, CONDITION_MANIFESTWORK_APPLIED),
        (applied_status.into(), applied_reason.into())
    );
    let summary = s.placements_summary.expect("placement summary")[0].clone();
    assert_eq!(
        summary.available_decision_groups,
        format!("1 ({} / {selected} clusters applied)", works.len())
    );
    assert_eq!(summary.summary, s.summary);
}

#[test]
fn no_works_at_all_is_an_empty_decision() {
    let s = status(
        &Default::default(),
        &[rolled_out(0, 0, 0)],
        &BTreeMap::new(),
        &ManifestWorkSpec::default(),
        at(0),
    );
    assert_eq!(
        reason(&s, CONDITION_PLACEMENT_VERIFIED),
        ("False".into(), "PlacementDecisionEmpty".into())
    );
    assert_eq!(
        reason(&s, CONDITION_MANIFESTWORK_APPLIED),
        ("False".into(), "PlacementDecisionEmpty".into())
    );
    assert_eq!(
        reason(&s, CONDITION_PLACEMENT_ROLLED_OUT),
        ("True".into(), "Complete".into())
    );
    assert_eq!(s.summary.total, 0);
}

#[test]
fn a_missing_placement_only_sets_placement_verified() {
    let s = status(
        &Default::default(),
        &[PlacementOutcome::NotFound],
        &BTreeMap::new(),
        &ManifestWorkSpec::default(),
        at(0),
    );
    assert_eq!(
        reason(&s, CONDITION_PLACEMENT_VERIFIED),
        ("False".into(), "PlacementDecisionNotFound".into())
    );
    assert_eq!(s.conditions.len(), 1);
    assert_eq!(s.placements_summary, None);
}

#[test]
fn an_unreadable_strategy_says_why_in_placement_verified() {
    let outcomes = [
        PlacementOutcome::Invalid("maxFailures \"5\" is invalid".into()),
        rolled_out(0, 0, 0),
    ];
    let s = status(
        &Default::default(),
        &outcomes,
        &BTreeMap::new(),
        &ManifestWorkSpec::default(),
        at(0),
    );
    let c = conditions::find(&s.conditions, CONDITION_PLACEMENT_VERIFIED).expect("set");
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "NotAsExpected"));
    assert!(c.message.contains("maxFailures"));
}

#[test]
fn an_unchanged_outcome_gives_an_identical_status() {
    let outcomes = [rolled_out(0, 0, 0)];
    let first = status(
        &Default::default(),
        &outcomes,
        &BTreeMap::new(),
        &ManifestWorkSpec::default(),
        at(0),
    );
    let second = status(
        &first,
        &outcomes,
        &BTreeMap::new(),
        &ManifestWorkSpec::default(),
        at(60),
    );
    assert_eq!(first, second);
}
