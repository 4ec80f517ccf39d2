//! The work agent against real hub and managed control planes: a work lands in kind order
//! with OCM's conditions, records and owner references; feedback and condition rules; update
//! strategies; delete options; dropped manifests; shared objects; drift.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use crate::agent_support;

use std::sync::{Arc, Mutex};

use agent_support::*;
use flotilla_api::work::v1::{
    AppliedManifestWork, ConditionRule, ConditionRuleType, DeleteOption, DeletePropagationPolicyType,
    FeedBackType, FeedbackRule, IgnoreField, IgnoreFieldsCondition, JsonPath, ManifestConfigOption,
    ManifestWork, OrphaningRule, ResourceIdentifier, SelectivelyOrphan, ServerSideApplyConfig,
    UpdateStrategy, UpdateStrategyType, ValueType,
};
use flotilla_core::work::agent::{
    names::{applied_manifest_work_name, hub_hash},
    ownership::RELEASE_PRE_EXISTING_ANNOTATION,
};
use flotilla_work::agent::AgentOptions;
use futures::StreamExt;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::{Value, json};

fn config_map(namespace: &str, name: &str, data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name, "namespace": namespace },
        "data": data,
    })
}

fn namespace_manifest(name: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } })
}

fn identifier(group: &str, resource: &str, namespace: &str, name: &str) -> ResourceIdentifier {
    ResourceIdentifier {
        group: group.into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

fn strategy(type_: UpdateStrategyType, ssa: Option<ServerSideApplyConfig>) -> Option<UpdateStrategy> {
    Some(UpdateStrategy {
        type_,
        server_side_apply: ssa,
    })
}

async fn ensure_namespace(agent: &Agent, name: &str) {
    namespace(&agent.managed, name).await;
}

#[tokio::test]
async fn a_work_with_namespace_crd_cr_service_account_config_map_and_deployment_lands_in_order() {
    let agent = start_agent("cluster-full").await;
    let (hub, _) = planes().await;
    let ns = "work-full";
    let manifests = vec![
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "web", "namespace": ns },
            "spec": {
                "replicas": 1,
                "selector": { "matchLabels": { "app": "web" } },
                "template": {
                    "metadata": { "labels": { "app": "web" } },
                    "spec": { "serviceAccountName": "web", "automountServiceAccountToken": false, "containers": [{ "name": "web", "image": "registry.invalid/web:1" }] },
                },
            },
        }),
        json!({ "apiVersion": "test.flotilla.dev/v1", "kind": "Widget", "metadata": { "name": "w1", "namespace": ns }, "spec": { "size": 3 } }),
        config_map(ns, "settings", json!({ "mode": "fast" })),
        json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": "web", "namespace": ns } }),
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": { "name": "widgets.test.flotilla.dev" },
            "spec": {
                "group": "test.flotilla.dev", "scope": "Namespaced",
                "names": { "plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList" },
                "versions": [{ "name": "v1", "served": true, "storage": true,
                    "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } } }],
            },
        }),
        namespace_manifest(ns),
    ];
    let mut work = work("full", manifests);
    work.spec.manifest_configs = vec![ManifestConfigOption {
        resource_identifier: identifier("apps", "deployments", ns, "web"),
        feedback_rules: vec![
            FeedbackRule {
                type_: FeedBackType::WellKnownStatus,
                json_paths: vec![],
            },
            FeedbackRule {
                type_: FeedBackType::JSONPaths,
                json_paths: vec![
                    JsonPath {
                        name: "specReplicas".into(),
                        version: String::new(),
                        path: ".spec.replicas".into(),
                    },
                    JsonPath {
                        name: "image".into(),
                        version: String::new(),
                        path: ".spec.template.spec.containers[0].image".into(),
                    },
                    JsonPath {
                        name: "automount".into(),
                        version: String::new(),
                        path: ".spec.template.spec.automountServiceAccountToken".into(),
                    },
                ],
            },
        ],
        condition_rules: vec![ConditionRule {
            condition: "OneReplica".into(),
            type_: ConditionRuleType::Cel,
            cel_expressions: Some(vec!["object.spec.replicas == 1".into()]),
            message: String::new(),
            message_expression: "result ? 'exactly one replica' : 'not one replica'".into(),
        }],
        ..Default::default()
    }];

    // Every status the agent writes, seen by a watcher from before the work exists.
    let seen: Arc<Mutex<Vec<ManifestWork>>> = Arc::default();
    let watch_seen = seen.clone();
    let works = agent.works();
    let watch = tokio::spawn(async move {
        let mut stream = watcher(works, watcher::Config::default().fields("metadata.name=full"))
            .applied_objects()
            .boxed();
        while let Some(Ok(work)) = stream.next().await {
            watch_seen.lock().unwrap().push(work);
        }
    });

    agent.create(&work).await;
    agent.wait_condition("full", "Applied", "True").await;
    let done = agent
        .wait_work("full", "feedback and rule", |w| {
            manifest_condition(w, 0, "OneReplica").is_some()
                && w.status.as_ref().unwrap().resource_status.manifests[0]
                    .status_feedbacks
                    .values
                    .iter()
                    .any(|v| v.name == "Replicas")
        })
        .await;
    watch.abort();

    // In kind order, every manifest applied the first time: no status ever had Applied False.
    for snapshot in seen.lock().unwrap().iter() {
        if let Some(applied) = work_condition(snapshot, "Applied") {
            assert_eq!(
                applied.status, "True",
                "a status had Applied False: {:#?}",
                snapshot.status
            );
        }
    }
    let applied = work_condition(&done, "Applied").unwrap();
    assert_eq!(applied.reason, "AppliedManifestWorkComplete");
    assert_eq!(applied.observed_generation, Some(1));
    let available = work_condition(
        &agent.wait_condition("full", "Available", "True").await,
        "Available",
    )
    .unwrap()
    .clone();
    assert_eq!(available.reason, "ResourcesAvailable");
    // The agent itself says the rollout of this generation is done, as MWRS rollouts expect.
    let settled = agent.wait_condition("full", "Progressing", "False").await;
    assert_eq!(
        work_condition(&settled, "Progressing").unwrap().reason,
        "Completed"
    );
    let degraded = work_condition(&settled, "Degraded").unwrap();
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("False", "Completed")
    );
    let status = done.status.as_ref().unwrap();
    assert_eq!(status.resource_status.manifests.len(), 6);
    for manifest in &status.resource_status.manifests {
        let applied = manifest.conditions.iter().find(|c| c.type_ == "Applied").unwrap();
        assert_eq!(
            (applied.status.as_str(), applied.reason.as_str()),
            ("True", "AppliedManifestComplete")
        );
    }
    assert_eq!(
        status.resource_status.manifests[1].resource_meta.resource,
        "widgets"
    );
    assert_eq!(
        status.resource_status.manifests[5].resource_meta.kind,
        "Namespace"
    );

    // Feedback: typed values.
    let values = &status.resource_status.manifests[0].status_feedbacks.values;
    let value = |name: &str| values.iter().find(|v| v.name == name).map(|v| v.value.clone());
    let replicas = value("Replicas").unwrap();
    assert_eq!((replicas.type_, replicas.integer), (ValueType::Integer, Some(1)));
    let spec_replicas = value("specReplicas").unwrap();
    assert_eq!(
        (spec_replicas.type_, spec_replicas.integer),
        (ValueType::Integer, Some(1))
    );
    let image = value("image").unwrap();
    assert_eq!(
        (image.type_, image.string.as_deref()),
        (ValueType::String, Some("registry.invalid/web:1"))
    );
    let paused = value("automount").unwrap();
    assert_eq!((paused.type_, paused.boolean), (ValueType::Boolean, Some(false)));
    let synced = manifest_condition(&done, 0, "StatusFeedbackSynced").unwrap();
    assert_eq!(
        (synced.status.as_str(), synced.reason.as_str()),
        ("True", "StatusFeedbackSynced")
    );
    let rule = manifest_condition(&done, 0, "OneReplica").unwrap();
    assert_eq!(
        (rule.status.as_str(), rule.reason.as_str(), rule.message.as_str()),
        ("True", "ConditionRuleEvaluated", "exactly one replica")
    );
    let aggregated = work_condition(&done, "OneReplica").unwrap();
    assert_eq!(
        (aggregated.status.as_str(), aggregated.reason.as_str()),
        ("True", "ConditionRulesAggregated")
    );

    // Record: <sha256(hub URL)>-<work>, sorted resources with uids, finalizers, owner references.
    let applied_name = applied_manifest_work_name(&hub_hash(hub.server()), "full");
    let record = Api::<AppliedManifestWork>::all(agent.managed.clone())
        .get(&applied_name)
        .await
        .unwrap();
    assert_eq!(record.spec.hub_hash, hub_hash(hub.server()));
    assert_eq!(record.spec.manifest_work_name, "full");
    assert_eq!(
        record.metadata.finalizers,
        Some(vec![
            "cluster.open-cluster-management.io/applied-manifest-work-cleanup".to_owned()
        ])
    );
    let resources = &record.status.as_ref().unwrap().applied_resources;
    assert_eq!(resources.len(), 6);
    assert!(resources.iter().all(|r| !r.uid.is_empty()));
    let mut sorted = resources.clone();
    sorted.sort_by(|a, b| {
        (&a.group, &a.version, &a.resource, &a.namespace, &a.name).cmp(&(
            &b.group,
            &b.version,
            &b.resource,
            &b.namespace,
            &b.name,
        ))
    });
    assert_eq!(resources, &sorted);
    let deployment = Api::<Deployment>::namespaced(agent.managed.clone(), ns)
        .get("web")
        .await
        .unwrap();
    let owner = &deployment.owner_references()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.controller
        ),
        (
            "work.open-cluster-management.io/v1",
            "AppliedManifestWork",
            applied_name.as_str(),
            None
        )
    );
    assert_eq!(owner.uid, record.uid().unwrap());
    assert_eq!(
        done.metadata.finalizers,
        Some(vec![
            "cluster.open-cluster-management.io/manifest-work-cleanup".to_owned()
        ])
    );
}

