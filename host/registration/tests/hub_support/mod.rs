//! Shared pieces of the hub integration tests (`tests/hub_*.rs`): one real control plane per
//! test binary with the hub controllers running against it, clients that act as a cluster's
//! agent with harness-issued certificates, and await helpers.
//!
//! The hub runs on its own thread and Tokio runtime, because each `#[tokio::test]` has a
//! runtime of its own that ends with the test; the thread lives as long as the test binary.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    dead_code,
    reason = "test support: fail loudly; not every binary uses every helper"
)]

use std::{collections::BTreeMap, time::Duration};

use flotilla_api::cluster::{
    consts::managed_cluster::{CONDITION_HUB_ACCEPTED, REASON_HUB_CLUSTER_ADMIN_ACCEPTED},
    v1::{ManagedCluster, ManagedClusterSpec},
};
use flotilla_registration::{
    hub::{self, HubOptions},
    names,
};
use flotilla_testing::{ControlPlane, wait};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;

/// How long the tests wait for the hub to act.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// How long a deleted cluster's agent must be gone before the test hub stops waiting for it.
pub const FORCE_CLEANUP_AFTER: Duration = Duration::from_secs(15);

/// How long a deleted cluster's clean-up waits on a live agent before the test hub calls it
/// stalled.
pub const CLEANUP_STALLED_AFTER: Duration = Duration::from_secs(10);

/// Short settings so tests see clean-up, resyncs and set upkeep quickly.
pub fn test_options() -> HubOptions {
    HubOptions {
        resync: Duration::from_secs(20),
        cleanup_requeue: Duration::from_secs(1),
        hub_sets_interval: Duration::from_secs(1),
        force_cleanup_after: FORCE_CLEANUP_AFTER,
        cleanup_stalled_after: CLEANUP_STALLED_AFTER,
    }
}

/// The control plane `name` of this test binary, with the hub controllers running against it
/// as the admin (started on first use).
pub async fn hub(name: &str) -> &'static ControlPlane {
    let cp = flotilla_testing::shared(name).await.expect("start control plane");
    flotilla_testing::spawn_controllers_once(name, cp, |client| async move {
        if let Err(error) = hub::run(client, test_options()).await {
            eprintln!("hub stopped: {error}");
        }
    });
    cp
}

/// A ManagedCluster as an agent would create it (plus `hubAcceptsClient` as the admin sets it).
pub fn cluster(
    name: &str,
    accepted: bool,
    lease_duration_seconds: i32,
    labels: &[(&str, &str)],
) -> ManagedCluster {
    let mut cluster = ManagedCluster::new(
        name,
        ManagedClusterSpec {
            hub_accepts_client: accepted,
            lease_duration_seconds,
            ..Default::default()
        },
    );
    cluster.metadata = ObjectMeta {
        name: Some(name.to_owned()),
        labels: (!labels.is_empty()).then(|| {
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        }),
        ..Default::default()
    };
    cluster
}

/// Creates the cluster as the admin.
pub async fn create_cluster(admin: &Client, cluster: &ManagedCluster) -> ManagedCluster {
    Api::<ManagedCluster>::all(admin.clone())
        .create(&PostParams::default(), cluster)
        .await
        .expect("create ManagedCluster")
}

/// Sets `spec.hubAcceptsClient` as the admin.
pub async fn set_accepted(admin: &Client, name: &str, accepted: bool) {
    Api::<ManagedCluster>::all(admin.clone())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "hubAcceptsClient": accepted } })),
        )
        .await
        .expect("patch hubAcceptsClient");
}

/// The agent user of `cluster`.
pub fn agent_user(cluster: &str) -> String {
    names::agent_user(cluster, "agent1")
}

