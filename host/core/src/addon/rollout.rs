//! Which ManagedClusterAddOns get their desired configs now: one step of an add-on's config
//! rollout, planned over every install placement with the shared rollout engine
//! ([`crate::rollout::plan`]), as OCM's add-on configuration controller does.
//!
//! ```text
//!  CMA defaults ─┐                         ┌─▶ per add-on: configReferences released or not,
//!  placements ───┼─▶ nodes: each placement ─┤       `Configured` (ConfigurationUpdate)
//!   (decisions,  │   owns the add-ons of its ├─▶ per placement: installProgressions with
//!    strategy)   │   clusters (the last      │       `Progressing` and lastKnownGoodConfig
//!  add-ons ──────┘   placement wins); the    └─▶ when to look again (nearest deadline or soak)
//!                    rest are the defaults node
//! ```
//!
//! An add-on's rollout state comes from its own status ([`super::status::rollout_status`]):
//! ToApply until its `configReferences` carry the desired configs, Progressing (or Failed)
//! until `lastAppliedConfig` caught up, then Succeeded — combined with the state of the plugin
//! revision ([`super::revision`]), which rolls out the same way: an add-on in the batch is
//! released the serving revision too, so a new plugin revision reaches the clusters batch by
//! batch. A placement's add-ons are released in
//! the batches its rollout strategy allows; add-ons no placement owns (Manual, or made by hand)
//! are released at once.
//!
//! Unlike OCM, where one bad placement fails the whole add-on's sync, a placement that does not
//! exist or whose decisions or strategy cannot be read only holds its own add-ons (their
//! configs stay as they are) and says why in its install progression's `Progressing`
//! condition; every other placement keeps rolling out.

use std::collections::{BTreeMap, BTreeSet};

use flotilla_api::addon::consts::cluster_management_addon as cma;
use flotilla_api::addon::v1beta1::{
    AddOnConfig, ConfigGroupResource, ConfigReference, ConfigReferent, InstallProgression, PlacementStrategy,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::configs::{
    ObservedConfig, configured_clusters, desired_configs, inherits_placement_configs, install_progressions,
    resolve,
};
use super::revision::{AddonRevisions, combine, revision_status, to_release};
use super::status::{
    AddonRolloutStatus, ConfigurationUpdate, PlacementAddon, RolloutState, configuration_update,
    install_counts, rollout_status, set_install_progression,
};
use crate::conditions::{self, FALSE, NewCondition};
use crate::rollout::{self, ClusterGroups, ClusterState, ClusterStatus};

/// `Progressing` reason of an install progression whose Placement does not exist (Flotilla's;
/// OCM stops the whole add-on's rollout instead).
pub const REASON_PLACEMENT_NOT_FOUND: &str = "PlacementNotFound";

/// `Progressing` reason of an install progression whose decisions or rollout strategy cannot
/// be read (Flotilla's).
pub const REASON_ROLLOUT_INVALID: &str = "RolloutStrategyInvalid";

/// Why a placement cannot be rolled out over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlacementProblem {
    /// The Placement does not exist.
    NotFound,
    /// Its decisions or its rollout strategy cannot be read; the message says which.
    Invalid(String),
}

/// One install placement as the hub sees it.
#[derive(Clone, Debug)]
pub struct PlacementInput<'a> {
    /// The install strategy entry (placement, configs, rollout strategy).
    pub strategy: &'a PlacementStrategy,
    /// Clusters its decisions name (all of them, even when the groups cannot be read).
    pub selected: BTreeSet<String>,
    /// Its decision groups, or why it cannot be rolled out over.
    pub groups: Result<ClusterGroups, PlacementProblem>,
    /// The Placement's `clustersPerDecisionGroup`, the `maxConcurrency` of a Progressive
    /// strategy that sets none (as OCM's add-on manager does).
    pub clusters_per_decision_group: IntOrString,
}

