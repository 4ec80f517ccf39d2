//! One placement reference rolled out: its decisions become cluster groups, its current works
//! the clusters' rollout states, and [`rollout::plan`] says which clusters get the template
//! now; works of clusters the placement no longer chooses are deleted. What was found is
//! returned as a [`PlacementOutcome`] for the status.
//!
//! The Placement and its decisions are read from the API server, not a cache (see the
//! controller's docs); a failed read fails the reconcile before any status is written, since
//! the status would describe decisions that were never seen.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;

use flotilla_api::cluster::consts::PLACEMENT_LABEL;
use flotilla_api::cluster::v1beta1::{Placement, PlacementDecision};
use flotilla_api::work::consts::PLACEMENT_NAME_LABEL;
use flotilla_api::work::v1::{ManifestWork, ManifestWorkSpec};
use flotilla_api::work::v1alpha1::{LocalPlacementReference, ManifestWorkReplicaSet};
use flotilla_core::rollout::{self, ClusterGroups, ClusterState, ClusterStatus, Rollout};
use flotilla_core::work::replicaset::{self, PlacementOutcome};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::reconcile::Pass;
use super::works;
use crate::hub::error::{Error, Result};

/// What rolling out each placement of one replica set shares.
pub(super) struct Deploy<'a> {
    /// Client with the hub's identity.
    pub(super) client: &'a kube::Client,
    /// The replica set.
    pub(super) set: &'a ManifestWorkReplicaSet,
    /// Its owner label value, `<ns>.<name>`.
    pub(super) owner: &'a str,
    /// Its works, as listed at the start of the reconcile.
    pub(super) works: &'a [ManifestWork],
    /// The time the rollout is planned at.
    pub(super) now: Timestamp,
}

impl Deploy<'_> {
    /// Rolls the replica set out to the clusters of placement `reference`. Write failures are
    /// kept in `pass`; only a failed read of the placement or its decisions is returned.
    pub(super) async fn placement(
        &self,
        reference: &LocalPlacementReference,
        pass: &mut Pass,
    ) -> Result<PlacementOutcome> {
        let namespace = self.set.namespace().unwrap_or_default();
        let Some(placement) = read_placement(self.client, &namespace, &reference.name).await? else {
            return Ok(PlacementOutcome::NotFound);
        };
        let decisions = list_decisions(self.client, &namespace, &reference.name).await?;
        let groups = match ClusterGroups::from_decisions(&decisions) {
            Ok(groups) => groups,
            Err(error) => return Ok(invalid(&reference.name, error)),
        };
        let mine = placement_works(self.works, &reference.name);
        let mut current = Current::of(&mine, &self.set.spec.manifest_work_template);
        let plan = match rollout::plan(&reference.rollout_strategy, &groups, &current.states, self.now) {
            Ok(plan) => plan,
            Err(error) => return Ok(invalid(&reference.name, error)),
        };
        pass.recheck = earliest(pass.recheck, plan.recheck_after);
        self.apply_to_roll_out(&reference.name, &plan, &mine, &mut current, pass)
            .await;
        self.delete_unchosen(&groups, &mine, &mut current, pass).await;

        let placement_status = placement.status.unwrap_or_default();
        Ok(PlacementOutcome::RolledOut {
            name: reference.name.clone(),
            decision_groups: placement_status.decision_groups.map_or(0, |g| g.len()),
            selected_clusters: placement_status.number_of_selected_clusters,
            clusters_with_work: current.with_work.len(),
            succeeded: current.succeeded,
        })
    }

    /// Creates or updates the work of every cluster the plan puts in `ToApply`.
    async fn apply_to_roll_out(
        &self,
        placement: &str,
        plan: &Rollout,
        mine: &BTreeMap<String, &ManifestWork>,
        current: &mut Current,
        pass: &mut Pass,
    ) {
        for cluster in plan
            .to_rollout
            .iter()
            .filter(|c| c.state == ClusterState::ToApply)
        {
            let existing_work = mine.get(&cluster.cluster).copied();
            let desired = replicaset::desired_work(
                self.set,
                &cluster.cluster,
                placement,
                existing_work.map(|w| w.name_any()).as_deref(),
            );
            match works::apply(self.client, self.owner, desired, existing_work).await {
                Ok(()) => {
                    current.with_work.insert(cluster.cluster.clone());
                }
                Err(error) => pass.errors.push(error),
            }
        }
    }

    /// Deletes the works of clusters the placement no longer chooses, current or not.
    async fn delete_unchosen(
        &self,
        groups: &ClusterGroups,
        mine: &BTreeMap<String, &ManifestWork>,
        current: &mut Current,
        pass: &mut Pass,
    ) {
        let chosen = groups.clusters();
        for (cluster, work) in mine {
            if !chosen.contains(cluster.as_str()) {
                match works::delete(self.client, work).await {
                    Ok(()) => {
                        current.with_work.remove(cluster);
                        pass.deleted.insert(work.uid().unwrap_or_default());
                    }
                    Err(error) => pass.errors.push(error),
                }
            }
        }
    }
}

