//! Events (`events.k8s.io/v1`) about one object, as `kubectl describe` shows them: what the
//! tests of each controller's Events read.

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::{Api, Client};

use crate::wait;

/// The Events regarding the `kind` object `name` with `reason`, in every namespace (an Event
/// about a cluster-scoped object lives in `default`).
pub async fn about(client: &Client, kind: &str, name: &str, reason: &str) -> kube::Result<Vec<Event>> {
    let events: Api<Event> = Api::all(client.clone());
    let list = events.list(&Default::default()).await?;
    Ok(list
        .items
        .into_iter()
        .filter(|event| {
            event.reason.as_deref() == Some(reason)
                && event
                    .regarding
                    .as_ref()
                    .is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
        })
        .collect())
}

/// Waits up to `timeout` for an Event regarding the `kind` object `name` with `reason`;
/// returns the first.
pub async fn wait_for(
    client: &Client,
    kind: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> crate::Result<Event> {
    wait::until(
        &format!("Event {reason} on {kind} {name}"),
        timeout,
        || async move {
            about(client, kind, name, reason)
                .await
                .map(|events| events.into_iter().next())
        },
    )
    .await
}
