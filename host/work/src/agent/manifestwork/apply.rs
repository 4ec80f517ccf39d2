//! Applying a work's manifests to the managed cluster, in kind order: the manifests of one
//! rank at once ([`apply_waves`]), so a namespace or a CRD exists before what lives in it.
//! Each manifest is resolved through discovery, checked against the work's executor, written
//! with its update strategy ([`crate::agent::apply`]) and read back; what happened is a
//! [`ManifestResult`], from which the later steps record the object and write its status.
//!
//! One manifest failing does not stop the others: its failure is its `Applied` condition.

use std::{collections::BTreeMap, time::Duration};

use flotilla_api::work::{
    consts::manifest_work::CONDITION_COMPLETE,
    v1::{
        AppliedManifestResourceMeta, ManifestConfigOption, ManifestResourceMeta, ManifestWork,
        ManifestWorkStatus, UpdateStrategyType,
    },
};
use flotilla_core::{
    conditions::is_true,
    resources::ResourceKey,
    work::agent::{
        conditions::{ApplyOutcome, Availability},
        order::apply_waves,
        ownership::{owned_by_work, releases_pre_existing, required_owner},
        watch::MetadataKeys,
    },
};
use futures::{StreamExt as _, stream};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{
    Api,
    api::DynamicObject,
    core::GroupVersionKind,
    discovery::ApiResource,
    runtime::{conditions::is_crd_established, wait::await_condition},
};
use serde_json::Value;

use super::manifest::{find_config, same_manifest, watched_object, watches_feedback};
use crate::agent::{Context, apply, discovery::Resolved, executor};

/// Manifests of one wave applied at once, at most.
const WAVE_CONCURRENCY: usize = 8;

/// What happened to one manifest in this reconcile.
pub(super) struct ManifestResult {
    /// The manifest's identity, with its resource when discovery found it.
    pub(super) meta: ManifestResourceMeta,
    /// Whether it was applied.
    pub(super) outcome: ApplyOutcome,
    /// Whether its object exists.
    pub(super) availability: Availability,
    /// The object as written or read, if it exists.
    pub(super) live: Option<Value>,
    /// The object's uid, if it exists.
    pub(super) uid: Option<String>,
    /// Whether the group/resource is known (else the manifest's name blocks clean-up).
    pub(super) resolved: bool,
    /// When the agent keeps the object as written (applied with Update or ServerSideApply),
    /// the manifest's label and annotation keys: a change of its content is drift.
    pub(super) kept: Option<MetadataKeys>,
}

/// What one manifest's apply tells the later ones.
#[derive(Default)]
struct Flags {
    /// An executor was denied.
    denied: bool,
    /// A CRD was applied in this pass: its kind may take a moment to show in discovery.
    crd_applied: bool,
}

/// Applies every manifest of `work` in kind order; returns results in spec order and whether
/// an executor was denied. `status` is the work's status as read (a manifest that completed is
/// only read), `owner` the AppliedManifestWork's owner reference and `recorded` what it
/// records (an object it holds is read before it is written).
pub(super) async fn apply_all(
    ctx: &Context,
    work: &ManifestWork,
    status: &ManifestWorkStatus,
    owner: &OwnerReference,
    recorded: &[AppliedManifestResourceMeta],
) -> (Vec<ManifestResult>, bool) {
    let applier = Applier {
        ctx,
        work,
        status,
        owner,
        recorded,
        executor_user: executor::executor_user(work.spec.executor.as_ref()),
    };
    let manifests = &work.spec.workload.manifests;
    let kinds: Vec<Option<&str>> = manifests
        .iter()
        .map(|m| m.0.get("kind").and_then(Value::as_str))
        .collect();
    let mut results: BTreeMap<usize, ManifestResult> = BTreeMap::new();
    let mut flags = Flags::default();
    for wave in apply_waves(&kinds) {
        let crd_applied = flags.crd_applied;
        let applied: Vec<(usize, ManifestResult, Flags)> = stream::iter(wave)
            .map(|index| {
                let ordinal = i32::try_from(index).unwrap_or(i32::MAX);
                let applier = &applier;
                async move {
                    let (result, flags) = applier.apply_one(&manifests[index].0, ordinal, crd_applied).await;
                    (index, result, flags)
                }
            })
            .buffered(WAVE_CONCURRENCY)
            .collect()
            .await;
        for (index, result, wave_flags) in applied {
            flags.denied |= wave_flags.denied;
            flags.crd_applied |= wave_flags.crd_applied;
            results.insert(index, result);
        }
    }
    (results.into_values().collect(), flags.denied)
}

