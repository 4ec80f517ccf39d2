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
//! Every hub replica serves the same CA and serving certificate, kept in Secret
//! [`CERTIFICATE_SECRET`] of the hub namespace: the first replica to start makes them and
//! creates the Secret, and a replica that loses that race (the create conflicts) reads the
//! winner's. So the `caBundle` registered with `flotilla.dev-manifestwork-size` stays valid
//! whichever replica leads and across restarts. The add-on CRDs' conversion is registered with
//! the same CA and endpoint (path [`CONVERT_PATH`]).

use std::{net::SocketAddr, sync::Arc};

use flotilla_api::work::{consts::MAX_MANIFESTS_SIZE, v1::ManifestWorkSpec};
use http_body_util::Full;
use hyper::{Request, Response, body::Bytes, service::service_fn};
use hyper_util::rt::TokioIo;
use k8s_openapi::{
    ByteString,
    api::{admissionregistration::v1::ValidatingWebhookConfiguration, core::v1::Secret},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    api::{ObjectMeta, PostParams},
    core::{
        DynamicObject,
        admission::{AdmissionRequest, AdmissionResponse, AdmissionReview},
        conversion::{ConversionResponse, ConversionReview},
    },
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

/// Secret (in the hub namespace) holding the webhook's CA and serving certificate.
pub const CERTIFICATE_SECRET: &str = "flotilla-hub-webhook-serving";
/// Keys of [`CERTIFICATE_SECRET`]: the usual TLS Secret keys, the CA, and the host names the
/// certificate was made for (one a line).
const CA_KEY: &str = "ca.crt";
const CERT_KEY: &str = "tls.crt";
const KEY_KEY: &str = "tls.key";
const HOSTS_KEY: &str = "hosts";

/// Why the webhook could not start or register.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Making the CA or serving certificate failed.
    #[error("make the webhook certificate: {0}")]
    Certificate(String),
    /// Reading or creating the shared certificate's Secret failed.
    #[error("read or create the webhook certificate Secret {namespace}/{CERTIFICATE_SECRET}: {source}")]
    Secret {
        /// The hub namespace.
        namespace: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The shared certificate's Secret is unusable.
    #[error(
        "the webhook certificate Secret {namespace}/{CERTIFICATE_SECRET} {problem}; delete it and restart the hub replicas to make a new one"
    )]
    StoredCertificate {
        /// The hub namespace.
        namespace: String,
        /// What is wrong with it.
        problem: String,
    },
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

fn plain(status: hyper::StatusCode, text: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = status;
    response
}

async fn handle(
    server: &flotilla_kube::server::Server,
    request: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let path = request.uri().path().to_owned();
    if path != VALIDATE_PATH && path != CONVERT_PATH {
        return Ok(plain(hyper::StatusCode::NOT_FOUND, "not found".to_owned()));
    }
    let (body, _held) = match server.read_body(request.into_body()).await {
        Ok(read) => read,
        Err(refused) => {
            tracing::warn!(%path, %refused, "webhook request refused");
            return Ok(plain(refused.status(), refused.to_string()));
        }
    };
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

/// A CA and a serving certificate signed by it, as PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct ServingCertificate {
    /// The CA's certificate (the `caBundle`).
    pub ca_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// The serving certificate's private key (PKCS#8).
    pub key_pem: String,
    /// The host names and IPs the serving certificate is for.
    pub hosts: Vec<String>,
}

// === impl ServingCertificate ===

