//! Registration's admission rules, enforced by a real kube-apiserver: who may accept a cluster,
//! move it between cluster sets, bind a set, set taint times; and what a cluster may be named
//! (a namespace name, and none of the hub's own names).

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::time::Duration;

use flotilla_api::cluster::{v1::ManagedCluster, v1beta2::ManagedClusterSetBinding};
use flotilla_testing::{ControlPlane, shared, wait};
use k8s_openapi::api::{
    core::v1::Namespace,
    rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

/// A control plane with the policies installed and enforced (checked with a probe object).
async fn hub() -> &'static ControlPlane {
    let cp = shared("admission").await.unwrap();
    let admin = cp.admin_client().await.unwrap();
    flotilla_registration::admission::install(&admin).await.unwrap();
    let clusters: Api<ManagedCluster> = Api::all(admin);
    // Policies take effect once the apiserver has compiled them; probe until one denies.
    wait::until("admission policies enforced", Duration::from_secs(60), || {
        let clusters = clusters.clone();
        async move {
            let probe = cluster("probe.not-a-label", false);
            match clusters
                .create(
                    &PostParams {
                        dry_run: true,
                        ..Default::default()
                    },
                    &probe,
                )
                .await
            {
                Err(kube::Error::Api(status)) if status.code == 422 => Ok::<_, kube::Error>(Some(())),
                _ => Ok(None),
            }
        }
    })
    .await
    .unwrap();
    cp
}

fn cluster(name: &str, accepted: bool) -> ManagedCluster {
    serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": { "name": name },
        "spec": { "hubAcceptsClient": accepted }
    }))
    .unwrap()
}

/// A user allowed to create/update/patch ManagedClusters (and read them), nothing else.
async fn cluster_editor(cp: &ControlPlane, user: &str) -> Client {
    let admin = cp.admin_client().await.unwrap();
    grant(
        &admin,
        user,
        json!([{ "apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclusters"],
                 "verbs": ["get", "list", "create", "update", "patch"] }]),
    )
    .await;
    cp.client_for(user, &["cluster-editors"]).await.unwrap()
}

async fn grant(admin: &Client, user: &str, rules: Value) {
    let name = format!("test-{}-{}", user, rules.to_string().len());
    let role: ClusterRole =
        serde_json::from_value(json!({ "metadata": { "name": name }, "rules": rules })).unwrap();
    Api::<ClusterRole>::all(admin.clone())
        .patch(&name, &PatchParams::apply("test"), &Patch::Apply(&role))
        .await
        .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .patch(&name, &PatchParams::apply("test"), &Patch::Apply(&binding))
        .await
        .unwrap();
}

fn denial<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(status)) => {
            assert!(matches!(status.code, 403 | 422), "unexpected status {status:?}");
            status.message
        }
        other => panic!("expected a denial, got {other:?}"),
    }
}