/// Condition rules run under a budget, off the agent's async workers (a multi-threaded
/// runtime, as the agent's): a rule that would run for hours fails at its budget, and the
/// manifest's other rule still evaluates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_condition_rule_over_its_budget_fails_and_the_other_still_evaluates() {
    let agent = start_agent("cluster-cel-budget").await;
    let ns = "work-cel-budget";
    ensure_namespace(&agent, ns).await;
    let cel_rule = |condition: &str, expression: &str| ConditionRule {
        condition: condition.into(),
        type_: ConditionRuleType::Cel,
        cel_expressions: Some(vec![expression.into()]),
        message: String::new(),
        message_expression: String::new(),
    };
    let mut work = work(
        "hostile-rule",
        vec![config_map(ns, "settings", json!({ "mode": "fast" }))],
    );
    work.spec.manifest_configs = vec![ManifestConfigOption {
        resource_identifier: identifier("", "configmaps", ns, "settings"),
        condition_rules: vec![
            // First: a rule after the hostile one may find the sync's deadline gone.
            cel_rule("Fast", "object.data.mode == 'fast'"),
            // 10^12 iterations, of a size the compile-time estimate cannot know.
            cel_rule(
                "Hostile",
                "lists.range(size(object.metadata.name) * 100000).all(i, \
                 lists.range(size(object.metadata.name) * 100000).all(j, i != j || j >= 0))",
            ),
        ],
        ..Default::default()
    }];
    agent.create(&work).await;
    let done = agent
        .wait_work("hostile-rule", "both rules evaluated", |w| {
            manifest_condition(w, 0, "Hostile").is_some() && manifest_condition(w, 0, "Fast").is_some()
        })
        .await;
    let hostile = manifest_condition(&done, 0, "Hostile").unwrap();
    assert_eq!(
        (hostile.status.as_str(), hostile.reason.as_str()),
        ("False", "ConditionRuleExpressionError")
    );
    assert!(
        hostile.message.contains("ran over its budget"),
        "{}",
        hostile.message
    );
    let fast = manifest_condition(&done, 0, "Fast").unwrap();
    assert_eq!(
        (fast.status.as_str(), fast.reason.as_str()),
        ("True", "ConditionRuleEvaluated")
    );
}

