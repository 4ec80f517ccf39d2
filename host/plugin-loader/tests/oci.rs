//! Plugins through a real OCI registry (the CNCF distribution registry on loopback): pushed with
//! the library function `flotilla plugin push` uses, pulled the way the hub pulls them, and every
//! refusal named. Status conditions for the same faults are in `controller.rs`.

use crate::common;

use common::{addon, cluster, runtime};
use flotilla_plugin_loader::FetchError;
use flotilla_plugin_loader::fetch::oci::{self, RegistryAuth, WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE};
use flotilla_test_plugins as plugins;
use flotilla_testing::registry::Registry;
use flotilla_wasm::{Digest, Limits};
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::OciImageManifest;

const MAX: usize = 32 << 20;

fn bytes(path: &str) -> Vec<u8> {
    std::fs::read(path).expect("plugin component was built")
}

#[tokio::test]
async fn a_pushed_plugin_pulls_back_byte_for_byte_and_runs() {
    let registry = Registry::start().await.unwrap();
    let wasm = bytes(plugins::HELLOWORLD);
    let reference = registry.reference("plugins/helloworld", "v1");
    let pushed = oci::push(&wasm, &reference, &RegistryAuth::Anonymous, true)
        .await
        .unwrap();
    assert_eq!(pushed.digest, Digest::of(&wasm));
    assert!(pushed.manifest_digest.starts_with("sha256:"));

    let fetched = oci::pull(&reference, &RegistryAuth::Anonymous, true, MAX, None)
        .await
        .unwrap();
    assert_eq!(fetched.component.as_slice(), wasm.as_slice());
    assert_eq!(fetched.component.digest(), pushed.digest);

    // Pinned by manifest digest as well.
    let by_digest = format!(
        "{}/plugins/helloworld@{}",
        registry.host(),
        pushed.manifest_digest
    );
    let fetched = oci::pull(&by_digest, &RegistryAuth::Anonymous, true, MAX, None)
        .await
        .unwrap();
    assert_eq!(fetched.component.digest(), pushed.digest);

    let plugin = runtime()
        .load("helloworld", fetched.component, Limits::default())
        .await
        .unwrap();
    let objects = plugin
        .manifests(&cluster("cluster1"), &addon("helloworld"), &[])
        .await
        .unwrap();
    assert_eq!(objects.len(), 4);
}

#[tokio::test]
async fn the_pushed_artifact_has_the_cncf_wasm_layout() {
    let registry = Registry::start().await.unwrap();
    let wasm = bytes(plugins::REVISION_B);
    let reference = registry.reference("plugins/layout", "v1");
    oci::push(&wasm, &reference, &RegistryAuth::Anonymous, true)
        .await
        .unwrap();

    let client = plain_client();
    let parsed: oci_client::Reference = reference.parse().unwrap();
    let (manifest, _digest, config) = client
        .pull_manifest_and_config(&parsed, &RegistryAuth::Anonymous)
        .await
        .unwrap();
    assert_eq!(manifest.config.media_type, WASM_CONFIG_MEDIA_TYPE);
    assert_eq!(manifest.layers.len(), 1);
    assert_eq!(manifest.layers[0].media_type, WASM_LAYER_MEDIA_TYPE);
    assert_eq!(manifest.layers[0].digest, Digest::of(&wasm).to_string());
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    assert_eq!(config["architecture"], "wasm");
    assert_eq!(config["os"], "wasip2");
    assert_eq!(config["layerDigests"][0], Digest::of(&wasm).to_string());
    let exports = config["component"]["exports"].as_array().unwrap();
    assert!(
        exports.iter().any(|e| e == "flotilla:addon/hooks@0.1.0"),
        "{config}"
    );
}

fn plain_client() -> oci_client::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    oci_client::Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    })
}

/// Pushes `layer` under a CNCF-layout manifest without the host's checks (to build bad
/// artifacts), returning the layer digest.
async fn push_raw(reference: &str, layer: Vec<u8>, layer_media_type: &str) -> String {
    let client = plain_client();
    let parsed: oci_client::Reference = reference.parse().expect("raw push");
    let config = Config::new(
        br#"{"architecture":"wasm","os":"wasip2"}"#.to_vec(),
        WASM_CONFIG_MEDIA_TYPE.to_owned(),
        None,
    );
    let layer = ImageLayer::new(layer, layer_media_type.to_owned(), None);
    let digest = layer.sha256_digest();
    let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    client
        .push(
            &parsed,
            &[layer],
            config,
            &RegistryAuth::Anonymous,
            Some(manifest),
        )
        .await
        .expect("raw push");
    digest
}

