//! Plugin manifests in the CNCF TAG-Runtime "Wasm OCI Artifact layout" (an image manifest whose
//! config has media type `application/vnd.wasm.config.v0+json` and which has exactly one layer of
//! media type `application/wasm`), and the cosign signature manifests beside them.

use flotilla_core::cosign;
use oci_client::manifest::{
    IMAGE_MANIFEST_LIST_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE, OciDescriptor, OciImageManifest,
};
use serde_json::{Map, Value};

/// Config media type of a Wasm artifact (CNCF layout).
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// Layer media type of a Wasm artifact (CNCF layout).
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";

/// The blobs of a Wasm artifact the host reads.
#[derive(Clone, Debug)]
pub struct WasmArtifact {
    /// The config (JSON, media type [`WASM_CONFIG_MEDIA_TYPE`]).
    pub config: OciDescriptor,
    /// The one layer: the component's bytes, media type [`WASM_LAYER_MEDIA_TYPE`].
    pub layer: OciDescriptor,
}

/// One JSON object, read untyped first: a repeated key then means what it means to any JSON
/// reader (the last one wins), where the typed reader would refuse some repeats and skip others,
/// and an array is no manifest (serde reads structs from arrays too).
fn json_object(raw: &[u8], what: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_slice(raw) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(format!("{what} does not parse: not a JSON object")),
        Err(e) => Err(format!("{what} does not parse: {e}")),
    }
}

fn image_manifest(object: Map<String, Value>, what: &str) -> Result<OciImageManifest, String> {
    serde_json::from_value(Value::Object(object)).map_err(|e| format!("{what} does not parse: {e}"))
}

/// Reads the manifest bytes a registry served for a plugin reference: an image manifest in the
/// Wasm layout. An image index (or Docker manifest list) is refused by name: the host pulls one
/// artifact, not a choice of platforms, and an index also parsed as a manifest would be read
/// by whatever fields it happened to share with one.
pub fn read_wasm_manifest(raw: &[u8]) -> Result<WasmArtifact, String> {
    let object = json_object(raw, "manifest")?;
    let index_type = object
        .get("mediaType")
        .and_then(Value::as_str)
        .filter(|t| [OCI_IMAGE_INDEX_MEDIA_TYPE, IMAGE_MANIFEST_LIST_MEDIA_TYPE].contains(t));
    if let Some(t) = index_type {
        return Err(format!(
            "the registry served an image index ({t}), not the image manifest of a Wasm artifact"
        ));
    }
    if object.get("manifests").is_some_and(|m| !m.is_null()) {
        return Err(
            "the registry served an image index (it lists `manifests`), not the image manifest of a \
             Wasm artifact"
                .to_owned(),
        );
    }
    let manifest = image_manifest(object, "manifest")?;
    let layer = wasm_layer(&manifest)?;
    Ok(WasmArtifact {
        config: manifest.config,
        layer,
    })
}

/// The one `application/wasm` layer of a CNCF Wasm artifact manifest.
pub fn wasm_layer(manifest: &OciImageManifest) -> Result<OciDescriptor, String> {
    if manifest.config.media_type != WASM_CONFIG_MEDIA_TYPE {
        return Err(format!(
            "config media type is {:?}, want {WASM_CONFIG_MEDIA_TYPE:?}",
            manifest.config.media_type
        ));
    }
    match manifest.layers.as_slice() {
        [layer] if layer.media_type == WASM_LAYER_MEDIA_TYPE => Ok(layer.clone()),
        [layer] => Err(format!(
            "layer media type is {:?}, want {WASM_LAYER_MEDIA_TYPE:?}",
            layer.media_type
        )),
        layers => Err(format!(
            "{} layers, want exactly one {WASM_LAYER_MEDIA_TYPE:?} layer",
            layers.len()
        )),
    }
}

/// A simple-signing layer of a cosign signature manifest.
#[derive(Clone, Debug)]
pub struct SignatureLayer {
    /// The layer (its blob is the signed payload).
    pub layer: OciDescriptor,
    /// Its [`cosign::SIGNATURE_ANNOTATION`], `None` when the layer has none.
    pub signature: Option<String>,
}