#[tokio::test]
async fn update_reverts_drift_and_create_only_leaves_the_object_alone() {
    let agent = start_agent("cluster-strategies").await;
    let ns = "work-strategies";
    ensure_namespace(&agent, ns).await;
    let mut work = work(
        "strategies",
        vec![
            config_map(ns, "updated", json!({ "v": "1" })),
            config_map(ns, "created-once", json!({ "v": "1" })),
        ],
    );
    work.spec.manifest_configs = vec![ManifestConfigOption {
        resource_identifier: identifier("", "configmaps", ns, "created-once"),
        update_strategy: strategy(UpdateStrategyType::CreateOnly, None),
        ..Default::default()
    }];
    agent.create(&work).await;
    agent.wait_condition("strategies", "Applied", "True").await;
    let cms: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), ns);

    // A hand edit of both: Update reverts it on the next resync, CreateOnly keeps it.
    for name in ["updated", "created-once"] {
        let patch = json!({ "data": { "v": "hand" } });
        cms.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    wait_object(&cms, "updated", "drift reverted", |cm| {
        cm.and_then(|c| c.data.as_ref())
            .and_then(|d| d.get("v"))
            .map(String::as_str)
            == Some("1")
    })
    .await;

    // A new spec: Update applies it, CreateOnly does not.
    work.spec.workload.manifests = vec![
        flotilla_api::work::v1::Manifest(config_map(ns, "updated", json!({ "v": "2" }))),
        flotilla_api::work::v1::Manifest(config_map(ns, "created-once", json!({ "v": "2" }))),
    ];
    agent.set_spec("strategies", &work.spec).await;
    agent.wait_condition("strategies", "Applied", "True").await;
    wait_object(&cms, "updated", "new spec applied", |cm| {
        cm.and_then(|c| c.data.as_ref())
            .and_then(|d| d.get("v"))
            .map(String::as_str)
            == Some("2")
    })
    .await;
    let once = cms.get("created-once").await.unwrap();
    assert_eq!(once.data.unwrap()["v"], "hand");
    assert_eq!(
        once.metadata.owner_references.unwrap().len(),
        1,
        "CreateOnly still owns it"
    );
}

