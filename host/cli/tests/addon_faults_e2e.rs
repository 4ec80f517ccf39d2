//! Hostile plugins and bad input end to end: a hub and two managed clusters on their own control
//! planes, the real `flotilla hub` (as deploy/hub's service account) and one real `flotilla
//! klusterlet` per cluster, plugins pushed to a real OCI registry and registered by digest.
//!
//! - Hostile plugins registered as add-ons next to a healthy one: each add-on first runs a good
//!   revision, then its hostile revision under the same add-on; each reports its fault in
//!   `ManifestApplied`, its last good ManifestWork (and what the klusterlet applied from it)
//!   stays, and the healthy add-on keeps working and rolls out a config change.
//! - Bad input, each with a clear condition and nothing lost: a config reference to a missing
//!   object, an unsupported config type, two AddOnPlugins claiming one add-on, plugin output over
//!   the size limit, plugin output that is not a Kubernetes object (not JSON, no kind, no name),
//!   a Placement that does not exist.
//!
//! Both tests share one fleet (see [`fleet`]): the hostile add-ons live on cluster1, the bad
//! input on cluster2, each under names of its own.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use common::{Fleet, flotilla_at, ok};
use flotilla_api::{
    addon::v1alpha1::{ClusterManagementAddOn, InstallProgression, ManagedClusterAddOn},
    plugins::v1alpha1::AddOnPlugin,
    work::v1::ManifestWork,
};
use flotilla_test_plugins as plugins;
use flotilla_testing::wait;
use k8s_openapi::{
    api::{apps::v1::Deployment, core::v1::ConfigMap},
    apimachinery::pkg::apis::meta::v1::Condition,
};
use kube::{
    Api, Client, ResourceExt as _,
    api::{Patch, PatchParams},
};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(90);
const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
/// The ConfigMap the revision-b plugin renders, the good revision of the hostile add-ons.
const REVISION_CONFIG_MAP: &str = "revision";
/// The agent Deployment helloworld-config renders.
const AGENT: &str = "helloworld-agent";
const ADC: &str = "addon.open-cluster-management.io/addondeploymentconfigs";

/// The fleet the tests of this file share: started by the first test that asks, stopped when
/// the last test holding it ends (a static would never stop the hub and klusterlet processes).
async fn fleet() -> Arc<Fleet> {
    static SHARED: tokio::sync::Mutex<Weak<Fleet>> = tokio::sync::Mutex::const_new(Weak::new());
    let mut shared = SHARED.lock().await;
    if let Some(fleet) = shared.upgrade() {
        return fleet;
    }
    let fleet = Arc::new(Fleet::start("faults", &[]).await);
    *shared = Arc::downgrade(&fleet);
    fleet
}

/// Pushes the component at `path` to `addons/<repository>:v1`; returns reference and digest.
fn push(fleet: &Fleet, path: &str, repository: &str) -> (String, String) {
    let reference = fleet.registry.reference(&format!("addons/{repository}"), "v1");
    let pushed = ok(flotilla_at(
        fleet.state(),
        fleet.admin(),
        &["plugin", "push", path, &reference, "--insecure"],
    ));
    (reference, common::pushed_digest(&pushed))
}

/// `flotilla plugin register NAME --oci REFERENCE --digest DIGEST [ARGS]`.
fn register(fleet: &Fleet, name: &str, (reference, digest): &(String, String), args: &[&str]) {
    let mut all = vec![
        "plugin",
        "register",
        name,
        "--oci",
        reference,
        "--digest",
        digest,
        "--insecure",
    ];
    all.extend_from_slice(args);
    ok(flotilla_at(fleet.state(), fleet.admin(), &all));
}

/// `flotilla addon enable --names ADDON --clusters CLUSTER [ARGS]`.
fn enable(fleet: &Fleet, addon: &str, cluster: &str, args: &[&str]) {
    let mut all = vec!["addon", "enable", "--names", addon, "--clusters", cluster];
    all.extend_from_slice(args);
    ok(flotilla_at(fleet.state(), fleet.admin(), &all));
}

