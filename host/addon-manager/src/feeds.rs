//! The add-on manager's view of the process's shared feeds ([`flotilla_kube::feed::Feeds`]):
//! which kinds its controllers read, each kept as the union of what the hub's readers use,
//! and what of each object wakes which controller.
//!
//! | kind | readers here | kept |
//! |---|---|---|
//! | ManagedClusterAddOn | install, rollout, registration, deploy, health | all |
//! | ManagedCluster | install, registration, deploy, health | [`for_hub`] (placement reads the rest) |
//! | ClusterManagementAddOn | plugin, install, rollout, registration, deploy, health | all |
//! | AddOnPlugin | plugin, rollout, registration, deploy, health | all |
//! | ManifestWork (add-on label) | deploy, health | metadata, objects' identities, status but per-object conditions ([`slim_work`]) |
//! | Placement, PlacementDecision (placement label) | install, rollout | all |
//! | AddOnTemplate | every template add-on's reconcile | all |
//!
//! Managed fields are dropped from every object.

use flotilla_api::addon::consts::ADDON_NAME_LABEL;
use flotilla_api::addon::v1alpha1::{AddOnTemplate, ClusterManagementAddOn, ManagedClusterAddOn};
use flotilla_api::cluster::consts::PLACEMENT_LABEL;
use flotilla_api::cluster::v1::{ManagedCluster, ManagedClusterStatus};
use flotilla_api::cluster::v1beta1::{Placement, PlacementDecision};
use flotilla_api::plugins::v1alpha1::AddOnPlugin;
use flotilla_api::work::v1::{ManifestWork, ManifestWorkSpec};
use flotilla_core::addon::works::{keep_only_work_objects, work_spec_hash};
use flotilla_core::registration::hub::cached::for_hub;
use flotilla_kube::feed::{Feed, Namespaces, hash_of};
use kube::ResourceExt as _;

/// The shared feeds, as the add-on manager's controllers ask for them; they subscribe before
/// the process runs the feeds.
pub(crate) struct Feeds<'a>(pub(crate) &'a mut flotilla_kube::feed::Feeds);

impl Feeds<'_> {
    pub(crate) fn addons(&mut self) -> &mut Feed<ManagedClusterAddOn> {
        self.0.feed(None, None)
    }

    /// The add-ons by cluster namespace: which a cluster's change wakes.
    pub(crate) fn addons_by_cluster(&mut self) -> Namespaces<ManagedClusterAddOn> {
        self.addons().namespaces()
    }

    pub(crate) fn clusters(&mut self) -> &mut Feed<ManagedCluster> {
        self.0.feed(None, Some(for_hub))
    }

    pub(crate) fn cmas(&mut self) -> &mut Feed<ClusterManagementAddOn> {
        self.0.feed(None, None)
    }

    pub(crate) fn plugins(&mut self) -> &mut Feed<AddOnPlugin> {
        self.0.feed(None, None)
    }

    pub(crate) fn works(&mut self) -> &mut Feed<ManifestWork> {
        self.0.feed(Some(ADDON_NAME_LABEL), Some(slim_work))
    }

    /// The add-on works by cluster namespace: an add-on's own, found without a scan.
    pub(crate) fn works_by_cluster(&mut self) -> Namespaces<ManifestWork> {
        self.works().namespaces()
    }

    pub(crate) fn placements(&mut self) -> &mut Feed<Placement> {
        self.0.feed(None, None)
    }

    pub(crate) fn decisions(&mut self) -> &mut Feed<PlacementDecision> {
        self.0.feed(Some(PLACEMENT_LABEL), None)
    }

    /// AddOnTemplates: every reconcile of a template add-on reads its own.
    pub(crate) fn templates(&mut self) -> &mut Feed<AddOnTemplate> {
        self.0.feed(None, None)
    }
}

/// Annotation the work cache ([`slim_work`]) puts on each work it keeps, never written to the
/// apiserver: [`work_spec_hash`] of the work's whole spec as read.
pub(crate) const OBSERVED_SPEC_HASH: &str = "flotilla.dev/observed-spec-hash";

/// Keeps of a work what the controllers here read: a thousand clusters' add-on works held
/// whole were the largest part of the hub's memory.
/// - Of its spec, only each object's identity and replicas, in an annotation
///   ([`keep_only_work_objects`]): where the deploy keeps each object when it plans the works
///   again, and which Deployments the health check probes. The hash of the whole spec, in
///   [`OBSERVED_SPEC_HASH`], tells the deploy whether the spec is still the one it applied.
/// - Of its status, the work's conditions and each object's identity and feedback values (the
///   health check's), not each object's conditions.
pub(crate) fn slim_work(work: &mut ManifestWork) {
    let observed = work_spec_hash(&work.spec).unwrap_or_default();
    work.annotations_mut()
        .insert(OBSERVED_SPEC_HASH.to_owned(), observed);
    keep_only_work_objects(work);
    work.spec = ManifestWorkSpec {
        workload: std::mem::take(&mut work.spec.workload),
        ..Default::default()
    };
    if let Some(status) = work.status.as_mut() {
        for manifest in &mut status.resource_status.manifests {
            manifest.conditions = Vec::new();
        }
    }
}

/// What rendering reads of a cluster (the plugin's inputs): metadata, spec and status but its
/// conditions, whose transitions change no manifest, and its capacity and allocatable, which
/// its agent rewrites with every resource change and no plugin sees.
pub(crate) fn cluster_for_render(cluster: &ManagedCluster) -> Option<u64> {
    hash_of(&(
        &cluster.metadata.labels,
        &cluster.metadata.annotations,
        cluster.metadata.deletion_timestamp.is_some(),
        &cluster.spec,
        cluster.status.as_ref().map(|s| without_resources(s, false)),
    ))
}