/// What every manifest of one work's apply shares.
struct Applier<'a> {
    ctx: &'a Context,
    work: &'a ManifestWork,
    /// The work's status as read.
    status: &'a ManifestWorkStatus,
    /// The AppliedManifestWork's owner reference.
    owner: &'a OwnerReference,
    /// The applied resources the AppliedManifestWork records.
    recorded: &'a [AppliedManifestResourceMeta],
    /// The user of the work's executor, if it names one.
    executor_user: Option<String>,
}

/// The resource a manifest resolved to.
struct Target {
    /// The manifest's identity: resource filled in, namespace cleared when cluster-scoped.
    meta: ManifestResourceMeta,
    /// The resource serving its kind.
    resource: ApiResource,
    /// Whether its objects live in namespaces.
    namespaced: bool,
    /// The API of its objects (in its namespace when namespaced).
    api: Api<DynamicObject>,
}

impl Target {
    fn is_crd(&self) -> bool {
        self.meta.kind == "CustomResourceDefinition" && self.meta.group == "apiextensions.k8s.io"
    }
}

impl Applier<'_> {
    /// Resolves, writes (unless it completed) and reads back one manifest, the `ordinal`-th of
    /// the spec; `crd_applied` says an earlier wave applied a CRD.
    async fn apply_one(&self, manifest: &Value, ordinal: i32, crd_applied: bool) -> (ManifestResult, Flags) {
        let target = match self.resolve(manifest, ordinal, crd_applied).await {
            Ok(target) => target,
            Err(failed) => return (*failed, Flags::default()),
        };
        let config = find_config(&self.work.spec.manifest_configs, &target.meta);
        let strategy = config
            .and_then(|c| c.update_strategy.as_ref())
            .map(|s| s.type_)
            .unwrap_or_default();
        // A manifest that completed is not touched again.
        let complete = self
            .status
            .resource_status
            .manifests
            .iter()
            .find(|m| same_manifest(&m.resource_meta, &target.meta))
            .is_some_and(|m| is_true(&m.conditions, CONDITION_COMPLETE));

        let mut flags = Flags::default();
        let (mut outcome, written) = if complete {
            (ApplyOutcome::Applied, None)
        } else {
            self.write(&target, manifest, config, strategy, &mut flags).await
        };
        if outcome == ApplyOutcome::Applied && target.is_crd() {
            match self.wait_established(&target.meta.name).await {
                Ok(()) => flags.crd_applied = true,
                Err(message) => outcome = ApplyOutcome::Failed(message),
            }
        }

        let live = match written {
            Some(object) => Ok(Some(object)),
            None => target.api.get_opt(&target.meta.name).await,
        };
        let kept = !complete
            && outcome == ApplyOutcome::Applied
            && matches!(
                strategy,
                UpdateStrategyType::Update | UpdateStrategyType::ServerSideApply
            );
        if let Ok(Some(object)) = &live
            && (kept || watches_feedback(config))
        {
            self.ctx
                .watches
                .observed(watched_object(&target.meta), &object.metadata);
        }
        (read_back(target.meta, outcome, live, kept, manifest), flags)
    }

    /// The resource serving `manifest`, or the failed result of a manifest that names none.
    async fn resolve(
        &self,
        manifest: &Value,
        ordinal: i32,
        crd_applied: bool,
    ) -> Result<Target, Box<ManifestResult>> {
        let mut meta = ManifestResourceMeta {
            ordinal,
            ..ManifestResourceMeta::default()
        };
        let Some(key) = ResourceKey::of(manifest) else {
            let message = "the manifest needs apiVersion, kind and metadata.name".into();
            return Err(failed(meta, message, false));
        };
        let (group, version) = key.group_version();
        meta.group = group.to_owned();
        meta.version = version.to_owned();
        meta.kind = key.kind;
        meta.name = key.name;
        meta.namespace = key.namespace;
        let gvk = GroupVersionKind::gvk(&meta.group, &meta.version, &meta.kind);
        let resolved = match self.discover(&gvk, crd_applied).await {
            Ok(resolved) => resolved,
            Err(message) => return Err(failed(meta, message, false)),
        };
        meta.resource.clone_from(&resolved.resource.plural);
        if !resolved.namespaced {
            meta.namespace.clear();
        } else if meta.namespace.is_empty() {
            let message = format!("{} is namespaced: set metadata.namespace", meta.kind);
            return Err(failed(meta, message, true));
        }
        let api = if resolved.namespaced {
            Api::namespaced_with(self.ctx.managed.clone(), &meta.namespace, &resolved.resource)
        } else {
            Api::all_with(self.ctx.managed.clone(), &resolved.resource)
        };
        Ok(Target {
            meta,
            resource: resolved.resource,
            namespaced: resolved.namespaced,
            api,
        })
    }

    /// The resource serving `gvk`. Discovery serves a just-Established CRD's kind a moment
    /// later, so after a CRD was applied a missing kind is looked up again for a while.
    async fn discover(&self, gvk: &GroupVersionKind, crd_applied: bool) -> Result<Resolved, String> {
        let mut resolved = self.ctx.discovery.resolve(gvk).await;
        let mut attempts = if crd_applied { 10 } else { 0 };
        while resolved.is_err() && attempts > 0 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            resolved = self.ctx.discovery.resolve(gvk).await;
            attempts -= 1;
        }
        resolved
    }

    /// Writes `manifest` as `target` with `strategy`, once the executor may: the outcome, and
    /// the object as written when it was. A denied executor sets `flags.denied`.
    async fn write(
        &self,
        target: &Target,
        manifest: &Value,
        config: Option<&ManifestConfigOption>,
        strategy: UpdateStrategyType,
        flags: &mut Flags,
    ) -> (ApplyOutcome, Option<DynamicObject>) {
        let meta = &target.meta;
        let owned = owned_by_work(
            self.work.spec.delete_option.as_ref(),
            &meta.group,
            &meta.resource,
            &meta.namespace,
            &meta.name,
        );
        let required = required_owner(self.owner, owned && strategy != UpdateStrategyType::ReadOnly);
        let namespace = target.namespaced.then_some(meta.namespace.as_str());
        let desired = desired_object(manifest, namespace);
        if let Some(user) = self.executor_user.as_deref()
            && let Err(message) = self.check_executor(user, target, &desired, owned).await
        {
            flags.denied = true;
            return (ApplyOutcome::Failed(message), None);
        }
        let ssa = config
            .and_then(|c| c.update_strategy.as_ref())
            .and_then(|s| s.server_side_apply.as_ref());
        let known = self.recorded.iter().any(|r| {
            r.group == meta.group
                && r.resource == meta.resource
                && r.namespace == meta.namespace
                && r.name == meta.name
        });
        let release = releases_pre_existing(self.work.metadata.annotations.as_ref());
        let applied = apply::apply(
            &target.api,
            &meta.name,
            desired,
            strategy,
            ssa,
            &required,
            known,
            release,
        )
        .await;
        match applied {
            Ok(object) => (ApplyOutcome::Applied, Some(object)),
            Err(failure) => (failure, None),
        }
    }

    /// Whether the executor `user` may write `desired` as `target`: its access review, then,
    /// for RBAC objects, the dry run that shows an escalation.
    async fn check_executor(
        &self,
        user: &str,
        target: &Target,
        desired: &Value,
        owned: bool,
    ) -> Result<(), String> {
        let meta = &target.meta;
        let managed = &self.ctx.managed;
        executor::check(
            managed,
            user,
            &meta.group,
            &meta.resource,
            &meta.namespace,
            &meta.name,
            owned,
        )
        .await?;
        if executor::escalation_checked(&meta.group, &meta.resource) {
            executor::check_escalation(managed, user, &target.resource, &meta.namespace, desired).await?;
        }
        Ok(())
    }

    /// Waits until the CRD `name` is Established, so the custom resources of the next waves
    /// can be applied; why not, when it is not within the timeout.
    async fn wait_established(&self, name: &str) -> Result<(), String> {
        let timeout = self.ctx.options.crd_established_timeout;
        let crds: Api<CustomResourceDefinition> = Api::all(self.ctx.managed.clone());
        let established = await_condition(crds, name, is_crd_established());
        match tokio::time::timeout(timeout, established).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(format!("waiting for the CRD to be Established: {error}")),
            Err(_) => Err(format!(
                "the CRD is not Established after {timeout:?}; check its conditions"
            )),
        }
    }
}