/// The last lines of the hub's log, for a failure message.
fn hub_log(fleet: &Fleet) -> String {
    let text = std::fs::read_to_string(fleet.state().join("hub.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Waits until `check` holds, failing with the last observation and the hub's log.
async fn await_that<T, F, Fut>(fleet: &Fleet, what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, String>>,
{
    match wait::until(what, TIMEOUT, check).await {
        Ok(value) => value,
        Err(e) => panic!("{e}\nhub log:\n{}", hub_log(fleet)),
    }
}

/// Waits until condition `type_` of ManagedClusterAddOn `cluster/addon` satisfies `check`.
async fn await_condition(
    fleet: &Fleet,
    hub: &Client,
    cluster: &str,
    addon: &str,
    type_: &str,
    check: impl Fn(&Condition) -> bool,
) -> Condition {
    let api: Api<ManagedClusterAddOn> = Api::namespaced(hub.clone(), cluster);
    await_that(
        fleet,
        &format!("ManagedClusterAddOn {cluster}/{addon} condition {type_}"),
        || async {
            let mca = api.get_opt(addon).await.map_err(|e| e.to_string())?;
            let conditions = mca
                .and_then(|a| a.status)
                .map(|s| s.conditions)
                .unwrap_or_default();
            match conditions.iter().find(|c| c.type_ == type_) {
                Some(c) if check(c) => Ok(Some(c.clone())),
                other => Err(format!("{type_}: {other:?}")),
            }
        },
    )
    .await
}

/// Waits until the ClusterManagementAddOn a registered plugin drives exists.
async fn await_cma(fleet: &Fleet, hub: &Client, addon: &str) {
    let api: Api<ClusterManagementAddOn> = Api::all(hub.clone());
    await_that(fleet, &format!("ClusterManagementAddOn {addon}"), || async {
        let cma = api.get_opt(addon).await.map_err(|e| e.to_string())?;
        Ok(cma.map(|_| ()))
    })
    .await;
}

/// Waits until the add-on's deploy work on `cluster` exists and satisfies `check`.
async fn await_work(
    fleet: &Fleet,
    hub: &Client,
    cluster: &str,
    addon: &str,
    check: impl Fn(&ManifestWork) -> bool,
) -> ManifestWork {
    let api: Api<ManifestWork> = Api::namespaced(hub.clone(), cluster);
    let name = format!("addon-{addon}-deploy-0");
    await_that(fleet, &format!("work {cluster}/{name}"), || async {
        let work = api.get_opt(&name).await.map_err(|e| e.to_string())?;
        Ok(work.filter(|w| check(w)))
    })
    .await
}

/// The add-on's deploy work on `cluster`, if any.
async fn work(hub: &Client, cluster: &str, addon: &str) -> Option<ManifestWork> {
    Api::<ManifestWork>::namespaced(hub.clone(), cluster)
        .get_opt(&format!("addon-{addon}-deploy-0"))
        .await
        .unwrap()
}

/// Waits until the add-on is deployed on `cluster` by its real klusterlet: the deploy work
/// exists and `ManifestApplied` is True. Returns the work.
async fn await_deployed(fleet: &Fleet, hub: &Client, cluster: &str, addon: &str) -> ManifestWork {
    await_condition(fleet, hub, cluster, addon, "ManifestApplied", |c| {
        c.status == "True"
    })
    .await;
    await_work(fleet, hub, cluster, addon, |_| true).await
}

/// The `--v=` argument of the agent Deployment on a managed cluster.
async fn agent_log_level(managed: &Client) -> Option<String> {
    Api::<Deployment>::namespaced(managed.clone(), INSTALL_NAMESPACE)
        .get_opt(AGENT)
        .await
        .unwrap()
        .and_then(|d| d.spec)
        .and_then(|s| s.template.spec)
        .and_then(|p| p.containers.into_iter().next())
        .and_then(|c| c.args)
        .unwrap_or_default()
        .into_iter()
        .find_map(|a| a.strip_prefix("--v=").map(str::to_owned))
}

/// Waits until the agent Deployment on a managed cluster runs with `--v=<level>`.
async fn await_log_level(fleet: &Fleet, managed: &Client, level: &str) {
    await_that(fleet, &format!("agent Deployment with --v={level}"), || async {
        let found = agent_log_level(managed).await;
        if found.as_deref() == Some(level) {
            Ok(Some(()))
        } else {
            Err(format!("--v={found:?}"))
        }
    })
    .await;
}

/// Server-side applies AddOnDeploymentConfig `namespace/name` with `LOG_LEVEL` = `level`
/// (creating the namespace first).
async fn deployment_config(hub: &Client, namespace: &str, name: &str, level: &str) {
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
    Api::<k8s_openapi::api::core::v1::Namespace>::all(hub.clone())
        .patch(namespace, &PatchParams::apply("e2e"), &Patch::Apply(&ns))
        .await
        .unwrap();
    let config: flotilla_api::addon::v1alpha1::AddOnDeploymentConfig = serde_json::from_value(json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnDeploymentConfig",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"customizedVariables": [{"name": "LOG_LEVEL", "value": level}]}
    }))
    .unwrap();
    Api::<flotilla_api::addon::v1alpha1::AddOnDeploymentConfig>::namespaced(hub.clone(), namespace)
        .patch(name, &PatchParams::apply("e2e").force(), &Patch::Apply(&config))
        .await
        .unwrap();
}

/// Replaces `spec.configs` of ManagedClusterAddOn `cluster/addon`.
async fn set_configs(hub: &Client, cluster: &str, addon: &str, configs: serde_json::Value) {
    Api::<ManagedClusterAddOn>::namespaced(hub.clone(), cluster)
        .patch(
            addon,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"configs": configs}})),
        )
        .await
        .unwrap();
}