/// The simple-signing layers of a cosign signature manifest, in manifest order, with their
/// signatures; layers of any other media type are not signatures and are left out.
pub fn read_signature_manifest(raw: &[u8]) -> Result<Vec<SignatureLayer>, String> {
    let manifest = image_manifest(json_object(raw, "signature manifest")?, "signature manifest")?;
    Ok(manifest
        .layers
        .into_iter()
        .filter(|l| l.media_type == cosign::SIMPLE_SIGNING_MEDIA_TYPE)
        .map(|layer| SignatureLayer {
            signature: layer
                .annotations
                .as_ref()
                .and_then(|a| a.get(cosign::SIGNATURE_ANNOTATION))
                .cloned(),
            layer,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn descriptor(media_type: &str) -> Value {
        json!({"mediaType": media_type, "digest": format!("sha256:{:064x}", media_type.len()), "size": 1})
    }

    fn manifest(config: &str, layers: &[&str]) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": descriptor(config),
            "layers": layers.iter().map(|l| descriptor(l)).collect::<Vec<_>>(),
        }))
        .unwrap_or_default()
    }

    #[test]
    fn only_the_cncf_wasm_layout_is_accepted() {
        let ok = read_wasm_manifest(&manifest(WASM_CONFIG_MEDIA_TYPE, &[WASM_LAYER_MEDIA_TYPE]));
        let ok = ok.map(|a| (a.config.media_type, a.layer.media_type));
        assert_eq!(
            ok,
            Ok((
                WASM_CONFIG_MEDIA_TYPE.to_owned(),
                WASM_LAYER_MEDIA_TYPE.to_owned()
            ))
        );
        let refused = |config, layers: &[&str]| read_wasm_manifest(&manifest(config, layers)).unwrap_err();
        let err = refused(
            "application/vnd.oci.image.config.v1+json",
            &[WASM_LAYER_MEDIA_TYPE],
        );
        assert!(err.contains("config media type"), "{err}");
        let err = refused(
            WASM_CONFIG_MEDIA_TYPE,
            &[WASM_LAYER_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE],
        );
        assert!(err.contains("2 layers"), "{err}");
        let err = refused(
            WASM_CONFIG_MEDIA_TYPE,
            &["application/vnd.wasm.content.layer.v1+wasm"],
        );
        assert!(err.contains("layer media type"), "{err}");
        let err = read_wasm_manifest(b"{\"schemaVersion\": 2}").unwrap_err();
        assert!(err.starts_with("manifest does not parse: "), "{err}");
    }

    #[test]
    fn image_indexes_are_refused_by_name() {
        let entry = json!({"mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": format!("sha256:{:064x}", 1), "size": 1,
            "platform": {"architecture": "wasm", "os": "wasip2"}});
        for media_type in [OCI_IMAGE_INDEX_MEDIA_TYPE, IMAGE_MANIFEST_LIST_MEDIA_TYPE] {
            let index = json!({"schemaVersion": 2, "mediaType": media_type, "manifests": [entry]});
            let err = read_wasm_manifest(&serde_json::to_vec(&index).unwrap_or_default()).unwrap_err();
            assert!(err.contains("image index"), "{err}");
        }
        // Without a media type, and with the fields of a Wasm manifest besides: without the
        // check, this one was read as a manifest.
        let mut index: Value =
            serde_json::from_slice(&manifest(WASM_CONFIG_MEDIA_TYPE, &[WASM_LAYER_MEDIA_TYPE]))
                .unwrap_or_default();
        index["manifests"] = json!([entry]);
        index.as_object_mut().map(|o| o.remove("mediaType"));
        let err = read_wasm_manifest(&serde_json::to_vec(&index).unwrap_or_default()).unwrap_err();
        assert!(err.contains("lists `manifests`"), "{err}");
        // Listed twice, which a typed reader skips as an unknown field.
        let text = String::from_utf8(serde_json::to_vec(&index).unwrap_or_default()).unwrap_or_default();
        let twice = text.replacen("\"manifests\":", "\"manifests\":[],\"manifests\":", 1);
        assert!(read_wasm_manifest(twice.as_bytes()).is_err(), "{twice}");
    }

    #[test]
    fn signature_manifests_yield_their_simple_signing_layers_in_order() {
        let layer = |media: &str, signature: Option<&str>| {
            let mut d = descriptor(media);
            if let Some(s) = signature {
                d["annotations"] = json!({ cosign::SIGNATURE_ANNOTATION: s, "other": "x" });
            }
            d
        };
        let raw = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "config": descriptor("application/vnd.oci.image.config.v1+json"),
            "layers": [
                layer(cosign::SIMPLE_SIGNING_MEDIA_TYPE, Some("sig-1")),
                layer("application/octet-stream", Some("ignored")),
                layer(cosign::SIMPLE_SIGNING_MEDIA_TYPE, None),
            ],
        }))
        .unwrap_or_default();
        let read = read_signature_manifest(&raw).unwrap_or_default();
        let signatures: Vec<Option<&str>> = read.iter().map(|l| l.signature.as_deref()).collect();
        assert_eq!(signatures, [Some("sig-1"), None]);
        let err = read_signature_manifest(b"[]").unwrap_err();
        assert!(err.starts_with("signature manifest does not parse: "), "{err}");
    }

    #[test]
    fn manifests_are_json_objects_read_as_any_json_reader_reads_them() {
        let wasm = manifest(WASM_CONFIG_MEDIA_TYPE, &[WASM_LAYER_MEDIA_TYPE]);
        let v: Value = serde_json::from_slice(&wasm).unwrap_or_default();
        // The same fields as an array, which serde would read into the manifest's struct.
        let fields = ["schemaVersion", "mediaType", "config", "layers"].map(|k| v[k].clone());
        let array = serde_json::to_vec(&fields).unwrap_or_default();
        let err = read_wasm_manifest(&array).unwrap_err();
        assert!(err.contains("not a JSON object"), "{err}");
        // A repeated key: the last one counts (a typed reader refuses the repeat).
        let text = String::from_utf8(wasm).unwrap_or_default();
        let repeated = text.replacen("{", "{\"mediaType\":\"x\",", 1);
        assert!(read_wasm_manifest(repeated.as_bytes()).is_ok(), "{repeated}");
        let repeated = text.replacen("{", "{\"config\":{},", 1);
        assert!(read_wasm_manifest(repeated.as_bytes()).is_ok(), "{repeated}");
    }
}
