//! Fuzzes the readers of what a registry (or a pull secret) gives the hub when it pulls a plugin
//! (`flotilla_oci`). The first input byte picks what the rest is:
//!
//! ```text
//!  0 mod 3   the manifest a plugin reference resolves to (read_wasm_manifest)
//!  1 mod 3   the cosign signature manifest beside it (read_signature_manifest)
//!  2 mod 3   a registry line, then a docker config (credentials_for, credentials_in_dockercfg)
//! ```
//!
//! Properties, each reading checked against the same bytes read as untyped JSON: no panic; the
//! same answer twice. An accepted Wasm manifest is no image index (no index media type, no
//! `manifests`), has the Wasm config media type and exactly one layer, of type
//! `application/wasm`, and the descriptors returned are those; a manifest in that layout that
//! parses is accepted. A signature manifest yields exactly its simple-signing layers, in order,
//! each with its signature annotation. Credentials found are an entry's username and password,
//! its base64 `auth` split at the first `:`, or its identity token.

#![no_main]

use base64::Engine as _;
use flotilla_core::cosign::{SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE};
use flotilla_oci::{
    RegistryAuth, WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE, credentials_for, credentials_in_dockercfg,
    read_signature_manifest, read_wasm_manifest,
};
use libfuzzer_sys::fuzz_target;
use oci_client::manifest::OciImageManifest;
use serde_json::Value;

const INDEX_TYPES: [&str; 2] = [
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => check_wasm_manifest(rest),
        1 => check_signature_manifest(rest),
        _ => {
            let text = String::from_utf8_lossy(rest);
            let (registry, config) = text.split_once('\n').unwrap_or((&text, ""));
            check_credentials(registry, config.as_bytes());
        }
    }
});

fn check_wasm_manifest(raw: &[u8]) {
    let first = read_wasm_manifest(raw);
    let again = read_wasm_manifest(raw);
    assert_eq!(format!("{first:?}"), format!("{again:?}"), "two readings differ");
    let untyped = serde_json::from_slice::<Value>(raw).ok();
    let Ok(artifact) = first else {
        // A parsable manifest in the layout is never refused.
        if let Some(v) = &untyped
            && in_wasm_layout(v)
            && serde_json::from_value::<OciImageManifest>(v.clone()).is_ok()
        {
            panic!("refused a Wasm manifest: {first:?}");
        }
        return;
    };
    let v = untyped.expect("an accepted manifest is JSON");
    assert!(in_wasm_layout(&v), "accepted {v}");
    assert_eq!(
        v["config"]["digest"].as_str(),
        Some(artifact.config.digest.as_str())
    );
    assert_eq!(
        v["layers"][0]["digest"].as_str(),
        Some(artifact.layer.digest.as_str())
    );
    assert_eq!(artifact.layer.media_type, WASM_LAYER_MEDIA_TYPE);
}

/// The CNCF Wasm layout, read from untyped JSON: an image manifest (not an index) with the
/// Wasm config media type and exactly one `application/wasm` layer.
fn in_wasm_layout(v: &Value) -> bool {
    let index = v.get("manifests").is_some_and(|m| !m.is_null())
        || v["mediaType"].as_str().is_some_and(|t| INDEX_TYPES.contains(&t));
    let layers = v["layers"].as_array().map(Vec::as_slice).unwrap_or_default();
    !index
        && v["config"]["mediaType"].as_str() == Some(WASM_CONFIG_MEDIA_TYPE)
        && layers.len() == 1
        && layers[0]["mediaType"].as_str() == Some(WASM_LAYER_MEDIA_TYPE)
}

fn check_signature_manifest(raw: &[u8]) {
    let first = read_signature_manifest(raw);
    let again = read_signature_manifest(raw);
    assert_eq!(format!("{first:?}"), format!("{again:?}"), "two readings differ");
    let Ok(layers) = first else {
        return;
    };
    let v: Value = serde_json::from_slice(raw).expect("an accepted manifest is JSON");
    let expected: Vec<(Option<&str>, Option<&str>)> = v["layers"]
        .as_array()
        .expect("an accepted manifest has layers")
        .iter()
        .filter(|l| l["mediaType"].as_str() == Some(SIMPLE_SIGNING_MEDIA_TYPE))
        .map(|l| {
            (
                l["digest"].as_str(),
                l["annotations"][SIGNATURE_ANNOTATION].as_str(),
            )
        })
        .collect();
    let read: Vec<(Option<&str>, Option<&str>)> = layers
        .iter()
        .map(|l| (Some(l.layer.digest.as_str()), l.signature.as_deref()))
        .collect();
    assert_eq!(
        read, expected,
        "the simple-signing layers as read, and as written"
    );
}

fn check_credentials(registry: &str, config: &[u8]) {
    let untyped = serde_json::from_slice::<Value>(config).ok();
    let readings = [
        (
            credentials_for(config, registry),
            credentials_for(config, registry),
            untyped.as_ref().map(|v| &v["auths"]),
        ),
        (
            credentials_in_dockercfg(config, registry),
            credentials_in_dockercfg(config, registry),
            untyped.as_ref(),
        ),
    ];
    for (found, again, entries) in readings {
        assert_eq!(found, again, "two readings differ");
        let Ok(Some(auth)) = found else {
            continue;
        };
        let entries = entries
            .and_then(Value::as_object)
            .expect("credentials come from a map of entries");
        let from_an_entry = entries.values().any(|e| match &auth {
            RegistryAuth::Basic(user, password) => {
                (e["username"].as_str() == Some(user) && e["password"].as_str() == Some(password))
                    || e["auth"]
                        .as_str()
                        .and_then(|a| base64::engine::general_purpose::STANDARD.decode(a.trim()).ok())
                        .is_some_and(|d| d == format!("{user}:{password}").as_bytes())
            }
            RegistryAuth::Bearer(token) => {
                e["identitytoken"].as_str() == Some(token) || e["registrytoken"].as_str() == Some(token)
            }
            RegistryAuth::Anonymous => false,
        });
        assert!(from_an_entry, "credentials {auth:?} are no entry's");
    }
}