#[tokio::test]
async fn faults_are_named_when_pulling() {
    let registry = Registry::start().await.unwrap();
    let anonymous = RegistryAuth::Anonymous;
    let wasm = bytes(plugins::HELLOWORLD);

    // No such manifest.
    let err = oci::pull(
        &registry.reference("plugins/none", "v1"),
        &anonymous,
        true,
        MAX,
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(err.reason(), "ManifestNotFound", "{err}");

    // A layer larger than the cap, refused from the manifest's size before any byte is read.
    let reference = registry.reference("plugins/big", "v1");
    oci::push(&wasm, &reference, &anonymous, true).await.unwrap();
    let err = oci::pull(&reference, &anonymous, true, 1024, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FetchError::LayerTooLarge { actual, .. } if actual.contains("manifest")),
        "{err}"
    );

    // A legacy (non-CNCF) layer media type.
    let reference = registry.reference("plugins/legacy", "v1");
    push_raw(
        &reference,
        wasm.clone(),
        "application/vnd.wasm.content.layer.v1+wasm",
    )
    .await;
    let err = oci::pull(&reference, &anonymous, true, MAX, None)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "NotAWasmArtifact", "{err}");

    // A tampered blob: same size, one byte flipped in the registry's storage.
    let reference = registry.reference("plugins/tampered", "v1");
    let pushed = oci::push(&bytes(plugins::REVISION_B), &reference, &anonymous, true)
        .await
        .unwrap();
    let blob = registry.blob_path(&pushed.digest.to_string());
    let mut data = std::fs::read(&blob).unwrap();
    let last = data.len() - 1;
    data[last] ^= 0xff;
    std::fs::write(&blob, data).unwrap();
    let err = oci::pull(&reference, &anonymous, true, MAX, None)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "LayerDigestMismatch", "{err}");

    // A missing layer: the blob deleted from storage.
    let reference = registry.reference("plugins/missing", "v1");
    let pushed = oci::push(&bytes(plugins::HOSTILE_TRAP), &reference, &anonymous, true)
        .await
        .unwrap();
    std::fs::remove_dir_all(registry.blob_path(&pushed.digest.to_string()).parent().unwrap()).unwrap();
    let err = oci::pull(&reference, &anonymous, true, MAX, None)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "LayerMissing", "{err}");

    // The registry down.
    let reference = registry.reference("plugins/helloworld", "v1");
    let mut registry = registry;
    registry.stop();
    let err = oci::pull(&reference, &anonymous, true, MAX, None)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "RegistryUnreachable", "{err}");
}

#[tokio::test]
async fn a_registry_with_auth_needs_the_right_credentials() {
    let registry = Registry::builder()
        .htpasswd("alice", "s3cret")
        .start()
        .await
        .unwrap();
    let reference = registry.reference("plugins/private", "v1");
    let alice = RegistryAuth::Basic("alice".into(), "s3cret".into());
    let err = oci::push(
        &bytes(plugins::HELLOWORLD),
        &reference,
        &RegistryAuth::Anonymous,
        true,
    )
    .await
    .unwrap_err();
    assert_eq!(err.reason(), "RegistryUnauthorized", "{err}");
    oci::push(&bytes(plugins::HELLOWORLD), &reference, &alice, true)
        .await
        .unwrap();

    assert!(oci::pull(&reference, &alice, true, MAX, None).await.is_ok());
    for wrong in [
        RegistryAuth::Anonymous,
        RegistryAuth::Basic("alice".into(), "wrong".into()),
    ] {
        let err = oci::pull(&reference, &wrong, true, MAX, None).await.unwrap_err();
        assert_eq!(err.reason(), "RegistryUnauthorized", "{err}");
    }

    // The docker config a pull secret holds resolves to the same credentials.
    let config = registry.docker_config_json("alice", "s3cret");
    let auth = oci::credentials_for(config.as_bytes(), &registry.host())
        .unwrap()
        .unwrap();
    assert!(oci::pull(&reference, &auth, true, MAX, None).await.is_ok());
}