/// The result of a manifest that failed before it could be written; `resolved` says whether
/// its resource is known.
fn failed(meta: ManifestResourceMeta, message: String, resolved: bool) -> Box<ManifestResult> {
    Box::new(ManifestResult {
        meta,
        outcome: ApplyOutcome::Failed(message),
        availability: Availability::IncompleteMeta,
        live: None,
        uid: None,
        resolved,
        kept: None,
    })
}

/// `manifest` as written: without `uid` and `resourceVersion`, and in `namespace` when its
/// kind is namespaced.
fn desired_object(manifest: &Value, namespace: Option<&str>) -> Value {
    let mut desired = manifest.clone();
    if let Some(meta_map) = desired.get_mut("metadata").and_then(Value::as_object_mut) {
        meta_map.remove("uid");
        meta_map.remove("resourceVersion");
        if let Some(namespace) = namespace {
            meta_map.insert("namespace".into(), Value::String(namespace.to_owned()));
        }
    }
    desired
}

/// The result of a manifest whose object was written or read (`live`); `kept` says whether
/// the agent keeps it as written.
fn read_back(
    meta: ManifestResourceMeta,
    outcome: ApplyOutcome,
    live: kube::Result<Option<DynamicObject>>,
    kept: bool,
    manifest: &Value,
) -> ManifestResult {
    let (availability, live) = match live {
        Ok(Some(object)) => (Availability::Found, Some(object)),
        Ok(None) => (Availability::NotFound, None),
        Err(error) => (Availability::FetchFailed(error.to_string()), None),
    };
    let uid = live.as_ref().and_then(|o| o.metadata.uid.clone());
    let live = live.and_then(|o| serde_json::to_value(o).ok());
    let kept = (kept && live.is_some()).then(|| metadata_keys(manifest));
    ManifestResult {
        meta,
        outcome,
        availability,
        live,
        uid,
        resolved: true,
        kept,
    }
}

