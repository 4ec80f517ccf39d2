//! The AppliedManifestWork `<hubHash>-<work>` of a work, made before anything is applied: it
//! is the owner of the applied objects and the list of what the work applied, so an object is
//! never written without a record that can remove it.

use flotilla_api::work::{
    consts::APPLIED_MANIFEST_WORK_FINALIZER,
    v1::{AppliedManifestWork, AppliedManifestWorkSpec, ManifestWork},
};
use flotilla_core::work::agent::eviction;
use kube::{
    Api, ResourceExt,
    api::{ObjectMeta, PostParams},
    runtime::reflector::ObjectRef,
};

use crate::agent::{Context, Error, Result};

/// The AppliedManifestWork `name` as the agent's store holds it, if the store has been filled
/// (`None` while it is being listed, or when it does not hold the record).
fn stored(ctx: &Context, name: &str) -> Option<AppliedManifestWork> {
    if !flotilla_kube::controller::cache_ready(&ctx.applied) {
        return None;
    }
    ctx.applied
        .get(&ObjectRef::new(name))
        .map(|applied| applied.as_ref().clone())
}

/// The AppliedManifestWork `name`, created when missing: read from the store (the watch has
/// it), else created first (the usual case: a new work) and read from the server only if it
/// exists (the store was behind).
pub(super) async fn ensure(
    ctx: &Context,
    work: &ManifestWork,
    api: &Api<AppliedManifestWork>,
    name: &str,
) -> Result<AppliedManifestWork> {
    if let Some(existing) = stored(ctx, name) {
        return Ok(existing);
    }
    match api
        .create(&PostParams::default(), &new_record(ctx, work, name))
        .await
    {
        Ok(created) => Ok(created),
        Err(kube::Error::Api(status)) if status.code == 409 => api
            .get(name)
            .await
            .map_err(Error::kube(format!("read AppliedManifestWork {name}"))),
        Err(source) => Err(Error::Kube {
            action: format!("create AppliedManifestWork {name}"),
            source,
        }),
    }
}

/// The AppliedManifestWork `name` to create for `work`.
fn new_record(ctx: &Context, work: &ManifestWork, name: &str) -> AppliedManifestWork {
    AppliedManifestWork {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: work.metadata.labels.clone(),
            // What a later eviction compares with the hub's state (a restored hub is older),
            // and which work this is should the hub be reached under another URL.
            annotations: Some(
                [
                    (
                        eviction::HUB_RESOURCE_VERSION_ANNOTATION,
                        &work.metadata.resource_version,
                    ),
                    (eviction::MANIFEST_WORK_UID_ANNOTATION, &work.metadata.uid),
                ]
                .into_iter()
                .filter_map(|(key, value)| Some((key.to_owned(), value.clone()?)))
                .collect(),
            ),
            finalizers: Some(vec![APPLIED_MANIFEST_WORK_FINALIZER.to_owned()]),
            ..ObjectMeta::default()
        },
        spec: AppliedManifestWorkSpec {
            hub_hash: ctx.hub_hash.clone(),
            agent_id: ctx.agent_id.clone(),
            manifest_work_name: work.name_any(),
        },
        status: None,
    }
}
