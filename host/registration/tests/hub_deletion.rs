//! Deleting a ManagedCluster against a real apiserver: the hub removes the cluster
//! namespace's add-ons first, then its ManifestWorks lowest cleanup-priority first, reports
//! progress in `Deleting`, then removes the cluster's RBAC and its finalizers. Objects held by
//! a test finalizer stand in for agents that take their time, so each step can be observed.
//! Objects held by the agent's own finalizers show when the hub stops waiting for an agent:
//! after the grace once it is gone, at once when the admin says so, never for a live one.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::hub_support;

use flotilla_api::{
    addon::{consts::ADDON_PRE_DELETE_FINALIZER, v1alpha1::ManagedClusterAddOn},
    cluster::{
        consts::{
            API_RESOURCE_CLEANUP_FINALIZER, RESOURCE_CLEANUP_FINALIZER,
            managed_cluster::{CONDITION_AVAILABLE, CONDITION_DELETING, REASON_RESOURCE_REMAINING},
        },
        v1::ManagedCluster,
    },
    work::{consts::MANIFEST_WORK_FINALIZER, v1::ManifestWork},
};
use flotilla_core::registration::hub::cleanup::FORCE_CLEANUP_ANNOTATION;
use flotilla_registration::names;
use flotilla_testing::wait;
use hub_support::*;
use k8s_openapi::{
    api::{
        core::v1::Namespace,
        events::v1::Event,
        rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding},
    },
    jiff::{SignedDuration, Timestamp},
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde::de::DeserializeOwned;
use serde_json::json;

const CP: &str = "hub-deletion";
const HOLD: &str = "test.flotilla.dev/hold";

fn work(name: &str, namespace: &str, priority: Option<&str>, held: bool) -> ManifestWork {
    serde_json::from_value(json!({
        "apiVersion": "work.open-cluster-management.io/v1",
        "kind": "ManifestWork",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": priority.map(|p| json!({ "open-cluster-management.io/cleanup-priority": p })),
            "finalizers": if held { vec![HOLD] } else { vec![] },
        },
        "spec": { "workload": { "manifests": [{
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": name, "namespace": "default" },
        }]}}
    }))
    .unwrap()
}

/// Takes the test's finalizer off, letting the object go.
async fn release<K>(api: &Api<K>, name: &str)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
    )
    .await
    .unwrap();
}

/// The names of the works being deleted, and of those still alive.
async fn work_states(works: &Api<ManifestWork>) -> (Vec<String>, Vec<String>) {
    let list = works.list(&ListParams::default()).await.unwrap();
    let (deleting, alive): (Vec<_>, Vec<_>) = list
        .items
        .iter()
        .partition(|w| w.metadata.deletion_timestamp.is_some());
    let mut deleting: Vec<String> = deleting.iter().map(|w| w.name_any()).collect();
    let mut alive: Vec<String> = alive.iter().map(|w| w.name_any()).collect();
    deleting.sort();
    alive.sort();
    (deleting, alive)
}

async fn wait_works(works: &Api<ManifestWork>, what: &str, deleting: &[&str], alive: &[&str]) {
    wait::until(what, TIMEOUT, || async {
        let state = work_states(works).await;
        if state.0 == deleting && state.1 == alive {
            Ok(Some(()))
        } else {
            Err(format!("deleting {:?}, alive {:?}", state.0, state.1))
        }
    })
    .await
    .unwrap();
}

/// The `Deleting` False ResourceRemaining message of cluster `name` once it mentions `expect`:
/// the condition is written after the batch it reports is deleted, so an object seen deleting
/// may still be reported under the previous message for a moment.
async fn deleting_message(admin: &Client, name: &str, expect: &str) -> String {
    let cluster = wait_cluster(admin, name, &format!("Deleting message naming {expect}"), |c| {
        find(cluster_conditions(c), CONDITION_DELETING).is_some_and(|d| {
            d.status == "False" && d.reason == REASON_RESOURCE_REMAINING && d.message.contains(expect)
        })
    })
    .await;
    find(cluster_conditions(&cluster), CONDITION_DELETING)
        .unwrap()
        .message
        .clone()
}

