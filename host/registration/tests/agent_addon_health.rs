//! The registration agent judges its cluster's add-ons by their leases, against Flotilla's hub
//! controllers on a separate control plane (real RBAC: the agent reads add-ons and leases and
//! writes add-on status with its own hub identity only). Add-on leases last one second here, so
//! a lease goes stale five seconds after its last renewal; nothing renews them but the test.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::agent_support;

use std::time::Duration;

use agent_support::*;
use flotilla_api::addon::consts::{DEFAULT_INSTALL_NAMESPACE, managed_cluster_addon as mca};
use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_api::cluster::consts::managed_cluster as mc;
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_registration::hub::{self, HubOptions};
use flotilla_testing::wait;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

fn available(addon: &ManagedClusterAddOn) -> Option<Condition> {
    addon
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == mca::CONDITION_AVAILABLE)
        .cloned()
}

/// Waits until add-on `name` has `Available` with `status` and `reason`.
async fn wait_available(hub: &Client, cluster: &str, name: &str, status: &str, reason: &str) -> Condition {
    let api: Api<ManagedClusterAddOn> = Api::namespaced(hub.clone(), cluster);
    wait::until(
        &format!("{name} Available {status} {reason}"),
        TIMEOUT,
        || async {
            let addon = api.get(name).await?;
            Ok::<_, kube::Error>(available(&addon).filter(|c| c.status == status && c.reason == reason))
        },
    )
    .await
    .unwrap()
}

/// Creates or renews Lease `name` in `namespace` (renewTime now).
async fn renew(client: &Client, namespace: &str, name: &str) {
    Api::<Lease>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply("lease-test").force(),
            &Patch::Apply(json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": { "name": name, "namespace": namespace },
                "spec": { "holderIdentity": name, "renewTime": MicroTime(Timestamp::now()) },
            })),
        )
        .await
        .unwrap();
}

async fn create_addon(hub: &Client, cluster: &str, name: &str) {
    let addon = ManagedClusterAddOn::new(name, Default::default());
    Api::<ManagedClusterAddOn>::namespaced(hub.clone(), cluster)
        .create(&PostParams::default(), &addon)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_reports_addon_leases_as_updated_stopped_and_not_found_and_falls_back_to_the_hub() {
    init_tracing();
    let (hub_plane, managed) = planes().await;
    let hub_admin = hub_plane.admin_client().await.unwrap();
    let managed_admin = managed.admin_client().await.unwrap();
    let controllers = tokio::spawn(hub::run(
        hub_admin.clone(),
        HubOptions {
            resync: Duration::from_secs(10),
            ..HubOptions::default()
        },
    ));
    ensure_bootstrap_binding(&hub_admin).await;
    let (namespace, cluster) = ("addon-health-agent", "addon-health-c1");
    prepare_namespace(
        &managed_admin,
        namespace,
        bootstrap_kubeconfig(hub_plane).as_bytes(),
    )
    .await;
    let mut opts = options(namespace, Some(cluster));
    opts.lease_duration_seconds = 2;
    opts.addon_lease_duration = Duration::from_secs(1);
    let agent = RunningAgent::start(managed, opts).await;
    let first = wait_csrs(&hub_admin, cluster, 1).await.remove(0);
    decide_csr(&hub_admin, first.metadata.name.as_deref().unwrap(), true).await;
    Api::<ManagedCluster>::all(hub_admin.clone())
        .patch(
            cluster,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "hubAcceptsClient": true } })),
        )
        .await
        .unwrap();
    wait_cluster(&hub_admin, cluster, "joined", |c| {
        has_condition(c, mc::CONDITION_JOINED, "True", mc::REASON_JOINED)
    })
    .await;
    Api::<Namespace>::all(managed_admin.clone())
        .patch(
            DEFAULT_INSTALL_NAMESPACE,
            &PatchParams::apply("lease-test"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": DEFAULT_INSTALL_NAMESPACE}})),
        )
        .await
        .unwrap();

    // An add-on in Customized mode is the hub's business: the agent leaves it alone, even with
    // a lease of its name.
    create_addon(&hub_admin, cluster, "customized").await;
    Api::<ManagedClusterAddOn>::namespaced(hub_admin.clone(), cluster)
        .patch_status(
            "customized",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"healthCheck": {"mode": "Customized"}}})),
        )
        .await
        .unwrap();
    renew(&managed_admin, DEFAULT_INSTALL_NAMESPACE, "customized").await;

    // No lease anywhere: Unknown.
    let addon = "lease-addon";
    create_addon(&hub_admin, cluster, addon).await;
    let not_found = wait_available(&hub_admin, cluster, addon, "Unknown", mca::REASON_LEASE_NOT_FOUND).await;
    assert_eq!(
        not_found.message,
        format!("The status of {addon} add-on is unknown.")
    );

    // Renewed on the managed cluster: True; not renewed for five periods: False, without any
    // other change to wake the agent (it comes back when the lease goes stale).
    renew(&managed_admin, DEFAULT_INSTALL_NAMESPACE, addon).await;
    wait_available(&hub_admin, cluster, addon, "True", mca::REASON_LEASE_UPDATED).await;
    wait_available(
        &hub_admin,
        cluster,
        addon,
        "False",
        mca::REASON_LEASE_UPDATE_STOPPED,
    )
    .await;

    // Renewed again: True again.
    renew(&managed_admin, DEFAULT_INSTALL_NAMESPACE, addon).await;
    wait_available(&hub_admin, cluster, addon, "True", mca::REASON_LEASE_UPDATED).await;

    // Deleted: Unknown.
    Api::<Lease>::namespaced(managed_admin.clone(), DEFAULT_INSTALL_NAMESPACE)
        .delete(addon, &DeleteParams::default())
        .await
        .unwrap();
    wait_available(&hub_admin, cluster, addon, "Unknown", mca::REASON_LEASE_NOT_FOUND).await;

    // A lease the agent renews on the hub (with only its hub credential): True.
    renew(&hub_admin, cluster, addon).await;
    wait_available(&hub_admin, cluster, addon, "True", mca::REASON_LEASE_UPDATED).await;

    let customized = Api::<ManagedClusterAddOn>::namespaced(hub_admin.clone(), cluster)
        .get("customized")
        .await
        .unwrap();
    assert_eq!(
        available(&customized),
        None,
        "a Customized add-on is not judged by its lease"
    );
    agent.stop().await;
    controllers.abort();
}
