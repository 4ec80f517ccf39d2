//! The klusterlet's add-on credentials against a real hub whose signer issues two-minute
//! certificates: for a ManagedClusterAddOn with a kube-client registration in its status, the
//! agent makes an OCM-shaped add-on CSR (name, labels, DNS SAN, subject), writes
//! `<addon>-hub-kubeconfig` in the add-on's namespace with OCM's keys, sets
//! `ClusterCertificateRotated` on the add-on, renews the certificate before it expires, and
//! deletes the secret once the registration is gone — and only its own: another hub's
//! klusterlet's credential in the same namespace survives. The test plays the hub's approvers.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::agent_support;

use std::time::{Duration, SystemTime};

use agent_support::*;
use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_core::x509;
use flotilla_registration::agent::Phase;
use flotilla_registration::agent::addon_credentials::{CREDENTIAL_AGENT_LABEL, CREDENTIAL_LABEL};
use flotilla_testing::{ControlPlane, wait};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const SIGNING: Duration = Duration::from_secs(120);
const ADDON: &str = "hello";
const ADDON_NAMESPACE: &str = "hello-addon";
const SECRET: &str = "hello-hub-kubeconfig";

/// Lets the cluster's agent read its add-ons and write their status (the hub's
/// `open-cluster-management:managedcluster:registration` role grants this).
async fn allow_addons(hub_admin: &Client, cluster: &str) {
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "test-addon-registration"},
        "rules": [
            {"apiGroups": ["addon.open-cluster-management.io"], "resources": ["managedclusteraddons"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["addon.open-cluster-management.io"], "resources": ["managedclusteraddons/status"],
             "verbs": ["patch", "update"]}]});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("test-addon-registration-{cluster}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "test-addon-registration"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                      "name": format!("system:open-cluster-management:{cluster}")}]});
    for (kind, plural, object) in [
        ("ClusterRole", "clusterroles", role),
        ("ClusterRoleBinding", "clusterrolebindings", binding),
    ] {
        let resource = kube::api::ApiResource {
            group: "rbac.authorization.k8s.io".into(),
            version: "v1".into(),
            api_version: "rbac.authorization.k8s.io/v1".into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<kube::api::DynamicObject> = Api::all_with(hub_admin.clone(), &resource);
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        api.patch(&name, &PatchParams::apply("test").force(), &Patch::Apply(&object))
            .await
            .unwrap();
    }
}

/// What the hub's registration controller writes: the default kube-client registration.
fn registrations(cluster: &str) -> serde_json::Value {
    let group = format!("system:open-cluster-management:cluster:{cluster}:addon:{ADDON}");
    json!([{"signerName": "kubernetes.io/kube-apiserver-client",
            "subject": {"user": format!("{group}:agent:{ADDON}"),
                        "groups": [group, format!("system:open-cluster-management:addon:{ADDON}")]}}])
}

async fn secret(managed_admin: &Client) -> Option<Secret> {
    Api::<Secret>::namespaced(managed_admin.clone(), ADDON_NAMESPACE)
        .get_opt(SECRET)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_agent_writes_rotates_and_removes_an_addons_hub_kubeconfig() {
    init_tracing();
    let hub = ControlPlane::builder("agent-addon-hub")
        .signing_duration(SIGNING)
        .start()
        .await
        .unwrap();
    let managed = ControlPlane::start("agent-addon-managed").await.unwrap();
    let hub_admin = hub.admin_client().await.unwrap();
    let managed_admin = managed.admin_client().await.unwrap();
    ensure_bootstrap_rbac(&hub_admin).await;
    let (namespace, cluster) = ("agent-addon", "addon-c1");
    prepare_namespace(&managed_admin, namespace, bootstrap_kubeconfig(&hub).as_bytes()).await;
    let agent = RunningAgent::start(&managed, options(namespace, Some(cluster))).await;
    let first_csr = wait_csrs(&hub_admin, cluster, 1).await.remove(0);
    decide_csr(&hub_admin, first_csr.metadata.name.as_deref().unwrap(), true).await;
    agent
        .wait("certificate written", |s| s.phase == Phase::WaitingForAcceptance)
        .await;
    accept(&hub_admin, cluster).await;
    agent.wait("joined", |s| s.phase == Phase::Joined).await;
    allow_addons(&hub_admin, cluster).await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": ADDON_NAMESPACE}})).unwrap();
    Api::<Namespace>::all(managed_admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();

    // The hub side: the add-on with its registration and namespace in status.
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(hub_admin.clone(), cluster);
    let addon: ManagedClusterAddOn = serde_json::from_value(json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
        "metadata": {"name": ADDON, "namespace": cluster}, "spec": {}}))
    .unwrap();
    addons.create(&PostParams::default(), &addon).await.unwrap();
    addons
        .patch_status(
            ADDON,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"namespace": ADDON_NAMESPACE, "registrations": registrations(cluster)}}),
            ),
        )
        .await
        .unwrap();
    let approver = {
        let hub_admin = hub_admin.clone();
        tokio::spawn(async move {
            loop {
                approve_pending(&hub_admin, cluster).await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };

    let written = wait::until("add-on hub kubeconfig written", TIMEOUT, || async {
        Ok::<_, String>(secret(&managed_admin).await)
    })
    .await
    .unwrap();
    let mut keys: Vec<&str> = written
        .data
        .as_ref()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["cluster-name", "kubeconfig", "tls.crt", "tls.key"]);
    assert_eq!(secret_data(&written, "cluster-name"), cluster.as_bytes());
    let kubeconfig = std::str::from_utf8(secret_data(&written, "kubeconfig")).unwrap();
    assert!(kubeconfig.contains("client-certificate: tls.crt"), "{kubeconfig}");
    assert!(kubeconfig.contains(hub.server()), "{kubeconfig}");
    let old_cert = secret_data(&written, "tls.crt").to_vec();
    let old_info = x509::parse_certificate(&old_cert).unwrap();
    assert_eq!(
        old_info.subject.common_name,
        format!("system:open-cluster-management:cluster:{cluster}:addon:{ADDON}:agent:{ADDON}")
    );

    // The CSR as OCM's agent makes it.
    let csr = cluster_csrs(&hub_admin, cluster)
        .await
        .into_iter()
        .find(|c| {
            c.metadata.labels.as_ref().is_some_and(|l| {
                l.get("open-cluster-management.io/addon-name").map(String::as_str) == Some(ADDON)
            })
        })
        .expect("the add-on CSR");
    assert!(
        csr.metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with(&format!("addon-{cluster}-{ADDON}-"))
    );
    let request = x509::parse_request(&csr.spec.request.0).unwrap();
    assert_eq!(
        request.dns_names,
        [format!("{ADDON}.addon.open-cluster-management.io")]
    );
    assert_eq!(request.subject.organizations.len(), 2);

    let rotated_condition = wait::until("ClusterCertificateRotated on the add-on", TIMEOUT, || async {
        let addon = addons.get(ADDON).await.map_err(|e| e.to_string())?;
        Ok::<_, String>(addon.status.and_then(|s| {
            s.conditions
                .into_iter()
                .find(|c| c.type_ == "ClusterCertificateRotated" && c.status == "True")
        }))
    })
    .await
    .unwrap();
    assert_eq!(rotated_condition.reason, "ClientCertificateUpdated");

    // Renewed before the first certificate expires.
    let rotated = wait::until(
        "add-on certificate rotated",
        SIGNING + Duration::from_secs(60),
        || async {
            let secret = secret(&managed_admin).await.unwrap();
            Ok::<_, String>((secret_data(&secret, "tls.crt") != old_cert.as_slice()).then_some(secret))
        },
    )
    .await
    .unwrap();
    assert!(SystemTime::now() < old_info.not_after, "renewed before expiry");
    let new_info = x509::parse_certificate(secret_data(&rotated, "tls.crt")).unwrap();
    assert!(new_info.not_after > old_info.not_after);

    // Another hub's klusterlet on the same cluster wrote a credential of the same add-on
    // (labelled with its own agent namespace): this agent's clean-up must leave it alone.
    let other: Secret = serde_json::from_value(json!({
        "metadata": {"name": "hello-hub-kubeconfig-of-another-hub", "namespace": ADDON_NAMESPACE,
                     "labels": {(CREDENTIAL_LABEL): ADDON, (CREDENTIAL_AGENT_LABEL): "another-hubs-agent"}},
        "data": {}}))
    .unwrap();
    let addon_secrets = Api::<Secret>::namespaced(managed_admin.clone(), ADDON_NAMESPACE);
    addon_secrets
        .create(&PostParams::default(), &other)
        .await
        .unwrap();

    // The registration is gone: so is the secret.
    addons
        .patch_status(
            ADDON,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"registrations": null}})),
        )
        .await
        .unwrap();
    wait::until("add-on secret removed", TIMEOUT, || async {
        Ok::<_, String>(secret(&managed_admin).await.is_none().then_some(()))
    })
    .await
    .unwrap();
    assert!(
        addon_secrets
            .get_opt("hello-hub-kubeconfig-of-another-hub")
            .await
            .unwrap()
            .is_some(),
        "another klusterlet's credential survives this one's clean-up"
    );
    approver.abort();
}
