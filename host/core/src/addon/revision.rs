//! A new plugin revision rolls out like a config change: the serving revision (the digest of the
//! plugin's component) is one more thing an add-on is released, renders with, and applies, so
//! a Progressive or ProgressivePerGroup strategy re-renders the clusters batch by batch and a
//! cluster not yet released keeps its last ManifestWork untouched.
//!
//! OCM has no plugins and so no field for this; Flotilla keeps the state in its own annotations
//! (never new OCM fields), the same three steps as a config's `desiredConfig` →
//! config-spec-hash on the works → `lastAppliedConfig`:
//!
//! ```text
//!  rollout controller ──releases──▶ MCA  flotilla.dev/released-plugin-revision  (batch by batch)
//!  deploy controller ───renders───▶ work flotilla.dev/plugin-revision           (only the released one)
//!  deploy controller ───records───▶ MCA  flotilla.dev/applied-plugin-revision   (works Applied+Available)
//! ```
//!
//! An add-on's revision state ([`revision_status`]) is ToApply while neither annotation names
//! the serving revision, Progressing (or Failed, by the `Progressing` reason) while the applied
//! one lags behind the released one, and Succeeded once they agree. It is [`combine`]d with the
//! config state, so the rollout engine, `Configured`-independent batch release and the
//! install progressions count a revision exactly like a config.
//!
//! An add-on that never had a revision released or applied (a new one, or one from before these
//! annotations) has nothing to roll out: it renders with the serving revision at once, as a new
//! add-on always did, and the revision it applied is recorded from then on.

use std::collections::BTreeMap;

use flotilla_api::work::v1::ManifestWork;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::status::{AddonRolloutStatus, RolloutState, all_applied, released_not_applied};

/// Annotation on a deploy ManifestWork: the plugin revision (digest) that rendered it.
pub const WORK_REVISION_ANNOTATION: &str = "flotilla.dev/plugin-revision";

/// Annotation on a ManagedClusterAddOn: the plugin revision the rollout released to it.
pub const RELEASED_REVISION_ANNOTATION: &str = "flotilla.dev/released-plugin-revision";

/// Annotation on a ManagedClusterAddOn: the plugin revision its works were last seen applied
/// with (written by the deploy controller once `Progressing` completes).
pub const APPLIED_REVISION_ANNOTATION: &str = "flotilla.dev/applied-plugin-revision";

/// The revision annotations of one ManagedClusterAddOn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddonRevisions<'a> {
    /// What the rollout released ([`RELEASED_REVISION_ANNOTATION`]).
    pub released: Option<&'a str>,
    /// What the works applied ([`APPLIED_REVISION_ANNOTATION`]).
    pub applied: Option<&'a str>,
}

impl<'a> AddonRevisions<'a> {
    /// Reads them from an add-on's annotations (empty values count as absent).
    pub fn from_annotations(annotations: Option<&'a BTreeMap<String, String>>) -> Self {
        let get = |key| {
            annotations
                .and_then(|a| a.get(key))
                .map(String::as_str)
                .filter(|v| !v.is_empty())
        };
        Self {
            released: get(RELEASED_REVISION_ANNOTATION),
            applied: get(APPLIED_REVISION_ANNOTATION),
        }
    }

    /// The revision the add-on may render with: the released one, else the one it applied
    /// (its first install counts as released). None: nothing was ever released or applied.
    pub fn granted(&self) -> Option<&'a str> {
        self.released.or(self.applied)
    }
}

/// Whether the deploy controller may render the add-on with the serving revision `serving`:
/// when that revision is granted to it, when nothing ever was (a new add-on installs at once),
/// or when it has no deploy work yet (nothing to keep). Otherwise its works stay as they are
/// until the rollout releases `serving` here.
pub fn may_render(revisions: AddonRevisions<'_>, serving: &str, has_works: bool) -> bool {
    !has_works || revisions.granted().is_none_or(|g| g == serving)
}

/// The revision that rendered `work`, from [`WORK_REVISION_ANNOTATION`].
pub fn work_revision(work: &ManifestWork) -> Option<&str> {
    work.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(WORK_REVISION_ANNOTATION))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// The revision to record as applied once `Progressing` completed over `works`: the one every
/// work carries (None when there are none, or they disagree, or one carries none).
pub fn applied_revision(works: &[ManifestWork]) -> Option<&str> {
    let mut revisions = works.iter().map(work_revision);
    let first = revisions.next()??;
    revisions.all(|r| r == Some(first)).then_some(first)
}

/// The rollout state of the plugin revision on one add-on, `serving` being the revision the
/// plugin serves now (None: no plugin loaded, nothing to roll out). See the module docs.
pub fn revision_status(
    serving: Option<&str>,
    revisions: AddonRevisions<'_>,
    conditions: &[Condition],
) -> AddonRolloutStatus {
    let (Some(serving), Some(granted)) = (serving, revisions.granted()) else {
        return all_applied(conditions);
    };
    if granted != serving {
        return AddonRolloutStatus {
            state: RolloutState::ToApply,
            since: None,
        };
    }
    if revisions.applied != Some(granted) {
        return released_not_applied(conditions);
    }
    all_applied(conditions)
}

