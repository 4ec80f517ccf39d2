//! Publishing the scores: AddOnPlacementScore `resource-usage-score` in the cluster namespace on
//! the hub, written with the add-on's own hub credential.
//!
//! ```text
//!   scores ──▶ plan(published, scores, now, validity) ──▶ nothing (same scores, validUntil fresh)
//!                                                    └──▶ status to write
//!   hub, namespace <cluster>:  AddOnPlacementScore resource-usage-score
//!     created (server-side apply, metadata only) if missing
//!     status {scores, validUntil} applied to the status subresource
//! ```
//!
//! OCM's agent does the same through the status subresource: it creates the object (the API
//! server drops the status of a create, the CRD having a status subresource) and then updates
//! `/status` on its next sync, every 60 s and whenever the object changes; an update that
//! changes nothing does not reach storage. It never sets `validUntil`. This agent sets it so
//! that placements stop trusting the scores of a cluster whose agent has stopped (a placement
//! counts an expired score as 0), and refreshes it once less than half of it is left, so that
//! unchanged scores cost one write per half validity rather than one per period.

use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams},
};
use serde::{Deserialize, Serialize};

use resource_usage_agent::score::Score;

/// The object's name, as in OCM (`AddOnPlacementScoresName`): placements name it in
/// `scoreCoordinate.addOn.resourceName`.
pub const SCORE_NAME: &str = "resource-usage-score";
/// The API group of AddOnPlacementScore.
pub const GROUP: &str = "cluster.open-cluster-management.io";
/// Its version.
pub const VERSION: &str = "v1alpha1";
/// Its kind.
pub const KIND: &str = "AddOnPlacementScore";
/// Its resource (plural) name.
pub const PLURAL: &str = "addonplacementscores";
/// The field manager of every write; the holder of the agent's Lease and the prefix of its log
/// lines.
pub const FIELD_MANAGER: &str = "resource-usage-agent";

/// `status` of an AddOnPlacementScore, the part this agent reads and writes (conditions are
/// left to whoever sets them).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoreStatus {
    /// The named scores.
    #[serde(default)]
    pub scores: Vec<Score>,
    /// After this instant placements count the scores as 0; absent: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<Time>,
}

/// The status to write, if any: when nothing is published yet, when any score differs from
/// the published one (OCM reads the last entry of a repeated name), when `validity` is set and
/// less than half of it is left (or none is published), or when it is unset and an expiry is
/// published. `None` means the hub already says what it should.
pub fn plan(
    published: Option<&ScoreStatus>,
    scores: &[Score],
    now: Timestamp,
    validity: Option<Duration>,
) -> Option<ScoreStatus> {
    let desired = ScoreStatus {
        scores: scores.to_vec(),
        valid_until: validity.map(|v| Time(expiry(now, v))),
    };
    let Some(published) = published else {
        return Some(desired);
    };
    let same_scores = scores.iter().all(|wanted| {
        published
            .scores
            .iter()
            .rev()
            .find(|s| s.name == wanted.name)
            .is_some_and(|s| s.value == wanted.value)
    });
    let fresh = match (validity, &published.valid_until) {
        (None, None) => true,
        (None, Some(_)) | (Some(_), None) => false,
        (Some(validity), Some(until)) => {
            let left = until.0.as_second().saturating_sub(now.as_second());
            let half = i64::try_from(validity.as_secs() / 2).unwrap_or(i64::MAX);
            left >= half
        }
    };
    (!same_scores || !fresh).then_some(desired)
}

/// `now + validity`, whole seconds (the precision of a Kubernetes time), at most the latest
/// representable instant.
fn expiry(now: Timestamp, validity: Duration) -> Timestamp {
    let seconds = i64::try_from(validity.as_secs()).unwrap_or(i64::MAX);
    let at = now.as_second().saturating_add(seconds);
    Timestamp::from_second(at).unwrap_or(Timestamp::MAX)
}

/// What a publication did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The hub already had these scores and a fresh `validUntil`.
    Unchanged,
    /// The status was written (the object created first when missing).
    Written,
}

/// AddOnPlacementScores in one cluster namespace on the hub.
#[derive(Clone)]
pub struct Hub {
    api: Api<DynamicObject>,
}

