//! Acceptance against a real apiserver: what the hub creates for an accepted cluster (with
//! OCM's names), that the RBAC it grants isolates one cluster's agent from everything else
//! (checked with the agents' own certificates), that withdrawing acceptance takes write
//! access away, that a cluster name that cannot be a namespace is reported, not retried
//! hot, and that with admission bypassed a cluster named after a hub-wide role, a system
//! namespace or someone else's namespace is refused: nothing written there, nothing deleted.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::hub_support;

use std::{collections::BTreeMap, time::Duration};

use flotilla_api::{
    cluster::{
        consts::{
            API_RESOURCE_CLEANUP_FINALIZER, CLUSTER_NAME_LABEL, CLUSTER_SET_LABEL,
            RESOURCE_CLEANUP_FINALIZER,
            managed_cluster::{CONDITION_HUB_ACCEPTED, REASON_ERROR, REASON_HUB_CLUSTER_ADMIN_DENIED},
        },
        v1::ManagedCluster,
    },
    work::v1::ManifestWork,
};
use flotilla_registration::names;
use flotilla_testing::wait;
use hub_support::*;
use k8s_openapi::{
    api::{
        coordination::v1::Lease,
        core::v1::{Namespace, Secret},
        rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleBinding},
    },
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use pretty_assertions::assert_eq;
use serde_json::json;

const CP: &str = "hub-accept";

fn work(name: &str, namespace: &str) -> ManifestWork {
    serde_json::from_value(json!({
        "apiVersion": "work.open-cluster-management.io/v1",
        "kind": "ManifestWork",
        "metadata": { "name": name, "namespace": namespace },
        "spec": { "workload": { "manifests": [{
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": "cm", "namespace": "default" },
        }]}}
    }))
    .unwrap()
}

async fn accepted_cluster(admin: &Client, name: &str) -> ManagedCluster {
    create_cluster(admin, &cluster(name, true, 60, &[])).await;
    wait_accepted(admin, name).await
}

#[tokio::test]
async fn accepting_a_cluster_creates_its_namespace_rbac_and_lease_with_ocm_names() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    let name = "accept-c1";
    accepted_cluster(&admin, name).await;

    let accepted = wait_cluster(&admin, name, "both finalizers and the default set label", |c| {
        let finalizers = c.finalizers();
        finalizers.iter().any(|f| f == API_RESOURCE_CLEANUP_FINALIZER)
            && finalizers.iter().any(|f| f == RESOURCE_CLEANUP_FINALIZER)
            && c.labels().get(CLUSTER_SET_LABEL).map(String::as_str) == Some("default")
    })
    .await;
    let condition = find(cluster_conditions(&accepted), CONDITION_HUB_ACCEPTED).unwrap();
    assert_eq!(condition.message, "Accepted by hub cluster admin");
    let note = wait_event(&admin, "ManagedCluster", name, "HubClusterAdminAccepted").await;
    assert!(note.contains("accept-c1 accepted"), "{note}");

    let namespace = Api::<Namespace>::all(admin.clone()).get(name).await.unwrap();
    assert_eq!(
        namespace.labels().get(CLUSTER_NAME_LABEL).map(String::as_str),
        Some(name)
    );

    let role = Api::<ClusterRole>::all(admin.clone())
        .get("open-cluster-management:managedcluster:accept-c1")
        .await
        .unwrap();
    assert_eq!(
        role.labels().get(CLUSTER_NAME_LABEL).map(String::as_str),
        Some(name)
    );
    let resources: Vec<String> = role
        .rules
        .iter()
        .flatten()
        .flat_map(|r| r.resources.clone().unwrap_or_default())
        .collect();
    assert_eq!(resources, ["managedclusters", "managedclusters/status"]);
    // CSRs and renewal come from the hub-wide role, which the hub binds but does not write.
    let certificates = Api::<ClusterRoleBinding>::all(admin.clone())
        .get("open-cluster-management:managedcluster:accept-c1:certificates")
        .await
        .unwrap();
    assert_eq!(certificates.role_ref.name, "flotilla:managedcluster:certificates");

    let binding = Api::<ClusterRoleBinding>::all(admin.clone())
        .get("open-cluster-management:managedcluster:accept-c1")
        .await
        .unwrap();
    assert_eq!(
        binding.role_ref.name,
        "open-cluster-management:managedcluster:accept-c1"
    );
    let groups: Vec<_> = binding
        .subjects
        .iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(
        groups,
        [
            "system:open-cluster-management:accept-c1",
            "open-cluster-management:accept-c1"
        ]
    );

    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), name);
    let registration = bindings
        .get("open-cluster-management:managedcluster:accept-c1:registration")
        .await
        .unwrap();
    assert_eq!(
        registration.role_ref.name,
        "open-cluster-management:managedcluster:registration"
    );
    let work_binding = bindings
        .get("open-cluster-management:managedcluster:accept-c1:work")
        .await
        .unwrap();
    assert_eq!(
        work_binding.role_ref.name,
        "open-cluster-management:managedcluster:work"
    );
    assert_eq!(
        work_binding.finalizers(),
        ["cluster.open-cluster-management.io/manifest-work-cleanup"]
    );

    for hub_role in [
        "open-cluster-management:bootstrap",
        "open-cluster-management:managedcluster:registration",
        "open-cluster-management:managedcluster:work",
    ] {
        Api::<ClusterRole>::all(admin.clone())
            .get(hub_role)
            .await
            .unwrap();
    }

    let lease = Api::<Lease>::namespaced(admin.clone(), name)
        .get("managed-cluster-lease")
        .await
        .unwrap();
    assert_eq!(
        lease.labels().get(CLUSTER_NAME_LABEL).map(String::as_str),
        Some(name)
    );
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("managed-cluster-lease"));
    assert_eq!(spec.lease_duration_seconds, Some(60));
    assert!(spec.renew_time.is_some());
}