impl std::fmt::Debug for ServingCertificate {
    /// Leaves the private key out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCertificate")
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl ServingCertificate {
    /// A fresh CA and a serving certificate for `hosts` (IP addresses or DNS names) signed by it.
    pub fn issue(hosts: &[String]) -> Result<Self, Error> {
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
        Ok(Self {
            ca_pem: ca_cert.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            hosts: hosts.to_vec(),
        })
    }

    /// The Secret holding it.
    fn to_secret(&self, namespace: &str) -> Secret {
        let data = [
            (CA_KEY, self.ca_pem.as_str()),
            (CERT_KEY, self.cert_pem.as_str()),
            (KEY_KEY, self.key_pem.as_str()),
            (HOSTS_KEY, &self.hosts.join("\n")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
        .collect();
        Secret {
            metadata: ObjectMeta {
                name: Some(CERTIFICATE_SECRET.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..Default::default()
            },
            type_: Some("kubernetes.io/tls".to_owned()),
            data: Some(data),
            ..Default::default()
        }
    }

    /// The certificate a Secret holds, or what is wrong with it.
    fn from_secret(secret: &Secret) -> Result<Self, String> {
        let data = secret.data.clone().unwrap_or_default();
        let field = |key: &str| {
            data.get(key)
                .and_then(|v| String::from_utf8(v.0.clone()).ok())
                .ok_or_else(|| format!("has no text key {key:?}"))
        };
        Ok(Self {
            ca_pem: field(CA_KEY)?,
            cert_pem: field(CERT_KEY)?,
            key_pem: field(KEY_KEY)?,
            hosts: field(HOSTS_KEY)?
                .lines()
                .map(str::to_owned)
                .filter(|h| !h.is_empty())
                .collect(),
        })
    }

    /// The TLS server configuration serving it.
    fn server_config(&self) -> Result<rustls::ServerConfig, String> {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _};
        let cert = CertificateDer::from_pem_slice(self.cert_pem.as_bytes())
            .map_err(|e| format!("holds no PEM certificate: {e}"))?;
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(|e| format!("holds no PEM private key: {e}"))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .map_err(|e| format!("holds a certificate and key that do not serve: {e}"))
    }
}

/// The serving certificate every hub replica shares: read from [`CERTIFICATE_SECRET`] in
/// `namespace`, or made for `hosts` and stored there when absent. Two replicas starting at once
/// both try to create it; the apiserver lets one win, and the other reads the winner's.
pub async fn shared_certificate(
    client: &kube::Client,
    namespace: &str,
    hosts: &[String],
) -> Result<ServingCertificate, Error> {
    let secrets: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace);
    let api_error = |source| Error::Secret {
        namespace: namespace.to_owned(),
        source,
    };
    let stored = match secrets.get_opt(CERTIFICATE_SECRET).await.map_err(api_error)? {
        Some(secret) => secret,
        None => {
            let fresh = ServingCertificate::issue(hosts)?;
            let secret = fresh.to_secret(namespace);
            let mut created = secrets.create(&PostParams::default(), &secret).await;
            if matches!(&created, Err(kube::Error::Api(status)) if status.code == 404) {
                // A hub started before `flotilla init` made its namespace.
                create_namespace(client, namespace).await.map_err(api_error)?;
                created = secrets.create(&PostParams::default(), &secret).await;
            }
            match created {
                Ok(_) => return Ok(fresh),
                // Another replica created it first: serve theirs.
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    secrets.get(CERTIFICATE_SECRET).await.map_err(api_error)?
                }
                Err(source) => return Err(api_error(source)),
            }
        }
    };
    let stored_problem = |problem: String| Error::StoredCertificate {
        namespace: namespace.to_owned(),
        problem,
    };
    let certificate = ServingCertificate::from_secret(&stored).map_err(stored_problem)?;
    if let Some(missing) = hosts.iter().find(|h| !certificate.hosts.contains(h)) {
        return Err(stored_problem(format!(
            "is for {:?}, not {missing:?} (every replica must use the same --webhook-host)",
            certificate.hosts
        )));
    }
    Ok(certificate)
}

/// Creates namespace `name` unless it exists.
async fn create_namespace(client: &kube::Client, name: &str) -> Result<(), kube::Error> {
    let namespace = k8s_openapi::api::core::v1::Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    match kube::Api::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Starts the server on `bind`, serving `certificate`.
pub async fn serve(bind: SocketAddr, certificate: &ServingCertificate) -> Result<Webhook, Error> {
    let config = certificate
        .server_config()
        .map_err(|problem| Error::Certificate(format!("the serving certificate {problem}")))?;
    let ca_pem = certificate.ca_pem.clone();
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|source| Error::Listen { addr: bind, source })?;
    let addr = listener
        .local_addr()
        .map_err(|source| Error::Listen { addr: bind, source })?;
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let server = flotilla_kube::server::Server::new(flotilla_kube::server::WEBHOOK);
    // Connections live in the accept loop, so stopping the server (dropping [`Webhook`]) also
    // ends the apiserver's kept-alive connections.
    let task = tokio::spawn({
        let accepting = server.clone();
        async move {
            accepting
                .accept(listener, move |stream| {
                    let (acceptor, server) = (acceptor.clone(), server.clone());
                    async move {
                        let handshake = server.limits().handshake;
                        let Ok(Ok(tls)) = tokio::time::timeout(handshake, acceptor.accept(stream)).await
                        else {
                            return;
                        };
                        let service = service_fn(|request| handle(&server, request));
                        let connection = server.http1().serve_connection(TokioIo::new(tls), service);
                        if let Err(error) = connection.await {
                            tracing::debug!(%error, "webhook connection ended");
                        }
                    }
                })
                .await;
        }
    });
    Ok(Webhook { addr, ca_pem, task })
}

/// Where the apiserver reaches the webhook server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// An HTTPS URL (a server outside the cluster, or on the apiserver's own host).
    Url(String),
    /// A Service in the hub cluster (port 443), in front of the hub replicas.
    Service {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
    },
}

