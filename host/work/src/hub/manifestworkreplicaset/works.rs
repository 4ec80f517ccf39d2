//! The ManifestWork requests of the replica set controller: list a replica set's works, create
//! or update one from the template, delete one. Every step that writes works goes through
//! these, so each request and its error are spelled once.

use flotilla_api::work::consts::MANIFEST_WORK_REPLICA_SET_LABEL;
use flotilla_api::work::v1::ManifestWork;
use flotilla_core::work::replicaset;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::hub::error::{Error, Result};

/// The works labelled as belonging to the replica set `owner` (`<ns>.<name>`), in every cluster.
pub(super) async fn list(api: &Api<ManifestWork>, owner: &str) -> Result<Vec<ManifestWork>> {
    let params = ListParams::default().labels(&format!("{MANIFEST_WORK_REPLICA_SET_LABEL}={owner}"));
    let list = api.list(&params).await.map_err(|source| Error::List {
        kind: "ManifestWork",
        scope: "all namespaces".into(),
        source,
    })?;
    Ok(list.items)
}

/// Creates `desired` (by `generateName`) or, when `existing` differs from it in spec or labels,
/// replaces the existing work's spec and labels, guarded by its `resourceVersion`.
pub(super) async fn apply(
    client: &kube::Client,
    owner: &str,
    desired: ManifestWork,
    existing: Option<&ManifestWork>,
) -> Result<()> {
    let cluster = desired.namespace().unwrap_or_default();
    let api: Api<ManifestWork> = Api::namespaced(client.clone(), &cluster);
    let Some(existing) = existing else {
        api.create(&PostParams::default(), &desired)
            .await
            .map_err(|source| Error::CreateWork {
                owner: owner.to_owned(),
                cluster,
                source,
            })?;
        return Ok(());
    };
    let same_labels = existing.metadata.labels == desired.metadata.labels;
    if same_labels && replicaset::work_is_current(existing, &desired.spec) {
        return Ok(());
    }
    let name = existing.name_any();
    let patch = replace_spec_and_labels(existing, &desired)?;
    api.patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map_err(|source| Error::UpdateWork {
            cluster,
            name,
            source,
        })?;
    Ok(())
}

/// Deletes one work (already gone is fine).
pub(super) async fn delete(client: &kube::Client, work: &ManifestWork) -> Result<()> {
    let cluster = work.namespace().unwrap_or_default();
    let name = work.name_any();
    match Api::<ManifestWork>::namespaced(client.clone(), &cluster)
        .delete(&name, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(Error::DeleteWork {
            cluster,
            name,
            source,
        }),
    }
}

/// `test` the resourceVersion (a concurrent change fails and is retried), then replace `/spec`
/// and `/metadata/labels` whole, as OCM's patch of the difference does.
fn replace_spec_and_labels(existing: &ManifestWork, desired: &ManifestWork) -> Result<json_patch::Patch> {
    let ops = json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": existing.metadata.resource_version},
        {"op": "add", "path": "/spec", "value": desired.spec},
        {"op": "add", "path": "/metadata/labels", "value": desired.metadata.labels},
    ]);
    serde_json::from_value(ops).map_err(|source| Error::EncodePatch {
        name: existing.name_any(),
        source,
    })
}
