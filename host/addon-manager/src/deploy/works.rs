//! An add-on's deploy works as the steps read and compare them: from the work cache, with the
//! spec hash an apply stamps on them, and against how the last deploy left them
//! ([`Deployment`]). Both the deploy works and the pre-delete hook work are applied only when
//! [`unchanged`] says the work on the hub is not already what was rendered: a reconcile woken
//! by a status write then makes no request. How the last deploy of each add-on left its works
//! is kept in [`Context::deployed`].

use flotilla_api::addon::consts::ADDON_NAME_LABEL;
use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_api::work::consts::CONFIG_SPEC_HASH_ANNOTATION;
use flotilla_api::work::v1::ManifestWork;
use flotilla_core::addon::revision::WORK_REVISION_ANNOTATION;
use flotilla_core::addon::works::{
    AddonIdentity, WORK_SPEC_HASH_ANNOTATION, deploy_work_index, with_crd_defaults, work_spec_hash,
};
use kube::ResourceExt;

use super::{Context, Deployment, LeftWork};
use crate::feeds::OBSERVED_SPEC_HASH;

/// The add-on's deploy works, from the cache (which holds every write of this controller).
pub(super) fn current(ctx: &Context, addon: &ManagedClusterAddOn) -> Vec<ManifestWork> {
    let (name, namespace) = (addon.name_any(), addon.namespace().unwrap_or_default());
    ctx.works
        .objects(&namespace)
        .iter()
        .filter(|w| deploy_work_index(&name, &w.name_any()).is_some())
        .map(|w| ManifestWork::clone(w))
        .collect()
}

/// The add-on as its works name it: their owner and the namespace they go to.
pub(super) fn identity(addon: &ManagedClusterAddOn) -> AddonIdentity {
    AddonIdentity {
        name: addon.name_any(),
        namespace: addon.namespace().unwrap_or_default(),
        uid: addon.uid().unwrap_or_default(),
    }
}

/// Fills in `work` the CRD's defaults and records the hash of its spec, for [`unchanged`].
pub(super) fn stamp_spec_hash(work: &mut ManifestWork) {
    with_crd_defaults(&mut work.spec);
    if let Some(hash) = work_spec_hash(&work.spec) {
        work.annotations_mut()
            .insert(WORK_SPEC_HASH_ANNOTATION.to_owned(), hash);
    }
}

/// Whether `existing` (as the work cache keeps it, [`crate::feeds::slim_work`]) already is
/// `desired` (stamped by [`stamp_spec_hash`]) as far as the add-on manager owns it: the same
/// spec hash applied, and the spec read back still the one applied, or the one the apiserver
/// answered to this process's last write of it, `answered` (another manager's fields, which a
/// forced apply leaves, are then no change). A hand edit on the hub changes the spec and is
/// reverted.
pub(super) fn unchanged(existing: &ManifestWork, desired: &ManifestWork, answered: Option<&str>) -> bool {
    let annotation =
        |w: &ManifestWork, key: &str| w.metadata.annotations.as_ref().and_then(|a| a.get(key)).cloned();
    let observed = annotation(existing, OBSERVED_SPEC_HASH);
    observed.is_some()
        && (observed == annotation(desired, WORK_SPEC_HASH_ANNOTATION) || observed.as_deref() == answered)
        && [
            CONFIG_SPEC_HASH_ANNOTATION,
            WORK_REVISION_ANNOTATION,
            WORK_SPEC_HASH_ANNOTATION,
        ]
        .iter()
        .all(|key| annotation(existing, key) == annotation(desired, key))
        && existing.labels().get(ADDON_NAME_LABEL) == desired.labels().get(ADDON_NAME_LABEL)
        && desired
            .owner_references()
            .iter()
            .all(|o| existing.owner_references().iter().any(|e| e.uid == o.uid))
}

/// What of a deploy work (as the cache keeps it) the deploy compares with how it left the work:
/// all but its status, finalizers and resourceVersion.
pub(super) fn work_fingerprint(work: &ManifestWork) -> Option<u64> {
    crate::hash_of(&(
        &work.metadata.name,
        &work.metadata.labels,
        &work.metadata.annotations,
        &work.metadata.owner_references,
        work.metadata.deletion_timestamp.is_some(),
        &work.spec,
    ))
}

/// How `last` left work `name`.
pub(super) fn left_work<'a>(last: &'a Deployment, name: &str) -> Option<&'a LeftWork> {
    last.works
        .iter()
        .find(|(work, _)| work == name)
        .map(|(_, left)| left)
}

/// Whether `works`, an add-on's deploy works now, are the ones `last` left, each as it left it.
pub(super) fn as_left(last: &Deployment, works: &[ManifestWork]) -> bool {
    works.len() == last.works.len()
        && works.iter().all(|w| {
            left_work(last, &w.name_any()).is_some_and(|left| Some(left.fingerprint) == work_fingerprint(w))
        })
}

/// How the add-on was last deployed (by this process), if it was.
pub(super) fn last_deployed(ctx: &Context, addon: &ManagedClusterAddOn) -> Option<Deployment> {
    let id = deployed_key(addon);
    ctx.deployed.lock().ok().and_then(|d| d.get(&id).cloned())
}

/// Remembers `deployment` as how the add-on was last deployed.
pub(super) fn remember(ctx: &Context, addon: &ManagedClusterAddOn, deployment: Deployment) {
    if let Ok(mut deployed) = ctx.deployed.lock() {
        deployed.insert(deployed_key(addon), deployment);
    }
}

/// Forgets how the add-on was deployed: it is going, and garbage collection removes its works.
pub(super) fn forget(ctx: &Context, addon: &ManagedClusterAddOn) {
    if let Ok(mut deployed) = ctx.deployed.lock() {
        deployed.remove(&deployed_key(addon));
    }
}

/// The add-on's key in [`Context::deployed`]: `<cluster>/<name>`.
fn deployed_key(addon: &ManagedClusterAddOn) -> String {
    format!("{}/{}", addon.namespace().unwrap_or_default(), addon.name_any())
}