/// One ManagedClusterAddOn of the add-on.
#[derive(Clone, Debug)]
pub struct AddonInput<'a> {
    /// Its cluster (namespace).
    pub cluster: &'a str,
    /// Its `spec.configs`.
    pub spec_configs: &'a [AddOnConfig],
    /// Its `status.configReferences` (v1beta1 form).
    pub config_references: Vec<ConfigReference>,
    /// Its conditions (`Progressing` gives the state's start).
    pub conditions: &'a [Condition],
    /// The plugin revisions released to it and applied by it.
    pub revisions: AddonRevisions<'a>,
}

/// One step of the rollout.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConfigurationPlan {
    /// Per cluster, what to write on its add-on.
    pub addons: BTreeMap<String, ConfigurationUpdate>,
    /// Per cluster in the batch, the plugin revision to release to its add-on (the
    /// [`super::revision::RELEASED_REVISION_ANNOTATION`] to write).
    pub revisions: BTreeMap<String, String>,
    /// The CMA's new `status.installProgressions` (v1beta1 form), in placement order.
    pub progressions: Vec<InstallProgression>,
    /// Plan again after this long (nearest deadline or soak end), if anything is pending.
    pub recheck_after: Option<SignedDuration>,
}

/// Which node owns an add-on: a placement (by index) or the defaults.
type Owner = Option<usize>;