#[tokio::test]
async fn an_accepted_agent_reaches_its_own_namespace_and_cluster_and_nothing_else() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    accepted_cluster(&admin, "iso-c1").await;
    accepted_cluster(&admin, "iso-c2").await;
    for ns in ["iso-c1", "iso-c2"] {
        Api::<ManifestWork>::namespaced(admin.clone(), ns)
            .create(&PostParams::default(), &work("w1", ns))
            .await
            .unwrap();
    }
    let agent1 = agent(cp, "iso-c1").await;

    // Its own lease: read and renew.
    let leases: Api<Lease> = Api::namespaced(agent1.clone(), "iso-c1");
    let mut lease = eventually_ok("agent reads its lease", || leases.get("managed-cluster-lease")).await;
    lease.spec.as_mut().unwrap().renew_time = Some(MicroTime(Timestamp::now()));
    leases
        .replace("managed-cluster-lease", &PostParams::default(), &lease)
        .await
        .expect("agent renews its lease");

    // Its own works: list, update, status.
    let works: Api<ManifestWork> = Api::namespaced(agent1.clone(), "iso-c1");
    eventually_ok("agent lists its works", || async {
        works.list(&ListParams::default()).await
    })
    .await;
    works
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { "seen": "yes" } } })),
        )
        .await
        .expect("agent updates its work");
    works
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "conditions": [{
                "type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete",
                "message": "applied", "lastTransitionTime": "2026-01-01T00:00:00Z"
            }]}})),
        )
        .await
        .expect("agent updates its work status");

    // Its own ManagedCluster: read and status.
    let clusters: Api<ManagedCluster> = Api::all(agent1.clone());
    clusters.get("iso-c1").await.expect("agent reads its cluster");
    clusters
        .patch_status(
            "iso-c1",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "version": { "kubernetes": "v1.33.0" } } })),
        )
        .await
        .expect("agent updates its cluster status");

    // Nothing else.
    let denied = [
        (
            "lease of cluster2",
            status_code(
                &Api::<Lease>::namespaced(agent1.clone(), "iso-c2")
                    .get("managed-cluster-lease")
                    .await,
            ),
        ),
        (
            "works of cluster2",
            status_code(
                &Api::<ManifestWork>::namespaced(agent1.clone(), "iso-c2")
                    .list(&ListParams::default())
                    .await,
            ),
        ),
        (
            "ManagedCluster cluster2",
            status_code(&clusters.get("iso-c2").await),
        ),
        (
            "status of cluster2",
            status_code(
                &clusters
                    .patch_status(
                        "iso-c2",
                        &PatchParams::default(),
                        &Patch::Merge(json!({ "status": { "version": { "kubernetes": "v0" } } })),
                    )
                    .await,
            ),
        ),
        (
            "every ManagedCluster",
            status_code(&clusters.list(&ListParams::default()).await),
        ),
        (
            "secrets in its namespace",
            status_code(
                &Api::<Secret>::namespaced(agent1.clone(), "iso-c1")
                    .list(&ListParams::default())
                    .await,
            ),
        ),
        (
            "secrets in kube-system",
            status_code(
                &Api::<Secret>::namespaced(agent1.clone(), "kube-system")
                    .list(&ListParams::default())
                    .await,
            ),
        ),
        (
            "secrets anywhere",
            status_code(
                &Api::<Secret>::all(agent1.clone())
                    .list(&ListParams::default())
                    .await,
            ),
        ),
        (
            "deleting its own cluster",
            status_code(&clusters.delete("iso-c1", &Default::default()).await),
        ),
    ];
    for (what, code) in denied {
        assert_eq!(code, Some(403), "{what} must be forbidden");
    }
}