#[tokio::test]
async fn deleting_a_cluster_removes_addons_then_works_by_priority_then_rbac_and_finalizers() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    let name = "del-c1";
    create_cluster(&admin, &cluster(name, true, 60, &[])).await;
    wait_accepted(&admin, name).await;
    wait_cluster(&admin, name, "both hub finalizers", |c| {
        let f = c.finalizers();
        f.iter().any(|x| x == API_RESOURCE_CLEANUP_FINALIZER)
            && f.iter().any(|x| x == RESOURCE_CLEANUP_FINALIZER)
    })
    .await;

    let addons: Api<ManagedClusterAddOn> = Api::namespaced(admin.clone(), name);
    let held_addon: ManagedClusterAddOn = serde_json::from_value(json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "ManagedClusterAddOn",
        "metadata": { "name": "held-addon", "namespace": name, "finalizers": [HOLD] },
        "spec": {},
    }))
    .unwrap();
    addons.create(&PostParams::default(), &held_addon).await.unwrap();
    let works: Api<ManifestWork> = Api::namespaced(admin.clone(), name);
    for w in [
        work("w-first", name, None, true),
        work("w-invalid", name, Some("abc"), false),
        work("w-mid", name, Some("50"), true),
        work("w-last", name, Some("90"), false),
    ] {
        works.create(&PostParams::default(), &w).await.unwrap();
    }

    Api::<ManagedCluster>::all(admin.clone())
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();

    // Add-ons first: the held add-on is deleting, no work is touched yet.
    wait::until("add-on deleting", TIMEOUT, || async {
        let addon = addons.get("held-addon").await?;
        Ok::<_, kube::Error>(addon.metadata.deletion_timestamp.map(|_| ()))
    })
    .await
    .unwrap();
    let message = deleting_message(&admin, name, "managedclusteraddons").await;
    assert!(message.contains("managedclusteraddons"), "{message}");
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    wait_works(
        &works,
        "no work touched while add-ons remain",
        &[],
        &["w-first", "w-invalid", "w-last", "w-mid"],
    )
    .await;

    // Then works, priority 0 (missing or invalid) first.
    release(&addons, "held-addon").await;
    wait_works(&works, "priority-0 batch", &["w-first"], &["w-last", "w-mid"]).await;
    let message = deleting_message(&admin, name, "manifestworks").await;
    assert!(message.contains("manifestworks"), "{message}");

    release(&works, "w-first").await;
    wait_works(&works, "priority-50 batch", &["w-mid"], &["w-last"]).await;

    // RBAC stays until the namespace is clean.
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    roles
        .get(&names::cluster_role(name))
        .await
        .expect("RBAC kept while works remain");

    release(&works, "w-mid").await;
    wait::until("cluster gone", TIMEOUT, || async {
        let result = Api::<ManagedCluster>::all(admin.clone()).get(name).await;
        match status_code(&result) {
            Some(404) => Ok(Some(())),
            _ => Err(format!(
                "still there: {:?}",
                result.map(|c| c.finalizers().to_vec())
            )),
        }
    })
    .await
    .unwrap();

    assert!(works.list(&ListParams::default()).await.unwrap().items.is_empty());
    assert_eq!(
        status_code(&roles.get(&names::cluster_role(name)).await),
        Some(404)
    );
    for binding in [names::cluster_role(name), names::certificates_role_binding(name)] {
        assert_eq!(
            status_code(&Api::<ClusterRoleBinding>::all(admin.clone()).get(&binding).await),
            Some(404),
            "{binding}"
        );
    }
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), name);
    for binding in [
        names::registration_role_binding(name),
        names::work_role_binding(name),
    ] {
        assert_eq!(status_code(&bindings.get(&binding).await), Some(404), "{binding}");
    }
    let namespace = Api::<Namespace>::all(admin.clone()).get(name).await.unwrap();
    assert!(
        namespace.metadata.deletion_timestamp.is_none(),
        "the namespace is kept, as in OCM"
    );
}