/// What the health check reads of a cluster: [`cluster_for_render`] and its conditions
/// (an unavailable cluster's add-ons are Unknown).
pub(crate) fn cluster_with_conditions(cluster: &ManagedCluster) -> Option<u64> {
    hash_of(&(
        &cluster.metadata.labels,
        &cluster.metadata.annotations,
        cluster.metadata.deletion_timestamp.is_some(),
        &cluster.spec,
        cluster.status.as_ref().map(|s| without_resources(s, true)),
    ))
}

/// `status` without its capacity and allocatable, and without its conditions unless `conditions`.
fn without_resources(status: &ManagedClusterStatus, conditions: bool) -> ManagedClusterStatus {
    ManagedClusterStatus {
        conditions: if conditions {
            status.conditions.clone()
        } else {
            None
        },
        capacity: Default::default(),
        allocatable: Default::default(),
        ..status.clone()
    }
}

/// Of a CMA, only whether it is ours: its annotations. Its status, which the rollout writes at
/// every step, must not wake the per-add-on controllers.
pub(crate) fn cma_annotations(cma: &ClusterManagementAddOn) -> Option<u64> {
    hash_of(&cma.metadata.annotations)
}

#[cfg(test)]
mod tests {
    use flotilla_api::work::v1::{
        Manifest, ManifestConfigOption, ManifestWork, ManifestWorkSpec, ManifestWorkStatus, ManifestsTemplate,
    };
    use flotilla_core::addon::works::{work_objects, work_spec_hash};
    use kube::ResourceExt as _;
    use serde_json::json;

    use super::{OBSERVED_SPEC_HASH, slim_work};

    #[test]
    fn a_slim_work_keeps_its_objects_identities_feedback_and_the_hash_of_its_whole_spec() {
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "agent", "namespace": "ns", "labels": {"a": "b"}},
            "spec": {"replicas": 0, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "r"}, "rules": [{"verbs": ["get"]}]});
        let spec = ManifestWorkSpec {
            workload: ManifestsTemplate {
                manifests: vec![Manifest(deployment), Manifest(role)],
            },
            manifest_configs: vec![ManifestConfigOption::default()],
            ..Default::default()
        };
        let mut work = ManifestWork::new("w", spec.clone());
        let reported: ManifestWorkStatus = serde_json::from_value(json!({
            "conditions": [{"type": "Applied", "status": "True", "reason": "R", "message": "",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "resourceStatus": {"manifests": [{
                "resourceMeta": {"ordinal": 0, "group": "apps", "version": "v1", "kind": "Deployment",
                                 "resource": "deployments", "name": "agent", "namespace": "ns"},
                "statusFeedback": {"values": [{"name": "ReadyReplicas",
                                               "fieldValue": {"type": "Integer", "integer": 1}}]},
                "conditions": [{"type": "Applied", "status": "True", "reason": "R", "message": "",
                                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]}
        }))
        .expect("status");
        work.status = Some(reported.clone());
        slim_work(&mut work);
        let status = work.status.as_ref().expect("status kept");
        assert_eq!(status.conditions, reported.conditions);
        let manifest = &status.resource_status.manifests[0];
        assert_eq!(
            manifest.resource_meta,
            reported.resource_status.manifests[0].resource_meta
        );
        assert_eq!(
            manifest.status_feedbacks,
            reported.resource_status.manifests[0].status_feedbacks
        );
        assert!(manifest.conditions.is_empty());
        assert!(work.spec.workload.manifests.is_empty());
        let objects: Vec<_> = work_objects(&work)
            .into_iter()
            .map(|o| (o.kind, o.name, o.replicas))
            .collect();
        assert_eq!(
            objects,
            [
                ("Deployment".to_owned(), "agent".to_owned(), Some(0)),
                ("ClusterRole".to_owned(), "r".to_owned(), None)
            ]
        );
        assert!(work.spec.manifest_configs.is_empty());
        assert_eq!(
            work.annotations().get(OBSERVED_SPEC_HASH),
            work_spec_hash(&spec).as_ref()
        );
    }

    #[test]
    fn the_cache_annotations_a_work_arrives_with_are_overwritten() {
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "agent", "namespace": "ns"}, "spec": {"replicas": 1}});
        let spec = ManifestWorkSpec {
            workload: ManifestsTemplate {
                manifests: vec![Manifest(deployment)],
            },
            ..Default::default()
        };
        let mut work = ManifestWork::new("w", spec.clone());
        // What a work author could write to pass for another spec, or hide its objects from
        // the health check.
        work.annotations_mut()
            .insert(OBSERVED_SPEC_HASH.to_owned(), "forged".to_owned());
        work.annotations_mut().insert(
            flotilla_core::addon::works::WORK_OBJECTS_ANNOTATION.to_owned(),
            r#"[{"apiVersion":"v1","kind":"ConfigMap","namespace":"x","name":"decoy"}]"#.to_owned(),
        );
        slim_work(&mut work);
        assert_eq!(
            work.annotations().get(OBSERVED_SPEC_HASH),
            work_spec_hash(&spec).as_ref()
        );
        let objects: Vec<_> = work_objects(&work)
            .into_iter()
            .map(|o| (o.kind, o.name))
            .collect();
        assert_eq!(objects, [("Deployment".to_owned(), "agent".to_owned())]);
    }
}
