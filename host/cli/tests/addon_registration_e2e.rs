//! Add-on registration end to end: a hub and two managed clusters on their own control planes,
//! the real `flotilla hub` (as deploy/hub's service account) and one real `flotilla klusterlet`
//! per cluster, helloworld pushed to a real OCI registry. helloworld enabled on cluster1 → the
//! klusterlet's add-on CSR is approved through the plugin → `helloworld-hub-kubeconfig` appears
//! on cluster1, shaped as an OCM add-on agent expects → a client built ONLY from that secret's
//! files reads configmaps in `cluster1` on the hub, is refused (403) in `cluster2` and on
//! secrets across the hub, and renews a Lease `helloworld` in `cluster1` → disabling the add-on
//! removes the hub Role/RoleBinding and the secret. Then custom-signer: its certificate is
//! signed by the hub with the CA its `AddOnPlugin.spec.signers` names and written to
//! `custom-signer-example.com-custom-signer-client-cert`, and removed with the add-on.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::{path::Path, time::Duration};

use common::{Fleet, flotilla_at, ok};
use flotilla_test_plugins as plugins;
use flotilla_testing::wait;
use k8s_openapi::api::{
    coordination::v1::{Lease, LeaseSpec},
    core::v1::{ConfigMap, Secret},
    rbac::v1::{Role, RoleBinding},
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};

const TIMEOUT: Duration = Duration::from_secs(180);
const ADDON: &str = "helloworld";
const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
const SECRET: &str = "helloworld-hub-kubeconfig";
const HUB_RBAC: &str = "open-cluster-management:helloworld:agent";

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Waits for `check` or panics with the hub's and cluster1's klusterlet's logs.
async fn await_or_logs<T, F, Fut>(state: &Path, what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, kube::Error>>,
{
    match wait::until(what, TIMEOUT, check).await {
        Ok(value) => value,
        Err(e) => panic!(
            "{e}\nhub log:\n{}\nklusterlet log:\n{}",
            tail(&state.join("hub.log")),
            tail(&state.join("klusterlets").join("cluster1").join("klusterlet.log"))
        ),
    }
}

/// A hub client built only from the files of the add-on's secret, written as a pod would see
/// the mounted secret (the kubeconfig refers to `tls.crt` and `tls.key` beside it).
async fn client_from_secret(secret: &Secret, dir: &Path) -> Client {
    for (key, value) in secret.data.as_ref().expect("secret data") {
        std::fs::write(dir.join(key), &value.0).unwrap();
    }
    let kubeconfig = Kubeconfig::read_from(dir.join("kubeconfig")).expect("the secret's kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("a usable kubeconfig");
    Client::try_from(config).expect("client")
}

fn forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(e)) if e.code == 403)
}