#[tokio::test]
async fn a_cluster_never_accepted_is_deleted_at_once() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    let name = "del-c2";
    create_cluster(&admin, &cluster(name, false, 60, &[])).await;
    // Give the hub a moment to see it (it labels it and taints it, but adds no finalizer).
    wait_cluster(&admin, name, "seen by the hub", |c| !c.spec.taints.is_empty()).await;
    let api: Api<ManagedCluster> = Api::all(admin.clone());
    api.delete(name, &DeleteParams::default()).await.unwrap();
    wait::until("cluster gone", TIMEOUT, || async {
        Ok::<_, kube::Error>(api.get_opt(name).await?.is_none().then_some(()))
    })
    .await
    .unwrap();
}

/// A work the agent has taken in (its finalizer on), and an add-on with a pre-delete hook.
async fn agent_held_objects(admin: &Client, name: &str) -> (Api<ManifestWork>, Api<ManagedClusterAddOn>) {
    let works: Api<ManifestWork> = Api::namespaced(admin.clone(), name);
    let mut held = work("w-applied", name, None, false);
    held.metadata.finalizers = Some(vec![MANIFEST_WORK_FINALIZER.to_owned()]);
    works.create(&PostParams::default(), &held).await.unwrap();
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(admin.clone(), name);
    let hooked: ManagedClusterAddOn = serde_json::from_value(json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "ManagedClusterAddOn",
        "metadata": { "name": "hooked", "namespace": name, "finalizers": [ADDON_PRE_DELETE_FINALIZER] },
        "spec": {},
    }))
    .unwrap();
    addons.create(&PostParams::default(), &hooked).await.unwrap();
    (works, addons)
}

async fn wait_gone(admin: &Client, name: &str) {
    let api: Api<ManagedCluster> = Api::all(admin.clone());
    wait::until("cluster gone", TIMEOUT, || async {
        match api.get_opt(name).await.unwrap() {
            None => Ok(Some(())),
            Some(c) => Err(format!("still there: {:?}", c.finalizers())),
        }
    })
    .await
    .unwrap();
}

/// Waits until the CleanupForced Events on cluster `name` name each of `objects` with `why`.
async fn wait_forced(admin: &Client, name: &str, objects: &[&str], why: &str) {
    wait::until("CleanupForced Events", TIMEOUT, || async {
        let notes = forced_notes(admin, name).await;
        if objects
            .iter()
            .all(|o| notes.iter().any(|n| n.contains(o) && n.contains(why)))
        {
            Ok(Some(()))
        } else {
            Err(format!("{notes:?}"))
        }
    })
    .await
    .unwrap();
}

/// The notes of the CleanupForced Events on cluster `name` and on the objects in its namespace.
async fn forced_notes(admin: &Client, name: &str) -> Vec<String> {
    events_with_reason(admin, name, "CleanupForced").await
}

/// The notes of the Events with `reason` on cluster `name` and on the objects in its namespace.
async fn events_with_reason(admin: &Client, name: &str, reason: &str) -> Vec<String> {
    let events: Api<Event> = Api::all(admin.clone());
    let list = events.list(&ListParams::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding
                    .as_ref()
                    .is_some_and(|r| r.name.as_deref() == Some(name) || r.namespace.as_deref() == Some(name))
        })
        .filter_map(|e| e.note)
        .collect()
}

