//! A klusterlet whose hub client certificate expires while the hub is down: once the hub is
//! back the agent bootstraps again (a new CSR from the bootstrap identity, which the admin
//! approves with `flotilla accept`, as after the first join), the cluster comes back Available
//! under the same name, and nothing its work agent applied on the managed cluster is lost or
//! re-created. Real `flotilla hub` and `flotilla klusterlet` processes; the hub's controller
//! manager signs 40-second certificates.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::time::{Duration, SystemTime};

use common::*;
use flotilla_api::cluster::{consts::managed_cluster as mc, v1::ManagedCluster};
use flotilla_api::work::v1::{AppliedManifestWork, ManifestWork};
use flotilla_core::conditions;
use flotilla_testing::{ControlPlane, wait};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

/// Lifetime of the certificates the hub's signer issues: short, so one expires within an
/// outage the test can afford.
const SIGNING: Duration = Duration::from_secs(40);
const WAIT: Duration = Duration::from_secs(120);

fn available(cluster: &ManagedCluster) -> Option<String> {
    let conditions = cluster.status.as_ref()?.conditions.as_ref()?;
    conditions::find(conditions, mc::CONDITION_AVAILABLE).map(|c| c.status.clone())
}

/// The `notAfter` of the hub client certificate the klusterlet keeps in its hub kubeconfig
/// Secret on the managed cluster.
async fn agent_certificate_expiry(managed: &kube::Client) -> Option<SystemTime> {
    let secrets: Api<Secret> = Api::namespaced(managed.clone(), "open-cluster-management-agent");
    let secret = secrets.get_opt("hub-kubeconfig-secret").await.ok()??;
    let pem = secret.data?.get("tls.crt")?.0.clone();
    flotilla_core::x509::parse_certificate(&pem)
        .ok()
        .map(|info| info.not_after)
}