#[tokio::test]
async fn server_side_apply_conflicts_fail_the_manifest_until_forced() {
    let agent = start_agent("cluster-ssa").await;
    let ns = "work-ssa";
    ensure_namespace(&agent, ns).await;
    let cms: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), ns);
    // Someone else owns data.owned.
    cms.patch(
        "shared-fields",
        &PatchParams::apply("someone-else"),
        &Patch::Apply(config_map(ns, "shared-fields", json!({ "owned": "theirs" }))),
    )
    .await
    .unwrap();

    let ssa = |force: bool| ServerSideApplyConfig {
        force,
        field_manager: "work-agent-test".into(),
        ignore_fields: vec![],
    };
    let mut work = work(
        "ssa",
        vec![
            config_map(ns, "shared-fields", json!({ "owned": "ours" })),
            config_map(ns, "plain", json!({ "a": "b" })),
        ],
    );
    work.spec.manifest_configs = vec![ManifestConfigOption {
        resource_identifier: identifier("", "configmaps", ns, "shared-fields"),
        update_strategy: strategy(UpdateStrategyType::ServerSideApply, Some(ssa(false))),
        ..Default::default()
    }];
    agent.create(&work).await;
    let failed = agent.wait_condition("ssa", "Applied", "False").await;
    let condition = manifest_condition(&failed, 0, "Applied").unwrap();
    assert_eq!(condition.reason, "AppliedManifestFailed");
    assert!(condition.message.contains("conflict"), "{}", condition.message);
    assert_eq!(manifest_condition(&failed, 1, "Applied").unwrap().status, "True");

    work.spec.manifest_configs[0].update_strategy =
        strategy(UpdateStrategyType::ServerSideApply, Some(ssa(true)));
    agent.set_spec("ssa", &work.spec).await;
    agent.wait_condition("ssa", "Applied", "True").await;
    let cm = cms.get("shared-fields").await.unwrap();
    assert_eq!(cm.data.unwrap()["owned"], "ours");
    let managers: Vec<_> = cm
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|f| f.manager)
        .collect();
    assert!(managers.contains(&"work-agent-test".to_owned()), "{managers:?}");
}