#[tokio::test]
async fn a_deleted_cluster_whose_agent_is_gone_stops_waiting_for_it_after_the_grace() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    let name = "del-gone";
    // A 1 s lease nobody renews: Available goes Unknown after 5 s, like an unjoined cluster.
    create_cluster(&admin, &cluster(name, true, 1, &[])).await;
    wait_accepted(&admin, name).await;
    wait_cluster(&admin, name, "resource-cleanup finalizer", |c| {
        c.finalizers().iter().any(|f| f == RESOURCE_CLEANUP_FINALIZER)
    })
    .await;
    let (works, addons) = agent_held_objects(&admin, name).await;
    Api::<ManagedCluster>::all(admin.clone())
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    let unknown = wait_cluster(&admin, name, "Available Unknown", |c| {
        find(cluster_conditions(c), CONDITION_AVAILABLE).is_some_and(|a| a.status == "Unknown")
    })
    .await;
    let since = find(cluster_conditions(&unknown), CONDITION_AVAILABLE)
        .unwrap()
        .last_transition_time
        .0;

    wait_gone(&admin, name).await;
    let waited = Timestamp::now().duration_since(since);
    assert!(
        waited >= SignedDuration::try_from(FORCE_CLEANUP_AFTER).unwrap(),
        "forced after only {waited:?} of the agent gone"
    );
    assert!(works.list(&ListParams::default()).await.unwrap().items.is_empty());
    assert!(
        addons
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    wait_forced(
        &admin,
        name,
        &[
            "managedclusteraddons/hooked",
            "manifestworks/w-applied",
            "stopped waiting",
        ],
        "gone",
    )
    .await;
}

#[tokio::test]
async fn a_live_agent_is_waited_for_until_the_admin_forces_the_clean_up() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    let name = "del-live";
    create_cluster(&admin, &cluster(name, true, 60, &[])).await;
    wait_accepted(&admin, name).await;
    wait_cluster(&admin, name, "resource-cleanup finalizer", |c| {
        c.finalizers().iter().any(|f| f == RESOURCE_CLEANUP_FINALIZER)
    })
    .await;
    let clusters: Api<ManagedCluster> = Api::all(admin.clone());
    // The agent reports the cluster Available, and is merely slow to clean up.
    clusters
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "conditions": [{
                "type": CONDITION_AVAILABLE, "status": "True", "reason": "ManagedClusterAvailable",
                "message": "alive", "lastTransitionTime": Timestamp::now().to_string(),
            }]}})),
        )
        .await
        .unwrap();
    let (works, _) = agent_held_objects(&admin, name).await;
    clusters.delete(name, &DeleteParams::default()).await.unwrap();

    tokio::time::sleep(FORCE_CLEANUP_AFTER + std::time::Duration::from_secs(5)).await;
    let still = clusters.get(name).await.expect("waits for a live agent");
    assert!(
        still.finalizers().iter().any(|f| f == RESOURCE_CLEANUP_FINALIZER),
        "{:?}",
        still.finalizers()
    );
    let addon = Api::<ManagedClusterAddOn>::namespaced(admin.clone(), name)
        .get("hooked")
        .await
        .unwrap();
    assert_eq!(addon.finalizers(), [ADDON_PRE_DELETE_FINALIZER]);
    assert_eq!(
        works.get("w-applied").await.unwrap().finalizers(),
        [MANIFEST_WORK_FINALIZER]
    );
    assert!(forced_notes(&admin, name).await.is_empty());
    // Waiting past its patience, the clean-up says it is stalled and names the way forward.
    let message = deleting_message(&admin, name, "waiting since").await;
    assert!(
        message.contains("waiting since") && message.contains(FORCE_CLEANUP_ANNOTATION),
        "{message}"
    );
    let stalled = events_with_reason(&admin, name, "CleanupStalled").await;
    assert!(
        stalled.iter().any(|n| n.contains(FORCE_CLEANUP_ANNOTATION)),
        "{stalled:?}"
    );

    clusters
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "annotations": { FORCE_CLEANUP_ANNOTATION: "true" } } })),
        )
        .await
        .unwrap();
    wait_gone(&admin, name).await;
    wait_forced(
        &admin,
        name,
        &[
            "managedclusteraddons/hooked",
            "manifestworks/w-applied",
            "stopped waiting",
        ],
        FORCE_CLEANUP_ANNOTATION,
    )
    .await;
}
