//! Availability against a real apiserver: when an agent stops renewing its lease the hub
//! marks the cluster (and its add-ons) Unknown and taints it unreachable within the grace
//! period, leaves other clusters alone, and follows the agent's own Available reports with the
//! right taint. The agents here are the test, acting with the agents' certificates.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::hub_support;

use std::time::{Duration, Instant};

use flotilla_api::{
    addon::v1alpha1::ManagedClusterAddOn,
    cluster::{
        consts::{
            TAINT_UNAVAILABLE, TAINT_UNREACHABLE,
            managed_cluster::{
                CONDITION_AVAILABLE, CONDITION_CLOCK_SYNCED, REASON_AVAILABLE, REASON_CLOCK_OUT_OF_SYNC,
                REASON_CLOCK_SYNCED, REASON_KUBE_APISERVER_UNAVAILABLE, REASON_LEASE_UPDATE_STOPPED,
            },
        },
        v1::{ManagedCluster, Taint},
    },
};
use flotilla_testing::wait;
use hub_support::*;
use k8s_openapi::{
    api::coordination::v1::Lease,
    apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;
use tokio::task::JoinHandle;

const CP: &str = "hub-availability";

/// Bumps the cluster's lease as its agent would.
async fn renew(agent: &Client, cluster: &str) -> Result<(), kube::Error> {
    let leases: Api<Lease> = Api::namespaced(agent.clone(), cluster);
    let mut lease = leases.get("managed-cluster-lease").await?;
    lease.spec.get_or_insert_with(Default::default).renew_time = Some(MicroTime(Timestamp::now()));
    leases
        .replace("managed-cluster-lease", &PostParams::default(), &lease)
        .await
        .map(drop)
}

/// Renews the lease every 500 ms until aborted.
fn keep_renewing(agent: Client, cluster: &'static str) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let _ = renew(&agent, cluster).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
}

/// Sets the cluster's Available condition as its agent would: the whole condition list, guarded
/// by the resourceVersion.
async fn report_available(agent: &Client, cluster: &str, status: &str, reason: &str) {
    let api: Api<ManagedCluster> = Api::all(agent.clone());
    eventually_ok("agent reports Available", || {
        let api = api.clone();
        async move {
            let current = api.get(cluster).await?;
            let mut conditions: Vec<Condition> = cluster_conditions(&current)
                .iter()
                .filter(|c| c.type_ != CONDITION_AVAILABLE)
                .cloned()
                .collect();
            conditions.push(Condition {
                type_: CONDITION_AVAILABLE.into(),
                status: status.into(),
                reason: reason.into(),
                message: format!("agent says {status}"),
                observed_generation: None,
                last_transition_time: Time(Timestamp::now()),
            });
            let patch = json!({
                "metadata": { "resourceVersion": current.metadata.resource_version },
                "status": { "conditions": conditions },
            });
            api.patch_status(cluster, &PatchParams::default(), &Patch::Merge(&patch))
                .await
        }
    })
    .await;
}

fn hub_taints(cluster: &ManagedCluster) -> Vec<&Taint> {
    cluster
        .spec
        .taints
        .iter()
        .filter(|t| t.key == TAINT_UNREACHABLE || t.key == TAINT_UNAVAILABLE)
        .collect()
}

fn has_only_taint(cluster: &ManagedCluster, key: &str) -> bool {
    let taints = hub_taints(cluster);
    taints.len() == 1 && taints[0].key == key
}

async fn addon(admin: &Client, cluster: &str, name: &str) -> Api<ManagedClusterAddOn> {
    let api: Api<ManagedClusterAddOn> = Api::namespaced(admin.clone(), cluster);
    let object: ManagedClusterAddOn = serde_json::from_value(json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "ManagedClusterAddOn",
        "metadata": { "name": name, "namespace": cluster },
        "spec": {},
    }))
    .unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
    let status = json!({ "status": { "conditions": [{
        "type": "Available", "status": "True", "reason": "ManagedClusterAddOnLeaseUpdated",
        "message": "healthy", "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    api
}

fn addon_available(addon: &ManagedClusterAddOn) -> Option<Condition> {
    addon
        .status
        .as_ref()
        .and_then(|s| find(&s.conditions, "Available").cloned())
}

#[tokio::test]
async fn a_silent_agent_makes_its_cluster_and_addons_unknown_and_unreachable_and_no_other() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    for name in ["av-c1", "av-c2"] {
        create_cluster(&admin, &cluster(name, true, 1, &[])).await;
        wait_accepted(&admin, name).await;
    }
    // Before any report, Available is missing: unreachable.
    let fresh = wait_cluster(&admin, "av-c1", "unreachable before any report", |c| {
        has_only_taint(c, TAINT_UNREACHABLE)
    })
    .await;
    assert!(
        hub_taints(&fresh)[0].time_added.is_some(),
        "the hub stamps timeAdded"
    );

    let agent1 = agent(cp, "av-c1").await;
    let agent2 = agent(cp, "av-c2").await;
    eventually_ok("agent2 renews", || renew(&agent2, "av-c2")).await;
    let renewing2 = keep_renewing(agent2.clone(), "av-c2");
    report_available(&agent2, "av-c2", "True", REASON_AVAILABLE).await;
    let addons1 = addon(&admin, "av-c1", "probe").await;
    let addons2 = addon(&admin, "av-c2", "probe").await;

    // cluster1 renews once and reports Available: no taint.
    eventually_ok("agent1 renews", || renew(&agent1, "av-c1")).await;
    let last_renewal = Instant::now();
    report_available(&agent1, "av-c1", "True", REASON_AVAILABLE).await;
    wait_cluster(&admin, "av-c1", "taints gone while Available", |c| {
        hub_taints(c).is_empty()
    })
    .await;

    // Then it falls silent: Unknown once 5 × 1 s have passed, not before.
    let unknown = wait_condition(
        &admin,
        "av-c1",
        CONDITION_AVAILABLE,
        "Unknown",
        REASON_LEASE_UPDATE_STOPPED,
    )
    .await;
    let silent_for = last_renewal.elapsed();
    assert!(
        silent_for >= Duration::from_secs(4),
        "Unknown after only {silent_for:?}"
    );
    assert!(
        silent_for <= Duration::from_secs(15),
        "Unknown only after {silent_for:?}"
    );
    let message = &find(cluster_conditions(&unknown), CONDITION_AVAILABLE)
        .unwrap()
        .message;
    assert!(message.contains("stopped updating its lease"), "{message}");
    let note = wait_event(&admin, "ManagedCluster", "av-c1", REASON_LEASE_UPDATE_STOPPED).await;
    assert!(note.contains("stopped updating its lease"), "{note}");
    let tainted = wait_cluster(&admin, "av-c1", "unreachable taint", |c| {
        has_only_taint(c, TAINT_UNREACHABLE)
    })
    .await;
    let added = hub_taints(&tainted)[0]
        .time_added
        .clone()
        .expect("timeAdded stamped");

    // The add-on follows its cluster; the other cluster and its add-on are untouched.
    let probe = wait::until("add-on Available Unknown", TIMEOUT, || {
        let addons1 = addons1.clone();
        async move {
            let addon = addons1.get("probe").await?;
            Ok::<_, kube::Error>(addon_available(&addon).filter(|c| c.status == "Unknown"))
        }
    })
    .await
    .unwrap();
    assert_eq!(probe.reason, REASON_LEASE_UPDATE_STOPPED);
    let other = Api::<ManagedCluster>::all(admin.clone())
        .get("av-c2")
        .await
        .unwrap();
    assert!(has(
        cluster_conditions(&other),
        CONDITION_AVAILABLE,
        "True",
        REASON_AVAILABLE
    ));
    assert!(hub_taints(&other).is_empty(), "{:?}", other.spec.taints);
    let other_addon = addons2.get("probe").await.unwrap();
    assert_eq!(addon_available(&other_addon).unwrap().status, "True");

    // Renewing alone does not make it Available (the agent says so); the taint stays as added.
    let renewing1 = keep_renewing(agent1.clone(), "av-c1");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let still = Api::<ManagedCluster>::all(admin.clone())
        .get("av-c1")
        .await
        .unwrap();
    assert!(has_only_taint(&still, TAINT_UNREACHABLE));
    assert_eq!(
        hub_taints(&still)[0].time_added.as_ref(),
        Some(&added),
        "timeAdded is kept"
    );

    // Available True: no taint. Available False: unavailable.
    report_available(&agent1, "av-c1", "True", REASON_AVAILABLE).await;
    wait_cluster(&admin, "av-c1", "taint removed", |c| hub_taints(c).is_empty()).await;
    report_available(&agent1, "av-c1", "False", REASON_KUBE_APISERVER_UNAVAILABLE).await;
    let unavailable = wait_cluster(&admin, "av-c1", "unavailable taint", |c| {
        has_only_taint(c, TAINT_UNAVAILABLE)
    })
    .await;
    assert!(hub_taints(&unavailable)[0].time_added.is_some());

    renewing1.abort();
    renewing2.abort();
}

/// Writes the cluster's lease with `renewTime` = now + `ahead`, as an agent whose clock runs
/// ahead by that much would.
async fn renew_ahead(agent: &Client, cluster: &str, ahead: Duration) -> Result<(), kube::Error> {
    let leases: Api<Lease> = Api::namespaced(agent.clone(), cluster);
    let mut lease = leases.get("managed-cluster-lease").await?;
    let at = Timestamp::now() + ahead;
    lease.spec.get_or_insert_with(Default::default).renew_time = Some(MicroTime(at));
    leases
        .replace("managed-cluster-lease", &PostParams::default(), &lease)
        .await
        .map(drop)
}

fn clock_synced(cluster: &ManagedCluster) -> Option<(String, String)> {
    find(cluster_conditions(cluster), CONDITION_CLOCK_SYNCED).map(|c| (c.status.clone(), c.reason.clone()))
}

#[tokio::test]
async fn an_agent_clock_a_lease_period_off_the_hubs_is_reported_out_of_sync_and_in_sync_again() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    // A 60 s lease period: ten minutes ahead is out of sync, and the lease stays fresh.
    create_cluster(&admin, &cluster("clock-c1", true, 60, &[])).await;
    wait_accepted(&admin, "clock-c1").await;
    let agent = agent(cp, "clock-c1").await;

    eventually_ok("agent renews", || renew_ahead(&agent, "clock-c1", Duration::ZERO)).await;
    wait_cluster(&admin, "clock-c1", "clock synced", |c| {
        clock_synced(c) == Some(("True".into(), REASON_CLOCK_SYNCED.into()))
    })
    .await;

    eventually_ok("agent renews ten minutes ahead", || {
        renew_ahead(&agent, "clock-c1", Duration::from_secs(600))
    })
    .await;
    let skewed = wait_cluster(&admin, "clock-c1", "clock out of sync", |c| {
        clock_synced(c) == Some(("False".into(), REASON_CLOCK_OUT_OF_SYNC.into()))
    })
    .await;
    let message = &find(cluster_conditions(&skewed), CONDITION_CLOCK_SYNCED)
        .unwrap()
        .message;
    assert!(message.contains("NTP"), "says what to do: {message}");

    eventually_ok("agent renews on time", || {
        renew_ahead(&agent, "clock-c1", Duration::ZERO)
    })
    .await;
    wait_cluster(&admin, "clock-c1", "clock synced again", |c| {
        clock_synced(c) == Some(("True".into(), REASON_CLOCK_SYNCED.into()))
    })
    .await;
}

/// A taint someone adds with `kubectl patch` carries no `timeAdded` (admission leaves that to
/// the hub); the hub stamps it on the change's watch event, as OCM's webhook stamps it on
/// admission, since tolerations with `tolerationSeconds` count from it (issue 30).
#[tokio::test]
async fn a_taint_a_user_adds_gets_its_time_added_stamped_by_the_hub() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    create_cluster(&admin, &cluster("taint-user", true, 60, &[])).await;
    // No agent reports: the hub's own unreachable taint is there first.
    let before = wait_cluster(&admin, "taint-user", "unreachable taint", |c| {
        has_only_taint(c, TAINT_UNREACHABLE)
    })
    .await;
    let hub_added = hub_taints(&before)[0].time_added.clone();

    let from = Timestamp::from_second(Timestamp::now().as_second()).unwrap();
    let patch = json!([{ "op": "add", "path": "/spec/taints/-",
        "value": { "key": "example.com/maintenance", "value": "disk", "effect": "NoSelect" } }]);
    let output = cp
        .kubectl()
        .args(["patch", "managedcluster", "taint-user", "--type=json", "-p"])
        .arg(patch.to_string())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "kubectl patch: {}",
        String::from_utf8_lossy(&output.stderr)
    );

    let user_taint = |c: &ManagedCluster| {
        c.spec
            .taints
            .iter()
            .find(|t| t.key == "example.com/maintenance")
            .cloned()
    };
    let stamped = wait_cluster(&admin, "taint-user", "the user's taint stamped", |c| {
        user_taint(c).is_some_and(|t| t.time_added.is_some())
    })
    .await;
    let added = user_taint(&stamped).unwrap().time_added.unwrap().0;
    assert!(
        added >= from && added <= Timestamp::now(),
        "timeAdded {added} is when the taint was added (from {from})"
    );
    assert_eq!(user_taint(&stamped).unwrap().value, "disk");
    assert_eq!(
        hub_taints(&stamped)[0].time_added,
        hub_added,
        "the hub's own taint keeps its time"
    );
}
