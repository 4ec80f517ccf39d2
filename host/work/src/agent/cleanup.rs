//! Removing recorded applied objects (a dropped manifest, or a deleted work): each is deleted
//! only when this AppliedManifestWork is its last AppliedManifestWork owner and its uid is the
//! recorded one ([`flotilla_core::work::agent::ownership::cleanup`]); a shared object only
//! loses this owner reference. Returns what is still being deleted.

use flotilla_api::work::v1::AppliedManifestResourceMeta;
use flotilla_core::work::agent::ownership::{Cleanup, LiveObject, cleanup};
use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy},
    discovery::ApiResource,
};
use serde_json::json;

use super::{Error, Result};

/// An API for the recorded object's resource.
pub fn api_for(client: &Client, recorded: &AppliedManifestResourceMeta) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: recorded.group.clone(),
        version: recorded.version.clone(),
        api_version: if recorded.group.is_empty() {
            recorded.version.clone()
        } else {
            format!("{}/{}", recorded.group, recorded.version)
        },
        kind: String::new(),
        plural: recorded.resource.clone(),
    };
    if recorded.namespace.is_empty() {
        Api::all_with(client.clone(), &resource)
    } else {
        Api::namespaced_with(client.clone(), &recorded.namespace, &resource)
    }
}

fn describe(recorded: &AppliedManifestResourceMeta) -> String {
    let group = if recorded.group.is_empty() {
        "core"
    } else {
        &recorded.group
    };
    if recorded.namespace.is_empty() {
        format!("{} ({group}) {}", recorded.resource, recorded.name)
    } else {
        format!(
            "{} ({group}) {}/{}",
            recorded.resource, recorded.namespace, recorded.name
        )
    }
}

/// Cleans up `resources` owned through AppliedManifestWork uid `owner_uid`; returns those still
/// being deleted. Errors are collected: one bad object does not stop the others.
pub async fn cleanup_resources(
    client: &Client,
    resources: &[AppliedManifestResourceMeta],
    owner_uid: &str,
    reason: &str,
) -> Result<Vec<AppliedManifestResourceMeta>> {
    let mut pending = Vec::new();
    let mut errors = Vec::new();
    for recorded in resources {
        let api = api_for(client, recorded);
        let live = match api.get_opt(&recorded.name).await {
            Ok(live) => live,
            Err(error) => {
                errors.push(format!("read {}: {error}", describe(recorded)));
                pending.push(recorded.clone());
                continue;
            }
        };
        let view = live.as_ref().map(|l| LiveObject {
            uid: l.metadata.uid.clone().unwrap_or_default(),
            owners: l.metadata.owner_references.clone().unwrap_or_default(),
            deleting: l.metadata.deletion_timestamp.is_some(),
        });
        match cleanup(recorded, view.as_ref(), owner_uid) {
            Cleanup::Gone | Cleanup::NotOwned | Cleanup::Replaced => {}
            Cleanup::Pending => pending.push(recorded.clone()),
            Cleanup::Release => {
                let owners: Vec<_> = view
                    .iter()
                    .flat_map(|v| v.owners.iter())
                    .filter(|o| o.uid != owner_uid)
                    .collect();
                let patch = json!({"metadata": {
                    "resourceVersion": live.as_ref().and_then(|l| l.metadata.resource_version.clone()),
                    "ownerReferences": owners,
                }});
                if let Err(error) = api
                    .patch(&recorded.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    errors.push(format!("release {}: {error}", describe(recorded)));
                    pending.push(recorded.clone());
                } else {
                    tracing::info!(object = %describe(recorded), reason, "released a shared object");
                }
            }
            Cleanup::Delete => {
                let params = DeleteParams {
                    propagation_policy: Some(PropagationPolicy::Background),
                    preconditions: Some(Preconditions {
                        uid: view.as_ref().map(|v| v.uid.clone()),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                match api.delete(&recorded.name, &params).await {
                    Ok(_) => {
                        tracing::info!(object = %describe(recorded), reason, "deleted");
                        pending.push(recorded.clone());
                    }
                    Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
                    Err(error) => {
                        errors.push(format!("delete {}: {error}", describe(recorded)));
                        pending.push(recorded.clone());
                    }
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(pending)
    } else {
        Err(Error::Waiting(errors.join("; ")))
    }
}