impl Hub {
    /// AddOnPlacementScores in namespace `cluster` through `client`.
    pub fn new(client: Client, cluster: &str) -> Self {
        let gvk = GroupVersionKind::gvk(GROUP, VERSION, KIND);
        let resource = ApiResource::from_gvk_with_plural(&gvk, PLURAL);
        Self {
            api: Api::namespaced_with(client, cluster, &resource),
        }
    }

    /// Brings `resource-usage-score` to `scores`, writing only what [`plan`] asks for.
    pub async fn publish(
        &self,
        scores: &[Score],
        now: Timestamp,
        validity: Option<Duration>,
    ) -> anyhow::Result<Outcome> {
        let current = self
            .api
            .get_opt(SCORE_NAME)
            .await
            .with_context(|| format!("read AddOnPlacementScore {SCORE_NAME}"))?;
        let published = current.as_ref().map(status_of);
        let Some(status) = plan(published.as_ref(), scores, now, validity) else {
            return Ok(Outcome::Unchanged);
        };
        if current.is_none() {
            self.api
                .patch(
                    SCORE_NAME,
                    &PatchParams::apply(FIELD_MANAGER),
                    &Patch::Apply(object(serde_json::Value::Null)),
                )
                .await
                .with_context(|| format!("create AddOnPlacementScore {SCORE_NAME}"))?;
        }
        let status = serde_json::to_value(&status).context("serialize the scores")?;
        // Forced: the scores are this agent's alone; whoever else wrote them last is overruled,
        // as OCM's agent overwrites them with an update.
        self.api
            .patch_status(
                SCORE_NAME,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(object(status)),
            )
            .await
            .with_context(|| format!("write the status of AddOnPlacementScore {SCORE_NAME}"))?;
        Ok(Outcome::Written)
    }
}

/// The status published in `object`; an unreadable one counts as empty, to be rewritten.
fn status_of(object: &DynamicObject) -> ScoreStatus {
    object
        .data
        .get("status")
        .and_then(|status| ScoreStatus::deserialize(status).ok())
        .unwrap_or_default()
}