#[tokio::test]
async fn an_agent_certificate_expiring_during_a_hub_outage_bootstraps_again_and_loses_nothing() {
    let (hub, one) = tokio::join!(
        ControlPlane::builder("cert-outage-hub")
            .signing_duration(SIGNING)
            .start(),
        ControlPlane::start("cert-outage-cluster1")
    );
    let (mut hub, one) = (hub.unwrap(), one.unwrap());
    let state = tempfile::tempdir().unwrap();
    let _klusterlets = Klusterlets(state.path().to_owned());
    let state = state.path();
    let admin = hub.admin_kubeconfig().to_owned();
    let token = hub_token(&ok(flotilla_at(state, &admin, &["init"])));
    let identity = hub_service_account(&hub, state);
    let _hub_process = start_hub(&identity, &state.join("hub.log"), &[]);
    ok(join_local(
        state,
        one.admin_kubeconfig(),
        hub.server(),
        &token,
        "cluster1",
        &["--lease-duration-seconds=2"],
    ));
    ok(flotilla_at(
        state,
        &admin,
        &["accept", "--wait", "--clusters", "cluster1", "--timeout", "90s"],
    ));
    let hub_client = hub.admin_client().await.unwrap();
    let managed = one.admin_client().await.unwrap();
    let clusters: Api<ManagedCluster> = Api::all(hub_client.clone());
    wait::until("cluster1 available", WAIT, || async {
        Ok::<_, kube::Error>(
            clusters
                .get_opt("cluster1")
                .await?
                .filter(|c| available(c).as_deref() == Some("True")),
        )
    })
    .await
    .unwrap();

    // A work the agent applies: its ConfigMap and AppliedManifestWork must outlive the outage.
    let work: ManifestWork = serde_json::from_value(json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "keep", "namespace": "cluster1"},
        "spec": {"workload": {"manifests": [{
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kept", "namespace": "default"},
            "data": {"k": "v"}
        }]}}
    }))
    .unwrap();
    Api::<ManifestWork>::namespaced(hub_client.clone(), "cluster1")
        .create(&PostParams::default(), &work)
        .await
        .unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(managed.clone(), "default");
    let applied = wait::until("the work applied", WAIT, || async {
        config_maps.get_opt("kept").await
    })
    .await
    .unwrap();
    let applied_works: Api<AppliedManifestWork> = Api::all(managed.clone());
    let applied_work_uids = || async {
        let list = applied_works.list(&ListParams::default()).await.unwrap();
        list.items
            .iter()
            .map(|w| w.uid().unwrap_or_default())
            .collect::<Vec<_>>()
    };
    let before = applied_work_uids().await;
    assert_eq!(before.len(), 1, "one AppliedManifestWork");

    // The outage: from now until past the notAfter of the certificate the agent holds.
    let expires = wait::until("the agent holds a certificate", WAIT, || async {
        Ok::<_, String>(agent_certificate_expiry(&managed).await)
    })
    .await
    .unwrap();
    hub.stop_apiserver().unwrap();
    let outage = expires
        .duration_since(SystemTime::now())
        .unwrap_or_default()
        .saturating_add(Duration::from_secs(3));
    println!("hub down for {outage:?}, past the agent certificate's notAfter");
    tokio::time::sleep(outage).await;
    hub.start_apiserver().await.unwrap();
    let back = std::time::Instant::now();

    // The agent bootstraps again: a CSR from the bootstrap identity, approved by the admin.
    let csrs: Api<CertificateSigningRequest> = Api::all(hub_client.clone());
    wait::until("a new bootstrap CSR for cluster1", WAIT, || async {
        let list = csrs
            .list(&ListParams::default().labels("open-cluster-management.io/cluster-name=cluster1"))
            .await?;
        Ok::<_, kube::Error>(
            list.items
                .into_iter()
                .find(|c| {
                    c.spec
                        .username
                        .as_deref()
                        .is_some_and(|u| u.starts_with("system:bootstrap:"))
                        && c.status.as_ref().and_then(|s| s.conditions.as_ref()).is_none()
                })
                .map(|c| c.name_any()),
        )
    })
    .await
    .unwrap();
    ok(flotilla_at(
        state,
        &admin,
        &["accept", "--wait", "--clusters", "cluster1", "--timeout", "90s"],
    ));
    // Available may not have changed yet when the hub returns: wait for the new certificate,
    // then for the agent to report with it.
    let renewed = wait::until("a new certificate in the agent's Secret", WAIT, || async {
        Ok::<_, String>(agent_certificate_expiry(&managed).await.filter(|t| *t > expires))
    })
    .await
    .unwrap();
    assert!(renewed > expires);
    wait::until("cluster1 available again", WAIT, || async {
        Ok::<_, kube::Error>(
            clusters
                .get_opt("cluster1")
                .await?
                .filter(|c| available(c).as_deref() == Some("True")),
        )
    })
    .await
    .unwrap();
    println!(
        "cluster1 available again {:?} after the hub returned",
        back.elapsed()
    );

    // Nothing applied was lost or made again: the same ConfigMap and AppliedManifestWork.
    let after = config_maps.get("kept").await.unwrap();
    assert_eq!(after.uid(), applied.uid(), "the applied ConfigMap was kept");
    assert_eq!(
        applied_work_uids().await,
        before,
        "the AppliedManifestWork was kept"
    );
    // And the work agent works for the hub again: a change is applied.
    let mut work = Api::<ManifestWork>::namespaced(hub_client.clone(), "cluster1")
        .get("keep")
        .await
        .unwrap();
    work.spec.workload.manifests[0].0["data"]["k"] = json!("v2");
    Api::<ManifestWork>::namespaced(hub_client.clone(), "cluster1")
        .replace("keep", &PostParams::default(), &work)
        .await
        .unwrap();
    wait::until("the change applied", WAIT, || async {
        let current = config_maps.get("kept").await?;
        Ok::<_, kube::Error>(
            current
                .data
                .as_ref()
                .and_then(|d| d.get("k"))
                .filter(|v| *v == "v2")
                .cloned(),
        )
    })
    .await
    .unwrap();
}