/// The state of an add-on over its configs and its plugin revision: the one furthest from
/// done (ToApply, then Failed, then Progressing, then Succeeded). Both come from the same
/// `Progressing` condition, so the start time is the furthest state's.
///
/// ToApply comes first on purpose: an add-on released new configs that a new revision then
/// overtook cannot apply them (the deploy holds its works until the revision is granted), so
/// ranking it Progressing would wait for it forever; as ToApply, the rollout releases it the
/// revision in its turn and both apply together.
pub fn combine(configs: &AddonRolloutStatus, revision: &AddonRolloutStatus) -> AddonRolloutStatus {
    let rank = |s: RolloutState| match s {
        RolloutState::ToApply => 0,
        RolloutState::Failed => 1,
        RolloutState::Progressing => 2,
        RolloutState::Succeeded => 3,
    };
    if rank(revision.state) < rank(configs.state) {
        revision.clone()
    } else {
        configs.clone()
    }
}

/// Whether the rollout, having put an add-on in its batch, writes `serving` as its released
/// revision: a plugin is serving, and the add-on was granted another revision before. A new
/// add-on renders with the serving revision at once ([`may_render`]) and records it as applied,
/// so releasing it first would only be one more write per new add-on.
pub fn to_release<'a>(serving: Option<&'a str>, revisions: AddonRevisions<'_>) -> Option<&'a str> {
    let granted = revisions.granted()?;
    serving.filter(|s| granted != *s)
}

/// What `flotilla get addons` shows of the plugin revision rollout on one add-on: its state
/// (see [`revision_status`]) and the short digest of the revision it concerns (the serving one
/// while ToApply, else the one granted), or `-` when no revision was ever released or applied.
pub fn describe(serving: Option<&str>, revisions: AddonRevisions<'_>, conditions: &[Condition]) -> String {
    let Some(granted) = revisions.granted() else {
        return "-".to_owned();
    };
    let status = revision_status(serving, revisions, conditions);
    let (state, revision) = match status.state {
        RolloutState::ToApply => ("ToApply", serving.unwrap_or(granted)),
        RolloutState::Progressing => ("Progressing", granted),
        RolloutState::Failed => ("Failed", granted),
        RolloutState::Succeeded => ("Succeeded", granted),
    };
    let hex = revision.strip_prefix("sha256:").unwrap_or(revision);
    let short: String = hex.chars().take(12).collect();
    format!("{state} {short}")
}

#[cfg(test)]
mod tests {
    use flotilla_api::work::v1::ManifestWorkSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use rstest::rstest;

    use super::*;

    fn revisions<'a>(released: Option<&'a str>, applied: Option<&'a str>) -> AddonRevisions<'a> {
        AddonRevisions { released, applied }
    }

    fn progressing(reason: &str) -> Vec<Condition> {
        vec![Condition {
            type_: "Progressing".into(),
            status: if reason == "Progressing" { "True" } else { "False" }.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(Timestamp::from_second(100).unwrap()),
        }]
    }

    fn work(revision: Option<&str>) -> ManifestWork {
        let mut work = ManifestWork::new("addon-hello-deploy-0", ManifestWorkSpec::default());
        work.metadata.annotations =
            revision.map(|r| BTreeMap::from([(WORK_REVISION_ANNOTATION.to_owned(), r.to_owned())]));
        work
    }

