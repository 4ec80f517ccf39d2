//! The plugin host inside `flotilla hub`, end to end: the real binary runs as the hub's service
//! account (deploy/hub), a component published and signed with the real `flotilla plugin push
//! --sign` to a real OCI registry (its AddOnPlugin requires the signature) and one from a
//! ConfigMap become `Ready`, and a bad one becomes `Degraded` with the fault named — all through
//! `AddOnPlugin` objects, as an admin would use them.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::{flotilla_at, hub_service_account, ok, pushed_digest, start_hub};

use flotilla_api::plugins::v1alpha1::{
    AddOnPlugin, AddOnPluginSpec, AddOnPluginStatus, ConfigMapSource, OciSource, PluginSource,
    PluginVerification,
};
use flotilla_test_plugins as plugins;
use flotilla_testing::registry::Registry;
use flotilla_testing::{ControlPlane, wait};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{Patch, PatchParams};

const NS: &str = "plugin-sources";

fn flotilla(state: &Path, kubeconfig: &Path, args: &[&str]) -> Output {
    flotilla_at(state, kubeconfig, args)
}

fn plugin(name: &str, source: PluginSource, digest: Option<&str>) -> AddOnPlugin {
    AddOnPlugin::new(
        name,
        AddOnPluginSpec {
            source,
            digest: digest.map(str::to_owned),
            ..AddOnPluginSpec::default()
        },
    )
}

fn config_map_source(name: &str) -> PluginSource {
    PluginSource {
        config_map: Some(ConfigMapSource {
            namespace: NS.into(),
            name: name.into(),
            key: "plugin.wasm".into(),
        }),
        oci: None,
    }
}

/// A fixed ECDSA P-256 key pair: PKCS#8 private key for `--sign`, public key for the spec.
fn key_pair() -> (String, String) {
    use p256::pkcs8::{EncodePrivateKey as _, EncodePublicKey as _, LineEnding};
    let secret = p256::SecretKey::from_slice(&[42; 32]).unwrap();
    let private = secret.to_pkcs8_pem(LineEnding::LF).unwrap().to_string();
    let public = secret.public_key().to_public_key_pem(LineEnding::LF).unwrap();
    (private, public)
}

/// What an expected status must satisfy.
type StatusCheck = fn(&AddOnPluginStatus) -> bool;

fn has(status: &AddOnPluginStatus, type_: &str, value: &str, reason: &str) -> bool {
    status
        .conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == value && c.reason == reason)
}

#[tokio::test]
async fn flotilla_hub_loads_plugins_from_a_config_map_and_a_registry_and_names_a_bad_one() {
    let hub = ControlPlane::start("plugin-hub").await.unwrap();
    let state = tempfile::tempdir().unwrap();
    let state = state.path();
    ok(flotilla(state, hub.admin_kubeconfig(), &["init"]));

    // The hub runs as the service account of deploy/hub, proving its ClusterRole suffices.
    let hub_identity = hub_service_account(&hub, state);

    // Publish and sign with the CLI, as a plugin author would; the hub requires the signature.
    let (private_key, public_key) = key_pair();
    let key_file = state.join("cosign.key");
    std::fs::write(&key_file, private_key).unwrap();
    let registry = Registry::start().await.unwrap();
    let reference = registry.reference("plugins/helloworld", "v1");
    let pushed = ok(flotilla(
        state,
        hub.admin_kubeconfig(),
        &[
            "plugin",
            "push",
            plugins::HELLOWORLD,
            &reference,
            "--insecure",
            "--sign",
            key_file.to_str().unwrap(),
        ],
    ));
    assert!(pushed.contains("signed:") && pushed.contains(".sig"), "{pushed}");
    let digest = pushed_digest(&pushed);
    assert!(digest.starts_with("sha256:"), "{pushed}");

    let client = hub.admin_client().await.unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": NS}})).unwrap();
    namespaces
        .patch(NS, &PatchParams::apply("test").force(), &Patch::Apply(&ns))
        .await
        .unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    for (name, path) in [
        ("revision-b", plugins::REVISION_B),
        ("describe-trap", plugins::HOSTILE_DESCRIBE_TRAP),
    ] {
        let cm = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            binary_data: Some(BTreeMap::from([(
                "plugin.wasm".to_owned(),
                ByteString(std::fs::read(path).unwrap()),
            )])),
            ..Default::default()
        };
        config_maps
            .patch(name, &PatchParams::apply("test").force(), &Patch::Apply(&cm))
            .await
            .unwrap();
    }

    let hub_log_path = state.join("hub.log");
    let cache = state.join("plugin-artifacts");
    let _hub_process = start_hub(
        &hub_identity,
        &hub_log_path,
        &[
            "--plugin-cache-dir",
            cache.to_str().unwrap(),
            "--plugin-resync-seconds=600",
        ],
    );

    let plugins_api: Api<AddOnPlugin> = Api::all(client.clone());
    let mut from_registry = plugin(
        "from-registry",
        PluginSource {
            config_map: None,
            oci: Some(OciSource {
                reference: reference.clone(),
                pull_secret_ref: None,
                insecure: true,
            }),
        },
        Some(&digest),
    );
    from_registry.spec.verification = Some(PluginVerification { public_key });
    let objects = [
        plugin("from-configmap", config_map_source("revision-b"), None),
        from_registry,
        plugin("bad", config_map_source("describe-trap"), None),
    ];
    for object in &objects {
        let name = object.metadata.name.clone().unwrap();
        plugins_api
            .patch(&name, &PatchParams::apply("test").force(), &Patch::Apply(object))
            .await
            .unwrap();
    }

    let expectations: [(&str, StatusCheck); 3] = [
        ("from-configmap", |s| {
            has(s, "Ready", "True", "Ready") && has(s, "Degraded", "False", "AsExpected")
        }),
        ("from-registry", |s| {
            has(s, "Ready", "True", "Ready") && has(s, "Fetched", "True", "Fetched")
        }),
        ("bad", |s| {
            has(s, "Degraded", "True", "RevisionRejected") && has(s, "Validated", "False", "DescribeFailed")
        }),
    ];
    for (name, check) in expectations {
        let api = plugins_api.clone();
        let result = wait::until(&format!("AddOnPlugin {name}"), Duration::from_secs(120), || {
            let api = api.clone();
            async move {
                let status = api.get(name).await?.status.unwrap_or_default();
                Ok::<_, kube::Error>(check(&status).then_some(status))
            }
        })
        .await;
        let status = match result {
            Ok(status) => status,
            Err(e) => {
                let last = plugins_api.get(name).await.ok().and_then(|p| p.status);
                let log = std::fs::read_to_string(&hub_log_path).unwrap_or_default();
                panic!("{e}\nlast status: {last:?}\nhub log:\n{log}");
            }
        };
        if name == "from-registry" {
            assert_eq!(
                status.digest.as_deref(),
                Some(digest.as_str()),
                "the pushed bytes serve"
            );
            assert!(status.describe.is_some(), "describe() answered");
        }
        if name == "bad" {
            let message = &status
                .conditions
                .iter()
                .find(|c| c.type_ == "Validated")
                .unwrap()
                .message;
            assert!(message.contains("describe"), "{message}");
        }
    }

    // kubectl shows the plugin table an admin reads.
    let listed = hub.kubectl().args(["get", "addonplugins"]).output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("from-registry") && l.contains("True")),
        "{listed}"
    );
}
