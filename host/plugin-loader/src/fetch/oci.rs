//! Plugins as OCI artifacts in the CNCF TAG-Runtime "Wasm OCI Artifact layout": an image
//! manifest whose config has media type `application/vnd.wasm.config.v0+json` and which has
//! exactly one layer of media type `application/wasm` (the component's bytes, uncompressed).
//!
//! Pulling caps every byte before reading it: the manifest body (by `Content-Length` and while
//! streaming), and for the config and the layer the size the manifest states, the response's
//! `Content-Length`, and the bytes actually streamed (a registry may lie about the first two). The layer's digest is checked twice: by `oci-client`'s verifying stream
//! and again here over the bytes kept. Pushing writes the same layout, so what
//! `flotilla plugin push` publishes is what the hub pulls.
//!
//! Credentials come from a `kubernetes.io/dockerconfigjson` Secret (`pullSecretRef`) on the hub,
//! or a docker `config.json` for the CLI; both parse with [`credentials_for`].
//!
//! What the registry serves is read by the pure readers of `flotilla-oci` (fuzzed there); this
//! module does the requests and caps.

use std::collections::BTreeMap;
use std::sync::Once;
use std::time::Duration;

use flotilla_api::plugins::v1alpha1::SecretReference;
pub use flotilla_oci::{RegistryAuth, WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE, credentials_for};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use oci_client::RegistryOperation;
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::{Client, Reference};

use flotilla_core::cosign;
use flotilla_oci::SignatureLayer;

use super::Fetched;
use crate::{ComponentBytes, Digest, FetchError};

/// Largest manifest read. A Wasm artifact's manifest is well under 1 KiB.
pub const MAX_MANIFEST_BYTES: usize = 64 << 10;
/// Largest config blob read. A Wasm artifact's config lists the component's imports and
/// exports: a few KiB.
pub const MAX_CONFIG_BYTES: usize = 256 << 10;
/// Secret types whose docker config the host reads.
const DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";
const DOCKER_CFG: &str = "kubernetes.io/dockercfg";

/// The registry (`host[:port]`) a reference points at.
pub fn registry_of(reference: &str) -> Result<String, FetchError> {
    Ok(parse_reference(reference)?.resolve_registry().to_owned())
}

fn parse_reference(reference: &str) -> Result<Reference, FetchError> {
    reference
        .parse::<Reference>()
        .map_err(|e| FetchError::InvalidReference {
            reference: reference.to_owned(),
            reason: e.to_string(),
        })
}

/// An OCI client: plain HTTP when `insecure` (loopback test registries), HTTPS otherwise.
fn client(insecure: bool) -> Client {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        // reqwest is built without a default provider; kube uses ring too. Another part of the
        // process may have installed one already, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    Client::new(ClientConfig {
        protocol: if insecure {
            ClientProtocol::Http
        } else {
            ClientProtocol::Https
        },
        connect_timeout: Some(Duration::from_secs(10)),
        read_timeout: Some(Duration::from_secs(30)),
        ..ClientConfig::default()
    })
}

/// Pulls the component `reference` names, reading at most `max_bytes` of layer. With
/// `public_key` (PEM), the manifest must carry a cosign signature by that key, checked before
/// the layer is read.
pub async fn pull(
    reference: &str,
    auth: &RegistryAuth,
    insecure: bool,
    max_bytes: usize,
    public_key: Option<&str>,
) -> Result<Fetched, FetchError> {
    let parsed = parse_reference(reference)?;
    let registry = parsed.resolve_registry().to_owned();
    let client = client(insecure);
    let fail = |stage: Stage<'_>, e: OciDistributionError| classify(e, &registry, reference, stage);

    let (raw, manifest_digest) = pull_manifest_capped(&client, &parsed, auth, insecure, reference).await?;
    if let Some(public_key) = public_key {
        verify_signature(
            &client,
            &parsed,
            auth,
            insecure,
            reference,
            &manifest_digest,
            public_key,
        )
        .await?;
    }
    let not_wasm = |reason: String| FetchError::NotAWasmArtifact {
        reference: reference.to_owned(),
        reason,
    };
    let artifact = flotilla_oci::read_wasm_manifest(&raw).map_err(not_wasm)?;
    let layer = artifact.layer;

    // The config: read (capped, digest-checked) so a registry cannot serve an unbounded one, and
    // checked to be JSON as the layout requires.
    let config_too_large = |actual: String| FetchError::ConfigTooLarge {
        reference: reference.to_owned(),
        digest: artifact.config.digest.clone(),
        actual,
        limit: MAX_CONFIG_BYTES,
    };
    let config = read_blob(
        &client,
        &parsed,
        &artifact.config,
        MAX_CONFIG_BYTES,
        &config_too_large,
        &fail,
    )
    .await?;
    serde_json::from_slice::<serde_json::Value>(&config)
        .map_err(|e| not_wasm(format!("config is not JSON: {e}")))?;

    let too_large = |actual: String| FetchError::LayerTooLarge {
        digest: layer.digest.clone(),
        actual,
        limit: max_bytes,
    };
    let bytes = read_blob(&client, &parsed, &layer, max_bytes, &too_large, &fail).await?;
    let component = ComponentBytes::new(bytes);
    if component.digest().to_string() != layer.digest {
        return Err(FetchError::LayerDigestMismatch {
            expected: layer.digest.clone(),
            actual: component.digest().to_string(),
        });
    }
    Ok(Fetched {
        component,
        origin: format!("oci {reference} (manifest {manifest_digest})"),
    })
}

