//! The hub's webhook server: the validating webhook for what CEL cannot express — the 500 KiB
//! limit on a ManifestWork's manifests (their encoded size; CEL has no way to measure it) — and
//! the add-on CRDs' conversion webhook (v1alpha1 ⇄ v1beta1, [`flotilla_api::addon::conversion`]).
//! The other work rules stay in the [`crate::admission`] policy, enforced by the apiserver itself.
//!
//! ```text
//!  kube-apiserver ──HTTPS (CA in caBundle)──▶ /validate-manifestwork ──▶ allowed / denied + message
//!                                           ─▶ /convert ──▶ ClusterManagementAddOn / ManagedClusterAddOn
//!                                                           in the requested version, or a failure
//! ```
//!
//! The server makes its own CA at start and a serving certificate for its host names, and
//! registers `flotilla.dev-manifestwork-size` and the add-on CRDs' conversion with that CA; a
//! restart re-registers the new CA.

use std::{net::SocketAddr, sync::Arc};

use flotilla_api::work::{consts::MAX_MANIFESTS_SIZE, v1::ManifestWorkSpec};
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, body::Bytes, service::service_fn};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::{
    DynamicObject,
    admission::{AdmissionRequest, AdmissionResponse, AdmissionReview},
    conversion::{ConversionResponse, ConversionReview},
};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType};
use serde_json::json;
use tokio_rustls::TlsAcceptor;

/// Path of the ManifestWork size check.
pub const VALIDATE_PATH: &str = "/validate-manifestwork";
/// Path of the add-on CRDs' conversion webhook (OCM's path).
pub const CONVERT_PATH: &str = "/convert";
/// The CRDs whose versions the conversion webhook converts between.
pub const CONVERTED_CRDS: [&str; 2] = [
    "clustermanagementaddons.addon.open-cluster-management.io",
    "managedclusteraddons.addon.open-cluster-management.io",
];
/// Name of the ValidatingWebhookConfiguration.
pub const CONFIGURATION_NAME: &str = "flotilla.dev-manifestwork-size";