#[tokio::test]
async fn withdrawing_acceptance_leaves_the_agent_read_only_and_keeps_the_namespace() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    let name = "deny-c1";
    accepted_cluster(&admin, name).await;
    let agent = agent(cp, name).await;
    let leases: Api<Lease> = Api::namespaced(agent.clone(), name);
    let works: Api<ManifestWork> = Api::namespaced(agent.clone(), name);
    eventually_ok("agent reads its lease", || leases.get("managed-cluster-lease")).await;
    eventually_ok("agent lists its works", || async {
        works.list(&ListParams::default()).await
    })
    .await;

    set_accepted(&admin, name, false).await;
    let denied = wait_condition(
        &admin,
        name,
        CONDITION_HUB_ACCEPTED,
        "False",
        REASON_HUB_CLUSTER_ADMIN_DENIED,
    )
    .await;
    assert_eq!(
        find(cluster_conditions(&denied), CONDITION_HUB_ACCEPTED)
            .unwrap()
            .message,
        "Denied by hub cluster admin"
    );

    eventually_forbidden("agent loses its lease", || leases.get("managed-cluster-lease")).await;
    eventually_forbidden("agent loses its works", || async {
        works.list(&ListParams::default()).await
    })
    .await;
    let clusters: Api<ManagedCluster> = Api::all(agent.clone());
    clusters
        .get(name)
        .await
        .expect("a denied agent still reads its cluster");
    let status_write = clusters
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "version": { "kubernetes": "v0" } } })),
        )
        .await;
    assert_eq!(status_code(&status_write), Some(403));

    let role = Api::<ClusterRole>::all(admin.clone())
        .get(&names::cluster_role(name))
        .await
        .unwrap();
    assert_eq!(role.rules.map(|r| r.len()), Some(1), "read-only: one rule left");
    let certificates = Api::<ClusterRoleBinding>::all(admin.clone())
        .get(&names::certificates_role_binding(name))
        .await;
    assert_eq!(
        status_code(&certificates),
        Some(404),
        "a denied agent may not renew"
    );
    let bindings = Api::<RoleBinding>::namespaced(admin.clone(), name)
        .list(&ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={name}")))
        .await
        .unwrap();
    assert!(bindings.items.is_empty(), "{:?}", bindings.items);
    let namespace = Api::<Namespace>::all(admin.clone()).get(name).await.unwrap();
    assert!(
        namespace.metadata.deletion_timestamp.is_none(),
        "the namespace is kept"
    );

    // Accepting again restores write access.
    set_accepted(&admin, name, true).await;
    wait_accepted(&admin, name).await;
    eventually_ok("agent regains its lease", || leases.get("managed-cluster-lease")).await;
}