/// ignoreFields as OCM applies them: the ignored fields are written once, when the object is
/// created. While the hub's intent is unchanged nothing is applied again; a new intent brings
/// OnSpokeChange fields back to the hub's value but leaves OnSpokePresent fields to the
/// managed cluster.
#[tokio::test]
async fn server_side_apply_leaves_ignored_fields_to_the_managed_cluster() {
    let agent = start_agent("cluster-ignore").await;
    let ns = "work-ignore";
    ensure_namespace(&agent, ns).await;
    let cms: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), ns);
    let option = |name: &str, condition: IgnoreFieldsCondition| ManifestConfigOption {
        resource_identifier: identifier("", "configmaps", ns, name),
        update_strategy: strategy(
            UpdateStrategyType::ServerSideApply,
            Some(ServerSideApplyConfig {
                force: true,
                field_manager: "work-agent-test".into(),
                ignore_fields: vec![IgnoreField {
                    condition,
                    json_paths: vec![".data.size".into()],
                    ..Default::default()
                }],
            }),
        ),
        ..Default::default()
    };
    let manifests = |size: &str, label: &str| {
        ["present", "change"]
            .map(|name| config_map(ns, name, json!({ "size": size, "label": label })))
            .to_vec()
    };
    let mut work = work("ignore", manifests("1", "a"));
    work.spec.manifest_configs = vec![
        option("present", IgnoreFieldsCondition::OnSpokePresent),
        option("change", IgnoreFieldsCondition::OnSpokeChange),
    ];
    agent.create(&work).await;
    agent.wait_condition("ignore", "Applied", "True").await;
    for name in ["present", "change"] {
        let cm = cms.get(name).await.unwrap();
        assert!(
            cm.annotations()
                .contains_key(flotilla_core::work::agent::ignore::SPEC_HASH_ANNOTATION)
        );
        assert_eq!(cm.data.unwrap()["size"], "1", "{name} is created whole");
        // Someone scales it on the managed cluster.
        let params = PatchParams {
            field_manager: Some("someone".into()),
            ..PatchParams::default()
        };
        cms.patch(name, &params, &Patch::Merge(json!({ "data": { "size": "5" } })))
            .await
            .unwrap();
    }

    work.spec.workload.manifests = manifests("2", "b")
        .into_iter()
        .map(flotilla_api::work::v1::Manifest)
        .collect();
    agent.set_spec("ignore", &work.spec).await;
    for name in ["present", "change"] {
        wait_object(&cms, name, "the new intent applied", |cm| {
            cm.and_then(|c| c.data.as_ref())
                .and_then(|d| d.get("label"))
                .map(String::as_str)
                == Some("b")
        })
        .await;
    }
    let size = |cm: ConfigMap| cm.data.unwrap()["size"].clone();
    assert_eq!(
        size(cms.get("change").await.unwrap()),
        "2",
        "OnSpokeChange follows a new intent"
    );
    assert_eq!(
        size(cms.get("present").await.unwrap()),
        "5",
        "OnSpokePresent stays the cluster's"
    );
}

#[tokio::test]
async fn read_only_reports_feedback_and_never_writes_or_deletes() {
    let agent = start_agent("cluster-readonly").await;
    let ns = "work-readonly";
    ensure_namespace(&agent, ns).await;
    let cms: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), ns);
    let existing: ConfigMap =
        serde_json::from_value(config_map(ns, "watched", json!({ "level": "7" }))).unwrap();
    cms.create(&PostParams::default(), &existing).await.unwrap();

    let mut work = work(
        "readonly",
        vec![config_map(ns, "watched", json!({ "level": "changed" }))],
    );
    work.spec.manifest_configs = vec![ManifestConfigOption {
        resource_identifier: identifier("", "configmaps", ns, "watched"),
        update_strategy: strategy(UpdateStrategyType::ReadOnly, None),
        feedback_rules: vec![FeedbackRule {
            type_: FeedBackType::JSONPaths,
            json_paths: vec![JsonPath {
                name: "level".into(),
                version: String::new(),
                path: ".data.level".into(),
            }],
        }],
        ..Default::default()
    }];
    agent.create(&work).await;
    let done = agent
        .wait_work("readonly", "feedback", |w| {
            w.status.as_ref().is_some_and(|s| {
                s.resource_status
                    .manifests
                    .first()
                    .is_some_and(|m| !m.status_feedbacks.values.is_empty())
            })
        })
        .await;
    let value = &done.status.unwrap().resource_status.manifests[0]
        .status_feedbacks
        .values[0];
    assert_eq!(value.value.string.as_deref(), Some("7"));
    let cm = cms.get("watched").await.unwrap();
    assert_eq!(cm.data.unwrap()["level"], "7");
    assert!(cm.metadata.owner_references.unwrap_or_default().is_empty());

    agent
        .works()
        .delete("readonly", &DeleteParams::default())
        .await
        .unwrap();
    agent.wait_gone("readonly").await;
    assert!(cms.get_opt("watched").await.unwrap().is_some());
}

