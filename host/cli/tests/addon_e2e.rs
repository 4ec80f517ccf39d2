//! The add-on lifecycle end to end, as a hub admin lives it: a hub and two managed clusters on
//! their own control planes, the real `flotilla hub` (as deploy/hub's service account) and one
//! real `flotilla klusterlet` per cluster, and the helloworld plugin pushed to a real OCI
//! registry. `plugin register` → `addon enable` on cluster1 → the add-on's agent objects exist
//! on cluster1 and `ManifestApplied` is True → disable → nothing left on hub or cluster1; then
//! a Placements install strategy over both clusters that follows the placement's decisions;
//! then helloworld-config, whose AddOnDeploymentConfig change reaches the agent's Deployment.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::{path::Path, time::Duration};

use common::{Fleet, flotilla_at, ok};
use flotilla_api::{addon::v1alpha1::ManagedClusterAddOn, work::v1::ManifestWork};
use flotilla_core::conditions;
use flotilla_test_plugins as plugins;
use flotilla_testing::{ControlPlane, wait};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::ServiceAccount,
    rbac::v1::{ClusterRole, ClusterRoleBinding},
};
use kube::{Api, Client};

const TIMEOUT: Duration = Duration::from_secs(150);
const ADDON: &str = "helloworld";
const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
/// What the helloworld plugin renders for a cluster.
const AGENT: &str = "helloworld-agent";
const AGENT_SA: &str = "helloworld-agent-sa";
const AGENT_RBAC: &str = "open-cluster-management:helloworld:agent";

/// Whether the add-on's agent objects exist on a managed cluster: `Some(true)` all of them,
/// `Some(false)` none, `None` some.
async fn agent_objects(client: &Client) -> Option<bool> {
    let found = [
        Api::<Deployment>::namespaced(client.clone(), INSTALL_NAMESPACE)
            .get_opt(AGENT)
            .await
            .unwrap()
            .is_some(),
        Api::<ServiceAccount>::namespaced(client.clone(), INSTALL_NAMESPACE)
            .get_opt(AGENT_SA)
            .await
            .unwrap()
            .is_some(),
        Api::<ClusterRole>::all(client.clone())
            .get_opt(AGENT_RBAC)
            .await
            .unwrap()
            .is_some(),
        Api::<ClusterRoleBinding>::all(client.clone())
            .get_opt(AGENT_RBAC)
            .await
            .unwrap()
            .is_some(),
    ];
    if found.iter().all(|f| *f) {
        Some(true)
    } else if found.iter().all(|f| !*f) {
        Some(false)
    } else {
        None
    }
}

/// The add-on's ManagedClusterAddOn on `cluster`, its `ManifestApplied` status, and how many
/// ManifestWorks of the add-on the cluster's namespace holds.
async fn hub_side(hub: &Client, cluster: &str) -> (Option<String>, usize) {
    let addon = Api::<ManagedClusterAddOn>::namespaced(hub.clone(), cluster)
        .get_opt(ADDON)
        .await
        .unwrap();
    let applied = addon.map(|a| {
        a.status
            .as_ref()
            .and_then(|s| conditions::find(&s.conditions, "ManifestApplied"))
            .map(|c| c.status.clone())
            .unwrap_or_default()
    });
    let works = Api::<ManifestWork>::namespaced(hub.clone(), cluster)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|w| {
            w.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("open-cluster-management.io/addon-name"))
                .is_some_and(|name| name == ADDON)
        })
        .count();
    (applied, works)
}

/// Waits until the add-on is installed on `cluster` (`true`: ManifestApplied True and every agent
/// object on the managed cluster) or entirely gone from hub and managed cluster (`false`).
async fn await_installed(state: &Path, hub: &Client, cluster: &str, managed: &Client, installed: bool) {
    let what = if installed { "installed" } else { "gone" };
    let result = wait::until(&format!("{ADDON} {what} on {cluster}"), TIMEOUT, || async {
        let (applied, works) = hub_side(hub, cluster).await;
        let objects = agent_objects(managed).await;
        let done = if installed {
            applied.as_deref() == Some("True") && works > 0 && objects == Some(true)
        } else {
            applied.is_none() && works == 0 && objects == Some(false)
        };
        if done {
            Ok(Some(()))
        } else {
            Err(format!(
                "ManifestApplied {applied:?}, {works} works, agent objects {objects:?}"
            ))
        }
    })
    .await;
    if let Err(e) = result {
        let hub_log = std::fs::read_to_string(state.join("hub.log")).unwrap_or_default();
        let agent_log =
            std::fs::read_to_string(state.join("klusterlets").join(cluster).join("klusterlet.log"))
                .unwrap_or_default();
        let tail = |text: &str| {
            text.lines()
                .rev()
                .take(40)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        };
        panic!(
            "{e}\nhub log:\n{}\nklusterlet log:\n{}",
            tail(&hub_log),
            tail(&agent_log)
        );
    }
}