/// A client acting as `cluster`'s registration agent, with a harness-issued certificate for
/// `system:open-cluster-management:<c>:agent1` in the per-cluster and managed-clusters groups.
pub async fn agent(cp: &ControlPlane, cluster: &str) -> Client {
    let group = names::cluster_group(cluster);
    cp.client_for(&agent_user(cluster), &[&group, names::MANAGED_CLUSTERS_GROUP])
        .await
        .expect("agent client")
}

/// The condition `type_` of a condition list.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// The conditions of a ManagedCluster.
pub fn cluster_conditions(cluster: &ManagedCluster) -> &[Condition] {
    cluster
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
}

/// Whether the list has condition `type_` with `status` and `reason`.
pub fn has(conditions: &[Condition], type_: &str, status: &str, reason: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == status && c.reason == reason)
}

/// Waits until the ManagedCluster `name` satisfies `check`, and returns it.
pub async fn wait_cluster(
    admin: &Client,
    name: &str,
    what: &str,
    check: impl Fn(&ManagedCluster) -> bool,
) -> ManagedCluster {
    let api: Api<ManagedCluster> = Api::all(admin.clone());
    let check = &check;
    wait::until(what, TIMEOUT, || {
        let api = api.clone();
        async move {
            let cluster = api.get(name).await?;
            Ok::<_, kube::Error>(check(&cluster).then_some(cluster))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Waits until the cluster has condition `type_` with `status` and `reason`.
pub async fn wait_condition(
    admin: &Client,
    name: &str,
    type_: &str,
    status: &str,
    reason: &str,
) -> ManagedCluster {
    wait_cluster(admin, name, &format!("{type_} {status} {reason}"), |c| {
        has(cluster_conditions(c), type_, status, reason)
    })
    .await
}

/// Waits until the hub has accepted cluster `name` (HubAcceptedManagedCluster True).
pub async fn wait_accepted(admin: &Client, name: &str) -> ManagedCluster {
    wait_condition(
        admin,
        name,
        CONDITION_HUB_ACCEPTED,
        "True",
        REASON_HUB_CLUSTER_ADMIN_ACCEPTED,
    )
    .await
}

/// The HTTP status of a failed API call.
pub fn status_code<T>(result: &Result<T, kube::Error>) -> Option<u16> {
    match result {
        Err(kube::Error::Api(status)) => Some(status.code),
        _ => None,
    }
}

/// Retries `call` until it succeeds (new RBAC can take a moment to reach the authorizer).
pub async fn eventually_ok<T, F, Fut>(what: &str, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    wait::until(what, TIMEOUT, || {
        let fut = call();
        async move { fut.await.map(Some) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Retries `call` until the apiserver answers 403 (revoked RBAC can take a moment).
pub async fn eventually_forbidden<T, F, Fut>(what: &str, mut call: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    wait::until(what, TIMEOUT, || {
        let fut = call();
        async move {
            let result = fut.await;
            match status_code(&result) {
                Some(403) => Ok(Some(())),
                _ => Err(format!(
                    "still answered {:?}",
                    status_code(&result).unwrap_or(200)
                )),
            }
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Waits for an Event (events.k8s.io/v1) regarding `kind` `name` with `reason`; returns its note.
pub async fn wait_event(admin: &Client, kind: &str, name: &str, reason: &str) -> String {
    use k8s_openapi::api::events::v1::Event;
    let events: Api<Event> = Api::all(admin.clone());
    wait::until(
        &format!("Event {reason} on {kind} {name}"),
        Duration::from_secs(60),
        || {
            let events = events.clone();
            async move {
                let list = events.list(&Default::default()).await?;
                Ok::<_, kube::Error>(list.items.into_iter().find_map(|e| {
                    let regarding = e.regarding.as_ref()?;
                    (regarding.kind.as_deref() == Some(kind)
                        && regarding.name.as_deref() == Some(name)
                        && e.reason.as_deref() == Some(reason))
                    .then(|| e.note.unwrap_or_default())
                }))
            }
        },
    )
    .await
    .unwrap()
}