/// Why the webhook could not start or register.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Making the CA or serving certificate failed.
    #[error("make the webhook certificate: {0}")]
    Certificate(String),
    /// Binding the listener failed.
    #[error("listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Registering the configuration failed.
    #[error(transparent)]
    Register(#[from] flotilla_kube::Error),
    /// Switching an add-on CRD's conversion to the webhook failed.
    #[error("switch the conversion of CRD {crd} to the hub's webhook: {source}")]
    Conversion {
        /// The CRD.
        crd: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// A running webhook server.
pub struct Webhook {
    /// Where it listens.
    pub addr: SocketAddr,
    /// PEM of the CA that signed its serving certificate (the `caBundle`).
    pub ca_pem: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The message refusing a work whose manifests take `size` bytes, or `None` when it fits.
pub fn size_violation(spec: &ManifestWorkSpec) -> Option<String> {
    let size: usize = spec
        .workload
        .manifests
        .iter()
        .map(|m| serde_json::to_vec(&m.0).map_or(0, |b| b.len()))
        .sum();
    (size > MAX_MANIFESTS_SIZE).then(|| {
        format!(
            "the manifests take {size} bytes, more than the limit of {MAX_MANIFESTS_SIZE} bytes (500 KiB); \
             split them over several ManifestWorks"
        )
    })
}

/// The answer to one admission review.
pub fn review(request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
    let response = AdmissionResponse::from(request);
    let Some(object) = &request.object else {
        return response;
    };
    let spec: ManifestWorkSpec = match object.data.get("spec").cloned().map(serde_json::from_value) {
        Some(Ok(spec)) => spec,
        // Malformed specs are the schema's to refuse.
        _ => return response,
    };
    match size_violation(&spec) {
        Some(message) => response.deny(message),
        None => response,
    }
}

async fn handle(request: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let path = request.uri().path().to_owned();
    if path != VALIDATE_PATH && path != CONVERT_PATH {
        let mut not_found = Response::new(Full::new(Bytes::from_static(b"not found")));
        *not_found.status_mut() = hyper::StatusCode::NOT_FOUND;
        return Ok(not_found);
    }
    let body = request.into_body().collect().await?.to_bytes();
    let bytes = if path == CONVERT_PATH {
        let answer = match serde_json::from_slice::<ConversionReview>(&body) {
            Ok(request) => flotilla_api::addon::conversion::review(request),
            Err(e) => ConversionResponse::invalid(kube::core::Status::failure(
                &format!("decode the ConversionReview: {e}"),
                "BadRequest",
            ))
            .into_review(),
        };
        serde_json::to_vec(&answer).unwrap_or_default()
    } else {
        let answer = match serde_json::from_slice::<AdmissionReview<DynamicObject>>(&body)
            .map_err(|e| e.to_string())
            .and_then(|r| {
                let request: Result<AdmissionRequest<DynamicObject>, _> = r.try_into();
                request.map_err(|e| e.to_string())
            }) {
            Ok(request) => review(&request).into_review(),
            Err(message) => AdmissionResponse::invalid(message).into_review(),
        };
        serde_json::to_vec(&answer).unwrap_or_default()
    };
    let mut response = Response::new(Full::new(Bytes::from(bytes)));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// A fresh CA and a serving certificate for `hosts` (IP addresses or DNS names) signed by it.
fn certificates(hosts: &[String]) -> Result<(String, rustls::ServerConfig), Error> {
    let error = |e: rcgen::Error| Error::Certificate(e.to_string());
    let ca_key = KeyPair::generate().map_err(error)?;
    let mut ca = CertificateParams::default();
    ca.distinguished_name
        .push(DnType::CommonName, "flotilla-hub-webhook-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca.self_signed(&ca_key).map_err(error)?;
    let issuer = Issuer::new(ca, ca_key);
    let mut serving = CertificateParams::default();
    serving
        .distinguished_name
        .push(DnType::CommonName, "flotilla-hub-webhook");
    for host in hosts {
        serving
            .subject_alt_names
            .push(match host.parse::<std::net::IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(host.clone().try_into().map_err(error)?),
            });
    }
    let key = KeyPair::generate().map_err(error)?;
    let cert = serving.signed_by(&key, &issuer).map_err(error)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Certificate(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .map_err(|e| Error::Certificate(e.to_string()))?;
    Ok((ca_cert.pem(), config))
}

/// Starts the server on `bind` with a certificate for `hosts`.
pub async fn serve(bind: SocketAddr, hosts: &[String]) -> Result<Webhook, Error> {
    let (ca_pem, config) = certificates(hosts)?;
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|source| Error::Listen { addr: bind, source })?;
    let addr = listener
        .local_addr()
        .map_err(|source| Error::Listen { addr: bind, source })?;
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let task = tokio::spawn(async move {
        // Connections live in the accept task's set, so stopping the server (dropping
        // [`Webhook`]) also ends the apiserver's kept-alive connections.
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            while connections.try_join_next().is_some() {}
            let acceptor = acceptor.clone();
            connections.spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service_fn(handle));
                if let Err(error) = connection.await {
                    tracing::debug!(%error, "webhook connection ended");
                }
            });
        }
    });
    Ok(Webhook { addr, ca_pem, task })
}

/// The configuration sending ManifestWork creates and updates to `url` (trusting `ca_pem`).
pub fn configuration(url: &str, ca_pem: &str) -> ValidatingWebhookConfiguration {
    use base64::Engine as _;
    serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": { "name": CONFIGURATION_NAME },
        "webhooks": [{
            "name": "manifestwork-size.flotilla.dev",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "clientConfig": {
                "url": url,
                "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem),
            },
            "rules": [{
                "apiGroups": ["work.open-cluster-management.io"],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["manifestworks"],
            }],
        }],
    }))
    .unwrap_or_default()
}

/// Registers (server-side applies) the configuration for `url` and `ca_pem`.
pub async fn register(client: &kube::Client, url: &str, ca_pem: &str) -> Result<(), Error> {
    let api: kube::Api<ValidatingWebhookConfiguration> = kube::Api::all(client.clone());
    flotilla_kube::apply::apply(&api, &configuration(url, ca_pem)).await?;
    Ok(())
}

