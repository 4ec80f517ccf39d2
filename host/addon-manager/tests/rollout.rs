//! Config rollouts of the add-on manager against a real control plane: a Progressive strategy
//! releases a config change batch by batch (watched, never more than `maxConcurrency` add-ons
//! in flight), a cluster that keeps failing past `progressDeadline` counts toward
//! `maxFailures` and stops the rollout, and a Placement that does not exist is named in its
//! install progression while the other placements roll out.
//!
//! The managed clusters' work agents are stood in for by [`support::spawn_agent`], which can
//! fail chosen clusters; PlacementDecisions are written directly.

#![allow(clippy::expect_used, reason = "tests fail loudly")]

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use flotilla_api::addon::consts::ADDON_NAME_LABEL;
use flotilla_api::addon::v1alpha1::{ClusterManagementAddOn, InstallProgression, ManagedClusterAddOn};
use flotilla_api::work::consts::CONFIG_SPEC_HASH_ANNOTATION;
use flotilla_test_plugins as plugins;
use flotilla_testing::wait;
use futures::TryStreamExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use support::*;

const ADC_GROUP: &str = "addon.open-cluster-management.io";
const ADC_RESOURCE: &str = "addondeploymentconfigs";

/// Sets the CMA's install strategy to one placement with `configs` and `rollout`.
async fn install_through(client: &Client, addon: &str, placements: serde_json::Value) {
    Api::<ClusterManagementAddOn>::all(client.clone())
        .patch(
            addon,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"installStrategy": {"type": "Placements", "placements": placements}}}),
            ),
        )
        .await
        .expect("install strategy");
}

/// Waits until the CMA's install progression of placement `name` satisfies `check`.
async fn await_progression(
    client: &Client,
    addon: &str,
    name: &str,
    what: &str,
    check: impl Fn(&InstallProgression) -> bool,
) -> InstallProgression {
    let api: Api<ClusterManagementAddOn> = Api::all(client.clone());
    wait::until(what, TIMEOUT, || {
        let api = api.clone();
        let check = &check;
        async move {
            let cma = api.get(addon).await?;
            Ok::<_, kube::Error>(
                cma.status
                    .into_iter()
                    .flat_map(|s| s.install_progressions)
                    .find(|p| p.placement.name == name && check(p)),
            )
        }
    })
    .await
    .expect(what)
}