#[tokio::test]
async fn helloworld_gets_a_hub_credential_through_the_plugin_that_reaches_only_its_cluster_namespace() {
    let fleet = Fleet::start("addonreg", &[]).await;
    let (hub, one, registry) = (&fleet.hub, &fleet.one, &fleet.registry);
    let (state, admin) = (fleet.state(), fleet.admin());
    ok(flotilla_at(
        state,
        admin,
        &["addon", "enable", "--names", ADDON, "--clusters", "cluster1"],
    ));

    let hub_client = hub.admin_client().await.unwrap();
    let one_client = one.admin_client().await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(one_client.clone(), INSTALL_NAMESPACE);
    let secret = await_or_logs(state, "helloworld-hub-kubeconfig on cluster1", || {
        let secrets = secrets.clone();
        async move { secrets.get_opt(SECRET).await }
    })
    .await;
    let data = secret.data.as_ref().unwrap();
    let mut keys: Vec<&str> = data.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["cluster-name", "kubeconfig", "tls.crt", "tls.key"]);
    assert_eq!(data["cluster-name"].0, b"cluster1");

    // The CSR was approved by the hub's add-on CSR controller through the plugin.
    let csrs = Api::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>::all(hub_client.clone())
        .list(&ListParams::default().labels(
            "open-cluster-management.io/cluster-name=cluster1,open-cluster-management.io/addon-name=helloworld",
        ))
        .await
        .unwrap();
    let csr = csrs.items.first().expect("the add-on CSR");
    assert!(
        csr.metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("addon-cluster1-helloworld-")
    );
    let approved = csr
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Approved"))
        .expect("approved");
    assert_eq!(
        approved.reason.as_deref(),
        Some("AutoApprovedByHubCSRApprovingController")
    );

    let dir = tempfile::tempdir().unwrap();
    let agent = client_from_secret(&secret, dir.path()).await;
    // Reads its own cluster namespace on the hub...
    Api::<ConfigMap>::namespaced(agent.clone(), "cluster1")
        .list(&ListParams::default())
        .await
        .expect("configmaps in cluster1");
    // ...and nothing else.
    assert!(forbidden(
        Api::<ConfigMap>::namespaced(agent.clone(), "cluster2")
            .list(&ListParams::default())
            .await
    ));
    assert!(forbidden(
        Api::<Secret>::all(agent.clone())
            .list(&ListParams::default())
            .await
    ));
    // Renews its lease in the cluster namespace.
    let leases: Api<Lease> = Api::namespaced(agent.clone(), "cluster1");
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(ADDON.into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            ..LeaseSpec::default()
        }),
    };
    leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("create the lease");
    // Renewed from a fresh read: the klusterlet makes the add-on the lease's owner meanwhile.
    let mut renewed = false;
    for _ in 0..5 {
        let mut current = leases.get(ADDON).await.expect("read the lease");
        current.spec.as_mut().unwrap().renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        match leases.replace(ADDON, &PostParams::default(), &current).await {
            Ok(_) => {
                renewed = true;
                break;
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("renew the lease: {e}"),
        }
    }
    assert!(renewed, "renew the lease");
    let hub_leases: Api<Lease> = Api::namespaced(hub_client.clone(), "cluster1");
    await_or_logs(state, "the add-on lease on the hub owned by its add-on", || {
        let hub_leases = hub_leases.clone();
        async move {
            Ok(hub_leases.get_opt(ADDON).await?.filter(|l| {
                kube::ResourceExt::owner_references(l)
                    .iter()
                    .any(|o| o.kind == "ManagedClusterAddOn" && o.name == ADDON)
            }))
        }
    })
    .await;

    // The add-on's status says its certificate was rotated in.
    let addons: Api<flotilla_api::addon::v1alpha1::ManagedClusterAddOn> =
        Api::namespaced(hub_client.clone(), "cluster1");
    await_or_logs(state, "ClusterCertificateRotated True", || {
        let addons = addons.clone();
        async move {
            Ok(addons.get_opt(ADDON).await?.filter(|a| {
                a.status.as_ref().is_some_and(|s| {
                    s.conditions.iter().any(|c| {
                        c.type_ == "ClusterCertificateRotated"
                            && c.status == "True"
                            && c.reason == "ClientCertificateUpdated"
                    })
                })
            }))
        }
    })
    .await;

    // Disabled: the hub permissions and the secret go.
    ok(flotilla_at(
        state,
        admin,
        &["addon", "disable", "--names", ADDON, "--clusters", "cluster1"],
    ));
    await_or_logs(
        state,
        "hub permissions, the add-on secret and its lease removed",
        || {
            let (hub_client, secrets, hub_leases) = (hub_client.clone(), secrets.clone(), hub_leases.clone());
            async move {
                if hub_leases.get_opt(ADDON).await?.is_some() {
                    return Ok(None);
                }
                let role = Api::<Role>::namespaced(hub_client.clone(), "cluster1")
                    .get_opt(HUB_RBAC)
                    .await?;
                let binding = Api::<RoleBinding>::namespaced(hub_client, "cluster1")
                    .get_opt(HUB_RBAC)
                    .await?;
                let secret = secrets.get_opt(SECRET).await?;
                Ok((role.is_none() && binding.is_none() && secret.is_none()).then_some(()))
            }
        },
    )
    .await;

    // custom-signer: its certificate is signed by the hub with the CA its AddOnPlugin names.
    let ca = flotilla_testing::pki::CertificateAuthority::new("custom-signer e2e CA").unwrap();
    let ca_secret = Secret {
        metadata: ObjectMeta {
            name: Some("custom-signer-ca".into()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(std::collections::BTreeMap::from([
            (
                "tls.crt".to_owned(),
                k8s_openapi::ByteString(ca.cert_pem().as_bytes().to_vec()),
            ),
            (
                "tls.key".to_owned(),
                k8s_openapi::ByteString(ca.key_pem().as_bytes().to_vec()),
            ),
        ])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(hub_client.clone(), "open-cluster-management-hub")
        .create(&PostParams::default(), &ca_secret)
        .await
        .unwrap();
    common::register_plugin(state, admin, registry, "custom-signer", plugins::CUSTOM_SIGNER);
    let merge = |value: serde_json::Value| kube::api::Patch::Merge(value);
    // The hub admin grants the hub this add-on's signer, as deploy/hub says to.
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(hub_client.clone())
        .patch(
            "flotilla:hub:addon-signers",
            &kube::api::PatchParams::default(),
            &merge(
                serde_json::json!({"rules": [{"apiGroups": ["certificates.k8s.io"],
                "resources": ["signers"], "resourceNames": ["example.com/custom-signer"],
                "verbs": ["approve", "sign"]}]}),
            ),
        )
        .await
        .unwrap();
    Api::<flotilla_api::plugins::v1alpha1::AddOnPlugin>::all(hub_client.clone())
        .patch(
            "custom-signer",
            &kube::api::PatchParams::default(),
            &merge(
                serde_json::json!({"spec": {"signers": [{"signerName": "example.com/custom-signer",
                "caSecretRef": {"namespace": "open-cluster-management-hub", "name": "custom-signer-ca"}}]}}),
            ),
        )
        .await
        .unwrap();
    Api::<flotilla_api::cluster::v1::ManagedCluster>::all(hub_client.clone())
        .patch(
            "cluster1",
            &kube::api::PatchParams::default(),
            &merge(
                serde_json::json!({"metadata": {"labels": {"custom-signer.example.com/enabled": "true"}}}),
            ),
        )
        .await
        .unwrap();
    ok(flotilla_at(
        state,
        admin,
        &[
            "addon",
            "enable",
            "--names",
            "custom-signer",
            "--clusters",
            "cluster1",
        ],
    ));
    let custom_secret = "custom-signer-example.com-custom-signer-client-cert";
    let custom = await_or_logs(state, "custom-signer client cert on cluster1", || {
        let secrets = secrets.clone();
        async move { secrets.get_opt(custom_secret).await }
    })
    .await;
    let data = custom.data.as_ref().unwrap();
    let mut keys: Vec<&str> = data.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["cluster-name", "tls.crt", "tls.key"]);
    use der::DecodePem;
    let certificate = x509_cert::Certificate::from_pem(&data["tls.crt"].0).unwrap();
    assert_eq!(
        certificate.tbs_certificate().issuer().to_string(),
        "CN=custom-signer e2e CA"
    );
    let info = flotilla_core::x509::parse_certificate(&data["tls.crt"].0).unwrap();
    assert_eq!(info.subject.common_name, "custom-signer-agent:cluster1");
    ok(flotilla_at(
        state,
        admin,
        &[
            "addon",
            "disable",
            "--names",
            "custom-signer",
            "--clusters",
            "cluster1",
        ],
    ));
    await_or_logs(state, "custom-signer secrets removed", || {
        let secrets = secrets.clone();
        async move {
            let custom = secrets.get_opt(custom_secret).await?;
            let kube_client = secrets.get_opt("custom-signer-hub-kubeconfig").await?;
            Ok((custom.is_none() && kube_client.is_none()).then_some(()))
        }
    })
    .await;
}