#[tokio::test]
async fn accepting_a_cluster_needs_the_accept_permission() {
    let cp = hub().await;
    let editor = cluster_editor(cp, "accept-editor").await;
    let clusters: Api<ManagedCluster> = Api::all(editor.clone());

    let message = denial(
        clusters
            .create(&PostParams::default(), &cluster("wants-in", true))
            .await,
    );
    assert!(
        message.contains("cannot accept cluster wants-in") && message.contains("managedclusters/accept"),
        "{message}"
    );

    clusters
        .create(&PostParams::default(), &cluster("wants-in", false))
        .await
        .unwrap();
    let accept = json!({ "spec": { "hubAcceptsClient": true } });
    let message = denial(
        clusters
            .patch("wants-in", &PatchParams::default(), &Patch::Merge(&accept))
            .await,
    );
    assert!(message.contains("managedclusters/accept"), "{message}");

    let admin = cp.admin_client().await.unwrap();
    grant(
        &admin,
        "accept-editor",
        json!([{ "apiGroups": ["register.open-cluster-management.io"], "resources": ["managedclusters/accept"],
                 "resourceNames": ["wants-in"], "verbs": ["update"] }]),
    )
    .await;
    wait::until("accept allowed once granted", Duration::from_secs(30), || {
        let clusters = clusters.clone();
        let accept = accept.clone();
        async move {
            clusters
                .patch("wants-in", &PatchParams::default(), &Patch::Merge(&accept))
                .await
                .map(Some)
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_cluster_name_must_be_a_namespace_name_and_urls_must_be_https() {
    let cp = hub().await;
    let admin: Api<ManagedCluster> = Api::all(cp.admin_client().await.unwrap());
    let message = denial(
        admin
            .create(&PostParams::default(), &cluster("dotted.name", false))
            .await,
    );
    assert!(message.contains("not a valid namespace name"), "{message}");

    let mut plain_http = cluster("plain-http", false);
    plain_http.spec.managed_cluster_client_configs =
        serde_json::from_value(json!([{ "url": "http://insecure.example:6443" }])).unwrap();
    let message = denial(admin.create(&PostParams::default(), &plain_http).await);
    assert!(message.contains("https://"), "{message}");
}

#[tokio::test]
async fn a_cluster_may_not_take_the_name_of_a_hub_role_or_a_system_namespace() {
    let cp = hub().await;
    let admin: Api<ManagedCluster> = Api::all(cp.admin_client().await.unwrap());
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    for name in [
        "work",
        "registration",
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "default",
        flotilla_registration::names::HUB_NAMESPACE,
        "open-cluster-management",
        "open-cluster-management-agent",
    ] {
        let message = denial(admin.create(&dry_run, &cluster(name, false)).await);
        assert!(message.contains(&format!("{name} is reserved")), "{message}");
    }
    for name in ["work1", "registration-east", "my-kube-system", "cluster1"] {
        admin
            .create(&dry_run, &cluster(name, false))
            .await
            .unwrap_or_else(|e| panic!("{name} must be allowed: {e}"));
    }
}

#[tokio::test]
async fn moving_a_cluster_between_sets_needs_join_on_both_sets() {
    let cp = hub().await;
    let editor = cluster_editor(cp, "set-mover").await;
    let clusters: Api<ManagedCluster> = Api::all(editor);
    let admin: Api<ManagedCluster> = Api::all(cp.admin_client().await.unwrap());
    let mut mover = cluster("mover", false);
    mover.metadata.labels = Some(
        [(
            "cluster.open-cluster-management.io/clusterset".to_owned(),
            "red".to_owned(),
        )]
        .into(),
    );
    admin.create(&PostParams::default(), &mover).await.unwrap();

    let relabel =
        json!({ "metadata": { "labels": { "cluster.open-cluster-management.io/clusterset": "blue" } } });
    let message = denial(
        clusters
            .patch("mover", &PatchParams::default(), &Patch::Merge(&relabel))
            .await,
    );
    assert!(
        message.contains("managedclustersets/join")
            && message.contains("\"red\"")
            && message.contains("\"blue\""),
        "{message}"
    );

    let admin_client = cp.admin_client().await.unwrap();
    grant(
        &admin_client,
        "set-mover",
        json!([{ "apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclustersets/join"],
                 "resourceNames": ["blue"], "verbs": ["create"] }]),
    )
    .await;
    // Joining blue alone is not enough: leaving red needs the right too.
    tokio::time::sleep(Duration::from_secs(1)).await;
    denial(
        clusters
            .patch("mover", &PatchParams::default(), &Patch::Merge(&relabel))
            .await,
    );
    grant(
        &admin_client,
        "set-mover",
        json!([{ "apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclustersets/join"],
                 "resourceNames": ["red", "blue"], "verbs": ["create"] }]),
    )
    .await;
    wait::until(
        "move allowed once both joins are granted",
        Duration::from_secs(30),
        || {
            let clusters = clusters.clone();
            let relabel = relabel.clone();
            async move {
                clusters
                    .patch("mover", &PatchParams::default(), &Patch::Merge(&relabel))
                    .await
                    .map(Some)
            }
        },
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn only_the_hub_sets_taint_times() {
    let cp = hub().await;
    let editor = cluster_editor(cp, "tainter").await;
    let clusters: Api<ManagedCluster> = Api::all(editor);
    let admin: Api<ManagedCluster> = Api::all(cp.admin_client().await.unwrap());
    admin
        .create(&PostParams::default(), &cluster("tainted", false))
        .await
        .unwrap();

    let forged = json!({ "spec": { "taints": [
        { "key": "example.com/maintenance", "effect": "NoSelect", "timeAdded": "2020-01-01T00:00:00Z" }
    ] } });
    let message = denial(
        clusters
            .patch("tainted", &PatchParams::default(), &Patch::Merge(&forged))
            .await,
    );
    assert!(message.contains("timeAdded is set by the hub"), "{message}");

    let plain = json!({ "spec": { "taints": [{ "key": "example.com/maintenance", "effect": "NoSelect" }] } });
    clusters
        .patch("tainted", &PatchParams::default(), &Patch::Merge(&plain))
        .await
        .unwrap();

    // The hub (here: the admin, a system:masters member) stamps the time; others keep it.
    let stamped = json!({ "spec": { "taints": [
        { "key": "example.com/maintenance", "effect": "NoSelect", "timeAdded": "2026-11-23T08:00:00Z" }
    ] } });
    admin
        .patch("tainted", &PatchParams::default(), &Patch::Merge(&stamped))
        .await
        .unwrap();
    let kept = json!({ "spec": { "taints": [
        { "key": "example.com/maintenance", "value": "v2", "effect": "NoSelect", "timeAdded": "2026-11-23T08:00:00Z" }
    ] } });
    clusters
        .patch("tainted", &PatchParams::default(), &Patch::Merge(&kept))
        .await
        .unwrap();
    let moved = json!({ "spec": { "taints": [
        { "key": "example.com/maintenance", "value": "v2", "effect": "NoSelect", "timeAdded": "2026-11-23T09:00:00Z" }
    ] } });
    denial(
        clusters
            .patch("tainted", &PatchParams::default(), &Patch::Merge(&moved))
            .await,
    );
}

#[tokio::test]
async fn a_set_binding_must_be_named_after_its_set_and_needs_bind() {
    let cp = hub().await;
    let admin = cp.admin_client().await.unwrap();
    let namespace: Namespace =
        serde_json::from_value(json!({ "metadata": { "name": "team-bind" } })).unwrap();
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let role: Role = serde_json::from_value(json!({
        "metadata": { "name": "binder", "namespace": "team-bind" },
        "rules": [{ "apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclustersetbindings"],
                    "verbs": ["create", "get"] }]
    }))
    .unwrap();
    Api::<Role>::namespaced(admin.clone(), "team-bind")
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "binder", "namespace": "team-bind" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "binder" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "binder" }]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), "team-bind")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    let binder = cp.client_for("binder", &["binders"]).await.unwrap();
    let bindings: Api<ManagedClusterSetBinding> = Api::namespaced(binder, "team-bind");
    let set_binding = |name: &str, set: &str| -> ManagedClusterSetBinding {
        serde_json::from_value(json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta2",
            "kind": "ManagedClusterSetBinding",
            "metadata": { "name": name, "namespace": "team-bind" },
            "spec": { "clusterSet": set }
        }))
        .unwrap()
    };
    let message = denial(
        bindings
            .create(&PostParams::default(), &set_binding("other-name", "prod"))
            .await,
    );
    assert!(
        message.contains("metadata.name must equal spec.clusterSet"),
        "{message}"
    );
    let message = denial(
        bindings
            .create(&PostParams::default(), &set_binding("prod", "prod"))
            .await,
    );
    assert!(message.contains("managedclustersets/bind"), "{message}");

    grant(
        &admin,
        "binder",
        json!([{ "apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclustersets/bind"],
                 "resourceNames": ["prod"], "verbs": ["create"] }]),
    )
    .await;
    wait::until(
        "binding allowed once bind is granted",
        Duration::from_secs(30),
        || {
            let bindings = bindings.clone();
            let binding = set_binding("prod", "prod");
            async move { bindings.create(&PostParams::default(), &binding).await.map(Some) }
        },
    )
    .await
    .unwrap();
}