#[tokio::test]
async fn a_cluster_name_that_cannot_name_a_namespace_is_reported_and_not_retried_hot() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    let long = format!("c{}", "x".repeat(70));
    for name in ["bad.cluster", long.as_str()] {
        create_cluster(&admin, &cluster(name, true, 60, &[])).await;
        let reported = wait_condition(&admin, name, CONDITION_HUB_ACCEPTED, "False", REASON_ERROR).await;
        let message = &find(cluster_conditions(&reported), CONDITION_HUB_ACCEPTED)
            .unwrap()
            .message;
        assert!(message.contains("not a valid namespace name"), "{message}");
        assert_eq!(
            status_code(&Api::<Namespace>::all(admin.clone()).get(name).await),
            Some(404)
        );
    }
    // Once settled (default set label, unreachable taint), nothing keeps rewriting the object.
    let api: Api<ManagedCluster> = Api::all(admin.clone());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = api.get("bad.cluster").await.unwrap().resource_version();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = api.get("bad.cluster").await.unwrap().resource_version();
    assert_eq!(
        before, after,
        "the hub must not rewrite a cluster it cannot accept"
    );
}

/// The rules and labels of a ClusterRole, once it exists (the hub installs the hub-wide roles
/// as it starts): what a cluster's name must never rewrite.
async fn role_content(
    admin: &Client,
    name: &str,
) -> (Option<Vec<PolicyRule>>, Option<BTreeMap<String, String>>) {
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    let role = eventually_ok(&format!("ClusterRole {name}"), || roles.get(name)).await;
    (role.rules, role.metadata.labels)
}

/// Waits until the hub has decided on cluster `name` (HubAcceptedManagedCluster, any status).
async fn decided(admin: &Client, name: &str) -> ManagedCluster {
    wait_cluster(admin, name, "the hub decided", |c| {
        find(cluster_conditions(c), CONDITION_HUB_ACCEPTED).is_some()
    })
    .await
}

/// The HubAcceptedManagedCluster message of a refused cluster.
fn refusal(cluster: &ManagedCluster) -> String {
    let condition = find(cluster_conditions(cluster), CONDITION_HUB_ACCEPTED).unwrap();
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", REASON_ERROR),
        "{condition:?}"
    );
    condition.message.clone()
}

#[tokio::test]
async fn a_cluster_named_after_a_hub_role_never_writes_or_deletes_that_role() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    let hub_roles = [names::REGISTRATION_CLUSTER_ROLE, names::WORK_CLUSTER_ROLE];
    let mut before = Vec::new();
    for role in hub_roles {
        before.push(role_content(&admin, role).await);
    }
    let api: Api<ManagedCluster> = Api::all(admin.clone());

    // No admission policy runs here: as if it were bypassed or not yet installed.
    for name in ["registration", "work"] {
        create_cluster(&admin, &cluster(name, true, 60, &[])).await;
    }
    for name in ["registration", "work"] {
        decided(&admin, name).await;
    }
    for (role, before) in hub_roles.iter().zip(&before) {
        assert_eq!(&role_content(&admin, role).await, before, "{role} was rewritten");
    }
    for name in ["registration", "work"] {
        let message = refusal(&api.get(name).await.unwrap());
        assert!(message.contains("is reserved"), "{message}");
        let note = wait_event(&admin, "ManagedCluster", name, "ClusterNameReserved").await;
        assert!(note.contains("hub-wide role"), "{note}");
    }

    // Denying them runs the revoke path, which must not shrink the roles either.
    for name in ["registration", "work"] {
        set_accepted(&admin, name, false).await;
        wait_condition(
            &admin,
            name,
            CONDITION_HUB_ACCEPTED,
            "False",
            REASON_HUB_CLUSTER_ADMIN_DENIED,
        )
        .await;
    }
    for (role, before) in hub_roles.iter().zip(&before) {
        assert_eq!(
            &role_content(&admin, role).await,
            before,
            "{role} was rewritten on denial"
        );
    }

    for name in ["registration", "work"] {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    for name in ["registration", "work"] {
        wait::until("cluster gone", TIMEOUT, || async {
            Ok::<_, kube::Error>(api.get_opt(name).await?.is_none().then_some(()))
        })
        .await
        .unwrap();
    }
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    for (role, before) in hub_roles.iter().zip(&before) {
        let after = roles.get(role).await.unwrap();
        assert_eq!(
            &(after.rules, after.metadata.labels),
            before,
            "{role} changed by the deletion"
        );
    }
}