/// Plans one step of an add-on's config rollout at `now`. `serving` is the plugin revision
/// serving the add-on (None: no plugin loaded), `defaults` the CMA's default configs,
/// `placements` its install placements in spec order, `existing` its current install
/// progressions, `observe` the hash and generation of a config object (None when missing).
pub fn plan_configuration(
    serving: Option<&str>,
    defaults: &[AddOnConfig],
    placements: &[PlacementInput<'_>],
    existing: &[InstallProgression],
    addons: &[AddonInput<'_>],
    observe: impl Fn(&ConfigGroupResource, &ConfigReferent) -> Option<ObservedConfig>,
    now: Timestamp,
) -> ConfigurationPlan {
    let strategies: Vec<PlacementStrategy> = placements.iter().map(|p| p.strategy.clone()).collect();
    let mut progressions = install_progressions(defaults, &strategies, existing, &observe);

    // Each add-on belongs to the last placement selecting its cluster, else to the defaults.
    let owner_of = |cluster: &str| -> Owner { placements.iter().rposition(|p| p.selected.contains(cluster)) };
    struct Child<'a> {
        input: &'a AddonInput<'a>,
        owner: Owner,
        desired: Vec<ConfigReference>,
        inherits: bool,
        /// Over configs and revision: what the rollout engine sees.
        status: AddonRolloutStatus,
        /// Over configs only: what `Configured` says.
        configs: AddonRolloutStatus,
    }
    let children: Vec<Child<'_>> = addons
        .iter()
        .map(|input| {
            let owner = owner_of(input.cluster);
            let placement_configs = owner.map(|i| placements[i].strategy.configs.as_slice());
            let desired = desired_configs(defaults, placement_configs, input.spec_configs);
            let node_desired = desired_configs(defaults, placement_configs, &[]);
            let inherits = inherits_placement_configs(&desired, &node_desired, input.spec_configs);
            let desired = resolve(&desired, &observe).references;
            let configs = rollout_status(&desired, &input.config_references, input.conditions);
            let revision = revision_status(serving, input.revisions, input.conditions);
            Child {
                input,
                owner,
                desired,
                inherits,
                status: combine(&configs, &revision),
                configs,
            }
        })
        .collect();

    let mut in_batch: BTreeSet<&str> = BTreeSet::new();
    let mut held: BTreeSet<&str> = BTreeSet::new();
    let mut recheck: Option<SignedDuration> = None;
    let selected: Vec<BTreeSet<String>> = placements.iter().map(|p| p.selected.clone()).collect();
    let configured = configured_clusters(&selected);
    for (index, placement) in placements.iter().enumerate() {
        let mine: Vec<&Child<'_>> = children.iter().filter(|c| c.owner == Some(index)).collect();
        let problem = |reason: &'static str, message: String| NewCondition {
            type_: cma::CONDITION_PROGRESSING,
            status: FALSE,
            reason,
            message,
            observed_generation: None,
        };
        let p = &placement.strategy.placement;
        let planned = match &placement.groups {
            Err(PlacementProblem::NotFound) => Err(problem(
                REASON_PLACEMENT_NOT_FOUND,
                format!(
                    "Placement {}/{} does not exist; create it or remove it from the install strategy",
                    p.namespace, p.name
                ),
            )),
            Err(PlacementProblem::Invalid(why)) => Err(problem(
                REASON_ROLLOUT_INVALID,
                format!("placement {}/{}: {why}", p.namespace, p.name),
            )),
            Ok(groups) => {
                let strategy = rollout::with_group_size_as_max_concurrency(
                    &placement.strategy.rollout_strategy,
                    &placement.clusters_per_decision_group,
                );
                let existing: Vec<ClusterStatus> = mine
                    .iter()
                    .map(|c| {
                        ClusterStatus::new(
                            c.input.cluster,
                            engine_state(c.status.state),
                            c.status.since.as_ref().map(|t| t.0),
                        )
                    })
                    .collect();
                rollout::plan(&strategy, groups, &existing, now).map_err(|e| {
                    problem(
                        REASON_ROLLOUT_INVALID,
                        format!("placement {}/{}: {e}", p.namespace, p.name),
                    )
                })
            }
        };
        let Some(progression) = progressions.get_mut(index) else {
            continue;
        };
        match planned {
            Err(condition) => {
                held.extend(mine.iter().map(|c| c.input.cluster));
                conditions::set(&mut progression.conditions, condition, now);
            }
            Ok(result) => {
                let batch: BTreeSet<&str> = result.to_rollout.iter().map(|s| s.cluster.as_str()).collect();
                let counted: Vec<PlacementAddon> = mine
                    .iter()
                    .map(|c| PlacementAddon {
                        state: c.status.state,
                        in_batch: batch.contains(c.input.cluster),
                        inherits_placement_configs: c.inherits,
                    })
                    .collect();
                in_batch.extend(mine.iter().map(|c| c.input.cluster).filter(|c| batch.contains(c)));
                let counts = install_counts(
                    &counted,
                    result.timed_out.len(),
                    placement.selected.len(),
                    configured.get(index).map_or(0, BTreeSet::len),
                );
                set_install_progression(progression, counts, now);
                recheck = match (recheck, result.recheck_after) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
    }

    let mut revisions = BTreeMap::new();
    let addons = children
        .iter()
        .filter(|c| !held.contains(c.input.cluster))
        .map(|c| {
            // The defaults node releases every add-on that has not succeeded, at once.
            let batch = match c.owner {
                Some(_) => in_batch.contains(c.input.cluster),
                None => c.status.state != RolloutState::Succeeded,
            };
            if batch && let Some(revision) = to_release(serving, c.input.revisions) {
                revisions.insert(c.input.cluster.to_owned(), revision.to_owned());
            }
            let update = configuration_update(&c.configs, batch, &c.input.config_references, &c.desired);
            (c.input.cluster.to_owned(), update)
        })
        .collect();
    ConfigurationPlan {
        addons,
        revisions,
        progressions,
        recheck_after: recheck,
    }
}

/// The rollout engine's state for an add-on's rollout state.
fn engine_state(state: RolloutState) -> ClusterState {
    match state {
        RolloutState::ToApply => ClusterState::ToApply,
        RolloutState::Progressing => ClusterState::Progressing,
        RolloutState::Succeeded => ClusterState::Succeeded,
        RolloutState::Failed => ClusterState::Failed,
    }
}

#[cfg(test)]
mod tests {
    use flotilla_api::addon::v1beta1::{ConfigSpecHash, PlacementRef};
    use flotilla_api::cluster::v1alpha1::{RolloutProgressive, RolloutStrategy, RolloutType};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use rstest::rstest;

    use super::*;
    use crate::rollout::GroupKey;

    const GROUP: &str = "addon.open-cluster-management.io";
    const RESOURCE: &str = "addondeploymentconfigs";

    fn gr() -> ConfigGroupResource {
        ConfigGroupResource {
            group: GROUP.into(),
            resource: RESOURCE.into(),
        }
    }

    fn config(name: &str) -> AddOnConfig {
        AddOnConfig {
            group_resource: gr(),
            referent: ConfigReferent {
                namespace: "ns".into(),
                name: name.into(),
            },
        }
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    /// A status reference to `name` released with `desired` and applied with `applied`.
    fn reference(name: &str, desired: &str, applied: Option<&str>) -> ConfigReference {
        let hash = |h: &str| ConfigSpecHash {
            referent: config(name).referent,
            spec_hash: h.into(),
        };
        ConfigReference {
            group_resource: gr(),
            last_observed_generation: 1,
            desired_config: Some(hash(desired)),
            last_applied_config: applied.map(hash),
        }
    }

    fn progressing(reason: &str, since: i64) -> Condition {
        Condition {
            type_: "Progressing".into(),
            status: if reason == "Progressing" { "True" } else { "False" }.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(at(since)),
        }
    }

    fn progressive(max_concurrency: i32, deadline: &str) -> RolloutStrategy {
        let mut progressive = RolloutProgressive {
            max_concurrency: IntOrString::Int(max_concurrency),
            ..Default::default()
        };
        progressive.config.progress_deadline = deadline.into();
        RolloutStrategy {
            type_: Some(RolloutType::Progressive),
            progressive: Some(progressive),
            ..Default::default()
        }
    }

    fn strategy(rollout: RolloutStrategy) -> PlacementStrategy {
        PlacementStrategy {
            placement: PlacementRef {
                namespace: "ns".into(),
                name: "pl".into(),
            },
            configs: vec![config("cfg")],
            rollout_strategy: rollout,
        }
    }

    fn placement<'a>(strategy: &'a PlacementStrategy, clusters: &[&str]) -> PlacementInput<'a> {
        PlacementInput {
            strategy,
            selected: clusters.iter().map(|c| (*c).to_owned()).collect(),
            groups: Ok(ClusterGroups::new([(GroupKey::new("", 0), clusters.to_vec())])),
            clusters_per_decision_group: IntOrString::String("100%".into()),
        }
    }

    /// State per cluster: `new` (never released), `old` (done on hash h1), `run` (released h2,
    /// Progressing since 100), `done` (applied h2).
    fn addon<'a>(cluster: &'a str, state: &str, conditions: &'a [Condition]) -> AddonInput<'a> {
        let references = match state {
            "new" => vec![],
            "old" => vec![reference("cfg", "h1", Some("h1"))],
            "run" => vec![reference("cfg", "h2", Some("h1"))],
            "done" => vec![reference("cfg", "h2", Some("h2"))],
            other => panic!("unknown state {other}"),
        };
        AddonInput {
            cluster,
            spec_configs: &[],
            config_references: references,
            conditions,
            revisions: AddonRevisions::default(),
        }
    }

    fn observe_h2(_: &ConfigGroupResource, _: &ConfigReferent) -> Option<ObservedConfig> {
        Some(ObservedConfig {
            spec_hash: "h2".into(),
            generation: 2,
        })
    }

    fn released(plan: &ConfigurationPlan) -> Vec<&str> {
        plan.addons
            .iter()
            .filter(|(_, u)| u.references.is_some())
            .map(|(c, _)| c.as_str())
            .collect()
    }

    #[rstest]
    #[case::first_batch_is_max_concurrency(&["old", "old", "old", "old"], &["c1", "c2"])]
    #[case::a_slot_frees_when_a_cluster_succeeds(&["done", "run", "old", "old"], &["c2", "c3"])]
    #[case::two_in_flight_start_nothing_new(&["run", "run", "old", "old"], &["c1", "c2"])]
    #[case::new_add_ons_wait_their_turn_too(&["new", "new", "new", "new"], &["c1", "c2"])]
    fn a_progressive_rollout_releases_at_most_max_concurrency_add_ons(
        #[case] states: &[&str],
        #[case] expected: &[&str],
    ) {
        let s = strategy(progressive(2, "None"));
        let clusters = ["c1", "c2", "c3", "c4"];
        let conditions = [progressing("Progressing", 100)];
        let addons: Vec<AddonInput<'_>> = clusters
            .iter()
            .zip(states)
            .map(|(c, s)| addon(c, s, &conditions))
            .collect();
        let plan = plan_configuration(
            None,
            &[],
            &[placement(&s, &clusters)],
            &[],
            &addons,
            observe_h2,
            at(110),
        );
        assert_eq!(released(&plan), expected);
        let waiting: Vec<&str> = plan
            .addons
            .iter()
            .filter(|(_, u)| u.configured.as_ref().is_some_and(|c| c.status == "False"))
            .map(|(c, _)| c.as_str())
            .collect();
        assert!(
            waiting.iter().all(|c| !expected.contains(c)),
            "released add-ons are not also waiting: {waiting:?}"
        );
    }

    #[test]
    fn a_cluster_past_its_deadline_times_out_counts_as_a_failure_and_stops_the_rollout() {
        let s = strategy(progressive(2, "10s"));
        let clusters = ["c1", "c2", "c3", "c4"];
        let conditions = [progressing("Progressing", 100)];
        let addons = [
            addon("c1", "run", &conditions),
            addon("c2", "done", &conditions),
            addon("c3", "old", &conditions),
            addon("c4", "old", &conditions),
        ];
        let plan = plan_configuration(
            None,
            &[],
            &[placement(&s, &clusters)],
            &[],
            &addons,
            observe_h2,
            at(200),
        );
        assert!(
            released(&plan).is_empty(),
            "a breach of maxFailures (0) starts no cluster: {:?}",
            released(&plan)
        );
        let condition = &plan.progressions[0].conditions[0];
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("True", "Progressing")
        );
        assert!(
            condition.message.contains("0 failed 1 timeout"),
            "{}",
            condition.message
        );
    }

    #[test]
    fn within_the_deadline_a_recheck_is_asked_for_at_the_deadline() {
        let s = strategy(progressive(2, "10s"));
        let clusters = ["c1", "c2"];
        let conditions = [progressing("Progressing", 100)];
        let addons = [addon("c1", "run", &conditions), addon("c2", "done", &conditions)];
        let plan = plan_configuration(
            None,
            &[],
            &[placement(&s, &clusters)],
            &[],
            &addons,
            observe_h2,
            at(104),
        );
        assert_eq!(plan.recheck_after, Some(SignedDuration::from_secs(6)));
    }

    #[test]
    fn when_every_add_on_is_done_the_progression_completes_with_last_known_good_config() {
        let s = strategy(progressive(2, "None"));
        let clusters = ["c1", "c2"];
        let conditions = [progressing("Completed", 100)];
        let addons = [addon("c1", "done", &conditions), addon("c2", "done", &conditions)];
        let plan = plan_configuration(
            None,
            &[],
            &[placement(&s, &clusters)],
            &[],
            &addons,
            observe_h2,
            at(104),
        );
        let progression = &plan.progressions[0];
        assert_eq!(progression.conditions[0].reason, "Completed");
        let reference = &progression.config_references[0];
        assert_eq!(
            reference
                .last_known_good_config
                .as_ref()
                .map(|c| c.spec_hash.as_str()),
            Some("h2")
        );
        assert_eq!(reference.last_applied_config, reference.desired_config);
    }

    #[test]
    fn a_missing_placement_is_named_in_its_progression_and_holds_only_its_own_add_ons() {
        let missing = PlacementStrategy {
            placement: PlacementRef {
                namespace: "ns".into(),
                name: "gone".into(),
            },
            ..strategy(progressive(2, "None"))
        };
        let healthy = strategy(RolloutStrategy {
            type_: Some(RolloutType::All),
            ..Default::default()
        });
        let placements = [
            PlacementInput {
                strategy: &missing,
                selected: BTreeSet::new(),
                groups: Err(PlacementProblem::NotFound),
                clusters_per_decision_group: IntOrString::Int(0),
            },
            placement(&healthy, &["c1"]),
        ];
        let conditions = [progressing("Completed", 100)];
        let addons = [addon("c1", "old", &conditions)];
        let plan = plan_configuration(None, &[], &placements, &[], &addons, observe_h2, at(104));
        let condition = &plan.progressions[0].conditions[0];
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", REASON_PLACEMENT_NOT_FOUND)
        );
        assert!(condition.message.contains("ns/gone"), "{}", condition.message);
        assert_eq!(released(&plan), ["c1"], "the other placement rolls out");
    }

    /// An add-on whose configs are done (h2 applied), at plugin revision state `state`:
    /// `a` (applied revision a), `rel` (released b, applying), `b` (applied b), `new` (none).
    fn on_revision<'a>(cluster: &'a str, state: &str, conditions: &'a [Condition]) -> AddonInput<'a> {
        let revisions = match state {
            "a" => AddonRevisions {
                released: None,
                applied: Some("a"),
            },
            "rel" => AddonRevisions {
                released: Some("b"),
                applied: Some("a"),
            },
            "b" => AddonRevisions {
                released: Some("b"),
                applied: Some("b"),
            },
            "new" => AddonRevisions::default(),
            other => panic!("unknown revision state {other}"),
        };
        AddonInput {
            revisions,
            ..addon(cluster, "done", conditions)
        }
    }

    #[rstest]
    #[case::first_batch_is_max_concurrency(&["a", "a", "a", "a"], &["c1", "c2"])]
    #[case::a_slot_frees_when_a_cluster_applied_it(&["b", "rel", "a", "a"], &["c3"])]
    #[case::two_in_flight_release_nothing_new(&["rel", "rel", "a", "a"], &[])]
    #[case::all_applied_release_nothing(&["b", "b", "b", "b"], &[])]
    #[case::new_add_ons_need_no_release(&["new", "new", "a", "a"], &["c3", "c4"])]
    fn a_new_plugin_revision_is_released_at_most_max_concurrency_add_ons_at_a_time(
        #[case] states: &[&str],
        #[case] expected: &[&str],
    ) {
        let s = strategy(progressive(2, "None"));
        let clusters = ["c1", "c2", "c3", "c4"];
        let conditions = [progressing("Progressing", 100)];
        let addons: Vec<AddonInput<'_>> = clusters
            .iter()
            .zip(states)
            .map(|(c, s)| on_revision(c, s, &conditions))
            .collect();
        let plan = plan_configuration(
            Some("b"),
            &[],
            &[placement(&s, &clusters)],
            &[],
            &addons,
            observe_h2,
            at(110),
        );
        let revisions: Vec<&str> = plan.revisions.keys().map(String::as_str).collect();
        assert_eq!(revisions, expected);
        assert!(plan.revisions.values().all(|r| r == "b"));
        let configured_false = plan
            .addons
            .values()
            .filter_map(|u| u.configured.as_ref())
            .any(|c| c.status == "False");
        assert!(
            !configured_false,
            "a revision waiting for its turn leaves Configured (about configs) alone"
        );
    }

    #[rstest]
    #[case::the_first_group_first(&["a", "a", "a", "a"], &["c1", "c2"])]
    #[case::the_next_group_waits_for_the_first(&["b", "rel", "a", "a"], &[])]
    #[case::the_next_group_once_the_first_is_done(&["b", "b", "a", "a"], &["c3", "c4"])]
    fn a_new_plugin_revision_rolls_out_group_by_group_under_progressive_per_group(
        #[case] states: &[&str],
        #[case] expected: &[&str],
    ) {
        let s = strategy(RolloutStrategy {
            type_: Some(RolloutType::ProgressivePerGroup),
            ..Default::default()
        });
        let clusters = ["c1", "c2", "c3", "c4"];
        let conditions = [progressing("Completed", 100)];
        let addons: Vec<AddonInput<'_>> = clusters
            .iter()
            .zip(states)
            .map(|(c, s)| on_revision(c, s, &conditions))
            .collect();
        let groups = PlacementInput {
            groups: Ok(ClusterGroups::new([
                (GroupKey::new("", 0), vec!["c1", "c2"]),
                (GroupKey::new("", 1), vec!["c3", "c4"]),
            ])),
            ..placement(&s, &clusters)
        };
        let plan = plan_configuration(Some("b"), &[], &[groups], &[], &addons, observe_h2, at(110));
        let revisions: Vec<&str> = plan.revisions.keys().map(String::as_str).collect();
        assert_eq!(revisions, expected);
    }

    #[test]
    fn configs_a_new_revision_overtook_before_they_rendered_are_released_with_it() {
        let s = strategy(progressive(1, "None"));
        let conditions = [progressing("Progressing", 100)];
        // Released config h2 under revision a; the deploy now holds it for revision b.
        let overtaken = AddonInput {
            revisions: AddonRevisions {
                released: None,
                applied: Some("a"),
            },
            ..addon("c1", "run", &conditions)
        };
        let plan = plan_configuration(
            Some("b"),
            &[],
            &[placement(&s, &["c1"])],
            &[],
            &[overtaken],
            observe_h2,
            at(110),
        );
        assert_eq!(
            plan.revisions.get("c1").map(String::as_str),
            Some("b"),
            "released, not waited for forever"
        );
    }

    #[test]
    fn a_cluster_failing_on_a_new_revision_counts_toward_max_failures_and_stops_it() {
        let s = strategy(progressive(2, "10s"));
        let clusters = ["c1", "c2", "c3", "c4"];
        let running = [progressing("Progressing", 100)];
        let failed = [progressing("Failed", 100)];
        let addons = [
            on_revision("c1", "rel", &running),
            on_revision("c2", "rel", &failed),
            on_revision("c3", "a", &running),
            on_revision("c4", "a", &running),
        ];
        let plan = plan_configuration(
            Some("b"),
            &[],
            &[placement(&s, &clusters)],
            &[],
            &addons,
            observe_h2,
            at(200),
        );
        assert!(
            plan.revisions.is_empty(),
            "maxFailures (0) breached: no new cluster gets the revision: {:?}",
            plan.revisions
        );
        let condition = &plan.progressions[0].conditions[0];
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("True", "Progressing")
        );
        assert!(condition.message.contains("2 timeout"), "{}", condition.message);
    }

    #[test]
    fn the_progression_completes_once_every_add_on_applied_the_new_revision() {
        let s = strategy(progressive(2, "None"));
        let clusters = ["c1", "c2"];
        let completed = [progressing("Completed", 100)];
        let plan_with = |states: [&str; 2]| {
            let addons: Vec<AddonInput<'_>> = clusters
                .iter()
                .zip(states)
                .map(|(c, s)| on_revision(c, s, &completed))
                .collect();
            plan_configuration(
                Some("b"),
                &[],
                &[placement(&s, &clusters)],
                &[],
                &addons,
                observe_h2,
                at(104),
            )
            .progressions[0]
                .conditions[0]
                .reason
                .clone()
        };
        assert_eq!(plan_with(["b", "rel"]), "Progressing");
        assert_eq!(plan_with(["b", "b"]), "Completed");
    }

    #[test]
    fn add_ons_no_placement_owns_get_a_new_revision_at_once() {
        let conditions = [progressing("Completed", 100)];
        let addons = [
            on_revision("m1", "a", &conditions),
            on_revision("m2", "a", &conditions),
        ];
        let plan = plan_configuration(Some("b"), &[], &[], &[], &addons, observe_h2, at(104));
        let revisions: Vec<&str> = plan.revisions.keys().map(String::as_str).collect();
        assert_eq!(revisions, ["m1", "m2"]);
    }

    #[test]
    fn add_ons_no_placement_owns_are_released_at_once() {
        let conditions = [progressing("Completed", 100)];
        let addons = [addon("m1", "old", &conditions), addon("m2", "old", &conditions)];
        let defaults = [config("cfg")];
        let plan = plan_configuration(None, &defaults, &[], &[], &addons, observe_h2, at(104));
        assert_eq!(released(&plan), ["m1", "m2"]);
    }
}