/// Whether ConfigMap `revision` (revision-b's output) is on a managed cluster.
async fn revision_config_map(managed: &Client) -> bool {
    Api::<ConfigMap>::namespaced(managed.clone(), INSTALL_NAMESPACE)
        .get_opt(REVISION_CONFIG_MAP)
        .await
        .unwrap()
        .is_some()
}

/// Waits until AddOnPlugin `name` is `Degraded` True with `reason` (`<Hook><FaultKind>`, as the
/// plugin host names a runtime fault of the serving revision); returns the condition.
async fn await_degraded(fleet: &Fleet, hub: &Client, name: &str, reason: &str) -> Condition {
    let api: Api<AddOnPlugin> = Api::all(hub.clone());
    await_that(
        fleet,
        &format!("AddOnPlugin {name} Degraded {reason}"),
        || async {
            let plugin = api.get_opt(name).await.map_err(|e| e.to_string())?;
            let degraded = plugin
                .and_then(|p| p.status)
                .map(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.type_ == "Degraded");
            match degraded {
                Some(c) if c.status == "True" && c.reason == reason => Ok(Some(c)),
                other => Err(format!("Degraded: {other:?}")),
            }
        },
    )
    .await
}

/// Asserts that the add-on manager left work `kept` as it was when `before` was read: same
/// generation (the agent's status writes move the resourceVersion, not the generation), spec
/// and annotations.
fn assert_unchanged(kept: &ManifestWork, before: &ManifestWork, addon: &str) {
    assert_eq!(
        (kept.metadata.generation, &kept.spec, kept.annotations()),
        (before.metadata.generation, &before.spec, before.annotations()),
        "{addon}: the last good work is untouched"
    );
}

