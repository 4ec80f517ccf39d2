//! The key material of one local control plane: a certificate authority that is at once the
//! apiserver's client CA, its serving CA and the controller manager's CSR signing CA, plus the
//! service-account signing key.
//!
//! One CA for all three roles mirrors how OCM's own embedded control plane is set up: a
//! certificate that the controller manager issues through a CSR is then accepted by the
//! apiserver without further wiring.

use const_oid::db::rfc5280::ID_KP_CLIENT_AUTH;
use der::{DecodePem, EncodePem, pem::LineEnding};
use p256::{
    ecdsa::{DerSignature, SigningKey},
    pkcs8::{DecodePrivateKey, EncodePrivateKey},
};
use rcgen::{
    BasicConstraints as RcgenBasicConstraints, CertificateParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use time::{Duration, OffsetDateTime};
use x509_cert::{
    Certificate,
    builder::{Builder, CertificateBuilder, profile::BuilderProfile},
    certificate::TbsCertificate,
    ext::{
        Extension, ToExtension,
        pkix::{BasicConstraints, ExtendedKeyUsage, KeyUsage, KeyUsages},
    },
    name::Name,
    serial_number::SerialNumber,
    spki::{SubjectPublicKeyInfo, SubjectPublicKeyInfoRef},
    time::Validity,
};

use crate::error::{Error, Result};

/// A PEM certificate and its PEM private key.
#[derive(Clone, Debug)]
pub struct CertAndKey {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The PKCS#8 private key, PEM.
    pub key_pem: String,
}

/// A self-signed certificate authority that can issue client and serving certificates.
pub struct CertificateAuthority {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    key_pem: String,
}

impl std::fmt::Debug for CertificateAuthority {
    // The signing key stays out of debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority").finish_non_exhaustive()
    }
}

