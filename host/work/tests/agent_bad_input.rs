//! Bad input, against real control planes: each bad manifest fails alone (`Applied` False with
//! a message a person can act on) while the others apply; an executor without permission is
//! refused (malformed works refused at admission: `hub_admission.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use crate::agent_support;

use agent_support::*;
use flotilla_api::work::v1::{
    ManifestWorkExecutor, ManifestWorkExecutorSubject, ManifestWorkSubjectServiceAccount,
};
use k8s_openapi::api::{
    core::v1::ConfigMap,
    rbac::v1::{Role, RoleBinding},
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, api::PostParams};
use serde_json::{Value, json};

fn config_map(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name, "namespace": namespace },
        "data": { "k": "v" },
    })
}

fn crd(name: &str, plural: &str, kind: &str, short: &[&str]) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": name },
        "spec": {
            "group": "bad.flotilla.dev", "scope": "Namespaced",
            "names": { "plural": plural, "singular": plural.trim_end_matches('s'), "kind": kind,
                       "listKind": format!("{kind}List"), "shortNames": short },
            "versions": [{ "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } } }],
        },
    })
}

#[tokio::test]
async fn each_bad_manifest_fails_alone_with_a_message_while_the_others_apply() {
    let agent = start_agent("cluster-bad").await;
    let ns = "work-bad";
    namespace(&agent.managed, ns).await;
    // A CRD whose short name collides with the plural of an Established CRD is never
    // Established. The other CRD is created (and Established) first: when two colliding CRDs
    // arrive together, the apiserver accepts whichever it names first.
    let crds: Api<CustomResourceDefinition> = Api::all(agent.managed.clone());
    let taken: CustomResourceDefinition =
        serde_json::from_value(crd("gammas.bad.flotilla.dev", "gammas", "Gamma", &[])).unwrap();
    crds.create(&PostParams::default(), &taken).await.unwrap();
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        await_condition(crds, "gammas.bad.flotilla.dev", conditions::is_crd_established()),
    )
    .await
    .expect("the CRD gammas is Established")
    .unwrap();
    let manifests = vec![
        config_map(ns, "good"),
        json!({ "apiVersion": "nothing.flotilla.dev/v1", "kind": "Gadget", "metadata": { "name": "g", "namespace": ns } }),
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "Not_A_Valid_Name", "namespace": ns } }),
        config_map("no-such-namespace", "lost"),
        crd("alphas.bad.flotilla.dev", "alphas", "Alpha", &[]),
        crd("betas.bad.flotilla.dev", "betas", "Beta", &["gammas"]),
        json!({ "apiVersion": "bad.flotilla.dev/v1", "kind": "Beta", "metadata": { "name": "b", "namespace": ns } }),
    ];
    agent.create(&work("bad", manifests)).await;
    let failed = agent
        .wait_work("bad", "every manifest reported", |w| {
            w.status
                .as_ref()
                .is_some_and(|s| s.resource_status.manifests.len() == 7)
                && manifest_condition(w, 0, "Applied").is_some_and(|c| c.status == "True")
                && manifest_condition(w, 4, "Applied").is_some_and(|c| c.status == "True")
        })
        .await;
    let applied = work_condition(&failed, "Applied").unwrap();
    assert_eq!(
        (applied.status.as_str(), applied.reason.as_str()),
        ("False", "AppliedManifestWorkFailed")
    );
    let expect = |ordinal: i32, status: &str, hint: &str| {
        let condition = manifest_condition(&failed, ordinal, "Applied").unwrap();
        assert_eq!(condition.status, status, "manifest {ordinal}: {condition:?}");
        if status == "False" {
            assert_eq!(condition.reason, "AppliedManifestFailed");
            assert!(
                condition.message.contains(hint),
                "manifest {ordinal}: {}",
                condition.message
            );
        }
    };
    expect(0, "True", "");
    expect(1, "False", "does not serve nothing.flotilla.dev/v1");
    expect(2, "False", "Not_A_Valid_Name");
    expect(3, "False", "no-such-namespace");
    expect(4, "True", "");
    expect(5, "False", "not Established");
    expect(6, "False", "serves no kind Beta");
    let cms: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), ns);
    assert!(cms.get_opt("good").await.unwrap().is_some());
    let unknown = manifest_condition(&failed, 1, "Available").unwrap();
    assert_eq!(unknown.reason, "IncompleteResourceMeta");
}