/// The merge patch switching an add-on CRD to conversion through `url` (trusting `ca_pem`);
/// `service: null` drops a Service reference an installer may have left.
pub fn conversion_patch(url: &str, ca_pem: &str) -> serde_json::Value {
    use base64::Engine as _;
    json!({ "spec": { "conversion": {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {
                "url": url,
                "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem),
                "service": null,
            },
        },
    }}})
}

/// Points the add-on CRDs' conversion at `url` (the server's [`CONVERT_PATH`]): from then on
/// the apiserver serves v1beta1 by asking this server.
pub async fn register_conversion(client: &kube::Client, url: &str, ca_pem: &str) -> Result<(), Error> {
    let api: kube::Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = kube::Api::all(client.clone());
    let patch = conversion_patch(url, ca_pem);
    for name in CONVERTED_CRDS {
        api.patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .map_err(|source| Error::Conversion {
            crd: name.to_owned(),
            source,
        })?;
    }
    Ok(())
}

/// Whether `crd` converts through `url`, trusting `ca_pem`.
pub fn converts_through(crd: &CustomResourceDefinition, url: &str, ca_pem: &str) -> bool {
    crd.spec.conversion.as_ref().is_some_and(|conversion| {
        let config = conversion.webhook.as_ref().and_then(|w| w.client_config.as_ref());
        conversion.strategy == "Webhook"
            && config.and_then(|c| c.url.as_deref()) == Some(url)
            && config.and_then(|c| c.ca_bundle.as_ref()).map(|b| b.0.as_slice()) == Some(ca_pem.as_bytes())
    })
}

/// Keeps the add-on CRDs converting through `url` for as long as it runs: an installer that
/// applies the CRDs again (`flotilla init`, `kubectl apply -f deploy/crds`) resets their
/// conversion to `None`, and the hub points it back at once.
pub async fn keep_conversion(client: kube::Client, url: String, ca_pem: String) {
    use futures::StreamExt as _;
    use kube_runtime::{WatchStreamExt as _, watcher};

    let api: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    let watches = CONVERTED_CRDS.map(|name| {
        watcher(
            api.clone(),
            watcher::Config::default().fields(&format!("metadata.name={name}")),
        )
        .default_backoff()
        .applied_objects()
    });
    let mut changes = futures::stream::select_all(watches.map(Box::pin));
    while let Some(change) = changes.next().await {
        match change {
            Ok(crd) if !converts_through(&crd, &url, &ca_pem) => {
                let name = crd.metadata.name.unwrap_or_default();
                tracing::info!(crd = %name, "conversion was reset; pointing it at the hub's webhook again");
                let patch = conversion_patch(&url, &ca_pem);
                if let Err(error) = api
                    .patch(
                        &name,
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(&patch),
                    )
                    .await
                {
                    tracing::warn!(crd = %name, %error, "switch the conversion to the hub's webhook");
                }
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "watch the add-on CRDs"),
        }
    }
}

#[cfg(test)]
mod tests {
    use flotilla_api::work::v1::{Manifest, ManifestsTemplate};

    use super::*;

    fn spec(bytes: usize) -> ManifestWorkSpec {
        ManifestWorkSpec {
            workload: ManifestsTemplate {
                manifests: vec![Manifest(json!({
                    "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
                    "data": {"blob": "x".repeat(bytes)},
                }))],
            },
            ..Default::default()
        }
    }

    #[test]
    fn works_over_500_kib_are_refused_with_their_size_and_what_to_do() {
        assert_eq!(size_violation(&spec(1000)), None);
        let message = size_violation(&spec(MAX_MANIFESTS_SIZE)).unwrap();
        assert!(
            message.contains("500 KiB") && message.contains("split"),
            "{message}"
        );
    }

    #[test]
    fn the_configuration_trusts_the_ca_and_matches_work_writes() {
        let config = configuration("https://127.0.0.1:9443/validate-manifestwork", "PEM");
        let hook = &config.webhooks.unwrap()[0];
        assert_eq!(
            hook.client_config.ca_bundle.as_ref().map(|b| b.0.as_slice()),
            Some(&b"PEM"[..])
        );
        assert_eq!(hook.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(
            hook.rules.as_ref().unwrap()[0].resources.as_deref(),
            Some(&["manifestworks".to_owned()][..])
        );
    }
}
