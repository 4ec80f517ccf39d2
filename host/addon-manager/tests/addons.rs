//! The add-on manager against a real control plane, with real plugins registered from
//! ConfigMaps: install (Manual and Placements), deploy works with OCM's names, labels, owner and
//! annotation, `ManifestApplied`/`Progressing` from the works' status, removal on disable, a
//! plugin fault that keeps the last good work, and bad config inputs reported in conditions.
//!
//! The managed clusters' work agents and the placement controller are stood in for: the tests
//! patch ManifestWork status and write PlacementDecisions themselves.

#![allow(clippy::expect_used, reason = "tests fail loudly")]

use crate::support;

use flotilla_api::addon::consts::{ADDON_NAME_LABEL, LIFECYCLE_ANNOTATION};
use flotilla_api::addon::v1alpha1::{ClusterManagementAddOn, ManagedClusterAddOn};
use flotilla_api::work::consts::CONFIG_SPEC_HASH_ANNOTATION;
use flotilla_core::addon::works::{WORK_SPEC_HASH_ANNOTATION, with_crd_defaults, work_spec_hash};
use flotilla_test_plugins as plugins;
use flotilla_testing::wait;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::*;

fn deploy_work(addon: &str) -> String {
    format!("addon-{addon}-deploy-0")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enabled_addon_gets_its_deploy_work_reports_manifest_applied_and_loses_it_when_disabled() {
    let client = client().await;
    register_plugin(&client, "hello-manual", plugins::HELLOWORLD).await;
    let cma = await_cma(&client, "hello-manual").await;
    assert_eq!(cma.spec.add_on_meta.display_name, "hello-manual");
    cluster(&client, "mc-manual").await;
    enable(&client, "hello-manual", "mc-manual", json!([])).await;

    let addon = Api::<ManagedClusterAddOn>::namespaced(client.clone(), "mc-manual")
        .get("hello-manual")
        .await
        .expect("add-on exists");
    let work = await_work(
        &client,
        "mc-manual",
        &deploy_work("hello-manual"),
        "deploy work",
        |_| true,
    )
    .await;
    assert_eq!(
        work.labels().get(ADDON_NAME_LABEL).map(String::as_str),
        Some("hello-manual")
    );
    let owner = &work.owner_references()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.controller
        ),
        (
            "ManagedClusterAddOn",
            "hello-manual",
            addon.uid().unwrap_or_default().as_str(),
            Some(true)
        )
    );
    assert!(
        !work.spec.workload.manifests.is_empty(),
        "the plugin's objects are in the work"
    );

    agent_applied(&client, &work).await;
    let reported = Api::<flotilla_api::work::v1::ManifestWork>::namespaced(client.clone(), "mc-manual")
        .get(&work.name_any())
        .await
        .expect("reported work");
    let applied = await_condition(&client, "mc-manual", "hello-manual", "ManifestApplied", |c| {
        c.status == "True"
    })
    .await;
    assert_eq!(applied.reason, "AddonManifestApplied");
    let progressing = await_condition(&client, "mc-manual", "hello-manual", "Progressing", |c| {
        c.status == "False"
    })
    .await;
    assert_eq!(progressing.reason, "Completed");
    // Completed was computed by a reconcile that re-rendered the same output after the agent's
    // report: it wrote nothing to the work.
    let after = Api::<flotilla_api::work::v1::ManifestWork>::namespaced(client.clone(), "mc-manual")
        .get(&work.name_any())
        .await
        .expect("work");
    assert_eq!(
        after.resource_version(),
        reported.resource_version(),
        "unchanged output, no write"
    );
    // The spec read back hashes as the one applied: the CRD's defaults were filled in before,
    // so a restarted hub finds its works as it left them and writes none of them again.
    assert_eq!(
        work_spec_hash(&after.spec).as_ref(),
        after.annotations().get(WORK_SPEC_HASH_ANNOTATION),
        "spec stored as applied"
    );

    // A hand edit of the work on the hub is reverted.
    let works = Api::<flotilla_api::work::v1::ManifestWork>::namespaced(client.clone(), "mc-manual");
    let applied_objects = after.spec.workload.manifests.clone();
    let mut edited: Vec<serde_json::Value> = applied_objects.iter().map(|m| m.0.clone()).collect();
    edited[0]["metadata"]["labels"]["edited"] = json!("by-hand");
    works
        .patch(
            &work.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"workload": {"manifests": edited}}})),
        )
        .await
        .expect("hand edit");
    await_work(
        &client,
        "mc-manual",
        &work.name_any(),
        "hand edit reverted",
        |w| w.spec.workload.manifests == applied_objects,
    )
    .await;

    Api::<ManagedClusterAddOn>::namespaced(client.clone(), "mc-manual")
        .delete("hello-manual", &DeleteParams::default())
        .await
        .expect("disable");
    await_no_work(&client, "mc-manual", &deploy_work("hello-manual")).await;
}

