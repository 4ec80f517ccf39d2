//! The Placement status writer. A pass queues the status it wants (see
//! [`super::background`]); writers patch it once no pass runs, against the placement as the
//! cache holds it then, and skip it when the cache already shows it. A write refused because
//! the cached copy is behind (a conflict) is queued again unless a newer status waits.

use std::time::Duration;

use flotilla_api::cluster::v1beta1::{Placement, PlacementStatus};
use kube::{Api, runtime::reflector::ObjectRef};

use super::{
    Context,
    background::{Coalescing, MAX_DEFER},
};

/// Pause of a writer after a failed write, so a persistent failure does not spin.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Desired statuses by placement.
pub(crate) type StatusQueue = Coalescing<ObjectRef<Placement>, PlacementStatus>;

/// Writes queued statuses until dropped.
pub(crate) async fn write(ctx: &Context) {
    loop {
        let (key, desired) = ctx.statuses.next(&ctx.busy, MAX_DEFER).await;
        let Some(placement) = ctx.placements.get(&key) else {
            // Deleted meanwhile: nothing to write.
            continue;
        };
        let namespace = key.namespace.clone().unwrap_or_default();
        let api: Api<Placement> = Api::namespaced(ctx.client.clone(), &namespace);
        let written =
            flotilla_kube::status::patch_if_changed(&api, &placement, placement.status.as_ref(), &desired)
                .await;
        if let Err(error) = written {
            tracing::debug!(placement = %key, %error, "cannot write placement status; retrying");
            ctx.statuses.retry(key, desired);
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}
