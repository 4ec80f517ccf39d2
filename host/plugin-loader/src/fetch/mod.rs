//! Fetching a plugin's bytes from its `AddOnPlugin` source, with every byte capped before it is
//! read and every digest checked before anything is compiled.
//!
//! ```text
//!   spec.source.configMap {namespace, name, key}
//!        └─ binaryData[key] (or base64 text in data[key]) ─ gzip? (magic 1f 8b) ─ inflate ≤ cap
//!   spec.source.oci {reference, pullSecretRef, insecure}
//!        ├─ pullSecretRef → kubernetes.io/dockerconfigjson → credentials for the registry
//!        ├─ manifest: config `application/vnd.wasm.config.v0+json`, one `application/wasm` layer
//!        ├─ layer size from the manifest ≤ cap, Content-Length ≤ cap, stream stops past the cap
//!        ├─ spec.verification: a cosign signature of the manifest digest by the public key
//!        └─ layer bytes hash to the manifest's layer digest
//!   then: sha256(bytes) == spec.digest (when pinned)
//! ```
//!
//! Each failure is a [`FetchError`] whose [`FetchError::reason`] is the `Fetched` condition
//! reason. The OCI half also publishes (`push`), so `flotilla plugin push` and the tests that
//! stand up a registry write exactly the layout the host reads.

mod configmap;
pub mod oci;

use flotilla_api::plugins::v1alpha1::{PluginSource, PluginVerification};

use crate::{ComponentBytes, Digest, FetchError};

/// Default cap on a plugin's bytes after decompression: the runtime's component cap.
pub const DEFAULT_MAX_BYTES: usize = 32 << 20;

/// Bytes fetched from a source, hashed once, already checked against the pinned digest.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The component bytes and their digest.
    pub component: ComponentBytes,
    /// Where they came from, for messages (`configmap ns/name[key]`, `oci <ref>@<manifest>`).
    pub origin: String,
}

