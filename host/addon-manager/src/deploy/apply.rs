//! Third step: the rendered output becomes the add-on's `addon-<name>-deploy-<i>` works. The
//! works are built purely (`flotilla_core::addon::works::deploy_works`), each stamped with the
//! plugin revision that rendered it and the hash of its spec; only the works that changed are
//! applied (server-side, forced) and the ones no longer rendered deleted. How the writes left
//! them is returned, for the next reconcile to compare with ([`Deployment`]).

use std::collections::BTreeMap;

use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_api::work::v1::ManifestWork;
use flotilla_core::addon::revision::WORK_REVISION_ANNOTATION;
use flotilla_core::addon::status::{work_not_applied, works_not_built};
use flotilla_core::addon::works::{
    AgentManifest, DeployPlan, WORK_SPEC_HASH_ANNOTATION, deploy_works, manifest_configs,
};
use flotilla_wasm::Plugin;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::status::Report;
use super::works::{self, left_work, stamp_spec_hash, unchanged, work_fingerprint};
use super::{Context, Deployment, LeftWork};
use crate::error::{self, Result};
use crate::feeds::{OBSERVED_SPEC_HASH, slim_work};

/// The works `manifests` make for the add-on, beside its `existing` ones, stamped for
/// [`unchanged`]; `None` when they cannot be built (the report says why).
pub(super) fn plan(
    addon: &ManagedClusterAddOn,
    plugin: &Plugin,
    manifests: &[AgentManifest],
    existing: &[ManifestWork],
    report: &mut Report<'_>,
) -> Option<DeployPlan> {
    // The work agent reports the status feedback the add-on's health prober reads.
    let health = &plugin.options().health;
    let probes = crate::health::probe_configs(health);
    let configs = manifest_configs(crate::health::probe_feedback(health, &probes), manifests, &[]);
    let identity = works::identity(addon);
    let mut plan = match deploy_works(&identity, manifests, existing, &configs, report.references()) {
        Ok(plan) => plan,
        Err(e) => {
            report.set(works_not_built(&e.to_string()));
            return None;
        }
    };
    let serving = plugin.digest().to_string();
    for work in &mut plan.apply {
        work.annotations_mut()
            .insert(WORK_REVISION_ANNOTATION.to_owned(), serving.clone());
        stamp_spec_hash(work);
    }
    Some(plan)
}

/// Applies `plan` over the `existing` works and makes the status follow the works as the
/// writes left them; returns how they were left, for the next reconcile to compare with.
pub(super) async fn apply(
    ctx: &Context,
    addon: &ManagedClusterAddOn,
    plan: &DeployPlan,
    existing: Vec<ManifestWork>,
    last: Option<&Deployment>,
    report: &mut Report<'_>,
) -> Result<Vec<(String, LeftWork)>> {
    let nothing = plan.apply.is_empty() && plan.delete.is_empty() && existing.is_empty();
    // The works as they are after the writes: the apiserver's answers replace the listed ones.
    let mut works = existing;
    let answers = write(ctx, addon, &plan.apply, &mut works, last, report).await?;
    delete(ctx, addon, &plan.delete, &mut works).await?;
    works.sort_by_key(|w| w.name_any());
    let left = left(&works, answers);
    report.follow_applied(&works, nothing);
    Ok(left)
}

/// Applies each of `desired` that `works` do not show already; returns, per work applied or
/// kept, the spec hash the apiserver answered when it is not the one applied.
async fn write(
    ctx: &Context,
    addon: &ManagedClusterAddOn,
    desired: &[ManifestWork],
    works: &mut Vec<ManifestWork>,
    last: Option<&Deployment>,
    report: &mut Report<'_>,
) -> Result<BTreeMap<String, String>> {
    let (name, namespace) = (addon.name_any(), addon.namespace().unwrap_or_default());
    let api: Api<ManifestWork> = Api::namespaced(ctx.client.clone(), &namespace);
    let answered = |work: &str| left_work(last?, work)?.answered.clone();
    let mut answers = BTreeMap::new();
    for work in desired {
        let work_name = work.name_any();
        let before = answered(&work_name);
        if works
            .iter()
            .any(|e| e.name_any() == work_name && unchanged(e, work, before.as_deref()))
        {
            answers.extend(before.map(|hash| (work_name, hash)));
            continue;
        }
        let params = PatchParams::apply(crate::FIELD_MANAGER).force();
        let written = match api.patch(&work_name, &params, &Patch::Apply(work)).await {
            Ok(mut written) => {
                slim_work(&mut written);
                let observed = written.annotations().get(OBSERVED_SPEC_HASH);
                if observed != work.annotations().get(WORK_SPEC_HASH_ANNOTATION) {
                    answers.extend(observed.map(|hash| (work_name.clone(), hash.clone())));
                }
                let before = works.iter().find(|w| w.name_any() == work_name);
                let stale = vec![before.and_then(|w| w.resource_version())];
                ctx.unseen.record(ObjectRef::from_obj(&written), stale);
                written
            }
            Err(e) => {
                report.set(work_not_applied(&e.to_string()));
                return Err(error::write(format!("ManifestWork {namespace}/{work_name}"))(e));
            }
        };
        works.retain(|w| w.name_any() != work_name);
        works.push(written);
        tracing::info!(addon = %name, cluster = %namespace, work = %work_name, "deploy work applied");
    }
    Ok(answers)
}

/// Deletes the works named `names` (already gone is no error) and drops them from `works`.
async fn delete(
    ctx: &Context,
    addon: &ManagedClusterAddOn,
    names: &[String],
    works: &mut Vec<ManifestWork>,
) -> Result<()> {
    let namespace = addon.namespace().unwrap_or_default();
    let api: Api<ManifestWork> = Api::namespaced(ctx.client.clone(), &namespace);
    for work_name in names {
        match api.delete(work_name, &DeleteParams::default()).await {
            Ok(_) => {
                if let Some(gone) = works.iter().find(|w| &w.name_any() == work_name) {
                    ctx.unseen
                        .record(ObjectRef::from_obj(gone), vec![gone.resource_version()]);
                }
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(error::write(format!("ManifestWork {namespace}/{work_name}"))(e)),
        }
        works.retain(|w| &w.name_any() != work_name);
    }
    Ok(())
}

/// How the writes left `works`, with the spec hashes the apiserver answered (`answers`).
fn left(works: &[ManifestWork], mut answers: BTreeMap<String, String>) -> Vec<(String, LeftWork)> {
    works
        .iter()
        .filter_map(|w| {
            let name = w.name_any();
            let fingerprint = work_fingerprint(w)?;
            let answered = answers.remove(&name);
            Some((
                name,
                LeftWork {
                    fingerprint,
                    answered,
                },
            ))
        })
        .collect()
}
