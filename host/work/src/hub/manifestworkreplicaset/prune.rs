//! Works of placements the replica set no longer refers to are deleted before any placement
//! is rolled out: no later step looks at them, so nothing else would remove them, and the
//! status must not count them.

use std::collections::BTreeSet;

use flotilla_api::work::consts::PLACEMENT_NAME_LABEL;
use flotilla_api::work::v1::ManifestWork;
use flotilla_api::work::v1alpha1::ManifestWorkReplicaSet;
use kube::ResourceExt;

use super::reconcile::Pass;
use super::works;

/// Deletes the works in `works` whose placement label names no placement reference of `set`
/// (or that have none); a failed delete is kept in `pass` and the others go on.
pub(super) async fn unreferenced(
    client: &kube::Client,
    set: &ManifestWorkReplicaSet,
    works: &[ManifestWork],
    pass: &mut Pass,
) {
    let referenced: BTreeSet<&str> = set.spec.placement_refs.iter().map(|p| p.name.as_str()).collect();
    for work in works {
        let placement = work.labels().get(PLACEMENT_NAME_LABEL).map(String::as_str);
        if !placement.is_some_and(|p| referenced.contains(p)) {
            match works::delete(client, work).await {
                Ok(()) => {
                    pass.deleted.insert(work.uid().unwrap_or_default());
                }
                Err(error) => pass.errors.push(error),
            }
        }
    }
}