/// Reads plugin bytes from ConfigMaps and OCI registries on behalf of the hub.
#[derive(Clone)]
pub struct Fetcher {
    client: kube::Client,
    max_bytes: usize,
    /// Longest a whole fetch may take: the per-request connect and read timeouts do not bound
    /// a registry that sends a byte just often enough to keep each read alive.
    deadline: Option<std::time::Duration>,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("max_bytes", &self.max_bytes)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl Fetcher {
    /// A fetcher reading ConfigMaps and pull secrets with `client`, accepting at most
    /// `max_bytes` of component (decompressed).
    pub fn new(client: kube::Client, max_bytes: usize) -> Self {
        Self {
            client,
            max_bytes,
            deadline: None,
        }
    }

    /// The same fetcher, giving up on a fetch (every request of it) after `deadline`.
    pub fn with_deadline(self, deadline: std::time::Duration) -> Self {
        Self {
            deadline: Some(deadline),
            ..self
        }
    }

    /// The cap on a component's size.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Fetches the bytes `source` names and checks them against `expected` when it is set, and
    /// against the signature `verification` asks for (OCI sources only).
    /// The whole fetch ends within the fetcher's deadline, if it has one.
    pub async fn fetch(
        &self,
        source: &PluginSource,
        verification: Option<&PluginVerification>,
        expected: Option<Digest>,
    ) -> Result<Fetched, FetchError> {
        let fetch = self.fetch_unbounded(source, verification, expected);
        let Some(deadline) = self.deadline else {
            return fetch.await;
        };
        match tokio::time::timeout(deadline, fetch).await {
            Ok(fetched) => fetched,
            Err(_) => Err(FetchError::TimedOut {
                origin: describe_source(source),
                after: deadline,
            }),
        }
    }

    async fn fetch_unbounded(
        &self,
        source: &PluginSource,
        verification: Option<&PluginVerification>,
        expected: Option<Digest>,
    ) -> Result<Fetched, FetchError> {
        let public_key = verification.map(|v| v.public_key.as_str());
        let fetched = match (&source.config_map, &source.oci) {
            (Some(cm), None) if public_key.is_some() => {
                return Err(FetchError::SignatureMissing {
                    reference: format!("configmap {}/{}", cm.namespace, cm.name),
                    message:
                        "a ConfigMap source cannot carry a signature; spec.verification needs an OCI source"
                            .to_owned(),
                });
            }
            (Some(cm), None) => configmap::fetch(&self.client, cm, self.max_bytes).await?,
            (None, Some(oci)) => {
                let auth = match &oci.pull_secret_ref {
                    Some(secret) => {
                        let registry = oci::registry_of(&oci.reference)?;
                        oci::auth_from_secret(&self.client, secret, &registry).await?
                    }
                    None => oci::RegistryAuth::Anonymous,
                };
                oci::pull(&oci.reference, &auth, oci.insecure, self.max_bytes, public_key).await?
            }
            _ => return Err(FetchError::InvalidSource),
        };
        check_pinned(fetched, expected)
    }
}

/// Where `source` reads from, for messages: the registry and reference, or the ConfigMap.
fn describe_source(source: &PluginSource) -> String {
    match (&source.config_map, &source.oci) {
        (Some(cm), _) => format!("ConfigMap {}/{}", cm.namespace, cm.name),
        (None, Some(oci)) => match oci::registry_of(&oci.reference) {
            Ok(registry) => format!("registry {registry} ({})", oci.reference),
            Err(_) => format!("OCI reference {}", oci.reference),
        },
        (None, None) => "an empty source".to_owned(),
    }
}

/// Refuses bytes that do not hash to the pinned digest.
pub fn check_pinned(fetched: Fetched, expected: Option<Digest>) -> Result<Fetched, FetchError> {
    match expected {
        Some(expected) if expected != fetched.component.digest() => Err(FetchError::DigestMismatch {
            expected,
            actual: fetched.component.digest(),
        }),
        _ => Ok(fetched),
    }
}

/// Decompresses `data` if it starts with the gzip magic bytes, reading at most `max_bytes`;
/// returns other data unchanged (after the same cap).
pub fn maybe_gunzip(what: &str, data: &[u8], max_bytes: usize) -> Result<Vec<u8>, FetchError> {
    use std::io::Read as _;

    if !data.starts_with(&[0x1f, 0x8b]) {
        if data.len() > max_bytes {
            return Err(FetchError::TooLarge {
                what: what.to_owned(),
                limit: max_bytes,
            });
        }
        return Ok(data.to_vec());
    }
    let mut out = Vec::new();
    // One byte past the cap tells "exactly the cap" from "more": a gzip bomb stops there.
    let limit = u64::try_from(max_bytes).unwrap_or(u64::MAX).saturating_add(1);
    flate2::read::GzDecoder::new(data)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| FetchError::InvalidEncoding {
            what: format!("{what} (gzip)"),
            reason: e.to_string(),
        })?;
    if out.len() > max_bytes {
        return Err(FetchError::TooLarge {
            what: format!("{what} (decompressed)"),
            limit: max_bytes,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn gzip_is_detected_by_magic_bytes_and_plain_data_passes_through() {
        let wasm = b"\0asm\x0d\0\x01\0rest".to_vec();
        assert_eq!(maybe_gunzip("x", &wasm, 1024).unwrap(), wasm);
        assert_eq!(maybe_gunzip("x", &gzip(&wasm), 1024).unwrap(), wasm);
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_cap() {
        let bomb = gzip(&vec![0u8; 10 << 20]);
        assert!(bomb.len() < 64 << 10);
        let err = maybe_gunzip("cm", &bomb, 1 << 20).unwrap_err();
        assert_eq!(err.reason(), "TooLarge", "{err}");
        assert!(maybe_gunzip("cm", &bomb, 10 << 20).is_ok());
    }

    #[test]
    fn corrupt_gzip_is_an_encoding_error() {
        let mut broken = gzip(b"hello world, hello world");
        let n = broken.len();
        broken.truncate(n - 6);
        let err = maybe_gunzip("cm", &broken, 1024).unwrap_err();
        assert_eq!(err.reason(), "InvalidEncoding", "{err}");
    }

    #[test]
    fn a_pinned_digest_refuses_other_bytes() {
        let fetched = Fetched {
            component: ComponentBytes::new(b"a".to_vec()),
            origin: "test".into(),
        };
        assert!(check_pinned(fetched.clone(), Some(Digest::of(b"a"))).is_ok());
        assert!(check_pinned(fetched.clone(), None).is_ok());
        let err = check_pinned(fetched, Some(Digest::of(b"b"))).unwrap_err();
        assert_eq!(err.reason(), "DigestMismatch");
    }
}