/// The Placement `name` in `namespace`, `None` when it does not exist.
async fn read_placement(client: &kube::Client, namespace: &str, name: &str) -> Result<Option<Placement>> {
    Api::<Placement>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|source| Error::Read {
            kind: "Placement",
            name: format!("{namespace}/{name}"),
            source,
        })
}

/// The PlacementDecisions of placement `name` in `namespace`.
async fn list_decisions(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Vec<PlacementDecision>> {
    let decisions = Api::<PlacementDecision>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&format!("{PLACEMENT_LABEL}={name}")))
        .await
        .map_err(|source| Error::List {
            kind: "PlacementDecision",
            scope: namespace.to_owned(),
            source,
        })?;
    Ok(decisions.items)
}

/// The outcome of a placement whose decisions or rollout strategy cannot be read.
fn invalid(placement: &str, error: impl Display) -> PlacementOutcome {
    PlacementOutcome::Invalid(format!("placement {placement}: {error}"))
}

/// The works of placement `placement`, by cluster (namespace).
fn placement_works<'a>(works: &'a [ManifestWork], placement: &str) -> BTreeMap<String, &'a ManifestWork> {
    works
        .iter()
        .filter(|w| w.labels().get(PLACEMENT_NAME_LABEL).map(String::as_str) == Some(placement))
        .map(|w| (w.namespace().unwrap_or_default(), w))
        .collect()
}

/// The rollout state of one placement's clusters, kept up to date by its writes.
#[derive(Debug, Default, PartialEq)]
struct Current {
    /// The rollout state of each cluster whose work carries the current template; the others
    /// are outdated and count as new clusters.
    states: Vec<ClusterStatus>,
    /// Clusters with a current work: those found, plus those written, minus those deleted.
    with_work: BTreeSet<String>,
    /// Clusters whose current work Succeeded, as found.
    succeeded: usize,
}

impl Current {
    /// The state of the clusters of `mine` (works by cluster) against `template`.
    fn of(mine: &BTreeMap<String, &ManifestWork>, template: &ManifestWorkSpec) -> Self {
        let mut current = Self::default();
        for (cluster, work) in mine {
            if !replicaset::work_is_current(work, template) {
                continue;
            }
            let state = replicaset::cluster_rollout_status(cluster, work);
            current.succeeded += usize::from(state.state == ClusterState::Succeeded);
            current.with_work.insert(cluster.clone());
            current.states.push(state);
        }
        current
    }
}

/// The sooner of two optional recheck delays.
fn earliest(a: Option<SignedDuration>, b: Option<SignedDuration>) -> Option<SignedDuration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use flotilla_api::work::v1::{Manifest, ManifestWork};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn template(data: &str) -> ManifestWorkSpec {
        let mut spec = ManifestWorkSpec::default();
        spec.workload.manifests = vec![Manifest(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "apps"},
            "data": {"value": data},
        }))];
        spec
    }

    fn work(cluster: &str, placement: &str, spec: ManifestWorkSpec) -> ManifestWork {
        let mut work = ManifestWork::new("", spec);
        work.metadata.namespace = Some(cluster.to_owned());
        work.metadata.labels = Some([(PLACEMENT_NAME_LABEL.to_owned(), placement.to_owned())].into());
        work
    }

    #[test]
    fn only_works_of_the_placement_count_by_cluster() {
        let works = [work("c1", "p1", template("a")), work("c2", "p2", template("a"))];
        let mine = placement_works(&works, "p1");
        assert_eq!(mine.keys().collect::<Vec<_>>(), ["c1"]);
    }

    #[test]
    fn an_outdated_work_counts_as_a_new_cluster() {
        let works = [
            work("c1", "p1", template("new")),
            work("c2", "p1", template("old")),
        ];
        let current = Current::of(&placement_works(&works, "p1"), &template("new"));
        assert_eq!(current.with_work, ["c1".to_owned()].into());
        assert_eq!(
            current
                .states
                .iter()
                .map(|s| s.cluster.as_str())
                .collect::<Vec<_>>(),
            ["c1"]
        );
        assert_eq!(current.succeeded, 0);
    }

    #[rstest::rstest]
    #[case::neither(None, None, None)]
    #[case::one(Some(5), None, Some(5))]
    #[case::the_other(None, Some(7), Some(7))]
    #[case::both(Some(9), Some(3), Some(3))]
    fn the_sooner_recheck_wins(
        #[case] a: Option<i64>,
        #[case] b: Option<i64>,
        #[case] expected: Option<i64>,
    ) {
        let secs = |s: Option<i64>| s.map(SignedDuration::from_secs);
        assert_eq!(earliest(secs(a), secs(b)), secs(expected));
    }
}