/// The label and annotation keys `manifest` sets.
fn metadata_keys(manifest: &Value) -> MetadataKeys {
    let keys = |field: &str| {
        manifest
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_object)
            .map(|map| map.keys().cloned().collect())
            .unwrap_or_default()
    };
    MetadataKeys {
        labels: keys("labels"),
        annotations: keys("annotations"),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn manifest() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "settings",
                "uid": "from-another-cluster",
                "resourceVersion": "42",
                "labels": {"app": "web"},
                "annotations": {"note": "x"},
            },
        })
    }

    #[test]
    fn the_written_object_drops_uid_and_resource_version_and_gets_the_namespace() {
        let desired = desired_object(&manifest(), Some("apps"));
        assert_eq!(
            desired["metadata"],
            json!({
                "name": "settings",
                "namespace": "apps",
                "labels": {"app": "web"},
                "annotations": {"note": "x"},
            })
        );
        assert_eq!(
            desired_object(&manifest(), None)["metadata"].get("namespace"),
            None
        );
    }

    #[test]
    fn an_object_kept_as_written_is_watched_for_its_labels_and_annotations() {
        let live: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "apps", "uid": "uid-1"},
        }))
        .expect("a ConfigMap");
        let result = read_back(
            ManifestResourceMeta::default(),
            ApplyOutcome::Applied,
            Ok(Some(live)),
            true,
            &manifest(),
        );
        assert_eq!(result.availability, Availability::Found);
        assert_eq!(result.uid.as_deref(), Some("uid-1"));
        let kept = result.kept.expect("kept");
        assert_eq!(kept.labels, ["app".to_owned()].into());
        assert_eq!(kept.annotations, ["note".to_owned()].into());
    }

    #[test]
    fn a_missing_object_is_not_available_and_not_kept() {
        let result = read_back(
            ManifestResourceMeta::default(),
            ApplyOutcome::Applied,
            Ok(None),
            true,
            &manifest(),
        );
        assert_eq!(result.availability, Availability::NotFound);
        assert!(result.live.is_none() && result.uid.is_none() && result.kept.is_none());
    }
}