/// Every field the ManifestWork CRD defaults, left unset, then filled by `with_crd_defaults`:
/// the apiserver stores the spec as sent, so its hash is the stamp the deploy compares.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_spec_with_the_crd_defaults_filled_in_is_stored_as_sent() {
    use flotilla_api::work::v1::{
        DeleteOption, FeedbackRule, IgnoreField, Manifest, ManifestConfigOption, ManifestWork,
        ManifestWorkSpec, ManifestsTemplate, ResourceIdentifier, ServerSideApplyConfig, UpdateStrategy,
        UpdateStrategyType,
    };
    let client = client().await;
    cluster(&client, "mc-defaults").await;
    let mut spec = ManifestWorkSpec {
        workload: ManifestsTemplate {
            manifests: vec![Manifest(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": "default"}, "data": {"a": "1"}}))],
        },
        delete_option: Some(DeleteOption::default()),
        manifest_configs: vec![ManifestConfigOption {
            resource_identifier: ResourceIdentifier {
                resource: "configmaps".into(),
                name: "c".into(),
                namespace: "default".into(),
                ..Default::default()
            },
            feedback_rules: vec![FeedbackRule::default()],
            update_strategy: Some(UpdateStrategy {
                type_: UpdateStrategyType::ServerSideApply,
                server_side_apply: Some(ServerSideApplyConfig {
                    ignore_fields: vec![IgnoreField {
                        json_paths: vec![".data".into()],
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    let raw = work_spec_hash(&spec);
    with_crd_defaults(&mut spec);
    let stamped = work_spec_hash(&spec);
    assert_ne!(raw, stamped, "the spec had defaults to fill");
    let works = Api::<ManifestWork>::namespaced(client.clone(), "mc-defaults");
    let stored = works
        .create(&Default::default(), &ManifestWork::new("defaults", spec))
        .await
        .expect("create work");
    assert_eq!(work_spec_hash(&stored.spec), stamped, "stored as sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placements_install_strategy_follows_the_decisions() {
    let client = client().await;
    register_plugin(&client, "hello-placed", plugins::HELLOWORLD).await;
    await_cma(&client, "hello-placed").await;
    for c in ["mc-p1", "mc-p2"] {
        cluster(&client, c).await;
    }
    namespace(&client, "placed").await;
    apply_json(
        &client,
        "cluster.open-cluster-management.io/v1beta1",
        "Placement",
        Some("placed"),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
               "metadata": {"name": "pl", "namespace": "placed"}, "spec": {}}),
    )
    .await;
    let decisions = |clusters: &[&str]| json!({"status": {"decisions": clusters.iter().map(|c| json!({"clusterName": c, "reason": ""})).collect::<Vec<_>>()}});
    apply_json(
        &client,
        "cluster.open-cluster-management.io/v1beta1",
        "PlacementDecision",
        Some("placed"),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "PlacementDecision",
               "metadata": {"name": "pl-decision-1", "namespace": "placed",
                            "labels": {"cluster.open-cluster-management.io/placement": "pl",
                                       "cluster.open-cluster-management.io/decision-group-index": "0"}}}),
    )
    .await;
    let pd: Api<flotilla_api::cluster::v1beta1::PlacementDecision> =
        Api::namespaced(client.clone(), "placed");
    pd.patch_status(
        "pl-decision-1",
        &PatchParams::default(),
        &Patch::Merge(decisions(&["mc-p1", "mc-p2"])),
    )
    .await
    .expect("decisions");
    Api::<ClusterManagementAddOn>::all(client.clone())
        .patch(
            "hello-placed",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"installStrategy": {"type": "Placements",
                "placements": [{"namespace": "placed", "name": "pl"}]}}})),
        )
        .await
        .expect("install strategy");

    for c in ["mc-p1", "mc-p2"] {
        await_work(
            &client,
            c,
            &deploy_work("hello-placed"),
            "deploy work of a placed cluster",
            |_| true,
        )
        .await;
    }
    let owned = Api::<ManagedClusterAddOn>::namespaced(client.clone(), "mc-p1")
        .get("hello-placed")
        .await
        .expect("installed add-on");
    assert_eq!(owned.owner_references()[0].kind, "ClusterManagementAddOn");

    pd.patch_status(
        "pl-decision-1",
        &PatchParams::default(),
        &Patch::Merge(decisions(&["mc-p2"])),
    )
    .await
    .expect("decisions");
    await_no_work(&client, "mc-p1", &deploy_work("hello-placed")).await;
    let gone = Api::<ManagedClusterAddOn>::namespaced(client.clone(), "mc-p1")
        .get_opt("hello-placed")
        .await
        .expect("read add-on");
    assert!(
        gone.is_none(),
        "the add-on left the cluster that left the decisions"
    );
    await_work(
        &client,
        "mc-p2",
        &deploy_work("hello-placed"),
        "work of the remaining cluster",
        |_| true,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_starts_trapping_keeps_its_last_good_work_and_says_so_while_a_healthy_addon_keeps_working()
 {
    let client = client().await;
    register_plugin(&client, "hello-flaky", plugins::HELLOWORLD).await;
    register_plugin(&client, "hello-steady", plugins::HELLOWORLD).await;
    await_cma(&client, "hello-flaky").await;
    await_cma(&client, "hello-steady").await;
    cluster(&client, "mc-fault").await;
    enable(&client, "hello-flaky", "mc-fault", json!([])).await;
    let good = await_work(
        &client,
        "mc-fault",
        &deploy_work("hello-flaky"),
        "last good work",
        |_| true,
    )
    .await;

    register_plugin(&client, "hello-flaky", plugins::HOSTILE_TRAP).await;
    let fault = await_condition(&client, "mc-fault", "hello-flaky", "ManifestApplied", |c| {
        c.status == "False"
    })
    .await;
    assert_eq!(fault.reason, "ManifestWorkApplyFailed");
    assert!(
        fault
            .message
            .starts_with("failed to get manifest from agent interface")
            && fault.message.contains("hostile-trap"),
        "the condition names the fault: {}",
        fault.message
    );
    let kept = Api::<flotilla_api::work::v1::ManifestWork>::namespaced(client.clone(), "mc-fault")
        .get(&deploy_work("hello-flaky"))
        .await
        .expect("the last good work stays");
    assert_eq!(
        kept.resource_version(),
        good.resource_version(),
        "the last good work is untouched"
    );

    enable(&client, "hello-steady", "mc-fault", json!([])).await;
    let steady = await_work(
        &client,
        "mc-fault",
        &deploy_work("hello-steady"),
        "healthy add-on's work",
        |_| true,
    )
    .await;
    agent_applied(&client, &steady).await;
    await_condition(&client, "mc-fault", "hello-steady", "ManifestApplied", |c| {
        c.status == "True"
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_config_references_get_clear_conditions_and_a_config_that_appears_is_deployed_with_its_hash() {
    let client = client().await;
    register_plugin(&client, "hello-cfg", plugins::HELLOWORLD_CONFIG).await;
    await_cma(&client, "hello-cfg").await;
    cluster(&client, "mc-cfg").await;
    cluster(&client, "mc-unsupported").await;

    enable(
        &client,
        "hello-cfg",
        "mc-unsupported",
        json!([{"group": "example.com", "resource": "widgets", "namespace": "x", "name": "y"}]),
    )
    .await;
    let refused = await_condition(&client, "mc-unsupported", "hello-cfg", "Progressing", |c| {
        c.status == "False"
    })
    .await;
    assert_eq!(refused.reason, "ConfigurationUnsupported");
    assert!(
        refused.message.contains("example.com/widgets"),
        "{}",
        refused.message
    );

    enable(
        &client,
        "hello-cfg",
        "mc-cfg",
        json!([{"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs",
                "namespace": "mc-cfg", "name": "tuning"}]),
    )
    .await;
    let missing = await_condition(&client, "mc-cfg", "hello-cfg", "ManifestApplied", |c| {
        c.status == "False"
    })
    .await;
    assert_eq!(missing.reason, "ManifestWorkApplyFailed");
    assert!(
        missing.message.contains("configs not found") && missing.message.contains("tuning"),
        "{}",
        missing.message
    );

    apply_json(
        &client,
        "addon.open-cluster-management.io/v1alpha1",
        "AddOnDeploymentConfig",
        Some("mc-cfg"),
        json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnDeploymentConfig",
               "metadata": {"name": "tuning", "namespace": "mc-cfg"},
               "spec": {"customizedVariables": [{"name": "LOG_LEVEL", "value": "4"}]}}),
    )
    .await;
    let work = await_work(
        &client,
        "mc-cfg",
        &deploy_work("hello-cfg"),
        "work rendered with the config",
        |_| true,
    )
    .await;
    let annotation = work
        .annotations()
        .get(CONFIG_SPEC_HASH_ANNOTATION)
        .expect("config-spec-hash annotation");
    let hashes: std::collections::BTreeMap<String, String> =
        serde_json::from_str(annotation).expect("annotation is JSON");
    let hash = hashes
        .get("addondeploymentconfigs.addon.open-cluster-management.io/mc-cfg/tuning")
        .expect("the config's key");
    assert_eq!(hash.len(), 64, "a SHA-256 hex spec hash: {hash}");

    // A config change re-renders the add-on: the work carries the new spec hash.
    let first = hash.clone();
    apply_json(
        &client,
        "addon.open-cluster-management.io/v1alpha1",
        "AddOnDeploymentConfig",
        Some("mc-cfg"),
        json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnDeploymentConfig",
               "metadata": {"name": "tuning", "namespace": "mc-cfg"},
               "spec": {"customizedVariables": [{"name": "LOG_LEVEL", "value": "8"}]}}),
    )
    .await;
    await_work(
        &client,
        "mc-cfg",
        &deploy_work("hello-cfg"),
        "work re-rendered with the changed config",
        |w| {
            w.annotations()
                .get(CONFIG_SPEC_HASH_ANNOTATION)
                .is_some_and(|a| a.contains("tuning") && !a.contains(&first))
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_output_over_the_limit_is_refused_in_a_condition_and_nothing_is_deployed() {
    let client = client().await;
    register_plugin(&client, "hello-big", plugins::HOSTILE_OUTPUT).await;
    await_cma(&client, "hello-big").await;
    cluster(&client, "mc-big").await;
    enable(&client, "hello-big", "mc-big", json!([])).await;
    let refused = await_condition(&client, "mc-big", "hello-big", "ManifestApplied", |c| {
        c.status == "False"
    })
    .await;
    assert_eq!(refused.reason, "ManifestWorkApplyFailed");
    assert!(
        refused
            .message
            .starts_with("failed to get manifest from agent interface")
            && refused.message.contains("5000"),
        "the condition names the oversized output: {}",
        refused.message
    );
    let works = Api::<flotilla_api::work::v1::ManifestWork>::namespaced(client.clone(), "mc-big")
        .get_opt(&deploy_work("hello-big"))
        .await
        .expect("read work");
    assert!(works.is_none(), "nothing is deployed from refused output");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_management_addon_that_manages_itself_is_left_alone() {
    let client = client().await;
    apply_json(
        &client,
        "addon.open-cluster-management.io/v1alpha1",
        "ClusterManagementAddOn",
        None,
        json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ClusterManagementAddOn",
               "metadata": {"name": "hello-self", "annotations": {LIFECYCLE_ANNOTATION: "self"}},
               "spec": {"addOnMeta": {"displayName": "their own manager"}}}),
    )
    .await;
    cluster(&client, "mc-self").await;
    register_plugin(&client, "hello-self", plugins::HELLOWORLD).await;
    enable(&client, "hello-self", "mc-self", json!([])).await;
    // A sibling registered after it and enabled on the same cluster: once its CMA and work
    // exist, the manager has had its turn at hello-self too.
    register_plugin(&client, "hello-sibling", plugins::HELLOWORLD).await;
    await_cma(&client, "hello-sibling").await;
    enable(&client, "hello-sibling", "mc-self", json!([])).await;
    await_work(
        &client,
        "mc-self",
        &deploy_work("hello-sibling"),
        "sibling's work",
        |_| true,
    )
    .await;

    let cma = Api::<ClusterManagementAddOn>::all(client.clone())
        .get("hello-self")
        .await
        .expect("CMA");
    assert_eq!(
        cma.annotations().get(LIFECYCLE_ANNOTATION).map(String::as_str),
        Some("self")
    );
    assert_eq!(cma.spec.add_on_meta.display_name, "their own manager");
    let work = Api::<flotilla_api::work::v1::ManifestWork>::namespaced(client.clone(), "mc-self")
        .get_opt(&deploy_work("hello-self"))
        .await
        .expect("read work");
    assert!(
        work.is_none(),
        "the add-on manager deploys nothing for a self-managed add-on"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_addon_plugin_removes_the_addon_from_every_cluster() {
    let client = client().await;
    register_plugin(&client, "hello-gone", plugins::HELLOWORLD).await;
    await_cma(&client, "hello-gone").await;
    for c in ["mc-gone1", "mc-gone2"] {
        cluster(&client, c).await;
        enable(&client, "hello-gone", c, json!([])).await;
        await_work(&client, c, &deploy_work("hello-gone"), "deploy work", |_| true).await;
    }
    Api::<flotilla_api::plugins::v1alpha1::AddOnPlugin>::all(client.clone())
        .delete("hello-gone", &DeleteParams::default())
        .await
        .expect("delete plugin");
    for c in ["mc-gone1", "mc-gone2"] {
        await_no_work(&client, c, &deploy_work("hello-gone")).await;
    }
    let api: Api<ClusterManagementAddOn> = Api::all(client.clone());
    wait::until("ClusterManagementAddOn hello-gone removed", TIMEOUT, || {
        let api = api.clone();
        async move { Ok::<_, kube::Error>(api.get_opt("hello-gone").await?.is_none().then_some(())) }
    })
    .await
    .expect("CMA removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placements_configs_override_the_defaults_for_the_clusters_it_selects() {
    let client = client().await;
    register_plugin(&client, "hello-pcfg", plugins::HELLOWORLD_CONFIG).await;
    await_cma(&client, "hello-pcfg").await;
    cluster(&client, "mc-pcfg").await;
    namespace(&client, "pcfg").await;
    apply_json(
        &client,
        "addon.open-cluster-management.io/v1alpha1",
        "AddOnDeploymentConfig",
        Some("pcfg"),
        json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnDeploymentConfig",
               "metadata": {"name": "per-placement", "namespace": "pcfg"},
               "spec": {"customizedVariables": [{"name": "LOG_LEVEL", "value": "2"}]}}),
    )
    .await;
    apply_json(
        &client,
        "cluster.open-cluster-management.io/v1beta1",
        "Placement",
        Some("pcfg"),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
               "metadata": {"name": "pl", "namespace": "pcfg"}, "spec": {}}),
    )
    .await;
    apply_json(
        &client,
        "cluster.open-cluster-management.io/v1beta1",
        "PlacementDecision",
        Some("pcfg"),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "PlacementDecision",
               "metadata": {"name": "pl-decision-1", "namespace": "pcfg",
                            "labels": {"cluster.open-cluster-management.io/placement": "pl",
                                       "cluster.open-cluster-management.io/decision-group-index": "0"}}}),
    )
    .await;
    Api::<flotilla_api::cluster::v1beta1::PlacementDecision>::namespaced(client.clone(), "pcfg")
        .patch_status(
            "pl-decision-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"decisions": [{"clusterName": "mc-pcfg", "reason": ""}]}})),
        )
        .await
        .expect("decisions");
    Api::<ClusterManagementAddOn>::all(client.clone())
        .patch(
            "hello-pcfg",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"installStrategy": {"type": "Placements",
                "placements": [{"namespace": "pcfg", "name": "pl", "configs": [
                    {"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs",
                     "namespace": "pcfg", "name": "per-placement"}]}]}}})),
        )
        .await
        .expect("install strategy");

    let key = "addondeploymentconfigs.addon.open-cluster-management.io/pcfg/per-placement";
    let work = await_work(
        &client,
        "mc-pcfg",
        &deploy_work("hello-pcfg"),
        "work rendered with the placement's config",
        |w| {
            w.annotations()
                .get(CONFIG_SPEC_HASH_ANNOTATION)
                .is_some_and(|a| a.contains(key))
        },
    )
    .await;
    assert!(!work.spec.workload.manifests.is_empty());
    let api = Api::<ManagedClusterAddOn>::namespaced(client.clone(), "mc-pcfg");
    wait::until("configReferences name the placement's config", TIMEOUT, || {
        let api = api.clone();
        async move {
            let addon = api.get("hello-pcfg").await?;
            let named = addon.status.is_some_and(|s| {
                s.config_references.iter().any(|r| {
                    r.desired_config
                        .as_ref()
                        .is_some_and(|d| d.referent.name == "per-placement")
                })
            });
            Ok::<_, kube::Error>(named.then_some(()))
        }
    })
    .await
    .expect("configReferences");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_plugin_revision_re_renders_the_addon_on_every_cluster() {
    let client = client().await;
    register_plugin(&client, "hello-rev", plugins::HELLOWORLD).await;
    await_cma(&client, "hello-rev").await;
    for c in ["mc-rev1", "mc-rev2"] {
        cluster(&client, c).await;
        enable(&client, "hello-rev", c, json!([])).await;
        await_work(
            &client,
            c,
            &deploy_work("hello-rev"),
            "work of revision a",
            |_| true,
        )
        .await;
    }
    register_plugin(&client, "hello-rev", plugins::REVISION_B).await;
    for c in ["mc-rev1", "mc-rev2"] {
        await_work(&client, c, &deploy_work("hello-rev"), "work of revision b", |w| {
            w.spec.workload.manifests.len() == 1
                && w.spec.workload.manifests[0].0.pointer("/data/revision") == Some(&json!("b"))
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_delete_hooks_run_through_their_own_work_and_the_addon_goes_only_once_they_complete() {
    use flotilla_api::addon::consts::ADDON_PRE_DELETE_FINALIZER;
    let client = client().await;
    let (addon, cluster_name) = ("hello-hook", "mc-hook");
    register_plugin(&client, addon, plugins::PRE_DELETE).await;
    await_cma(&client, addon).await;
    cluster(&client, cluster_name).await;
    enable(&client, addon, cluster_name, json!([])).await;
    let deploy = await_work(&client, cluster_name, &deploy_work(addon), "deploy work", |_| {
        true
    })
    .await;
    assert!(
        deploy
            .spec
            .workload
            .manifests
            .iter()
            .all(|m| m.0["kind"] != "Job"),
        "the hook is not deployed with the add-on"
    );
    let api = Api::<ManagedClusterAddOn>::namespaced(client.clone(), cluster_name);
    wait::until("pre-delete finalizer added", TIMEOUT, || {
        let api = api.clone();
        async move {
            let mca = api.get(addon).await?;
            Ok::<_, kube::Error>(
                mca.finalizers()
                    .iter()
                    .any(|f| f == ADDON_PRE_DELETE_FINALIZER)
                    .then_some(()),
            )
        }
    })
    .await
    .expect("finalizer");
    let works = Api::<flotilla_api::work::v1::ManifestWork>::namespaced(client.clone(), cluster_name);
    let hook_work = format!("addon-{addon}-pre-delete");
    assert!(
        works.get_opt(&hook_work).await.expect("read").is_none(),
        "hooks run only on deletion"
    );

    api.delete(addon, &DeleteParams::default())
        .await
        .expect("disable");
    let work = await_work(&client, cluster_name, &hook_work, "pre-delete work", |_| true).await;
    let job = &work.spec.manifest_configs[0].resource_identifier;
    assert_eq!((job.group.as_str(), job.resource.as_str()), ("batch", "jobs"));
    let waiting = await_condition(&client, cluster_name, addon, "HookManifestCompleted", |c| {
        c.status == "False"
    })
    .await;
    assert_eq!(waiting.reason, "HookManifestIsNotCompleted");
    assert!(
        works.get_opt(&deploy_work(addon)).await.expect("read").is_some(),
        "the add-on stays while its hook runs"
    );

    // The stand-in agent runs the Job and reports it complete through the work's feedback.
    let generation = work.metadata.generation.unwrap_or_default();
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    let condition = |type_: &str| {
        json!({"type": type_, "status": "True", "reason": "Done", "message": "",
               "observedGeneration": generation, "lastTransitionTime": now})
    };
    works
        .patch_status(
            &hook_work,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "conditions": [condition("Applied"), condition("Available")],
                "resourceStatus": {"manifests": [{
                    "resourceMeta": {"ordinal": 0, "group": "batch", "version": "v1", "kind": "Job",
                                     "resource": "jobs", "name": job.name, "namespace": job.namespace},
                    "statusFeedback": {"values": [{"name": "JobComplete",
                                                   "fieldValue": {"type": "String", "string": "True"}}]},
                    "conditions": []}]}}})),
        )
        .await
        .expect("report the hook complete");
    wait::until("add-on removed after its hook", TIMEOUT, || {
        let api = api.clone();
        async move { Ok::<_, kube::Error>(api.get_opt(addon).await?.is_none().then_some(())) }
    })
    .await
    .expect("add-on removed");
    await_no_work(&client, cluster_name, &deploy_work(addon)).await;
    await_no_work(&client, cluster_name, &hook_work).await;
}