/// The `Progressing` condition of a progression: (status, reason, message).
fn progressing(p: &InstallProgression) -> Option<(String, String, String)> {
    p.conditions
        .iter()
        .find(|c| c.type_ == "Progressing")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Whether the progression completed with `hash` as its last known good config.
fn completed_with(p: &InstallProgression, hash: Option<&str>) -> bool {
    progressing(p).is_some_and(|(_, reason, _)| reason == "Completed")
        && p.config_references.iter().all(|r| {
            let good = r.last_known_good_config.as_ref().map(|c| c.spec_hash.as_str());
            good.is_some() && hash.is_none_or(|h| good == Some(h))
        })
}

/// The desired spec hash of the progression's one config.
fn desired_hash(p: &InstallProgression) -> String {
    p.config_references[0]
        .desired_config
        .as_ref()
        .map(|c| c.spec_hash.clone())
        .expect("desired config")
}

/// Watches the ManagedClusterAddOns named `addon` and records the most that were in flight at
/// once: released (a desired config in `configReferences`) and not yet applied
/// (`lastAppliedConfig` differs). Every change is seen, in the order the API server made them.
fn watch_in_flight(client: Client, addon: &'static str) -> Arc<AtomicUsize> {
    let most = Arc::new(AtomicUsize::new(0));
    let recorded = Arc::clone(&most);
    tokio::spawn(async move {
        let api: Api<ManagedClusterAddOn> = Api::all(client);
        let config = watcher::Config::default().fields(&format!("metadata.name={addon}"));
        let mut events = std::pin::pin!(watcher(api, config).applied_objects());
        let mut in_flight: BTreeMap<String, bool> = BTreeMap::new();
        while let Ok(Some(mca)) = events.try_next().await {
            let flying = mca.status.as_ref().is_some_and(|s| {
                s.config_references
                    .iter()
                    .any(|r| r.desired_config.is_some() && r.last_applied_config != r.desired_config)
            });
            in_flight.insert(mca.namespace().unwrap_or_default(), flying);
            let now = in_flight.values().filter(|f| **f).count();
            recorded.fetch_max(now, Ordering::SeqCst);
        }
    });
    most
}

/// The config hash a cluster's deploy work was rendered with.
async fn work_hash(client: &Client, cluster: &str, addon: &str) -> String {
    let work = Api::<flotilla_api::work::v1::ManifestWork>::namespaced(client.clone(), cluster)
        .get(&format!("addon-{addon}-deploy-0"))
        .await
        .expect("deploy work");
    work.annotations()
        .get(CONFIG_SPEC_HASH_ANNOTATION)
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progressive_rollout_never_has_more_than_max_concurrency_add_ons_in_flight() {
    let client = client().await;
    let addon = "hello-ro";
    let clusters = ["ro-a1", "ro-a2", "ro-a3", "ro-a4", "ro-a5"];
    register_plugin(&client, addon, plugins::HELLOWORLD_CONFIG).await;
    await_cma(&client, addon).await;
    for c in clusters {
        cluster(&client, c).await;
    }
    spawn_agent(client.clone(), "ro-a", Failing::default());
    placement_deciding(&client, "rollout-a", "pl", &clusters).await;
    deployment_config(&client, "rollout-a", "tuning", "1").await;
    let most = watch_in_flight(client.clone(), addon);
    install_through(
        &client,
        addon,
        json!([{"namespace": "rollout-a", "name": "pl",
                "configs": [{"group": ADC_GROUP, "resource": ADC_RESOURCE, "namespace": "rollout-a", "name": "tuning"}],
                "rolloutStrategy": {"type": "Progressive", "progressive": {"maxConcurrency": 2}}}]),
    )
    .await;
    let first = await_progression(&client, addon, "pl", "first install completed", |p| {
        completed_with(p, None)
    })
    .await;
    let first_hash = desired_hash(&first);

    deployment_config(&client, "rollout-a", "tuning", "2").await;
    let second = await_progression(&client, addon, "pl", "config change completed", |p| {
        desired_hash(p) != first_hash && completed_with(p, None)
    })
    .await;
    let second_hash = desired_hash(&second);
    assert_eq!(
        second.config_references[0]
            .last_applied_config
            .as_ref()
            .map(|c| c.spec_hash.clone()),
        Some(second_hash.clone())
    );
    let (_, _, message) = progressing(&second).expect("Progressing");
    assert!(
        message.contains("selected clusters 5") && message.contains("5/5"),
        "{message}"
    );
    for c in clusters {
        assert!(
            work_hash(&client, c, addon).await.contains(&second_hash),
            "{c} runs the new config"
        );
    }
    let most = most.load(Ordering::SeqCst);
    println!("most add-ons in flight at once: {most}");
    assert!(
        (1..=2).contains(&most),
        "never more than maxConcurrency (2) in flight, saw {most}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_failing_past_the_progress_deadline_count_toward_max_failures_and_stop_the_rollout() {
    let client = client().await;
    let addon = "hello-rf";
    let clusters = ["ro-f1", "ro-f2", "ro-f3", "ro-f4"];
    register_plugin(&client, addon, plugins::HELLOWORLD_CONFIG).await;
    await_cma(&client, addon).await;
    for c in clusters {
        cluster(&client, c).await;
    }
    let failing = Failing::default();
    spawn_agent(client.clone(), "ro-f", Arc::clone(&failing));
    placement_deciding(&client, "rollout-f", "pl", &clusters).await;
    deployment_config(&client, "rollout-f", "tuning", "1").await;
    install_through(
        &client,
        addon,
        json!([{"namespace": "rollout-f", "name": "pl",
                "configs": [{"group": ADC_GROUP, "resource": ADC_RESOURCE, "namespace": "rollout-f", "name": "tuning"}],
                "rolloutStrategy": {"type": "Progressive", "progressive": {
                    "maxConcurrency": 2, "maxFailures": 0, "progressDeadline": "2s"}}}]),
    )
    .await;
    let first = await_progression(&client, addon, "pl", "first install completed", |p| {
        completed_with(p, None)
    })
    .await;
    let first_hash = desired_hash(&first);

    // The first batch (ro-f1, ro-f2 by name) fails; the change must stop there.
    failing
        .lock()
        .expect("failing set")
        .extend(["ro-f1".to_owned(), "ro-f2".to_owned()]);
    deployment_config(&client, "rollout-f", "tuning", "2").await;
    let stopped = await_progression(&client, addon, "pl", "both failing clusters time out", |p| {
        progressing(p).is_some_and(|(_, _, m)| m.contains("2 timeout"))
    })
    .await;
    let (status, reason, message) = progressing(&stopped).expect("Progressing");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "Progressing"),
        "{message}"
    );
    assert_eq!(
        stopped.config_references[0]
            .last_known_good_config
            .as_ref()
            .map(|c| c.spec_hash.clone()),
        Some(first_hash.clone()),
        "the last known good config is still the first one"
    );

    let second_hash = desired_hash(&stopped);
    assert_ne!(second_hash, first_hash);
    for c in ["ro-f3", "ro-f4"] {
        let mca = Api::<ManagedClusterAddOn>::namespaced(client.clone(), c)
            .get(addon)
            .await
            .expect("add-on");
        let status = mca.status.expect("status");
        let released: BTreeSet<String> = status
            .config_references
            .iter()
            .filter_map(|r| r.desired_config.as_ref().map(|d| d.spec_hash.clone()))
            .collect();
        assert_eq!(
            released,
            BTreeSet::from([first_hash.clone()]),
            "{c} was not released the new config"
        );
        let configured = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Configured")
            .expect("Configured");
        assert_eq!(
            (configured.status.as_str(), configured.reason.as_str()),
            ("False", "ConfigurationsNotConfigured")
        );
        assert!(work_hash(&client, c, addon).await.contains(&first_hash));
    }
    for c in ["ro-f1", "ro-f2"] {
        assert!(
            work_hash(&client, c, addon).await.contains(&second_hash),
            "{c} was released the new config"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_that_does_not_exist_is_named_in_its_progression_and_the_others_still_install() {
    let client = client().await;
    let addon = "hello-rm";
    register_plugin(&client, addon, plugins::HELLOWORLD).await;
    await_cma(&client, addon).await;
    cluster(&client, "ro-m1").await;
    placement_deciding(&client, "rollout-m", "pl", &["ro-m1"]).await;
    install_through(
        &client,
        addon,
        json!([{"namespace": "rollout-m", "name": "nowhere"}, {"namespace": "rollout-m", "name": "pl"}]),
    )
    .await;
    let missing = await_progression(&client, addon, "nowhere", "missing placement reported", |p| {
        progressing(p).is_some()
    })
    .await;
    let (status, reason, message) = progressing(&missing).expect("Progressing");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "PlacementNotFound"));
    assert!(message.contains("rollout-m/nowhere"), "{message}");
    await_work(
        &client,
        "ro-m1",
        &format!("addon-{addon}-deploy-0"),
        "work of the existing placement",
        |_| true,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_moves_to_another_placement_is_re_rendered_with_its_configs_and_loses_the_addon_when_no_placement_keeps_it()
 {
    let client = client().await;
    let (addon, cluster_name) = ("hello-rd", "ro-d1");
    register_plugin(&client, addon, plugins::HELLOWORLD_CONFIG).await;
    await_cma(&client, addon).await;
    cluster(&client, cluster_name).await;
    placement_deciding(&client, "rollout-d", "pa", &[cluster_name]).await;
    placement_deciding(&client, "rollout-d", "pb", &[]).await;
    deployment_config(&client, "rollout-d", "cfg-a", "1").await;
    deployment_config(&client, "rollout-d", "cfg-b", "2").await;
    let with = |name: &str| json!([{"group": ADC_GROUP, "resource": ADC_RESOURCE, "namespace": "rollout-d", "name": name}]);
    install_through(
        &client,
        addon,
        json!([{"namespace": "rollout-d", "name": "pa", "configs": with("cfg-a")},
               {"namespace": "rollout-d", "name": "pb", "configs": with("cfg-b")}]),
    )
    .await;
    let work = format!("addon-{addon}-deploy-0");
    let rendered_with = |name: &'static str| {
        move |w: &flotilla_api::work::v1::ManifestWork| {
            w.annotations().get(CONFIG_SPEC_HASH_ANNOTATION).is_some_and(|a| {
                a.contains(&format!("rollout-d/{name}\""))
                    && !a.contains(if name == "cfg-a" { "cfg-b" } else { "cfg-a" })
            })
        }
    };
    await_work(
        &client,
        cluster_name,
        &work,
        "work rendered with pa's config",
        rendered_with("cfg-a"),
    )
    .await;

    // pb, later in the install strategy, now also selects the cluster: its configs win.
    placement_deciding(&client, "rollout-d", "pb", &[cluster_name]).await;
    await_work(
        &client,
        cluster_name,
        &work,
        "work re-rendered with pb's config",
        rendered_with("cfg-b"),
    )
    .await;

    placement_deciding(&client, "rollout-d", "pa", &[]).await;
    placement_deciding(&client, "rollout-d", "pb", &[]).await;
    await_no_work(&client, cluster_name, &work).await;
    let gone = Api::<ManagedClusterAddOn>::namespaced(client.clone(), cluster_name)
        .get_opt(addon)
        .await
        .expect("read add-on");
    assert!(gone.is_none(), "no placement keeps the add-on on the cluster");
}

// === Plugin revisions ===

const WORK_REVISION: &str = "flotilla.dev/plugin-revision";
const APPLIED_REVISION: &str = "flotilla.dev/applied-plugin-revision";
const RELEASED_REVISION: &str = "flotilla.dev/released-plugin-revision";

/// Waits until AddOnPlugin `name` serves a revision other than `not`, returning its digest.
async fn await_serving(client: &Client, name: &str, not: Option<&str>) -> String {
    let api: Api<flotilla_api::plugins::v1alpha1::AddOnPlugin> = Api::all(client.clone());
    wait::until(
        &format!("AddOnPlugin {name} serves a new revision"),
        TIMEOUT,
        || {
            let api = api.clone();
            async move {
                let digest = api.get(name).await?.status.and_then(|s| s.digest);
                Ok::<_, kube::Error>(digest.filter(|d| Some(d.as_str()) != not))
            }
        },
    )
    .await
    .expect("serving revision")
}

/// Waits until ManagedClusterAddOn `cluster/addon` records `revision` as applied.
async fn await_applied_revision(client: &Client, cluster: &str, addon: &str, revision: &str) {
    let api = Api::<ManagedClusterAddOn>::namespaced(client.clone(), cluster);
    wait::until(&format!("{cluster} applied {revision}"), TIMEOUT, || {
        let api = api.clone();
        async move {
            let mca = api.get(addon).await?;
            Ok::<_, kube::Error>(
                (mca.annotations().get(APPLIED_REVISION).map(String::as_str) == Some(revision)).then_some(()),
            )
        }
    })
    .await
    .expect("applied revision");
}

/// Whether a work is Applied and Available at its generation (as the stand-in agent reports).
fn work_done(work: &flotilla_api::work::v1::ManifestWork) -> bool {
    let generation = work.metadata.generation;
    ["Applied", "Available"].iter().all(|type_| {
        work.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == *type_ && c.status == "True" && c.observed_generation == generation)
        })
    })
}

