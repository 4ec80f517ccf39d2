//! The add-on CRDs' v1alpha1 ⇄ v1beta1 conversion through the hub's webhook, on a real
//! apiserver that asks it.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use std::time::Duration;

use flotilla_testing::wait;
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;

/// A hub of these tests' own and a webhook server on loopback.
async fn hub_with_webhook() -> (
    &'static flotilla_testing::ControlPlane,
    kube::Client,
    flotilla_webhook::Webhook,
) {
    let hub = flotilla_testing::shared("webhook-hub").await.unwrap();
    let admin = hub.admin_client().await.unwrap();
    let webhook = flotilla_webhook::serve_on_loopback().await.unwrap();
    (hub, admin, webhook)
}

async fn namespace(client: &kube::Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    let _ = Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await;
}

/// A ClusterManagementAddOn and a ManagedClusterAddOn written in one version and read in the
/// other through the hub's conversion webhook keep every field (the deprecated ones included);
/// kubectl reads both versions; with the webhook down the apiserver says so and nothing is
/// stored half-converted.
// Multi-threaded: the webhook server runs on this runtime while the test waits on kubectl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_ons_convert_between_v1alpha1_and_v1beta1_through_the_hub_s_webhook() {
    use flotilla_api::addon::{consts::KUBE_APISERVER_CLIENT_SIGNER, v1alpha1 as a1, v1beta1 as b1};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

    let (hub, admin, webhook) = hub_with_webhook().await;
    let url = flotilla_webhook::Endpoint::Url(format!(
        "https://{}{}",
        webhook.addr,
        flotilla_webhook::CONVERT_PATH
    ));
    flotilla_webhook::register_conversion(&admin, &url, &webhook.ca_pem)
        .await
        .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for name in flotilla_webhook::CONVERTED_CRDS {
        let crd = crds.get(name).await.unwrap();
        assert_eq!(
            crd.spec.conversion.map(|c| c.strategy).as_deref(),
            Some("Webhook"),
            "{name}"
        );
    }

    // Written as v1alpha1 with the deprecated field and a supported config without default.
    let alpha_cmas: Api<a1::ClusterManagementAddOn> = Api::all(admin.clone());
    let beta_cmas: Api<b1::ClusterManagementAddOn> = Api::all(admin.clone());
    let cma: a1::ClusterManagementAddOn = serde_json::from_value(json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ClusterManagementAddOn",
        "metadata": {"name": "conversion-cma"},
        "spec": {
            "addOnMeta": {"displayName": "Conversion"},
            "addOnConfiguration": {"crdName": "configs.example.com"},
            "supportedConfigs": [
                {"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs"},
                {"group": "addon.open-cluster-management.io", "resource": "addontemplates", "defaultConfig": {"name": "t1"}},
            ],
        },
    }))
    .unwrap();
    alpha_cmas.create(&PostParams::default(), &cma).await.unwrap();
    // The apiserver picks up the CRD's new conversion a moment after the patch.
    let mut beta = wait::until(
        "the v1beta1 view is converted",
        Duration::from_secs(30),
        || async {
            let view = beta_cmas.get("conversion-cma").await.map_err(|e| e.to_string())?;
            Ok::<_, String>((view.spec.default_configs.len() == 2).then_some(view))
        },
    )
    .await
    .unwrap();
    assert_eq!(
        beta.spec.default_configs[0].referent.name,
        "__reserved_no_default__"
    );
    assert_eq!(beta.spec.default_configs[1].referent.name, "t1");
    // A v1beta1 client's read-modify-write keeps what only v1alpha1 has.
    beta.spec.add_on_meta.description = "edited through v1beta1".into();
    beta_cmas
        .replace("conversion-cma", &PostParams::default(), &beta)
        .await
        .unwrap();
    let stored = alpha_cmas.get("conversion-cma").await.unwrap();
    assert_eq!(stored.spec.add_on_configuration.crd_name, "configs.example.com");
    assert_eq!(stored.spec.add_on_meta.description, "edited through v1beta1");
    assert_eq!(stored.spec.supported_configs[0].default_config, None);
    assert_eq!(
        stored.spec.supported_configs[1]
            .default_config
            .as_ref()
            .map(|c| c.name.as_str()),
        Some("t1")
    );
    assert!(stored.annotations().is_empty(), "{:?}", stored.annotations());

    // Written as v1beta1 (install namespace in the annotation, typed registrations).
    namespace(&admin, "conversion-c1").await;
    let alpha_mcas: Api<a1::ManagedClusterAddOn> = Api::namespaced(admin.clone(), "conversion-c1");
    let beta_mcas: Api<b1::ManagedClusterAddOn> = Api::namespaced(admin.clone(), "conversion-c1");
    let mca: b1::ManagedClusterAddOn = serde_json::from_value(json!({
        "apiVersion": "addon.open-cluster-management.io/v1beta1", "kind": "ManagedClusterAddOn",
        "metadata": {"name": "conversion-mca", "annotations": {
            "addon.open-cluster-management.io/v1alpha1-install-namespace": "agents"}},
        "spec": {"configs": [{"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs", "name": "c", "namespace": "conversion-c1"}]},
    }))
    .unwrap();
    beta_mcas.create(&PostParams::default(), &mca).await.unwrap();
    let registrations = json!({"status": {"registrations": [
        {"type": "kubeClient", "kubeClient": {"subject": {"user": "agent", "groups": ["g1"]}, "driver": "token"}},
        {"type": "customSigner", "customSigner": {"signerName": "example.com/signer", "subject": {"user": "s", "organizationUnits": ["ou1"]}}},
    ]}});
    let written = beta_mcas
        .patch_status(
            "conversion-mca",
            &PatchParams::default(),
            &Patch::Merge(&registrations),
        )
        .await
        .unwrap();
    let stored = alpha_mcas.get("conversion-mca").await.unwrap();
    assert_eq!(stored.spec.install_namespace, "agents");
    assert!(stored.annotations().is_empty(), "{:?}", stored.annotations());
    let status = stored.status.unwrap();
    assert_eq!(
        status.kube_client_driver,
        Some(flotilla_api::addon::v1alpha1::KubeClientDriver::Token)
    );
    assert_eq!(status.registrations[0].signer_name, KUBE_APISERVER_CLIENT_SIGNER);
    assert_eq!(status.registrations[1].signer_name, "example.com/signer");
    assert_eq!(status.registrations[1].subject.organization_units, ["ou1"]);
    let read_back = beta_mcas.get("conversion-mca").await.unwrap();
    assert_eq!(read_back.status, written.status);
    assert_eq!(read_back.spec, mca.spec);
    assert_eq!(read_back.annotations(), mca.annotations());

    // kubectl, in the preferred version (v1beta1) and in each version by name.
    let kubectl = |args: &[&str]| {
        let out = hub.kubectl().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let table = kubectl(&["get", "mca", "-n", "conversion-c1"]);
    assert!(
        table.contains("conversion-mca") && table.contains("AVAILABLE"),
        "{table}"
    );
    for (version, has) in [
        (
            "v1beta1",
            "\"addon.open-cluster-management.io/v1alpha1-install-namespace\": \"agents\"",
        ),
        ("v1alpha1", "\"installNamespace\": \"agents\""),
    ] {
        let resource = format!("managedclusteraddons.{version}.addon.open-cluster-management.io");
        let json = kubectl(&[
            "get",
            &resource,
            "conversion-mca",
            "-n",
            "conversion-c1",
            "-o",
            "json",
        ]);
        assert!(json.contains(has), "{version}: {json}");
    }

    // An installer applying the CRDs again resets their conversion; the hub points it back.
    let keeper = tokio::spawn(flotilla_webhook::keep_conversion(
        admin.clone(),
        url.clone(),
        webhook.ca_pem.clone(),
    ));
    let reset = json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}});
    for name in flotilla_webhook::CONVERTED_CRDS {
        crds.patch(name, &PatchParams::default(), &Patch::Merge(&reset))
            .await
            .unwrap();
    }
    for name in flotilla_webhook::CONVERTED_CRDS {
        wait::until(
            "the conversion is pointed back at the webhook",
            Duration::from_secs(30),
            || async {
                let crd = crds.get(name).await.map_err(|e| e.to_string())?;
                Ok::<_, String>(flotilla_webhook::converts_through(&crd, &url, &webhook.ca_pem).then_some(()))
            },
        )
        .await
        .unwrap();
    }
    keeper.abort();

    // The webhook down: v1beta1 fails with the apiserver's reason, v1alpha1 still reads, and a
    // v1beta1 create stores nothing.
    drop(webhook);
    // The apiserver takes up a CRD's conversion a moment after the CRD changes (the reset above
    // may still be served): retry until the read fails for want of the webhook.
    let message = wait::until(
        "v1beta1 reads fail without the webhook",
        Duration::from_secs(30),
        || async {
            match beta_mcas.get("conversion-mca").await {
                Err(kube::Error::Api(status)) => Ok(Some(status.message)),
                other => Err(format!("expected a conversion failure, got {other:?}")),
            }
        },
    )
    .await
    .unwrap();
    assert!(message.contains("conversion webhook"), "{message}");
    alpha_mcas.get("conversion-mca").await.unwrap();
    let mut another = mca.clone();
    another.metadata.name = Some("half".into());
    assert!(beta_mcas.create(&PostParams::default(), &another).await.is_err());
    let half = alpha_mcas.get_opt("half").await;
    assert!(matches!(half, Ok(None)), "{half:?}");
}