/// Reads the blob `descriptor` names, refusing it — before reading its bytes where the
/// registry says enough — when the manifest states more than `cap`, the response's
/// `Content-Length` exceeds the stated size, or more bytes than stated arrive. `oci-client`'s
/// verifying stream checks the digest.
async fn read_blob<'a>(
    client: &Client,
    image: &Reference,
    descriptor: &'a OciDescriptor,
    cap: usize,
    too_large: &(dyn Fn(String) -> FetchError + Sync),
    fail: &(dyn Fn(Stage<'a>, OciDistributionError) -> FetchError + Sync),
) -> Result<Vec<u8>, FetchError> {
    let stated =
        usize::try_from(descriptor.size).map_err(|_| too_large(format!("size {}", descriptor.size)))?;
    if stated > cap {
        return Err(too_large(format!("{stated} bytes by the manifest")));
    }
    let mut stream = client
        .pull_blob_stream(image, descriptor)
        .await
        .map_err(|e| fail(Stage::Blob(&descriptor.digest), e))?;
    if let Some(length) = stream.content_length
        && length > stated as u64
    {
        return Err(too_large(format!(
            "{length} bytes by Content-Length (the manifest says {stated})"
        )));
    }
    let mut bytes = Vec::with_capacity(stated);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk
            .map_err(|e| classify_stream(e, image.resolve_registry(), &image.whole(), &descriptor.digest))?;
        if bytes.len() + chunk.len() > stated {
            return Err(too_large(format!(
                "more than the manifest's {stated} bytes streamed"
            )));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// GETs the image manifest with every byte counted: `Content-Length` above
/// [`MAX_MANIFEST_BYTES`] is refused before the body is read, and the body stops at the cap.
/// `oci-client` reads manifest bodies whole (oras-project/rust-oci-client#206), so this request
/// is made here, with the credentials `oci-client`'s own handshake settles on (a bearer token,
/// or basic auth for registries that ask for it). The bytes must hash to the registry's
/// `Docker-Content-Digest` and to the digest in the reference, when there are such.
async fn pull_manifest_capped(
    client: &Client,
    image: &Reference,
    auth: &RegistryAuth,
    insecure: bool,
    reference: &str,
) -> Result<(Vec<u8>, String), FetchError> {
    let registry = image.resolve_registry();
    let fail = |e: OciDistributionError| classify(e, registry, reference, Stage::Manifest);
    let token = client
        .auth(image, auth, RegistryOperation::Pull)
        .await
        .map_err(fail)?;
    let target = image.digest().or(image.tag()).unwrap_or("latest");
    let url = format!(
        "{scheme}://{registry}/v2/{repository}/manifests/{target}",
        scheme = if insecure { "http" } else { "https" },
        repository = image.repository(),
    );
    let mut request = http_client()
        .get(&url)
        .header(reqwest::header::ACCEPT, OCI_IMAGE_MEDIA_TYPE);
    request = match (token, auth) {
        (Some(token), _) => request.bearer_auth(token),
        (None, RegistryAuth::Basic(user, password)) => request.basic_auth(user, Some(password)),
        (None, _) => request,
    };
    let mut response = request
        .send()
        .await
        .map_err(|e| fail(OciDistributionError::RequestError(e)))?;
    let status = response.status();
    if !status.is_success() {
        let message = format!("GET {url}: {status}");
        return Err(match status.as_u16() {
            401 | 403 => FetchError::RegistryUnauthorized {
                registry: registry.to_owned(),
                message,
            },
            404 => FetchError::ManifestNotFound {
                reference: reference.to_owned(),
                message,
            },
            _ => registry_error(reference, message),
        });
    }
    let too_large = |actual: String| FetchError::ManifestTooLarge {
        reference: reference.to_owned(),
        actual,
        limit: MAX_MANIFEST_BYTES,
    };
    if let Some(length) = response.content_length()
        && length > MAX_MANIFEST_BYTES as u64
    {
        return Err(too_large(format!("{length} bytes by Content-Length")));
    }
    let header_digest = response
        .headers()
        .get("Docker-Content-Digest")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| fail(OciDistributionError::RequestError(e)))?
    {
        if body.len() + chunk.len() > MAX_MANIFEST_BYTES {
            return Err(too_large(format!(
                "more than {MAX_MANIFEST_BYTES} bytes streamed"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    let digest = Digest::of(&body).to_string();
    for (what, expected) in [
        ("Docker-Content-Digest", header_digest.as_deref()),
        ("reference", image.digest()),
    ] {
        if let Some(expected) = expected
            && expected.starts_with("sha256:")
            && expected != digest
        {
            return Err(registry_error(
                reference,
                format!("manifest bytes hash to {digest}, the {what} says {expected}"),
            ));
        }
    }
    Ok((body, digest))
}

/// A plain HTTP client for the one request `oci-client` cannot cap (the manifest GET), with
/// the same timeouts.
fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .read_timeout(Duration::from_secs(30))
        .build()
        .unwrap_or_default()
}

// === signatures ===

/// The repository of `image` with `tag` instead of its own tag or digest.
fn sibling(image: &Reference, tag: String) -> Reference {
    Reference::with_tag(image.registry().to_owned(), image.repository().to_owned(), tag)
}

/// Checks that the manifest `manifest_digest` of `image` carries a cosign signature by
/// `public_key`: the signature artifact at `sha256-<hex>.sig`, any of whose simple-signing
/// layers verifies (payload capped and digest-checked like any blob).
async fn verify_signature(
    client: &Client,
    image: &Reference,
    auth: &RegistryAuth,
    insecure: bool,
    reference: &str,
    manifest_digest: &str,
    public_key: &str,
) -> Result<(), FetchError> {
    let tag = cosign::signature_tag(manifest_digest);
    let signatures = sibling(image, tag.clone());
    let missing = |message: String| FetchError::SignatureMissing {
        reference: reference.to_owned(),
        message,
    };
    let invalid = |reason: String| FetchError::SignatureInvalid {
        reference: reference.to_owned(),
        reason,
    };
    let raw = match pull_manifest_capped(client, &signatures, auth, insecure, reference).await {
        Ok((raw, _)) => raw,
        Err(FetchError::ManifestNotFound { .. }) => {
            return Err(missing(format!(
                "no signature of manifest {manifest_digest} at tag {tag} (sign with `flotilla plugin push --sign`)"
            )));
        }
        Err(e) => return Err(e),
    };
    let layers = flotilla_oci::read_signature_manifest(&raw).map_err(invalid)?;
    let registry = image.resolve_registry().to_owned();
    let fail = |stage: Stage<'_>, e: OciDistributionError| classify(e, &registry, reference, stage);
    let mut reasons = Vec::new();
    for SignatureLayer { layer, signature } in &layers {
        let Some(signature) = signature else {
            reasons.push(format!(
                "layer {} has no {} annotation",
                layer.digest,
                cosign::SIGNATURE_ANNOTATION
            ));
            continue;
        };
        let too_large = |actual: String| {
            invalid(format!(
                "signature payload {actual}, limit {MAX_CONFIG_BYTES} bytes"
            ))
        };
        let payload = read_blob(client, &signatures, layer, MAX_CONFIG_BYTES, &too_large, &fail).await?;
        match cosign::verify(public_key, &payload, signature, manifest_digest) {
            Ok(()) => return Ok(()),
            Err(e) => reasons.push(e.to_string()),
        }
    }
    if reasons.is_empty() {
        return Err(missing(format!(
            "the artifact at tag {tag} holds no simple-signing layer"
        )));
    }
    Err(invalid(reasons.join("; ")))
}

/// Signs the manifest `manifest_digest` pushed at `reference` with the PEM private key
/// (ECDSA P-256, PKCS#8 or SEC1) and pushes the signature in cosign's layout. Returns the
/// signature's reference.
pub async fn push_signature(
    reference: &str,
    manifest_digest: &str,
    private_key_pem: &str,
    auth: &RegistryAuth,
    insecure: bool,
) -> Result<String, FetchError> {
    let parsed = parse_reference(reference)?;
    let registry = parsed.resolve_registry().to_owned();
    let docker_reference = format!("{registry}/{}", parsed.repository());
    let payload = cosign::payload(&docker_reference, manifest_digest);
    let signature = cosign::sign(private_key_pem, &payload).map_err(|e| FetchError::SignatureInvalid {
        reference: reference.to_owned(),
        reason: format!("cannot sign: {e}"),
    })?;
    let signatures = sibling(&parsed, cosign::signature_tag(manifest_digest));
    let layer = ImageLayer::new(
        payload,
        cosign::SIMPLE_SIGNING_MEDIA_TYPE.to_owned(),
        Some(BTreeMap::from([(
            cosign::SIGNATURE_ANNOTATION.to_owned(),
            signature,
        )])),
    );
    let config = Config::new(
        b"{}".to_vec(),
        "application/vnd.oci.image.config.v1+json".to_owned(),
        None,
    );
    let mut manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    manifest.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_owned());
    client(insecure)
        .push(&signatures, &[layer], config, auth, Some(manifest))
        .await
        .map_err(|e| classify(e, &registry, reference, Stage::Push))?;
    Ok(signatures.whole())
}

/// Which request failed, to tell a missing manifest from a missing layer.
#[derive(Clone, Copy)]
enum Stage<'a> {
    Manifest,
    Blob(&'a str),
    Push,
}

fn classify(e: OciDistributionError, registry: &str, reference: &str, stage: Stage<'_>) -> FetchError {
    let message = e.to_string();
    let unauthorized = || FetchError::RegistryUnauthorized {
        registry: registry.to_owned(),
        message: message.clone(),
    };
    let not_found = || match stage {
        Stage::Blob(digest) => FetchError::LayerMissing {
            reference: reference.to_owned(),
            digest: digest.to_owned(),
            message: message.clone(),
        },
        Stage::Manifest | Stage::Push => FetchError::ManifestNotFound {
            reference: reference.to_owned(),
            message: message.clone(),
        },
    };
    match &e {
        OciDistributionError::RequestError(re) if re.is_connect() || re.is_timeout() => {
            FetchError::RegistryUnreachable {
                registry: registry.to_owned(),
                message: flotilla_core::report::error_chain(re),
            }
        }
        OciDistributionError::AuthenticationFailure(_) | OciDistributionError::UnauthorizedError { .. } => {
            unauthorized()
        }
        OciDistributionError::RegistryError { envelope, .. } => {
            let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
            if codes
                .iter()
                .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied))
            {
                unauthorized()
            } else if codes.iter().any(|c| {
                matches!(
                    c,
                    OciErrorCode::BlobUnknown
                        | OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::NotFound
                )
            }) {
                not_found()
            } else {
                registry_error(reference, message.clone())
            }
        }
        OciDistributionError::ImageManifestNotFoundError(_) => not_found(),
        OciDistributionError::ServerError { code: 401 | 403, .. } => unauthorized(),
        OciDistributionError::ServerError { code: 404, .. } => not_found(),
        OciDistributionError::DigestError(DigestError::VerificationError { expected, actual })
            if matches!(stage, Stage::Blob(_)) =>
        {
            FetchError::LayerDigestMismatch {
                expected: expected.clone(),
                actual: actual.clone(),
            }
        }
        OciDistributionError::IoError(io) => classify_io(io, registry, reference),
        _ => registry_error(reference, message),
    }
}

fn classify_stream(e: std::io::Error, registry: &str, reference: &str, _digest: &str) -> FetchError {
    classify_io(&e, registry, reference)
}

fn classify_io(e: &std::io::Error, registry: &str, reference: &str) -> FetchError {
    if let Some(DigestError::VerificationError { expected, actual }) =
        e.get_ref().and_then(|inner| inner.downcast_ref::<DigestError>())
    {
        return FetchError::LayerDigestMismatch {
            expected: expected.clone(),
            actual: actual.clone(),
        };
    }
    if let Some(re) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<reqwest::Error>())
        && (re.is_connect() || re.is_timeout())
    {
        return FetchError::RegistryUnreachable {
            registry: registry.to_owned(),
            message: flotilla_core::report::error_chain(re),
        };
    }
    registry_error(reference, e.to_string())
}

fn registry_error(reference: &str, message: String) -> FetchError {
    FetchError::Registry {
        reference: reference.to_owned(),
        message,
    }
}

// === credentials ===

/// Registry credentials from a pull secret on the hub.
pub async fn auth_from_secret(
    client: &kube::Client,
    secret_ref: &SecretReference,
    registry: &str,
) -> Result<RegistryAuth, FetchError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &secret_ref.namespace);
    let secret = api
        .get_opt(&secret_ref.name)
        .await
        .map_err(|source| FetchError::Kube {
            what: format!("pull secret {}/{}", secret_ref.namespace, secret_ref.name),
            source,
        })?
        .ok_or_else(|| FetchError::PullSecretNotFound {
            namespace: secret_ref.namespace.clone(),
            name: secret_ref.name.clone(),
        })?;
    let invalid = |reason: String| FetchError::InvalidPullSecret {
        namespace: secret_ref.namespace.clone(),
        name: secret_ref.name.clone(),
        reason,
    };
    let data = secret.data.unwrap_or_default();
    let found = match secret.type_.as_deref() {
        Some(DOCKER_CONFIG_JSON) => {
            let json = data
                .get(".dockerconfigjson")
                .ok_or_else(|| invalid("no .dockerconfigjson key".to_owned()))?;
            credentials_for(&json.0, registry).map_err(invalid)?
        }
        Some(DOCKER_CFG) => {
            let json = data
                .get(".dockercfg")
                .ok_or_else(|| invalid("no .dockercfg key".to_owned()))?;
            flotilla_oci::credentials_in_dockercfg(&json.0, registry).map_err(invalid)?
        }
        other => {
            return Err(invalid(format!(
                "type is {:?}, want {DOCKER_CONFIG_JSON}",
                other.unwrap_or_default()
            )));
        }
    };
    found.ok_or_else(|| invalid(format!("no credentials for registry {registry}")))
}

