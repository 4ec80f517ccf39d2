//! A plugin from a key of a ConfigMap: `binaryData[key]`, or base64 text in `data[key]`,
//! optionally gzip-compressed (detected by its magic bytes, inflated up to the cap).
//!
//! A ConfigMap holds at most 1 MiB, which fits small Rust components; gzip roughly triples that.

use base64::Engine as _;
use flotilla_api::plugins::v1alpha1::ConfigMapSource;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use super::{Fetched, maybe_gunzip};
use crate::{ComponentBytes, FetchError};

pub(super) async fn fetch(
    client: &kube::Client,
    source: &ConfigMapSource,
    max_bytes: usize,
) -> Result<Fetched, FetchError> {
    let what = format!("ConfigMap {}/{}", source.namespace, source.name);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &source.namespace);
    let cm = api
        .get_opt(&source.name)
        .await
        .map_err(|e| FetchError::Kube {
            what: what.clone(),
            source: e,
        })?
        .ok_or_else(|| FetchError::ConfigMapNotFound {
            namespace: source.namespace.clone(),
            name: source.name.clone(),
        })?;
    let raw = if let Some(bytes) = cm.binary_data.as_ref().and_then(|d| d.get(&source.key)) {
        bytes.0.clone()
    } else if let Some(text) = cm.data.as_ref().and_then(|d| d.get(&source.key)) {
        let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        base64::engine::general_purpose::STANDARD
            .decode(compact)
            .map_err(|e| FetchError::InvalidEncoding {
                what: format!(
                    "{what} data[{}] (want base64 text; or use binaryData)",
                    source.key
                ),
                reason: e.to_string(),
            })?
    } else {
        return Err(FetchError::ConfigMapKeyNotFound {
            namespace: source.namespace.clone(),
            name: source.name.clone(),
            key: source.key.clone(),
        });
    };
    let bytes = maybe_gunzip(&format!("{what} key {}", source.key), &raw, max_bytes)?;
    Ok(Fetched {
        component: ComponentBytes::new(bytes),
        origin: format!("configmap {}/{}[{}]", source.namespace, source.name, source.key),
    })
}