#[tokio::test]
async fn helloworld_from_a_registry_installs_on_joined_clusters_follows_a_placement_and_leaves_nothing_behind()
 {
    let fleet = Fleet::start("addon", &[]).await;
    let (hub, one, two, registry) = (&fleet.hub, &fleet.one, &fleet.two, &fleet.registry);
    let (state, admin) = (fleet.state(), fleet.admin());

    let hub_client = hub.admin_client().await.unwrap();
    let (one_client, two_client) = (
        one.admin_client().await.unwrap(),
        two.admin_client().await.unwrap(),
    );

    // Enabled on cluster1 alone.
    ok(flotilla_at(
        state,
        admin,
        &["addon", "enable", "--names", ADDON, "--clusters", "cluster1"],
    ));
    await_installed(state, &hub_client, "cluster1", &one_client, true).await;
    assert_eq!(
        agent_objects(&two_client).await,
        Some(false),
        "cluster2 was not asked for"
    );
    let listed = hub
        .kubectl()
        .args(["get", "managedclusteraddons", "-A"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("cluster1") && l.split_whitespace().nth(1) == Some(ADDON)),
        "{listed}"
    );
    // kubectl read the preferred version, v1beta1, which the hub serves through its conversion
    // webhook: the v1alpha1 registrations come back typed.
    let crd = Api::<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    >::all(hub_client.clone())
    .get("managedclusteraddons.addon.open-cluster-management.io")
    .await
    .unwrap();
    assert_eq!(
        crd.spec.conversion.map(|c| c.strategy).as_deref(),
        Some("Webhook")
    );
    let stored = Api::<ManagedClusterAddOn>::namespaced(hub_client.clone(), "cluster1")
        .get(ADDON)
        .await
        .unwrap()
        .status
        .unwrap_or_default();
    let served =
        Api::<flotilla_api::addon::v1beta1::ManagedClusterAddOn>::namespaced(hub_client.clone(), "cluster1")
            .get(ADDON)
            .await
            .unwrap()
            .status
            .unwrap_or_default();
    assert!(!stored.registrations.is_empty());
    assert_eq!(
        served.registrations.iter().map(|r| r.type_).collect::<Vec<_>>(),
        stored
            .registrations
            .iter()
            .map(
                |r| if r.signer_name == flotilla_api::addon::consts::KUBE_APISERVER_CLIENT_SIGNER {
                    flotilla_api::addon::v1beta1::RegistrationType::KubeClient
                } else {
                    flotilla_api::addon::v1beta1::RegistrationType::CustomSigner
                }
            )
            .collect::<Vec<_>>()
    );
    let table = ok(flotilla_at(
        state,
        admin,
        &["get", "addons", "--cluster", "cluster1"],
    ));
    assert!(
        table.lines().any(|l| l.contains(ADDON) && l.contains("True")),
        "{table}"
    );

    ok(flotilla_at(
        state,
        admin,
        &["addon", "disable", "--names", ADDON, "--clusters", "cluster1"],
    ));
    await_installed(state, &hub_client, "cluster1", &one_client, false).await;

    // A Placements install strategy: clusters labelled `addons=on` in the global set.
    for name in ["cluster1", "cluster2"] {
        let out = hub
            .kubectl()
            .args(["label", "managedcluster", name, "addons=on"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let placement = state.join("placement.yaml");
    std::fs::write(
        &placement,
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: addons}\n---\n\
         apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\n\
         metadata: {name: labelled, namespace: addons}\n\
         spec:\n  predicates:\n  - requiredClusterSelector:\n      labelSelector:\n        matchLabels: {addons: \"on\"}\n",
    )
    .unwrap();
    let out = hub
        .kubectl()
        .args(["apply", "-f", placement.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    ok(flotilla_at(
        state,
        admin,
        &["clusterset", "bind", "global", "--namespace", "addons"],
    ));
    ok(flotilla_at(
        state,
        admin,
        &[
            "addon",
            "enable",
            "--names",
            ADDON,
            "--placement",
            "addons/labelled",
        ],
    ));
    await_installed(state, &hub_client, "cluster1", &one_client, true).await;
    await_installed(state, &hub_client, "cluster2", &two_client, true).await;

    // cluster2 leaves the placement and loses the add-on; it joins again and gains it.
    let label = |value: &str| {
        let out = hub
            .kubectl()
            .args([
                "label",
                "--overwrite",
                "managedcluster",
                "cluster2",
                &format!("addons={value}"),
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    label("off");
    await_installed(state, &hub_client, "cluster2", &two_client, false).await;
    assert_eq!(agent_objects(&one_client).await, Some(true), "cluster1 keeps it");
    label("on");
    await_installed(state, &hub_client, "cluster2", &two_client, true).await;

    ok(flotilla_at(
        state,
        admin,
        &[
            "addon",
            "disable",
            "--names",
            ADDON,
            "--placement",
            "addons/labelled",
        ],
    ));
    await_installed(state, &hub_client, "cluster1", &one_client, false).await;
    await_installed(state, &hub_client, "cluster2", &two_client, false).await;

    // helloworld-config with an AddOnDeploymentConfig: a config change reaches the Deployment.
    let reference = registry.reference("addons/helloworld-config", "v1");
    ok(flotilla_at(
        state,
        admin,
        &[
            "plugin",
            "push",
            plugins::HELLOWORLD_CONFIG,
            &reference,
            "--insecure",
        ],
    ));
    ok(flotilla_at(
        state,
        admin,
        &[
            "plugin",
            "register",
            CONFIGURED,
            "--oci",
            &reference,
            "--insecure",
        ],
    ));
    set_log_level(hub, state, "2");
    ok(flotilla_at(
        state,
        admin,
        &[
            "addon",
            "enable",
            "--names",
            CONFIGURED,
            "--clusters",
            "cluster1",
            "--config",
            "addon.open-cluster-management.io/addondeploymentconfigs/addons/agent-settings",
        ],
    ));
    await_agent_log_level(state, &one_client, "2").await;
    set_log_level(hub, state, "4");
    await_agent_log_level(state, &one_client, "4").await;
    ok(flotilla_at(
        state,
        admin,
        &[
            "addon",
            "disable",
            "--names",
            CONFIGURED,
            "--clusters",
            "cluster1",
        ],
    ));

    for (name, cp) in [("cluster1", &one), ("cluster2", &two)] {
        ok(flotilla_at(
            state,
            cp.admin_kubeconfig(),
            &["unjoin", "--cluster-name", name],
        ));
    }
}

/// The configurable add-on.
const CONFIGURED: &str = "helloworld-config";

/// Writes AddOnDeploymentConfig `addons/agent-settings` with customized variable `LOG_LEVEL`.
fn set_log_level(hub: &ControlPlane, state: &Path, level: &str) {
    let path = state.join("agent-settings.yaml");
    std::fs::write(
        &path,
        format!(
            "apiVersion: addon.open-cluster-management.io/v1alpha1\nkind: AddOnDeploymentConfig\n\
             metadata: {{name: agent-settings, namespace: addons}}\n\
             spec:\n  customizedVariables:\n  - {{name: LOG_LEVEL, value: \"{level}\"}}\n"
        ),
    )
    .unwrap();
    let out = hub
        .kubectl()
        .args(["apply", "-f", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Waits until the configurable add-on's agent Deployment on a managed cluster runs with
/// `--v=<level>`, as its AddOnDeploymentConfig says.
async fn await_agent_log_level(state: &Path, managed: &Client, level: &str) {
    let deployments = Api::<Deployment>::namespaced(managed.clone(), INSTALL_NAMESPACE);
    let want = format!("--v={level}");
    let result = wait::until(&format!("agent Deployment with {want}"), TIMEOUT, || async {
        let args = deployments
            .get_opt(AGENT)
            .await
            .map_err(|e| e.to_string())?
            .and_then(|d| d.spec)
            .and_then(|s| s.template.spec)
            .and_then(|p| p.containers.into_iter().next())
            .and_then(|c| c.args)
            .unwrap_or_default();
        if args.contains(&want) {
            Ok(Some(()))
        } else {
            Err(format!("args {args:?}"))
        }
    })
    .await;
    if let Err(e) = result {
        let hub_log = std::fs::read_to_string(state.join("hub.log")).unwrap_or_default();
        let tail: Vec<&str> = hub_log.lines().rev().take(30).collect();
        panic!("{e}\nhub log (newest first):\n{}", tail.join("\n"));
    }
}