/// Watches the deploy works of `addon` and records the most clusters at once whose work was
/// re-rendered by another revision than `old` and is not yet Applied and Available at its
/// generation. Every change is seen, in the order the API server made them.
fn watch_revision_in_flight(client: Client, addon: &'static str, old: String) -> Arc<AtomicUsize> {
    let most = Arc::new(AtomicUsize::new(0));
    let recorded = Arc::clone(&most);
    tokio::spawn(async move {
        let api: Api<flotilla_api::work::v1::ManifestWork> = Api::all(client);
        let config = watcher::Config::default().labels(&format!("{ADDON_NAME_LABEL}={addon}"));
        let mut events = std::pin::pin!(watcher(api, config).applied_objects());
        let mut in_flight: BTreeMap<String, bool> = BTreeMap::new();
        while let Ok(Some(work)) = events.try_next().await {
            let rendered = work.annotations().get(WORK_REVISION) != Some(&old);
            in_flight.insert(
                work.namespace().unwrap_or_default(),
                rendered && !work_done(&work),
            );
            let now = in_flight.values().filter(|f| **f).count();
            recorded.fetch_max(now, Ordering::SeqCst);
        }
    });
    most
}

/// Watches the CMA `addon` and records every install progression `Progressing` reason seen.
fn watch_progression_reasons(client: Client, addon: &'static str) -> Arc<std::sync::Mutex<BTreeSet<String>>> {
    let seen = Arc::new(std::sync::Mutex::new(BTreeSet::new()));
    let recorded = Arc::clone(&seen);
    tokio::spawn(async move {
        let api: Api<ClusterManagementAddOn> = Api::all(client);
        let config = watcher::Config::default().fields(&format!("metadata.name={addon}"));
        let mut events = std::pin::pin!(watcher(api, config).applied_objects());
        while let Ok(Some(cma)) = events.try_next().await {
            let reasons = cma
                .status
                .into_iter()
                .flat_map(|s| s.install_progressions)
                .filter_map(|p| progressing(&p).map(|(_, reason, _)| reason));
            recorded.lock().expect("reasons").extend(reasons);
        }
    });
    seen
}