/// A work executor: service account `name` of `namespace`.
fn executor(namespace: &str, name: &str) -> Option<ManifestWorkExecutor> {
    Some(ManifestWorkExecutor {
        subject: ManifestWorkExecutorSubject {
            service_account: Some(ManifestWorkSubjectServiceAccount {
                namespace: namespace.into(),
                name: name.into(),
            }),
            ..Default::default()
        },
    })
}

/// Grants service account `account` of `namespace` the Role `rules` there.
async fn grant(client: &kube::Client, namespace: &str, account: &str, rules: Value) {
    let role: Role = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": { "name": account, "namespace": namespace },
        "rules": rules,
    }))
    .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": { "name": account, "namespace": namespace },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account },
        "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": namespace }],
    }))
    .unwrap();
    Api::<Role>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

#[tokio::test]
async fn an_executor_without_permission_fails_every_manifest_with_the_reason() {
    let agent = start_agent("cluster-executor").await;
    let ns = "work-executor";
    namespace(&agent.managed, ns).await;
    let mut work = work("executor", vec![config_map(ns, "as-executor")]);
    work.spec.executor = executor(ns, "nobody");
    agent.create(&work).await;
    let failed = agent.wait_condition("executor", "Applied", "False").await;
    let condition = manifest_condition(&failed, 0, "Applied").unwrap();
    assert!(
        condition
            .message
            .contains("system:serviceaccount:work-executor:nobody is not allowed to create configmaps"),
        "{}",
        condition.message
    );
    let cms: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), ns);
    assert!(cms.get_opt("as-executor").await.unwrap().is_none());

    // Granted the permissions on the managed cluster, the retried work applies.
    let configmaps = json!([{ "apiGroups": [""], "resources": ["configmaps"],
        "verbs": ["create", "update", "patch", "get", "delete"] }]);
    grant(&agent.managed, ns, "nobody", configmaps).await;
    agent.wait_condition("executor", "Applied", "True").await;
    assert!(cms.get_opt("as-executor").await.unwrap().is_some());
}

/// A SubjectAccessReview cannot see RBAC's escalation rule: an executor allowed to write Roles
/// still may not write one granting more than it holds. That manifest fails with the reason;
/// the Role within its powers applies.
#[tokio::test]
async fn an_executor_may_not_grant_more_than_it_holds() {
    let agent = start_agent("cluster-escalation").await;
    let ns = "work-escalation";
    namespace(&agent.managed, ns).await;
    let role = |name: &str, resource: &str, verbs: &[&str]| -> Value {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": { "name": name, "namespace": ns },
            "rules": [{ "apiGroups": [""], "resources": [resource], "verbs": verbs }],
        })
    };
    let powers = json!([
        { "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"] },
        { "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"],
          "verbs": ["create", "update", "patch", "get", "delete"] },
    ]);
    grant(&agent.managed, ns, "limited", powers).await;

    let mut work = work(
        "escalation",
        vec![
            role("within", "configmaps", &["get"]),
            role("beyond", "secrets", &["get"]),
        ],
    );
    work.spec.executor = executor(ns, "limited");
    agent.create(&work).await;
    let failed = agent.wait_condition("escalation", "Applied", "False").await;
    let within = manifest_condition(&failed, 0, "Applied").unwrap();
    assert_eq!(within.status, "True", "{}", within.message);
    let beyond = manifest_condition(&failed, 1, "Applied").unwrap();
    assert!(
        beyond.message.contains("permission escalation")
            && beyond.message.contains("roles work-escalation/beyond"),
        "{}",
        beyond.message
    );
    let roles: Api<Role> = Api::namespaced(agent.managed.clone(), ns);
    assert!(roles.get_opt("within").await.unwrap().is_some());
    assert!(roles.get_opt("beyond").await.unwrap().is_none());
}