/// Asserts the fault condition the in-process tests show: `ManifestApplied` False
/// `ManifestWorkApplyFailed`, the message naming the failed plugin call and `fault`.
fn assert_fault(condition: &Condition, fault: &str) {
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "ManifestWorkApplyFailed"),
        "{}",
        condition.message
    );
    assert!(
        condition
            .message
            .starts_with("failed to get manifest from agent interface")
            && condition.message.contains(fault),
        "the condition names the fault ({fault}): {}",
        condition.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_plugins_report_their_faults_keep_their_last_good_work_and_a_healthy_addon_keeps_rolling_out()
{
    let fleet = fleet().await;
    let hub = fleet.hub.admin_client().await.unwrap();
    let one = fleet.one.admin_client().await.unwrap();
    let cluster = "cluster1";

    // The healthy add-on: helloworld-config with an AddOnDeploymentConfig.
    let healthy = "steady";
    register(
        &fleet,
        healthy,
        &push(&fleet, plugins::HELLOWORLD_CONFIG, "steady"),
        &[],
    );
    deployment_config(&hub, "steady-settings", "settings", "2").await;
    await_cma(&fleet, &hub, healthy).await;
    enable(
        &fleet,
        healthy,
        cluster,
        &["--config", &format!("{ADC}/steady-settings/settings")],
    );
    await_deployed(&fleet, &hub, cluster, healthy).await;
    await_log_level(&fleet, &one, "2").await;

    // Each hostile add-on runs a good revision first.
    let good = push(&fleet, plugins::REVISION_B, "revision-b");
    // (add-on, component, what the add-on's condition names, the plugin's Degraded reason)
    let hostile = [
        (
            "faulty-trap",
            plugins::HOSTILE_TRAP,
            "hostile-trap: panic in manifests",
            "ManifestsTrap",
        ),
        (
            "faulty-loop",
            plugins::HOSTILE_LOOP,
            "timed out",
            "ManifestsTimeout",
        ),
        (
            "faulty-memory",
            plugins::HOSTILE_MEMORY,
            "memory",
            "ManifestsMemory",
        ),
        (
            "faulty-stack",
            plugins::HOSTILE_STACK,
            "stack overflow",
            "ManifestsStackOverflow",
        ),
    ];
    for (addon, _, _, _) in hostile {
        register(&fleet, addon, &good, &[]);
    }
    for (addon, _, _, _) in hostile {
        await_cma(&fleet, &hub, addon).await;
        enable(&fleet, addon, cluster, &[]);
    }
    let mut last_good = Vec::new();
    for (addon, _, _, _) in hostile {
        last_good.push(await_deployed(&fleet, &hub, cluster, addon).await);
    }
    assert!(revision_config_map(&one).await, "the good revision is applied");

    // Then the hostile revision under the same add-on.
    for (addon, path, _, _) in hostile {
        register(&fleet, addon, &push(&fleet, path, addon), &[]);
    }
    for ((addon, _, fault, reason), good_work) in hostile.iter().zip(&last_good) {
        let condition = await_condition(&fleet, &hub, cluster, addon, "ManifestApplied", |c| {
            c.status == "False"
        })
        .await;
        assert_fault(&condition, fault);
        let kept = work(&hub, cluster, addon)
            .await
            .expect("the last good work stays");
        assert_unchanged(&kept, good_work, addon);
        // The plugin's own status names the fault too.
        await_degraded(&fleet, &hub, addon, reason).await;
    }
    assert!(
        revision_config_map(&one).await,
        "what the klusterlet applied from the last good works stays"
    );

    // The healthy add-on keeps working: a config change rolls out to the cluster.
    deployment_config(&hub, "steady-settings", "settings", "5").await;
    await_log_level(&fleet, &one, "5").await;
    await_condition(&fleet, &hub, cluster, healthy, "ManifestApplied", |c| {
        c.status == "True"
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_condition_and_loses_nothing() {
    let fleet = fleet().await;
    let hub = fleet.hub.admin_client().await.unwrap();
    let two = fleet.two.admin_client().await.unwrap();
    let cluster = "cluster2";

    // A configurable add-on, deployed with a good config.
    let addon = "tunable";
    register(
        &fleet,
        addon,
        &push(&fleet, plugins::HELLOWORLD_CONFIG, addon),
        &[],
    );
    deployment_config(&hub, "bad-input", "settings", "3").await;
    await_cma(&fleet, &hub, addon).await;
    enable(
        &fleet,
        addon,
        cluster,
        &["--config", &format!("{ADC}/bad-input/settings")],
    );
    let deployed = await_deployed(&fleet, &hub, cluster, addon).await;
    await_log_level(&fleet, &two, "3").await;
    let config = |name: &str| {
        json!([{"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs",
                "namespace": "bad-input", "name": name}])
    };

    // A config reference to an object that does not exist.
    set_configs(&hub, cluster, addon, config("missing")).await;
    let missing = await_condition(&fleet, &hub, cluster, addon, "ManifestApplied", |c| {
        c.status == "False"
    })
    .await;
    assert_eq!(missing.reason, "ManifestWorkApplyFailed");
    assert!(
        missing.message.contains("configs not found") && missing.message.contains("missing"),
        "{}",
        missing.message
    );
    let kept = work(&hub, cluster, addon).await.expect("the work stays");
    assert_unchanged(&kept, &deployed, addon);
    assert_eq!(agent_log_level(&two).await.as_deref(), Some("3"));
    // Once the object appears, the add-on is rendered with it.
    deployment_config(&hub, "bad-input", "missing", "4").await;
    await_log_level(&fleet, &two, "4").await;
    let redeployed = await_deployed(&fleet, &hub, cluster, addon).await;

    // A config type the add-on does not support.
    set_configs(
        &hub,
        cluster,
        addon,
        json!([{"group": "example.com", "resource": "widgets", "namespace": "x", "name": "y"}]),
    )
    .await;
    let refused = await_condition(&fleet, &hub, cluster, addon, "Progressing", |c| {
        c.reason == "ConfigurationUnsupported"
    })
    .await;
    assert_eq!(refused.status, "False");
    assert!(
        refused.message.contains("example.com/widgets"),
        "{}",
        refused.message
    );
    let kept = work(&hub, cluster, addon).await.expect("the work stays");
    assert_unchanged(&kept, &redeployed, addon);
    assert_eq!(agent_log_level(&two).await.as_deref(), Some("4"));

    // Two AddOnPlugins claiming one add-on: the second is refused, the first keeps driving it.
    register(
        &fleet,
        "tunable-twin",
        &push(&fleet, plugins::REVISION_B, "tunable-twin"),
        &["--addon-name", addon],
    );
    let plugins_api: Api<AddOnPlugin> = Api::all(hub.clone());
    let conflict = await_that(&fleet, "tunable-twin refused", || async {
        let plugin = plugins_api
            .get_opt("tunable-twin")
            .await
            .map_err(|e| e.to_string())?;
        let ready = plugin
            .and_then(|p| p.status)
            .map(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Ready");
        match ready {
            Some(c) if c.reason == "AddOnNameConflict" => Ok(Some(c)),
            other => Err(format!("Ready: {other:?}")),
        }
    })
    .await;
    assert_eq!(conflict.status, "False");
    assert!(
        conflict.message.contains("AddOnPlugin tunable ") && conflict.message.contains(addon),
        "the condition names the plugin that drives the add-on: {}",
        conflict.message
    );
    let owner = plugins_api.get(addon).await.unwrap();
    let ready = owner
        .status
        .unwrap_or_default()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "True", "the first plugin still drives the add-on");
    let kept = work(&hub, cluster, addon).await.expect("the work stays");
    assert!(
        kept.spec
            .workload
            .manifests
            .iter()
            .any(|m| m.0["kind"] == "Deployment"),
        "the work is still the first plugin's"
    );

    // Plugin output over the size limit: the add-on's good revision stays deployed.
    let big = "oversized";
    register(
        &fleet,
        big,
        &push(&fleet, plugins::REVISION_B, "oversized-good"),
        &[],
    );
    await_cma(&fleet, &hub, big).await;
    enable(&fleet, big, cluster, &[]);
    let good = await_deployed(&fleet, &hub, cluster, big).await;
    register(&fleet, big, &push(&fleet, plugins::HOSTILE_OUTPUT, big), &[]);
    let too_big = await_condition(&fleet, &hub, cluster, big, "ManifestApplied", |c| {
        c.status == "False"
    })
    .await;
    assert_fault(&too_big, "5000");
    await_degraded(&fleet, &hub, big, "ManifestsOutputTooLarge").await;
    let kept = work(&hub, cluster, big).await.expect("the last good work stays");
    assert_unchanged(&kept, &good, big);
    assert!(revision_config_map(&two).await);

    // Plugin output that is not a Kubernetes object: each add-on's good revision stays deployed.
    // hostile-malformed picks its answer by the add-on's name.
    let malformed = [
        ("malformed-not-json", "manifest 0 is not JSON"),
        ("malformed-no-kind", "manifest 0 has no kind"),
        ("malformed-no-name", "manifest 0 has no metadata.name"),
    ];
    let good_revision = push(&fleet, plugins::REVISION_B, "malformed-good");
    for (name, _) in malformed {
        register(&fleet, name, &good_revision, &[]);
    }
    for (name, _) in malformed {
        await_cma(&fleet, &hub, name).await;
        enable(&fleet, name, cluster, &[]);
    }
    let mut good_works = Vec::new();
    for (name, _) in malformed {
        good_works.push(await_deployed(&fleet, &hub, cluster, name).await);
    }
    let bad_revision = push(&fleet, plugins::HOSTILE_MALFORMED, "malformed");
    for (name, _) in malformed {
        register(&fleet, name, &bad_revision, &[]);
    }
    for ((name, fault), good) in malformed.iter().zip(&good_works) {
        let refused = await_condition(&fleet, &hub, cluster, name, "ManifestApplied", |c| {
            c.status == "False"
        })
        .await;
        assert_fault(&refused, fault);
        let kept = work(&hub, cluster, name).await.expect("the last good work stays");
        assert_unchanged(&kept, good, name);
        await_degraded(&fleet, &hub, name, "ManifestsInvalidOutput").await;
    }
    assert!(revision_config_map(&two).await);

    // A Placement that does not exist, next to one that does: the missing one is named in its
    // install progression, the other installs.
    let placed = "placed";
    register(&fleet, placed, &push(&fleet, plugins::REVISION_B, placed), &[]);
    let out = fleet
        .hub
        .kubectl()
        .args(["label", "--overwrite", "managedcluster", cluster, "bad-input=yes"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let placement = fleet.state().join("bad-input-placement.yaml");
    std::fs::write(
        &placement,
        "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\n\
         metadata: {name: labelled, namespace: bad-input}\n\
         spec:\n  predicates:\n  - requiredClusterSelector:\n      labelSelector:\n        matchLabels: {bad-input: \"yes\"}\n",
    )
    .unwrap();
    let out = fleet
        .hub
        .kubectl()
        .args(["apply", "-f", placement.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    ok(flotilla_at(
        fleet.state(),
        fleet.admin(),
        &["clusterset", "bind", "global", "--namespace", "bad-input"],
    ));
    let cmas: Api<ClusterManagementAddOn> = Api::all(hub.clone());
    await_cma(&fleet, &hub, placed).await;
    cmas.patch(
        placed,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"spec": {"installStrategy": {"type": "Placements", "placements": [
            {"namespace": "bad-input", "name": "nowhere"},
            {"namespace": "bad-input", "name": "labelled"}]}}}),
        ),
    )
    .await
    .unwrap();
    let progression: InstallProgression = await_that(&fleet, "missing placement reported", || async {
        let cma = cmas.get(placed).await.map_err(|e| e.to_string())?;
        let found = cma
            .status
            .into_iter()
            .flat_map(|s| s.install_progressions)
            .find(|p| p.placement.name == "nowhere" && !p.conditions.is_empty());
        Ok(found)
    })
    .await;
    let condition = progression
        .conditions
        .iter()
        .find(|c| c.type_ == "Progressing")
        .unwrap();
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "PlacementNotFound")
    );
    assert!(
        condition.message.contains("bad-input/nowhere"),
        "{}",
        condition.message
    );
    await_deployed(&fleet, &hub, cluster, placed).await;
}