async fn delete_and_check(option: Option<DeleteOption>, cluster: &str, survivors: &[&str], deleted: &[&str]) {
    let agent = start_agent(cluster).await;
    let ns = format!("work-{cluster}");
    ensure_namespace(&agent, &ns).await;
    let mut work = work(
        "deleted",
        vec![
            config_map(&ns, "keep", json!({})),
            config_map(&ns, "drop", json!({})),
        ],
    );
    work.spec.delete_option = option;
    agent.create(&work).await;
    agent.wait_condition("deleted", "Applied", "True").await;
    agent
        .works()
        .delete("deleted", &DeleteParams::default())
        .await
        .unwrap();
    agent.wait_gone("deleted").await;
    let cms: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), &ns);
    for name in deleted {
        wait_object(&cms, name, "deleted", |cm| {
            cm.is_none_or(|c| c.metadata.deletion_timestamp.is_some())
        })
        .await;
    }
    for name in survivors {
        let cm = cms.get(name).await.unwrap();
        assert!(
            cm.metadata.deletion_timestamp.is_none(),
            "{name} is being deleted"
        );
        assert!(
            cm.metadata.owner_references.unwrap_or_default().is_empty(),
            "{name} still owned"
        );
    }
}

#[tokio::test]
async fn foreground_deletion_removes_every_object_then_the_work() {
    delete_and_check(None, "cluster-foreground", &[], &["keep", "drop"]).await;
}

#[tokio::test]
async fn orphan_deletion_keeps_every_object_without_the_owner() {
    let option = DeleteOption {
        propagation_policy: DeletePropagationPolicyType::Orphan,
        ..Default::default()
    };
    delete_and_check(Some(option), "cluster-orphan", &["keep", "drop"], &[]).await;
}

#[tokio::test]
async fn selective_orphaning_keeps_only_the_named_object() {
    let option = DeleteOption {
        propagation_policy: DeletePropagationPolicyType::SelectivelyOrphan,
        selectively_orphan: Some(SelectivelyOrphan {
            orphaning_rules: vec![OrphaningRule {
                group: String::new(),
                resource: "configmaps".into(),
                namespace: "work-cluster-selective".into(),
                name: "keep".into(),
            }],
        }),
        ttl_seconds_after_finished: None,
    };
    delete_and_check(Some(option), "cluster-selective", &["keep"], &["drop"]).await;
}

#[tokio::test]
async fn removing_one_manifest_deletes_exactly_that_object() {
    let agent = start_agent("cluster-drop").await;
    let ns = "work-drop";
    ensure_namespace(&agent, ns).await;
    let mut work = work(
        "dropper",
        vec![
            config_map(ns, "a", json!({})),
            config_map(ns, "b", json!({})),
            config_map(ns, "c", json!({})),
        ],
    );
    agent.create(&work).await;
    agent.wait_condition("dropper", "Applied", "True").await;
    work.spec.workload.manifests.remove(1);
    agent.set_spec("dropper", &work.spec).await;
    let cms: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), ns);
    wait_object(&cms, "b", "b deleted", |cm| cm.is_none()).await;
    agent.wait_condition("dropper", "Applied", "True").await;
    assert!(cms.get_opt("a").await.unwrap().is_some());
    assert!(cms.get_opt("c").await.unwrap().is_some());
    let (hub, _) = planes().await;
    let names = |record: Option<&AppliedManifestWork>| -> Vec<String> {
        record
            .and_then(|r| r.status.as_ref())
            .map(|s| s.applied_resources.iter().map(|r| r.name.clone()).collect())
            .unwrap_or_default()
    };
    // The record keeps b until it is gone, then forgets exactly b.
    wait_object(
        &Api::<AppliedManifestWork>::all(agent.managed.clone()),
        &applied_manifest_work_name(&hub_hash(hub.server()), "dropper"),
        "b forgotten",
        |record| names(record) == vec!["a", "c"],
    )
    .await;
}