// === push ===

/// What [`push`] published.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// The reference pushed to.
    pub reference: String,
    /// Digest of the manifest (pin the artifact with `<repository>@<digest>`).
    pub manifest_digest: String,
    /// Digest of the component bytes (the value for `spec.digest`).
    pub digest: Digest,
    /// Size of the component.
    pub size: usize,
}

/// Publishes `bytes` (a component the host's name checks accept) at `reference` in the CNCF
/// Wasm layout. The config records the component's imports and exports, as the layout asks.
pub async fn push(
    bytes: &[u8],
    reference: &str,
    auth: &RegistryAuth,
    insecure: bool,
) -> Result<Pushed, FetchError> {
    let parsed = parse_reference(reference)?;
    let registry = parsed.resolve_registry().to_owned();
    let inspection = crate::inspect::inspect(bytes);
    if !inspection.accepted {
        return Err(FetchError::NotAWasmArtifact {
            reference: reference.to_owned(),
            reason: format!(
                "refusing to push a file the host would refuse: {}",
                inspection.refusal.unwrap_or_default()
            ),
        });
    }
    let digest = Digest::of(bytes);
    let created = k8s_openapi::jiff::Timestamp::now().to_string();
    let mut component = serde_json::json!({
        "exports": inspection.exports,
        "imports": inspection.imports,
    });
    if let Some(v) = &inspection.wit_version {
        component["target"] = format!("flotilla:addon/addon-plugin@{v}").into();
    }
    let config = serde_json::json!({
        "created": created,
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [digest.to_string()],
        "component": component,
    });
    let config = Config::new(
        serde_json::to_vec(&config).map_err(|e| registry_error(reference, e.to_string()))?,
        WASM_CONFIG_MEDIA_TYPE.to_owned(),
        None,
    );
    let layer = ImageLayer::new(bytes.to_vec(), WASM_LAYER_MEDIA_TYPE.to_owned(), None);
    let mut manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    manifest.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_owned());
    manifest.annotations = Some(BTreeMap::from([(
        "org.opencontainers.image.created".to_owned(),
        created,
    )]));

    let client = client(insecure);
    let fail = |e: OciDistributionError| classify(e, &registry, reference, Stage::Push);
    client
        .push(&parsed, &[layer], config, auth, Some(manifest))
        .await
        .map_err(fail)?;
    let manifest_digest = client.fetch_manifest_digest(&parsed, auth).await.map_err(fail)?;
    Ok(Pushed {
        reference: reference.to_owned(),
        manifest_digest,
        digest,
        size: bytes.len(),
    })
}