#[tokio::test]
async fn a_namespace_the_hub_did_not_create_gets_no_agent_role_bindings() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    // Someone else's namespace, made before a cluster of the same name is accepted.
    let foreign = "someone-elses";
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": foreign } })).unwrap(),
        )
        .await
        .unwrap();

    let cases = [
        (foreign, "not created by the hub", "ClusterNamespaceNotOwned"),
        ("kube-system", "is reserved", "ClusterNameReserved"),
    ];
    for (name, _, _) in cases {
        create_cluster(&admin, &cluster(name, true, 60, &[])).await;
    }
    for (name, _, _) in cases {
        decided(&admin, name).await;
    }
    for (name, _, _) in cases {
        let bindings = Api::<RoleBinding>::namespaced(admin.clone(), name)
            .list(&ListParams::default())
            .await
            .unwrap();
        let granted: Vec<_> = bindings
            .items
            .iter()
            .filter(|b| {
                b.subjects
                    .iter()
                    .flatten()
                    .any(|s| s.name.ends_with(&format!("open-cluster-management:{name}")))
            })
            .map(|b| b.name_any())
            .collect();
        assert!(granted.is_empty(), "agent RoleBindings in {name}: {granted:?}");
        assert_eq!(
            status_code(
                &Api::<ClusterRole>::all(admin.clone())
                    .get(&names::cluster_role(name))
                    .await
            ),
            Some(404),
            "no ClusterRole for {name}"
        );
        assert_eq!(
            status_code(
                &Api::<Lease>::namespaced(admin.clone(), name)
                    .get(names::CLUSTER_LEASE)
                    .await
            ),
            Some(404),
            "no cluster lease in {name}"
        );
        let namespace = namespaces.get(name).await.unwrap();
        assert!(
            !namespace.labels().contains_key(CLUSTER_NAME_LABEL),
            "{name} must not be adopted"
        );
    }
    for (name, rule, reason) in cases {
        let message = refusal(&Api::<ManagedCluster>::all(admin.clone()).get(name).await.unwrap());
        assert!(message.contains(rule), "{message}");
        wait_event(&admin, "ManagedCluster", name, reason).await;
    }

    // Deleting the cluster leaves the namespace alone.
    let api: Api<ManagedCluster> = Api::all(admin.clone());
    api.delete(foreign, &DeleteParams::default()).await.unwrap();
    wait::until("cluster gone", TIMEOUT, || async {
        Ok::<_, kube::Error>(api.get_opt(foreign).await?.is_none().then_some(()))
    })
    .await
    .unwrap();
    let namespace = namespaces.get(foreign).await.unwrap();
    assert!(namespace.metadata.deletion_timestamp.is_none());
}

/// Someone widens the cluster's ClusterRole and deletes its registration RoleBinding: the
/// accept controller hears of both from its RBAC watches and puts them back well before its
/// resync (20 s here), and its own writes do not keep it busy.
#[tokio::test]
async fn the_clusters_rbac_is_put_back_when_changed_or_deleted() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    let name = "drift-c1";
    accepted_cluster(&admin, name).await;
    // Acceptance is followed by the deletion controller's finalizer, a change the accept
    // controller reads and reconciles (repairing everything); the tampering comes after it, so
    // only the RBAC watches can bring the repair.
    let clusters: Api<ManagedCluster> = Api::all(admin.clone());
    wait::until("the cluster has its clean-up finalizer", TIMEOUT, || async {
        let cluster = clusters.get(name).await?;
        Ok::<_, kube::Error>(
            cluster
                .finalizers()
                .iter()
                .any(|f| f == RESOURCE_CLEANUP_FINALIZER)
                .then_some(()),
        )
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    let role_name = format!("open-cluster-management:managedcluster:{name}");
    let granted = roles.get(&role_name).await.unwrap().rules;
    let widened = json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
    roles
        .patch(&role_name, &PatchParams::default(), &Patch::Merge(&widened))
        .await
        .unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), name);
    let binding_name = format!("open-cluster-management:managedcluster:{name}:registration");
    bindings
        .delete(&binding_name, &DeleteParams::default())
        .await
        .unwrap();

    let before_resync = Duration::from_secs(10);
    wait::until("the ClusterRole's rules are put back", before_resync, || async {
        let rules = roles.get(&role_name).await?.rules;
        Ok::<_, kube::Error>((rules == granted).then_some(()))
    })
    .await
    .unwrap();
    wait::until("the RoleBinding is made again", before_resync, || async {
        Ok::<_, kube::Error>(bindings.get_opt(&binding_name).await?.map(drop))
    })
    .await
    .unwrap();
}