/// A ValidatingAdmissionPolicy on the managed cluster that denies status writes of the records
/// of works named `work`; the returned guard lifts it.
async fn hold_records_of(managed: &kube::Client, work: &str) -> impl AsyncFnOnce() {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    let name = format!("hold-records-{work}");
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": { "resourceRules": [{
                "apiGroups": ["work.open-cluster-management.io"], "apiVersions": ["*"],
                "operations": ["UPDATE"], "resources": ["appliedmanifestworks/status"],
            }]},
            "validations": [{
                "expression": format!("object.spec.manifestWorkName != '{work}'"),
                "message": format!("records of {work} are held"),
            }],
        },
    }))
    .unwrap();
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "policyName": name, "validationActions": ["Deny"] },
    }))
    .unwrap();
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(managed.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(managed.clone());
    policies.create(&PostParams::default(), &policy).await.unwrap();
    bindings.create(&PostParams::default(), &binding).await.unwrap();

    // The policy holds once a probe record of another hub (which the agent leaves alone) is
    // refused a status write.
    let records: Api<AppliedManifestWork> = Api::all(managed.clone());
    let probe = format!("probe-{work}");
    let record: AppliedManifestWork = serde_json::from_value(json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "AppliedManifestWork",
        "metadata": { "name": probe },
        "spec": { "hubHash": "probe", "agentID": "probe", "manifestWorkName": work },
    }))
    .unwrap();
    records.create(&PostParams::default(), &record).await.unwrap();
    let status = json!({ "status": { "evictionStartTime": "2026-01-01T00:00:00Z" } });
    let (records, probe, status) = (&records, &probe, &status);
    flotilla_testing::wait::until("the record policy in force", TIMEOUT, || async move {
        match records
            .patch_status(probe, &PatchParams::default(), &Patch::Merge(status))
            .await
        {
            Err(e) if e.to_string().contains("are held") => Ok(Some(())),
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .unwrap();
    records.delete(probe, &DeleteParams::default()).await.unwrap();
    async move || {
        bindings.delete(&name, &DeleteParams::default()).await.unwrap();
        policies.delete(&name, &DeleteParams::default()).await.unwrap();
    }
}

#[tokio::test]
async fn a_work_reports_applied_only_once_its_record_holds_every_object() {
    let agent = start_agent("cluster-held").await;
    let ns = "work-held";
    ensure_namespace(&agent, ns).await;
    let lift = hold_records_of(&agent.managed, "held-back").await;
    let mut work = work(
        "held-back",
        vec![
            config_map(ns, "a", json!({})),
            config_map(ns, "b", json!({})),
            config_map(ns, "c", json!({})),
        ],
    );
    agent.create(&work).await;
    let cms: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), ns);
    wait_object(&cms, "c", "objects applied", |cm| cm.is_some()).await;
    // The objects exist but cannot be recorded: the work does not report them applied. (The
    // status write would follow the objects' writes within milliseconds; seconds show it
    // holds back.)
    let reported = tokio::time::timeout(
        std::time::Duration::from_secs(3),
        agent.wait_work("held-back", "any Applied condition", |w| {
            w.status
                .as_ref()
                .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Applied"))
        }),
    )
    .await;
    assert!(reported.is_err(), "reported before recorded: {reported:?}");

    lift().await;
    agent.wait_condition("held-back", "Applied", "True").await;
    let (hub, _) = planes().await;
    let record = Api::<AppliedManifestWork>::all(agent.managed.clone())
        .get(&applied_manifest_work_name(&hub_hash(hub.server()), "held-back"))
        .await
        .unwrap();
    let names: Vec<_> = record
        .status
        .unwrap_or_default()
        .applied_resources
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["a", "b", "c"]);

    // So a manifest dropped at once is cleaned up.
    work.spec.workload.manifests.remove(1);
    agent.set_spec("held-back", &work.spec).await;
    wait_object(&cms, "b", "b deleted", |cm| cm.is_none()).await;
}

#[tokio::test]
async fn a_shared_object_survives_until_the_last_work_lets_go() {
    let agent = start_agent("cluster-shared").await;
    let ns = "work-shared";
    ensure_namespace(&agent, ns).await;
    agent
        .create(&work(
            "share-1",
            vec![config_map(ns, "common", json!({ "x": "1" }))],
        ))
        .await;
    agent
        .create(&work(
            "share-2",
            vec![config_map(ns, "common", json!({ "x": "1" }))],
        ))
        .await;
    agent.wait_condition("share-1", "Applied", "True").await;
    agent.wait_condition("share-2", "Applied", "True").await;
    let cms: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), ns);
    wait_object(&cms, "common", "two owners", |cm| {
        cm.is_some_and(|c| c.metadata.owner_references.as_ref().is_some_and(|o| o.len() == 2))
    })
    .await;

    agent
        .works()
        .delete("share-1", &DeleteParams::default())
        .await
        .unwrap();
    agent.wait_gone("share-1").await;
    let cm = cms.get("common").await.unwrap();
    assert!(cm.metadata.deletion_timestamp.is_none());
    assert_eq!(cm.metadata.owner_references.unwrap().len(), 1);

    agent
        .works()
        .delete("share-2", &DeleteParams::default())
        .await
        .unwrap();
    agent.wait_gone("share-2").await;
    wait_object(&cms, "common", "deleted with the last work", |cm| {
        cm.is_none_or(|c| c.metadata.deletion_timestamp.is_some())
    })
    .await;
}

