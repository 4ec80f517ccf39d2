//! Add-ons through the real `flotilla` binary and the real `flotilla hub`: `plugin register`
//! creates the AddOnPlugin, the hub loads it and ensures its ClusterManagementAddOn, `addon
//! enable` on a cluster becomes the add-on's deploy ManifestWork, `get addons` shows it,
//! `addon status` shows its health mode, conditions and plugin faults, `addon enable|disable
//! --placement` edits the install strategy, and `addon disable` removes the add-on and its work. Bad input is refused with a message that says what to do.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::{
    collections::BTreeMap,
    process::{Command, Output, Stdio},
    time::Duration,
};

use common::{Running, flotilla, ok};
use flotilla_api::{
    addon::v1alpha1::{ClusterManagementAddOn, InstallStrategyType, ManagedClusterAddOn},
    plugins::v1alpha1::AddOnPlugin,
    work::v1::ManifestWork,
};
use flotilla_test_plugins as plugins;
use flotilla_testing::{ControlPlane, wait};
use k8s_openapi::{
    ByteString,
    api::core::v1::{ConfigMap, Namespace},
};
use kube::{Api, api::PostParams};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(120);

/// Runs a command that must fail, and returns what it said.
fn refused(output: Output) -> String {
    assert!(
        !output.status.success(),
        "flotilla must refuse this: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn plugin_register_and_addon_enable_deploy_an_addon_that_get_addons_shows_and_disable_removes() {
    let hub = ControlPlane::start("addon-cli").await.unwrap();
    let kubeconfig = hub.admin_kubeconfig();
    let client = hub.admin_client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = std::fs::File::create(dir.path().join("hub.log")).unwrap();
    let _hub = Running(
        Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args(["hub", "--disable-leader-election", "--plugin-cache-dir"])
            .arg(dir.path().join("artifacts"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );

    // An accepted cluster, as `flotilla accept` leaves it (its agent is not needed here).
    let cluster: flotilla_api::cluster::v1::ManagedCluster = serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": { "name": "cluster1" }, "spec": { "hubAcceptsClient": true },
    }))
    .unwrap();
    Api::all(client.clone())
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();
    // The helloworld component in a ConfigMap.
    let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": "plugins" } })).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("helloworld".into()),
            namespace: Some("plugins".into()),
            ..Default::default()
        },
        binary_data: Some(BTreeMap::from([(
            "plugin.wasm".to_owned(),
            ByteString(std::fs::read(plugins::HELLOWORLD).unwrap()),
        )])),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), "plugins")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();

    let message = refused(flotilla(
        kubeconfig,
        &[
            "plugin",
            "register",
            "helloworld",
            "--configmap",
            "plugins/helloworld",
            "--digest",
            "md5:1",
        ],
    ));
    assert!(message.contains("sha256:<64 hex digits>"), "{message}");
    ok(flotilla(
        kubeconfig,
        &[
            "plugin",
            "register",
            "helloworld",
            "--configmap",
            "plugins/helloworld",
        ],
    ));
    let plugin = Api::<AddOnPlugin>::all(client.clone())
        .get("helloworld")
        .await
        .unwrap();
    assert_eq!(plugin.spec.add_on_name, "helloworld");

    // The hub loads the plugin and ensures the add-on's ClusterManagementAddOn.
    let cmas: Api<ClusterManagementAddOn> = Api::all(client.clone());
    wait::until(
        "the ClusterManagementAddOn of the registered plugin",
        TIMEOUT,
        || async { cmas.get_opt("helloworld").await },
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}\nhub log:\n{}",
            std::fs::read_to_string(dir.path().join("hub.log")).unwrap_or_default()
        )
    });

    let message = refused(flotilla(
        kubeconfig,
        &["addon", "enable", "--names", "helloworld", "--clusters", "nosuch"],
    ));
    assert!(message.contains("no ManagedCluster \"nosuch\""), "{message}");
    let message = refused(flotilla(
        kubeconfig,
        &[
            "addon",
            "enable",
            "--names",
            "helloworld",
            "--clusters",
            "cluster1",
            "--config",
            "cfg",
        ],
    ));
    assert!(message.contains("GROUP/RESOURCE/NAMESPACE/NAME"), "{message}");

    ok(flotilla(
        kubeconfig,
        &[
            "addon",
            "enable",
            "--names",
            "helloworld",
            "--clusters",
            "cluster1",
        ],
    ));
    let addon = Api::<ManagedClusterAddOn>::namespaced(client.clone(), "cluster1")
        .get("helloworld")
        .await
        .unwrap();
    assert_eq!(
        addon.spec.install_namespace,
        "open-cluster-management-agent-addon"
    );
    let works: Api<ManifestWork> = Api::namespaced(client.clone(), "cluster1");
    wait::until("the add-on's deploy ManifestWork", TIMEOUT, || async {
        works.get_opt("addon-helloworld-deploy-0").await
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}\nhub log:\n{}",
            std::fs::read_to_string(dir.path().join("hub.log")).unwrap_or_default()
        )
    });

    let table = ok(flotilla(kubeconfig, &["get", "addons", "--cluster", "cluster1"]));
    let row = table
        .lines()
        .find(|l| l.starts_with("cluster1"))
        .unwrap_or_else(|| panic!("no row for cluster1:\n{table}"));
    assert!(row.contains("helloworld"), "{table}");
    assert!(table.starts_with("CLUSTER"), "{table}");
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        &header[..5],
        ["CLUSTER", "NAME", "AVAILABLE", "HEALTH", "REGISTRATIONS"],
        "{table}"
    );

    // `addon status`: the hub writes the health mode (helloworld: Lease) and, from its own
    // controller, ManifestApplied; nothing has judged the lease (no klusterlet), and the plugin
    // has not failed.
    let shown = wait::until(
        "addon status shows the Lease health mode and ManifestApplied",
        TIMEOUT,
        || async {
            let text = ok(flotilla(
                kubeconfig,
                &["addon", "status", "helloworld", "--cluster", "cluster1"],
            ));
            Ok::<_, String>(
                (text.contains("Health:          Lease") && text.contains("ManifestApplied")).then_some(text),
            )
        },
    )
    .await
    .unwrap();
    for expected in [
        "Add-on:          helloworld",
        "Cluster:         cluster1",
        "Namespace:       open-cluster-management-agent-addon",
        "Lease — not reported yet",
        "ManifestApplied",
        "Last plugin fault: none",
    ] {
        assert!(shown.contains(expected), "{expected:?} missing from:\n{shown}");
    }
    let message = refused(flotilla(
        kubeconfig,
        &["addon", "status", "helloworld", "--cluster", "nosuch"],
    ));
    assert!(message.contains("not enabled on cluster nosuch"), "{message}");
    let listed: serde_json::Value =
        serde_json::from_str(&ok(flotilla(kubeconfig, &["get", "addons", "-o", "json"]))).unwrap();
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(1), "{listed}");

    // A placement in the install strategy, then out of it again.
    ok(flotilla(
        kubeconfig,
        &[
            "addon",
            "enable",
            "--names",
            "helloworld",
            "--placement",
            "default/web",
        ],
    ));
    let strategy = cmas.get("helloworld").await.unwrap().spec.install_strategy;
    assert_eq!(strategy.type_, InstallStrategyType::Placements);
    assert_eq!(strategy.placements.len(), 1);
    assert_eq!(strategy.placements[0].placement.name, "web");
    ok(flotilla(
        kubeconfig,
        &[
            "addon",
            "disable",
            "--names",
            "helloworld",
            "--placement",
            "default/web",
        ],
    ));
    let strategy = cmas.get("helloworld").await.unwrap().spec.install_strategy;
    assert_eq!(
        strategy.type_,
        InstallStrategyType::Placements,
        "so the hub removes what it installed"
    );
    assert!(strategy.placements.is_empty());

    ok(flotilla(
        kubeconfig,
        &[
            "addon",
            "disable",
            "--names",
            "helloworld",
            "--clusters",
            "cluster1",
        ],
    ));
    wait::until("the add-on and its work gone", TIMEOUT, || async {
        let addon = Api::<ManagedClusterAddOn>::namespaced(client.clone(), "cluster1")
            .get_opt("helloworld")
            .await?;
        let work = works.get_opt("addon-helloworld-deploy-0").await?;
        Ok::<_, kube::Error>((addon.is_none() && work.is_none()).then_some(()))
    })
    .await
    .unwrap();
}