impl CertificateAuthority {
    /// Creates a new CA whose common name is `common_name`, valid for ten years.
    pub fn new(common_name: &str) -> Result<Self> {
        let key = KeyPair::generate().map_err(|e| Error::Pki(format!("generate CA key: {e}")))?;
        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name(common_name, &[]);
        params.is_ca = IsCa::Ca(RcgenBasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let now = OffsetDateTime::now_utc();
        params.not_before = now - Duration::hours(1);
        params.not_after = now + Duration::days(3650);
        let cert = params
            .self_signed(&key)
            .map_err(|e| Error::Pki(format!("self-sign CA: {e}")))?;
        let key_pem = key.serialize_pem();
        Ok(Self {
            cert_pem: cert.pem(),
            key_pem,
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA private key, PEM (handed to the controller manager for CSR signing).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// Issues a client certificate: the apiserver reads `user` from the CN and `groups` from
    /// the O attributes.
    ///
    /// Built with `x509-cert` rather than rcgen because rcgen keeps one value per attribute
    /// type, and Kubernetes identities often need several organizations (groups).
    pub fn issue_client(&self, user: &str, groups: &[&str]) -> Result<CertAndKey> {
        let subject =
            flotilla_core::x509::subject_name(user, groups, &[]).map_err(|e| Error::Pki(e.to_string()))?;
        let ca = Certificate::from_pem(self.cert_pem.as_bytes())
            .map_err(|e| Error::Pki(format!("parse CA: {e}")))?;
        let signer =
            SigningKey::from_pkcs8_pem(&self.key_pem).map_err(|e| Error::Pki(format!("load CA key: {e}")))?;
        let key = SigningKey::from_pkcs8_pem(
            &KeyPair::generate()
                .map_err(|e| Error::Pki(format!("generate client key: {e}")))?
                .serialize_pem(),
        )
        .map_err(|e| Error::Pki(format!("load client key: {e}")))?;
        let profile = ClientProfile {
            issuer: ca.tbs_certificate().subject().clone(),
            subject,
        };
        let validity = Validity::new(
            x509_cert::time::Time::try_from(
                std::time::SystemTime::now() - std::time::Duration::from_secs(3600),
            )
            .map_err(|e| Error::Pki(format!("validity: {e}")))?,
            x509_cert::time::Time::try_from(
                std::time::SystemTime::now() + std::time::Duration::from_secs(365 * 86400),
            )
            .map_err(|e| Error::Pki(format!("validity: {e}")))?,
        );
        let spki = SubjectPublicKeyInfo::from_key(key.verifying_key())
            .map_err(|e| Error::Pki(format!("public key: {e}")))?;
        let serial = unique_serial(&spki)?;
        let builder = CertificateBuilder::new(profile, serial, validity, spki)
            .map_err(|e| Error::Pki(format!("client certificate: {e}")))?;
        let cert = builder
            .build::<_, DerSignature>(&signer)
            .map_err(|e| Error::Pki(format!("sign client certificate: {e}")))?;
        Ok(CertAndKey {
            cert_pem: cert
                .to_pem(LineEnding::LF)
                .map_err(|e| Error::Pki(format!("encode client certificate: {e}")))?,
            key_pem: key
                .to_pkcs8_pem(LineEnding::LF)
                .map_err(|e| Error::Pki(format!("encode client key: {e}")))?
                .to_string(),
        })
    }

    /// Issues a serving certificate for loopback (`127.0.0.1`, `::1`, `localhost`) plus `extra_dns`.
    pub fn issue_serving(&self, common_name: &str, extra_dns: &[&str]) -> Result<CertAndKey> {
        self.issue_serving_with_ips(common_name, extra_dns, &[])
    }

    /// Like [`Self::issue_serving`], also valid for `extra_ips` (an apiserver's `kubernetes`
    /// Service address, which pods dial).
    pub fn issue_serving_with_ips(
        &self,
        common_name: &str,
        extra_dns: &[&str],
        extra_ips: &[std::net::IpAddr],
    ) -> Result<CertAndKey> {
        let mut sans = vec!["localhost".to_owned()];
        sans.extend(extra_dns.iter().map(|s| (*s).to_owned()));
        let mut params =
            CertificateParams::new(sans).map_err(|e| Error::Pki(format!("serving SANs: {e}")))?;
        params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        params
            .subject_alt_names
            .push(SanType::IpAddress(std::net::Ipv6Addr::LOCALHOST.into()));
        params
            .subject_alt_names
            .extend(extra_ips.iter().map(|ip| SanType::IpAddress(*ip)));
        params.distinguished_name = distinguished_name(common_name, &[]);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        self.issue(params, "serving")
    }

    fn issue(&self, mut params: CertificateParams, what: &str) -> Result<CertAndKey> {
        let now = OffsetDateTime::now_utc();
        params.not_before = now - Duration::hours(1);
        params.not_after = now + Duration::days(365);
        let key = KeyPair::generate().map_err(|e| Error::Pki(format!("generate {what} key: {e}")))?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| Error::Pki(format!("sign {what} certificate: {e}")))?;
        Ok(CertAndKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The service-account token signing key pair (ECDSA P-256, accepted by kube-apiserver as ES256).
#[derive(Clone, Debug)]
pub struct ServiceAccountKeys {
    /// Private key, PEM: `--service-account-signing-key-file` and the controller manager's
    /// `--service-account-private-key-file`.
    pub private_pem: String,
    /// Public key, PEM: `--service-account-key-file`.
    pub public_pem: String,
}

impl ServiceAccountKeys {
    /// Generates a fresh key pair.
    pub fn generate() -> Result<Self> {
        let key =
            KeyPair::generate().map_err(|e| Error::Pki(format!("generate service-account key: {e}")))?;
        Ok(Self {
            private_pem: key.serialize_pem(),
            public_pem: key.public_key_pem(),
        })
    }
}

/// A PKCS#10 certificate request for `CN=<user>, O=<group>…` with a fresh ECDSA P-256 key,
/// as an agent would send through the CSR API. `cert_pem` holds the request.
pub fn client_request(user: &str, groups: &[&str]) -> Result<CertAndKey> {
    let made =
        flotilla_core::x509::client_request(user, groups, &[], &[]).map_err(|e| Error::Pki(e.to_string()))?;
    Ok(CertAndKey {
        cert_pem: made.request_pem,
        key_pem: made.key_pem,
    })
}

/// A serial number unique per key and moment: the first 16 bytes of SHA-256 over the public
/// key and the current time, with the top bit cleared so it stays positive.
fn unique_serial(spki: &x509_cert::spki::SubjectPublicKeyInfoOwned) -> Result<SerialNumber> {
    use der::Encode;
    use sha2::{Digest, Sha256};

    let mut hasher = Sha256::new();
    hasher.update(
        spki.to_der()
            .map_err(|e| Error::Pki(format!("encode public key: {e}")))?,
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    hasher.update(nanos.to_le_bytes());
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes[0] &= 0x7f;
    bytes[0] |= 0x01;
    SerialNumber::new(&bytes).map_err(|e| Error::Pki(format!("serial number: {e}")))
}

/// Extensions of a client certificate: not a CA, digital signature + key encipherment,
/// client authentication.
struct ClientProfile {
    issuer: Name,
    subject: Name,
}

impl BuilderProfile for ClientProfile {
    fn get_issuer(&self, _subject: &Name) -> Name {
        self.issuer.clone()
    }

    fn get_subject(&self) -> Name {
        self.subject.clone()
    }

    fn build_extensions(
        &self,
        _spk: SubjectPublicKeyInfoRef<'_>,
        _issuer_spk: SubjectPublicKeyInfoRef<'_>,
        tbs: &TbsCertificate,
    ) -> x509_cert::builder::Result<Vec<Extension>> {
        let mut extensions = Vec::new();
        let subject = tbs.subject();
        extensions.push(
            BasicConstraints {
                ca: false,
                path_len_constraint: None,
            }
            .to_extension(subject, &extensions)?,
        );
        extensions.push(
            KeyUsage(KeyUsages::DigitalSignature | KeyUsages::KeyEncipherment)
                .to_extension(subject, &extensions)?,
        );
        extensions.push(ExtendedKeyUsage(vec![ID_KP_CLIENT_AUTH]).to_extension(subject, &extensions)?);
        Ok(extensions)
    }
}

fn distinguished_name(common_name: &str, organizations: &[&str]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    for org in organizations {
        dn.push(DnType::OrganizationName, *org);
    }
    dn
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_certificate_carries_user_in_cn_and_every_group_in_o() {
        let ca = CertificateAuthority::new("test-ca").unwrap();
        let issued = ca
            .issue_client("system:agent, odd+name", &["g1", "team=b", "g3"])
            .unwrap();
        let cert = Certificate::from_pem(issued.cert_pem.as_bytes()).unwrap();
        let subject = cert.tbs_certificate().subject().to_string();
        for part in ["CN=system:agent\\, odd\\+name", "O=g1", "O=team=b", "O=g3"] {
            assert!(subject.contains(part), "{part} missing from {subject}");
        }
        assert_eq!(cert.tbs_certificate().issuer().to_string(), "CN=test-ca");
    }
}