#[tokio::test]
async fn a_record_whose_work_vanished_from_the_hub_is_evicted_after_the_grace_period() {
    let cluster = "cluster-evict";
    let options = AgentOptions {
        eviction_grace_period: std::time::Duration::from_secs(3),
        ..options(cluster)
    };
    let agent = start_agent_with(cluster, options.clone()).await;
    let ns = "work-evict";
    ensure_namespace(&agent, ns).await;
    agent
        .create(&work("vanishing", vec![config_map(ns, "left-behind", json!({}))]))
        .await;
    agent.wait_condition("vanishing", "Applied", "True").await;

    // The work disappears while no agent runs (its finalizer removed by hand).
    let (hub, _) = planes().await;
    let hub_admin = agent.hub.clone();
    let managed = agent.managed.clone();
    drop(agent);
    let works: Api<ManifestWork> = Api::namespaced(hub_admin, cluster);
    let patch = json!({ "metadata": { "finalizers": null } });
    works
        .patch("vanishing", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    works.delete("vanishing", &DeleteParams::default()).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(managed.clone(), ns);
    assert!(cms.get_opt("left-behind").await.unwrap().is_some());

    // A new agent marks the record, then evicts it: its objects go with it.
    let records: Api<AppliedManifestWork> = Api::all(managed);
    let name = applied_manifest_work_name(&hub_hash(hub.server()), "vanishing");
    let _agent = start_agent_with(cluster, options).await;
    wait_object(&records, &name, "eviction started or done", |record| {
        record.is_none_or(|r| r.status.as_ref().is_some_and(|s| s.eviction_start_time.is_some()))
    })
    .await;
    wait_object(&records, &name, "record evicted", |record| record.is_none()).await;
    wait_object(&cms, "left-behind", "object removed with the record", |cm| {
        cm.is_none_or(|c| c.metadata.deletion_timestamp.is_some())
    })
    .await;
}

/// A work naming a ConfigMap that already exists (`found`, with data the work replaces) and
/// one it creates (`made`) is applied and deleted, annotated `annotations`. Returns whether
/// `found` survived; `made` always goes.
async fn pre_existing_after_deletion(cluster: &str, annotations: &[(&str, &str)]) -> bool {
    let agent = start_agent(cluster).await;
    let ns = format!("work-{cluster}");
    ensure_namespace(&agent, &ns).await;
    let cms: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), &ns);
    let found: ConfigMap = serde_json::from_value(config_map(&ns, "found", json!({"by": "admin"}))).unwrap();
    cms.create(&PostParams::default(), &found).await.unwrap();
    // Works share the managed cluster's record names (hub hash + work name): one per test.
    let name = format!("adopting-{cluster}");
    let mut work = work(
        &name,
        vec![
            config_map(&ns, "found", json!({"by": "work"})),
            config_map(&ns, "made", json!({"by": "work"})),
        ],
    );
    work.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    agent.create(&work).await;
    agent.wait_condition(&name, "Applied", "True").await;
    // Applied either way: the work maintains the object it found.
    assert_eq!(cms.get("found").await.unwrap().data.unwrap()["by"], "work");
    agent
        .works()
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    agent.wait_gone(&name).await;
    wait_object(&cms, "made", "made deleted", |cm| {
        cm.is_none_or(|c| c.metadata.deletion_timestamp.is_some())
    })
    .await;
    match cms.get_opt("found").await.unwrap() {
        Some(cm) if cm.metadata.deletion_timestamp.is_none() => {
            assert!(
                cm.metadata.owner_references.unwrap_or_default().is_empty(),
                "a released object keeps no owner"
            );
            true
        }
        _ => false,
    }
}

#[tokio::test]
async fn an_object_that_existed_before_the_work_is_deleted_with_it_by_default() {
    assert!(!pre_existing_after_deletion("cluster-adopt", &[]).await);
}

#[tokio::test]
async fn an_object_that_existed_before_the_work_is_released_when_the_work_asks() {
    let released =
        pre_existing_after_deletion("cluster-release", &[(RELEASE_PRE_EXISTING_ANNOTATION, "true")]).await;
    assert!(released, "the object found already there was deleted");
}