    #[rstest]
    #[case::no_plugin_nothing_to_roll_out(None, None, Some("a"), "Completed", RolloutState::Succeeded)]
    #[case::a_new_add_on_installs_at_once(Some("b"), None, None, "Progressing", RolloutState::Succeeded)]
    #[case::applied_the_serving_revision(Some("a"), None, Some("a"), "Completed", RolloutState::Succeeded)]
    #[case::a_new_revision_waits_for_release(Some("b"), None, Some("a"), "Completed", RolloutState::ToApply)]
    #[case::released_an_older_revision(Some("c"), Some("b"), Some("a"), "Progressing", RolloutState::ToApply)]
    #[case::released_and_rendering(Some("b"), Some("b"), Some("a"), "Progressing", RolloutState::Progressing)]
    #[case::released_and_failing(Some("b"), Some("b"), Some("a"), "Failed", RolloutState::Failed)]
    #[case::released_before_the_deploy_saw_it(
        Some("b"),
        Some("b"),
        Some("a"),
        "Completed",
        RolloutState::Progressing
    )]
    #[case::released_and_applied(Some("b"), Some("b"), Some("b"), "Completed", RolloutState::Succeeded)]
    fn the_revision_state_follows_release_then_application(
        #[case] serving: Option<&str>,
        #[case] released: Option<&str>,
        #[case] applied: Option<&str>,
        #[case] reason: &str,
        #[case] expected: RolloutState,
    ) {
        let status = revision_status(serving, revisions(released, applied), &progressing(reason));
        assert_eq!(status.state, expected);
    }

    #[test]
    fn a_stale_completed_condition_gives_no_start_time_to_an_unapplied_revision() {
        let status = revision_status(
            Some("b"),
            revisions(Some("b"), Some("a")),
            &progressing("Completed"),
        );
        assert_eq!(
            status.since, None,
            "the deadline starts only once the deploy reports"
        );
        let status = revision_status(
            Some("b"),
            revisions(Some("b"), Some("a")),
            &progressing("Progressing"),
        );
        assert!(status.since.is_some());
    }

    #[rstest]
    #[case::granted_the_serving_revision(Some("b"), Some("a"), "b", true, true)]
    #[case::never_granted_anything(None, None, "b", true, true)]
    #[case::applied_the_serving_revision(None, Some("b"), "b", true, true)]
    #[case::not_released_yet_keeps_the_works(None, Some("a"), "b", true, false)]
    #[case::released_another_revision_keeps_the_works(Some("a"), Some("a"), "b", true, false)]
    #[case::no_work_yet_renders(Some("a"), Some("a"), "b", false, true)]
    fn the_deploy_renders_only_a_granted_revision(
        #[case] released: Option<&str>,
        #[case] applied: Option<&str>,
        #[case] serving: &str,
        #[case] has_works: bool,
        #[case] expected: bool,
    ) {
        assert_eq!(
            may_render(revisions(released, applied), serving, has_works),
            expected
        );
    }

    #[rstest]
    #[case::to_apply_beats_everything(RolloutState::Succeeded, RolloutState::ToApply, RolloutState::ToApply)]
    #[case::configs_to_apply(RolloutState::ToApply, RolloutState::Progressing, RolloutState::ToApply)]
    #[case::failed_beats_progressing(RolloutState::Progressing, RolloutState::Failed, RolloutState::Failed)]
    #[case::progressing_beats_succeeded(
        RolloutState::Succeeded,
        RolloutState::Progressing,
        RolloutState::Progressing
    )]
    #[case::both_done(RolloutState::Succeeded, RolloutState::Succeeded, RolloutState::Succeeded)]
    fn the_combined_state_is_the_one_furthest_from_done(
        #[case] configs: RolloutState,
        #[case] revision: RolloutState,
        #[case] expected: RolloutState,
    ) {
        let status = |state| AddonRolloutStatus { state, since: None };
        assert_eq!(combine(&status(configs), &status(revision)).state, expected);
    }

    #[rstest]
    #[case::all_on_one_revision(&[Some("b"), Some("b")], Some("b"))]
    #[case::mixed_revisions(&[Some("a"), Some("b")], None)]
    #[case::one_without_annotation(&[Some("b"), None], None)]
    #[case::no_works(&[], None)]
    fn the_applied_revision_is_the_one_every_work_carries(
        #[case] works: &[Option<&str>],
        #[case] expected: Option<&str>,
    ) {
        let works: Vec<ManifestWork> = works.iter().map(|r| work(*r)).collect();
        assert_eq!(applied_revision(&works), expected);
    }

    #[rstest]
    #[case::released_when_behind(Some("b"), None, Some("a"), Some("b"))]
    #[case::nothing_when_already_released(Some("b"), Some("b"), Some("a"), None)]
    #[case::nothing_when_already_applied(Some("b"), None, Some("b"), None)]
    #[case::nothing_without_a_plugin(None, None, Some("a"), None)]
    fn the_rollout_writes_the_serving_revision_only_when_it_changes(
        #[case] serving: Option<&str>,
        #[case] released: Option<&str>,
        #[case] applied: Option<&str>,
        #[case] expected: Option<&str>,
    ) {
        assert_eq!(to_release(serving, revisions(released, applied)), expected);
    }

    #[rstest]
    #[case::never_rolled_out(Some("sha256:b"), None, None, "Completed", "-")]
    #[case::waiting_for_its_turn(
        Some("sha256:bbbbbbbbbbbbbbbb"),
        None,
        Some("sha256:aaaaaaaaaaaaaaaa"),
        "Completed",
        "ToApply bbbbbbbbbbbb"
    )]
    #[case::rendering(
        Some("sha256:b"),
        Some("sha256:b"),
        Some("sha256:a"),
        "Progressing",
        "Progressing b"
    )]
    #[case::failing(Some("sha256:b"), Some("sha256:b"), Some("sha256:a"), "Failed", "Failed b")]
    #[case::done(
        Some("sha256:b"),
        Some("sha256:b"),
        Some("sha256:b"),
        "Completed",
        "Succeeded b"
    )]
    fn the_cli_shows_the_revision_state_and_short_digest(
        #[case] serving: Option<&str>,
        #[case] released: Option<&str>,
        #[case] applied: Option<&str>,
        #[case] reason: &str,
        #[case] expected: &str,
    ) {
        assert_eq!(
            describe(serving, revisions(released, applied), &progressing(reason)),
            expected
        );
    }

    #[test]
    fn annotations_are_read_and_empty_values_ignored() {
        let annotations = BTreeMap::from([
            (RELEASED_REVISION_ANNOTATION.to_owned(), "sha256:b".to_owned()),
            (APPLIED_REVISION_ANNOTATION.to_owned(), String::new()),
        ]);
        assert_eq!(
            AddonRevisions::from_annotations(Some(&annotations)),
            revisions(Some("sha256:b"), None)
        );
    }
}