/// The revision annotation of a cluster's deploy work and whether its ConfigMap says revision b.
async fn work_revision(client: &Client, cluster: &str, addon: &str) -> (Option<String>, bool) {
    let work = Api::<flotilla_api::work::v1::ManifestWork>::namespaced(client.clone(), cluster)
        .get(&format!("addon-{addon}-deploy-0"))
        .await
        .expect("deploy work");
    let b = work
        .spec
        .workload
        .manifests
        .iter()
        .any(|m| m.0.pointer("/data/revision") == Some(&json!("b")));
    (work.annotations().get(WORK_REVISION).cloned(), b)
}

/// Installs `addon` (helloworld) on `clusters` through placement `namespace/pl` with `rollout`,
/// and waits until every cluster applied the first revision, returned. The stand-in agent
/// serves the clusters named `prefix…`; the test itself acknowledges the works of the others.
async fn installed_on_revision_a(
    client: &Client,
    addon: &'static str,
    namespace: &str,
    clusters: &[&str],
    prefix: &'static str,
    failing: Failing,
    rollout: serde_json::Value,
) -> String {
    register_plugin(client, addon, plugins::HELLOWORLD).await;
    await_cma(client, addon).await;
    let revision_a = await_serving(client, addon, None).await;
    for c in clusters {
        cluster(client, c).await;
    }
    spawn_agent(client.clone(), prefix, failing);
    placement_deciding(client, namespace, "pl", clusters).await;
    install_through(
        client,
        addon,
        json!([{"namespace": namespace, "name": "pl", "rolloutStrategy": rollout}]),
    )
    .await;
    for c in clusters.iter().filter(|c| !c.starts_with(prefix)) {
        let work = await_work(client, c, &format!("addon-{addon}-deploy-0"), "first work", |w| {
            w.annotations().get(WORK_REVISION) == Some(&revision_a)
        })
        .await;
        agent_applied(client, &work).await;
    }
    for c in clusters {
        await_applied_revision(client, c, addon, &revision_a).await;
        assert_eq!(
            work_revision(client, c, addon).await,
            (Some(revision_a.clone()), false)
        );
    }
    revision_a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_plugin_revision_rolls_out_progressively_never_more_than_max_concurrency_at_once() {
    let client = client().await;
    let addon = "hello-rva";
    // The first batch by name (rv-a1, rv-a2) is acknowledged by the test, the rest by the agent.
    let clusters = ["rv-a1", "rv-a2", "rv-b3", "rv-b4", "rv-b5"];
    let revision_a = installed_on_revision_a(
        &client,
        addon,
        "revision-a",
        &clusters,
        "rv-b",
        Failing::default(),
        json!({"type": "Progressive", "progressive": {"maxConcurrency": 2}}),
    )
    .await;
    await_progression(&client, addon, "pl", "first install completed", |p| {
        progressing(p).is_some_and(|(_, reason, _)| reason == "Completed")
    })
    .await;
    let reasons = watch_progression_reasons(client.clone(), addon);
    let most = watch_revision_in_flight(client.clone(), addon, revision_a.clone());

    register_plugin(&client, addon, plugins::REVISION_B).await;
    let revision_b = await_serving(&client, addon, Some(&revision_a)).await;
    // The first batch re-renders and waits for its agent; nobody else may re-render meanwhile.
    let mut first_batch = Vec::new();
    for c in ["rv-a1", "rv-a2"] {
        let work = await_work(
            &client,
            c,
            &format!("addon-{addon}-deploy-0"),
            "first batch on b",
            |w| w.annotations().get(WORK_REVISION) == Some(&revision_b),
        )
        .await;
        first_batch.push(work);
    }
    for c in ["rv-b3", "rv-b4", "rv-b5"] {
        assert_eq!(
            work_revision(&client, c, addon).await,
            (Some(revision_a.clone()), false),
            "{c} keeps its work while the first batch is in flight"
        );
    }
    for work in &first_batch {
        agent_applied(&client, work).await;
    }
    for c in clusters {
        await_applied_revision(&client, c, addon, &revision_b).await;
        assert_eq!(
            work_revision(&client, c, addon).await,
            (Some(revision_b.clone()), true),
            "{c} runs revision b"
        );
    }
    let done = await_progression(&client, addon, "pl", "revision rollout completed", |p| {
        progressing(p).is_some_and(|(_, reason, _)| reason == "Completed")
    })
    .await;
    let (_, _, message) = progressing(&done).expect("Progressing");
    assert!(message.contains("5/5"), "{message}");
    let reasons = reasons.lock().expect("reasons").clone();
    assert!(
        reasons.contains("Progressing"),
        "the install progression said Progressing during the revision rollout: {reasons:?}"
    );
    let most = most.load(Ordering::SeqCst);
    println!("most clusters re-rendered and not yet applied at once: {most}");
    assert!(
        (1..=2).contains(&most),
        "never more than maxConcurrency (2) re-rendered at once, saw {most}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_failing_on_a_new_plugin_revision_count_toward_max_failures_and_stop_it() {
    let client = client().await;
    let addon = "hello-rvf";
    let clusters = ["rv-f1", "rv-f2", "rv-f3", "rv-f4"];
    let failing = Failing::default();
    let revision_a = installed_on_revision_a(
        &client,
        addon,
        "revision-f",
        &clusters,
        "rv-f",
        Arc::clone(&failing),
        json!({"type": "Progressive", "progressive": {
            "maxConcurrency": 2, "maxFailures": 0, "progressDeadline": "2s"}}),
    )
    .await;

    // The first batch (rv-f1, rv-f2 by name) fails on revision b; the rollout must stop there.
    failing
        .lock()
        .expect("failing set")
        .extend(["rv-f1".to_owned(), "rv-f2".to_owned()]);
    register_plugin(&client, addon, plugins::REVISION_B).await;
    let revision_b = await_serving(&client, addon, Some(&revision_a)).await;
    let stopped = await_progression(&client, addon, "pl", "both failing clusters time out", |p| {
        progressing(p).is_some_and(|(_, _, m)| m.contains("2 timeout"))
    })
    .await;
    let (status, reason, message) = progressing(&stopped).expect("Progressing");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "Progressing"),
        "{message}"
    );
    for c in ["rv-f1", "rv-f2"] {
        assert_eq!(
            work_revision(&client, c, addon).await,
            (Some(revision_b.clone()), true),
            "{c} was released revision b"
        );
    }
    for c in ["rv-f3", "rv-f4"] {
        assert_eq!(
            work_revision(&client, c, addon).await,
            (Some(revision_a.clone()), false),
            "{c} keeps its revision a work untouched"
        );
        let mca = Api::<ManagedClusterAddOn>::namespaced(client.clone(), c)
            .get(addon)
            .await
            .expect("add-on");
        assert_eq!(
            mca.annotations().get(RELEASED_REVISION),
            None,
            "{c} was not released b"
        );
        assert_eq!(mca.annotations().get(APPLIED_REVISION), Some(&revision_a));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_rollout_all_a_new_plugin_revision_re_renders_every_cluster_at_once() {
    let client = client().await;
    let addon = "hello-rvl";
    // rv-l1 is acknowledged by the test: under All nobody waits for it.
    let clusters = ["rv-l1", "rv-m2", "rv-m3"];
    let revision_a = installed_on_revision_a(
        &client,
        addon,
        "revision-l",
        &clusters,
        "rv-m",
        Failing::default(),
        json!({"type": "All"}),
    )
    .await;
    register_plugin(&client, addon, plugins::REVISION_B).await;
    let revision_b = await_serving(&client, addon, Some(&revision_a)).await;
    for c in clusters {
        await_work(&client, c, &format!("addon-{addon}-deploy-0"), "work on b", |w| {
            w.annotations().get(WORK_REVISION) == Some(&revision_b)
        })
        .await;
    }
    for c in ["rv-m2", "rv-m3"] {
        await_applied_revision(&client, c, addon, &revision_b).await;
    }
    let held = Api::<ManagedClusterAddOn>::namespaced(client.clone(), "rv-l1")
        .get(addon)
        .await
        .expect("add-on");
    assert_eq!(
        held.annotations().get(APPLIED_REVISION),
        Some(&revision_a),
        "rv-l1 is still in flight on revision b while the others are done"
    );
}

/// What one ManifestWork version carries: the revision its annotation names, whether its
/// manifests are revision b's (the ConfigMap's `data.revision`), and its objects (kind/name).
fn work_content(work: &flotilla_api::work::v1::ManifestWork) -> (Option<String>, bool, BTreeSet<String>) {
    let manifests = &work.spec.workload.manifests;
    let b = manifests
        .iter()
        .any(|m| m.0.pointer("/data/revision") == Some(&json!("b")));
    let objects = manifests
        .iter()
        .map(|m| {
            format!(
                "{}/{}",
                m.0["kind"].as_str().unwrap_or(""),
                m.0["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    (work.annotations().get(WORK_REVISION).cloned(), b, objects)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_revision_swapped_during_a_200_cluster_fan_out_never_mixes_revisions_in_a_work() {
    let client = client().await;
    let addon = "hello-rvs";
    let names: Vec<String> = (0..200).map(|i| format!("rv-s{i:03}")).collect();
    let clusters: Vec<&str> = names.iter().map(String::as_str).collect();
    register_plugin(&client, addon, plugins::HELLOWORLD).await;
    await_cma(&client, addon).await;
    let revision_a = await_serving(&client, addon, None).await;
    for c in &clusters {
        cluster(&client, c).await;
    }
    spawn_agent(client.clone(), "rv-s", Failing::default());

    // Every version of every work of the add-on, in the order the API server made them.
    type Seen = (usize, Vec<String>, BTreeMap<String, BTreeSet<BTreeSet<String>>>);
    let seen: Arc<std::sync::Mutex<Seen>> = Arc::default();
    let recorded = Arc::clone(&seen);
    let (watch_client, revision) = (client.clone(), revision_a.clone());
    tokio::spawn(async move {
        let api: Api<flotilla_api::work::v1::ManifestWork> = Api::all(watch_client);
        let config = watcher::Config::default().labels(&format!("{ADDON_NAME_LABEL}={addon}"));
        let mut events = std::pin::pin!(watcher(api, config).applied_objects());
        while let Ok(Some(work)) = events.try_next().await {
            let (carries, b, objects) = work_content(&work);
            let mut seen = recorded.lock().expect("seen");
            seen.0 += 1;
            let carries = carries.unwrap_or_default();
            if b == (carries == revision) {
                seen.1.push(format!(
                    "{}/{} carries {carries} but its manifests are revision {}",
                    work.namespace().unwrap_or_default(),
                    work.name_any(),
                    if b { "b" } else { "a" }
                ));
            }
            seen.2.entry(carries).or_default().insert(objects);
        }
    });

    placement_deciding(&client, "revision-s", "pl", &clusters).await;
    let started = std::time::Instant::now();
    install_through(
        &client,
        addon,
        json!([{"namespace": "revision-s", "name": "pl", "rolloutStrategy": {"type": "All"}}]),
    )
    .await;
    let works_api: Api<flotilla_api::work::v1::ManifestWork> = Api::all(client.clone());
    let listed = kube::api::ListParams::default().labels(&format!("{ADDON_NAME_LABEL}={addon}"));
    let at_swap = wait::until("a's fan-out under way", TIMEOUT, || {
        let (api, listed) = (works_api.clone(), listed.clone());
        async move {
            let n = api.list(&listed).await?.items.len();
            Ok::<_, kube::Error>((n >= 20).then_some(n))
        }
    })
    .await
    .expect("fan-out started");
    register_plugin(&client, addon, plugins::REVISION_B).await;
    println!(
        "revision b registered after {:?}, with {at_swap}/200 works written",
        started.elapsed()
    );
    assert!(
        at_swap < 200,
        "the swap must land during the fan-out, saw {at_swap} works"
    );
    let revision_b = await_serving(&client, addon, Some(&revision_a)).await;

    wait::until("every cluster on revision b", TIMEOUT, || {
        let (api, listed, b) = (works_api.clone(), listed.clone(), revision_b.clone());
        async move {
            let works = api.list(&listed).await?.items;
            let on_b = works
                .iter()
                .filter(|w| w.annotations().get(WORK_REVISION) == Some(&b))
                .count();
            Ok::<_, kube::Error>((works.len() == 200 && on_b == 200).then_some(()))
        }
    })
    .await
    .expect("all on b");
    println!("every cluster on b after {:?}", started.elapsed());
    let works = works_api.list(&listed).await.expect("works").items;
    let mut per_cluster: BTreeMap<String, usize> = BTreeMap::new();
    for w in &works {
        *per_cluster.entry(w.namespace().unwrap_or_default()).or_default() += 1;
        assert!(work_content(w).1, "{} runs b's manifests", w.name_any());
    }
    assert_eq!(per_cluster.len(), 200);
    assert!(
        per_cluster.values().all(|n| *n == 1),
        "one work per cluster: {per_cluster:?}"
    );

    let seen = seen.lock().expect("seen");
    println!("work versions watched: {}", seen.0);
    assert!(seen.1.is_empty(), "works mixing revisions: {:?}", seen.1);
    for (revision, sets) in &seen.2 {
        assert_eq!(
            sets.len(),
            1,
            "every work of revision {revision} carries the same objects: {sets:?}"
        );
    }
    assert!(
        seen.2.contains_key(&revision_a) && seen.2.contains_key(&revision_b),
        "both revisions rendered works"
    );
}