/// The apply configuration of `resource-usage-score`, with `status` unless it is null.
fn object(status: serde_json::Value) -> serde_json::Value {
    let mut object = serde_json::json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": KIND,
        "metadata": {"name": SCORE_NAME},
    });
    if !status.is_null() {
        object["status"] = status;
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(pairs: &[(&str, i32)]) -> Vec<Score> {
        pairs
            .iter()
            .map(|(name, value)| Score {
                name: (*name).to_owned(),
                value: *value,
            })
            .collect()
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    fn published(pairs: &[(&str, i32)], valid_until: Option<i64>) -> ScoreStatus {
        ScoreStatus {
            scores: scores(pairs),
            valid_until: valid_until.map(|s| Time(at(s))),
        }
    }

    const TEN_MINUTES: Option<Duration> = Some(Duration::from_secs(600));

    #[test]
    fn nothing_published_yet_is_written_with_an_expiry() {
        let written = plan(None, &scores(&[("cpuAvailable", 3)]), at(1000), TEN_MINUTES).unwrap();
        assert_eq!(written, published(&[("cpuAvailable", 3)], Some(1600)));
    }

    #[test]
    fn the_same_scores_with_a_fresh_expiry_are_not_written_again() {
        let hub = published(&[("cpuAvailable", 3), ("memAvailable", -5)], Some(1600));
        let wanted = scores(&[("cpuAvailable", 3), ("memAvailable", -5)]);
        assert_eq!(plan(Some(&hub), &wanted, at(1000), TEN_MINUTES), None);
        // Still more than half of the ten minutes left.
        assert_eq!(plan(Some(&hub), &wanted, at(1299), TEN_MINUTES), None);
    }

    #[test]
    fn the_expiry_is_refreshed_once_less_than_half_is_left() {
        let hub = published(&[("cpuAvailable", 3)], Some(1600));
        let wanted = scores(&[("cpuAvailable", 3)]);
        assert_eq!(
            plan(Some(&hub), &wanted, at(1301), TEN_MINUTES),
            Some(published(&[("cpuAvailable", 3)], Some(1901)))
        );
        // Long expired: refreshed too.
        assert!(plan(Some(&hub), &wanted, at(99_999), TEN_MINUTES).is_some());
    }

    #[test]
    fn a_changed_score_is_written_at_once() {
        let hub = published(&[("cpuAvailable", 3), ("memAvailable", -5)], Some(1600));
        let wanted = scores(&[("cpuAvailable", 2), ("memAvailable", -5)]);
        assert_eq!(
            plan(Some(&hub), &wanted, at(1001), TEN_MINUTES),
            Some(published(
                &[("cpuAvailable", 2), ("memAvailable", -5)],
                Some(1601)
            ))
        );
    }

    #[test]
    fn a_missing_score_is_written() {
        let hub = published(&[("cpuAvailable", 3)], Some(1600));
        let wanted = scores(&[("cpuAvailable", 3), ("memAvailable", -5)]);
        assert!(plan(Some(&hub), &wanted, at(1000), TEN_MINUTES).is_some());
    }

    #[test]
    fn the_last_of_repeated_names_is_the_published_one() {
        let hub = published(&[("cpuAvailable", 9), ("cpuAvailable", 3)], Some(1600));
        assert_eq!(
            plan(Some(&hub), &scores(&[("cpuAvailable", 3)]), at(1000), TEN_MINUTES),
            None
        );
    }

    #[test]
    fn without_a_validity_no_expiry_is_written_and_a_published_one_is_removed() {
        let wanted = scores(&[("cpuAvailable", 3)]);
        let hub = published(&[("cpuAvailable", 3)], None);
        assert_eq!(plan(Some(&hub), &wanted, at(1000), None), None);
        let with_expiry = published(&[("cpuAvailable", 3)], Some(1600));
        assert_eq!(
            plan(Some(&with_expiry), &wanted, at(1000), None),
            Some(published(&[("cpuAvailable", 3)], None))
        );
        assert_eq!(
            plan(None, &wanted, at(1000), None),
            Some(published(&[("cpuAvailable", 3)], None))
        );
    }

    #[test]
    fn a_published_status_without_an_expiry_gets_one() {
        let hub = published(&[("cpuAvailable", 3)], None);
        assert!(plan(Some(&hub), &scores(&[("cpuAvailable", 3)]), at(1000), TEN_MINUTES).is_some());
    }

    #[test]
    fn an_absurd_validity_saturates_instead_of_overflowing() {
        let written = plan(None, &[], at(1000), Some(Duration::MAX)).unwrap();
        assert_eq!(written.valid_until, Some(Time(Timestamp::MAX)));
    }

    #[test]
    fn the_status_reads_as_the_api_writes_it() {
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
            "kind": "AddOnPlacementScore",
            "metadata": {"name": SCORE_NAME, "namespace": "cluster1"},
            "status": {
                "conditions": [],
                "scores": [{"name": "cpuAvailable", "value": -12}],
                "validUntil": "2026-05-01T10:00:00Z"
            }
        }))
        .unwrap();
        let status = status_of(&object);
        assert_eq!(status.scores, scores(&[("cpuAvailable", -12)]));
        assert_eq!(
            status.valid_until.map(|t| t.0),
            Some("2026-05-01T10:00:00Z".parse::<Timestamp>().unwrap())
        );
    }

    #[test]
    fn the_apply_configuration_names_the_object_and_carries_the_status() {
        let status = serde_json::to_value(published(&[("cpuAvailable", 1)], Some(1600))).unwrap();
        let applied = object(status);
        assert_eq!(
            applied["apiVersion"],
            "cluster.open-cluster-management.io/v1alpha1"
        );
        assert_eq!(applied["kind"], "AddOnPlacementScore");
        assert_eq!(applied["metadata"]["name"], "resource-usage-score");
        assert_eq!(applied["status"]["scores"][0]["name"], "cpuAvailable");
        assert_eq!(applied["status"]["validUntil"], "1970-01-01T00:26:40Z");
        assert!(object(serde_json::Value::Null).get("status").is_none());
    }
}
