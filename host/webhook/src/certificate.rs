//! The CA and serving certificate every hub replica serves, kept in a Secret of the hub
//! namespace (the webhook's is [`crate::CERTIFICATE_SECRET`]) so the registered `caBundle` outlives
//! any one replica.

use std::sync::Arc;

use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::api::{ObjectMeta, PostParams};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType};

use crate::Error;

/// Keys of the certificate's Secret: the usual TLS Secret keys, the CA, and the host names the
/// certificate was made for (one a line).
const CA_KEY: &str = "ca.crt";
const CERT_KEY: &str = "tls.crt";
const KEY_KEY: &str = "tls.key";
const HOSTS_KEY: &str = "hosts";

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

    /// Secret `namespace/name` holding it.
    fn to_secret(&self, namespace: &str, name: &str) -> Secret {
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
                name: Some(name.to_owned()),
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
    pub(crate) fn server_config(&self) -> Result<rustls::ServerConfig, String> {
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

/// The serving certificate every hub replica shares: read from Secret `name` (the webhook's is
/// [`crate::CERTIFICATE_SECRET`]) in `namespace`, or made for `hosts` and stored there when
/// absent. Two replicas starting at once both try to create it; the apiserver lets one win,
/// and the other reads the winner's.
pub async fn shared_certificate(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    hosts: &[String],
) -> Result<ServingCertificate, Error> {
    let secrets: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace);
    let api_error = |source| Error::Secret {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    };
    let stored = match secrets.get_opt(name).await.map_err(api_error)? {
        Some(secret) => secret,
        None => {
            let fresh = ServingCertificate::issue(hosts)?;
            let secret = fresh.to_secret(namespace, name);
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
                    secrets.get(name).await.map_err(api_error)?
                }
                Err(source) => return Err(api_error(source)),
            }
        }
    };
    let stored_problem = |problem: String| Error::StoredCertificate {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        problem,
    };
    let certificate = ServingCertificate::from_secret(&stored).map_err(stored_problem)?;
    if let Some(missing) = hosts.iter().find(|h| !certificate.hosts.contains(h)) {
        return Err(stored_problem(format!(
            "is for {:?}, not {missing:?} (every replica must be started with the same host names)",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_survives_its_secret_and_serves() {
        let issued = ServingCertificate::issue(&["127.0.0.1".to_owned(), "hub.example".to_owned()]).unwrap();
        let read = ServingCertificate::from_secret(&issued.to_secret("hub", "serving")).unwrap();
        assert_eq!(read, issued);
        assert!(read.server_config().is_ok());
        let mut broken = issued.to_secret("hub", "serving");
        broken.data.as_mut().unwrap().remove(KEY_KEY);
        assert!(
            ServingCertificate::from_secret(&broken)
                .unwrap_err()
                .contains("tls.key")
        );
    }
}
