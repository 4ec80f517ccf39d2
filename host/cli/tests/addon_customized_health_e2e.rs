//! Customized health end to end: a hub and two managed clusters on their own control planes,
//! the real `flotilla hub` and `flotilla klusterlet` processes, plugins pushed to a real OCI
//! registry, and a real node per cluster. helloworld-config probes its agent Deployment (health
//! mode `customized`): the real work agent reports the Deployment's status feedback once the
//! node runs the helloworld agent's pod, the hub hands it to the plugin's `probe-health`, and the
//! add-on turns Available. An add-on whose
//! `probe-health` traps (the hostile probe-trap plugin) is Unknown naming the fault, and is never
//! Available, while its work applies like any other.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Fleet, flotilla_at, ok};
use flotilla_api::addon::consts::managed_cluster_addon as mca;
use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_api::work::v1::ManifestWork;
use flotilla_test_plugins as plugins;
use flotilla_testing::wait;
use futures::TryStreamExt as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};

const TIMEOUT: Duration = Duration::from_secs(120);
const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";

/// Pushes the component at `path` to the fleet's registry and registers it as add-on `name`.
fn push_and_register(fleet: &Fleet, name: &str, path: &str) {
    let reference = fleet.registry.reference(&format!("addons/{name}"), "v1");
    let pushed = ok(flotilla_at(
        fleet.state(),
        fleet.admin(),
        &["plugin", "push", path, &reference, "--insecure"],
    ));
    let digest = common::pushed_digest(&pushed);
    ok(flotilla_at(
        fleet.state(),
        fleet.admin(),
        &[
            "plugin",
            "register",
            name,
            "--oci",
            &reference,
            "--digest",
            &digest,
            "--insecure",
        ],
    ));
}

/// Waits until the `Available` condition of add-on `addon` on cluster1 satisfies `check`.
async fn await_available(
    fleet: &Fleet,
    hub: &Client,
    addon: &str,
    check: impl Fn(&Condition) -> bool,
) -> Condition {
    let api: Api<ManagedClusterAddOn> = Api::namespaced(hub.clone(), "cluster1");
    let found = wait::until(&format!("{addon} Available on cluster1"), TIMEOUT, || async {
        let addon = api.get_opt(addon).await.map_err(|e| e.to_string())?;
        let conditions = addon
            .and_then(|a| a.status)
            .map(|s| s.conditions)
            .unwrap_or_default();
        match conditions.iter().find(|c| c.type_ == mca::CONDITION_AVAILABLE) {
            Some(c) if check(c) => Ok(Some(c.clone())),
            other => Err(format!("Available: {other:?}")),
        }
    })
    .await;
    found.unwrap_or_else(|e| {
        let log = std::fs::read_to_string(fleet.state().join("hub.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        panic!(
            "{e}\nhub log:\n{}\nagent pods:\n{}\n{}",
            lines[lines.len().saturating_sub(30)..].join("\n"),
            fleet.nodes[0].pod_log_tail(INSTALL_NAMESPACE, "helloworld-agent", 10),
            fleet.nodes[0].log_tail("kubelet", 10)
        )
    })
}

/// Every `Available` status add-on `addon` on cluster1 has had, as a watch sees it.
fn watch_available(hub: &Client, addon: &'static str) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let api: Api<ManagedClusterAddOn> = Api::namespaced(hub.clone(), "cluster1");
    tokio::spawn(async move {
        let config = watcher::Config::default().fields(&format!("metadata.name={addon}"));
        let mut events = std::pin::pin!(watcher(api, config).applied_objects());
        while let Ok(Some(found)) = events.try_next().await {
            let conditions = found.status.map(|s| s.conditions).unwrap_or_default();
            if let Some(c) = conditions.iter().find(|c| c.type_ == mca::CONDITION_AVAILABLE) {
                record.lock().unwrap().push(c.status.clone());
            }
        }
    });
    seen
}

#[tokio::test]
async fn deployment_feedback_goes_through_probe_health_to_available_and_a_trapping_probe_is_unknown_naming_the_fault()
 {
    let fleet = Fleet::start_on_nodes("probe", &[]).await;
    flotilla_testing::image::push_helloworld_agent(&fleet.registry)
        .await
        .unwrap();
    let hub = fleet.hub.admin_client().await.unwrap();
    let trap_seen = watch_available(&hub, "probe-trap");
    push_and_register(&fleet, "helloworld-config", plugins::HELLOWORLD_CONFIG);
    push_and_register(&fleet, "probe-trap", plugins::HOSTILE_PROBE_TRAP);
    for addon in ["helloworld-config", "probe-trap"] {
        // The ClusterManagementAddOn comes from the plugin once it is loaded.
        let cmas: Api<flotilla_api::addon::v1alpha1::ClusterManagementAddOn> = Api::all(hub.clone());
        wait::until(&format!("ClusterManagementAddOn {addon}"), TIMEOUT, || async {
            cmas.get_opt(addon).await.map(|c| c.map(|_| ()))
        })
        .await
        .unwrap();
        ok(flotilla_at(
            fleet.state(),
            fleet.admin(),
            &["addon", "enable", "--names", addon, "--clusters", "cluster1"],
        ));
    }

    // helloworld-config: its agent's pod runs; the Deployment's feedback reaches probe-health.
    let available = await_available(&fleet, &hub, "helloworld-config", |c| c.status == "True").await;
    assert_eq!(available.reason, mca::REASON_PROBE_AVAILABLE);

    // probe-trap: its Deployment reports replicas (no pod needs to run for that), so the hub
    // asks probe-health, which traps: Unknown, naming the fault.
    // Until the hub has switched its health check to Customized, the klusterlet may judge it by
    // lease (Unknown, lease not found, a message naming the add-on); until the work reports
    // feedback, the hub's verdict is Unknown with the same reason as the trap's but says no
    // probe results came back: wait for the verdict that names the hook.
    let unknown = await_available(&fleet, &hub, "probe-trap", |c| {
        c.status == "Unknown" && c.reason == mca::REASON_NO_PROBE_RESULT && c.message.contains("probe-health")
    })
    .await;
    assert!(unknown.message.contains("trap"), "{}", unknown.message);
    // Its pod runs too: still never Available.
    // Once the work reports the ready replica, the hub has asked probe-health again.
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), "cluster1");
    wait::until("probe-trap's work reports a ready replica", TIMEOUT, || async {
        let work = works.get_opt("addon-probe-trap-deploy-0").await?;
        let ready = work.and_then(|w| w.status).is_some_and(|s| {
            s.resource_status.manifests.iter().any(|m| {
                m.status_feedbacks
                    .values
                    .iter()
                    .any(|v| v.name == "ReadyReplicas" && v.value.integer == Some(1))
            })
        });
        Ok::<_, kube::Error>(ready.then_some(()))
    })
    .await
    .unwrap();
    await_available(&fleet, &hub, "probe-trap", |c| c.status == "Unknown").await;
    let seen = trap_seen.lock().unwrap().clone();
    assert!(!seen.is_empty(), "the watch saw probe-trap's Available");
    assert!(
        seen.iter().all(|status| status != "True"),
        "probe-trap was never Available: {seen:?}"
    );
}