impl Endpoint {
    /// The host name the serving certificate must name for this endpoint, if not the URL's.
    pub fn service_host(&self) -> Option<String> {
        match self {
            Self::Url(_) => None,
            Self::Service { namespace, name } => Some(format!("{name}.{namespace}.svc")),
        }
    }

    /// The webhook's `clientConfig` for `path` (a URL endpoint carries its own) without the
    /// `caBundle`.
    fn client_config(&self, path: &str) -> serde_json::Value {
        match self {
            Self::Url(url) => json!({ "url": url }),
            Self::Service { namespace, name } => json!({
                "service": { "namespace": namespace, "name": name, "port": 443, "path": path }
            }),
        }
    }
}

/// The configuration sending ManifestWork creates and updates to `url` (trusting `ca_pem`).
pub fn configuration(url: &str, ca_pem: &str) -> ValidatingWebhookConfiguration {
    configuration_for(&Endpoint::Url(url.to_owned()), ca_pem)
}

/// The configuration sending ManifestWork creates and updates to `endpoint` (trusting
/// `ca_pem`).
pub fn configuration_for(endpoint: &Endpoint, ca_pem: &str) -> ValidatingWebhookConfiguration {
    use base64::Engine as _;
    let mut client_config = endpoint.client_config(VALIDATE_PATH);
    client_config["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(ca_pem));
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
            "clientConfig": client_config,
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
    register_endpoint(client, &Endpoint::Url(url.to_owned()), ca_pem).await
}

/// Registers (server-side applies) the configuration for `endpoint` and `ca_pem`.
pub async fn register_endpoint(
    client: &kube::Client,
    endpoint: &Endpoint,
    ca_pem: &str,
) -> Result<(), Error> {
    let api: kube::Api<ValidatingWebhookConfiguration> = kube::Api::all(client.clone());
    flotilla_kube::apply::apply(&api, &configuration_for(endpoint, ca_pem)).await?;
    Ok(())
}

/// The merge patch switching an add-on CRD to conversion through `endpoint` (a URL endpoint
/// names [`CONVERT_PATH`] itself), trusting `ca_pem`; the other kind of reference an installer
/// may have left is dropped.
pub fn conversion_patch(endpoint: &Endpoint, ca_pem: &str) -> serde_json::Value {
    use base64::Engine as _;
    let mut client_config = endpoint.client_config(CONVERT_PATH);
    let other = if matches!(endpoint, Endpoint::Url(_)) {
        "service"
    } else {
        "url"
    };
    client_config[other] = serde_json::Value::Null;
    client_config["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(ca_pem));
    json!({ "spec": { "conversion": {
        "strategy": "Webhook",
        "webhook": { "conversionReviewVersions": ["v1"], "clientConfig": client_config },
    }}})
}

/// Points the add-on CRDs' conversion at `endpoint`: from then on the apiserver serves
/// v1beta1 by asking this server.
pub async fn register_conversion(
    client: &kube::Client,
    endpoint: &Endpoint,
    ca_pem: &str,
) -> Result<(), Error> {
    let api: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    let patch = conversion_patch(endpoint, ca_pem);
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

/// Whether `crd` converts through `endpoint`, trusting `ca_pem`.
pub fn converts_through(crd: &CustomResourceDefinition, endpoint: &Endpoint, ca_pem: &str) -> bool {
    crd.spec.conversion.as_ref().is_some_and(|conversion| {
        let Some(config) = conversion.webhook.as_ref().and_then(|w| w.client_config.as_ref()) else {
            return false;
        };
        let target = match endpoint {
            Endpoint::Url(url) => config.url.as_deref() == Some(url.as_str()) && config.service.is_none(),
            Endpoint::Service { namespace, name } => {
                config.url.is_none()
                    && config.service.as_ref().is_some_and(|s| {
                        s.namespace == *namespace
                            && s.name == *name
                            && s.path.as_deref() == Some(CONVERT_PATH)
                    })
            }
        };
        conversion.strategy == "Webhook"
            && target
            && config.ca_bundle.as_ref().map(|b| b.0.as_slice()) == Some(ca_pem.as_bytes())
    })
}

/// Keeps the add-on CRDs converting through `endpoint` for as long as it runs: an installer that
/// resets their conversion to `None` (Flotilla's own keep a hub's webhook, see
/// `flotilla_kube::crds::keep_live_conversion`), and the hub points it back at once.
pub async fn keep_conversion(client: kube::Client, endpoint: Endpoint, ca_pem: String) {
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
            Ok(crd) if !converts_through(&crd, &endpoint, &ca_pem) => {
                let name = crd.metadata.name.unwrap_or_default();
                tracing::info!(crd = %name, "conversion was reset; pointing it at the hub's webhook again");
                let patch = conversion_patch(&endpoint, &ca_pem);
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
    fn a_certificate_survives_its_secret_and_serves() {
        let issued = ServingCertificate::issue(&["127.0.0.1".to_owned(), "hub.example".to_owned()]).unwrap();
        let read = ServingCertificate::from_secret(&issued.to_secret("hub")).unwrap();
        assert_eq!(read, issued);
        assert!(read.server_config().is_ok());
        let mut broken = issued.to_secret("hub");
        broken.data.as_mut().unwrap().remove(KEY_KEY);
        assert!(
            ServingCertificate::from_secret(&broken)
                .unwrap_err()
                .contains("tls.key")
        );
    }

    #[test]
    fn a_service_endpoint_is_registered_by_service_reference_and_named_in_the_certificate() {
        let endpoint = Endpoint::Service {
            namespace: "open-cluster-management-hub".to_owned(),
            name: "flotilla-hub-webhook".to_owned(),
        };
        assert_eq!(
            endpoint.service_host().as_deref(),
            Some("flotilla-hub-webhook.open-cluster-management-hub.svc")
        );
        let config = configuration_for(&endpoint, "PEM");
        let client = &config.webhooks.unwrap()[0].client_config;
        assert_eq!(client.url, None);
        let service = client.service.as_ref().unwrap();
        assert_eq!(
            (service.name.as_str(), service.port, service.path.as_deref()),
            ("flotilla-hub-webhook", Some(443), Some(VALIDATE_PATH))
        );
        assert_eq!(Endpoint::Url("https://x".to_owned()).service_host(), None);
    }

    #[rstest::rstest]
    #[case::url(Endpoint::Url("https://10.0.0.1:9443/convert".into()), "service")]
    #[case::service(Endpoint::Service { namespace: "hub".into(), name: "webhook".into() }, "url")]
    fn the_conversion_goes_to_the_endpoint_and_drops_the_other_reference(
        #[case] endpoint: Endpoint,
        #[case] dropped: &str,
    ) {
        let patch = conversion_patch(&endpoint, "PEM");
        let client = &patch["spec"]["conversion"]["webhook"]["clientConfig"];
        assert_eq!(client[dropped], serde_json::Value::Null);
        assert_eq!(patch["spec"]["conversion"]["strategy"], "Webhook");
        // The CRD as the apiserver stores it after the patch (nulls removed) converts there.
        let mut stored = patch["spec"]["conversion"].clone();
        if let Some(config) = stored["webhook"]["clientConfig"].as_object_mut() {
            config.remove(dropped);
        }
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": { "name": CONVERTED_CRDS[0] },
            "spec": { "group": "g", "names": { "kind": "K", "plural": "ks" }, "scope": "Cluster",
                      "versions": [], "conversion": stored },
        }))
        .unwrap();
        assert!(converts_through(&crd, &endpoint, "PEM"));
        assert!(!converts_through(&crd, &endpoint, "OTHER"));
        let elsewhere = Endpoint::Url("https://10.0.0.2:9443/convert".into());
        assert!(!converts_through(&crd, &elsewhere, "PEM"));
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
