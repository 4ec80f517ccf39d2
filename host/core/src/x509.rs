//! X.509 pieces of cluster and add-on registration: agents make PKCS#10 requests whose subject
//! carries a user (CN) and several groups (O), the hub reads them back to decide approval, and
//! agents read their certificate's validity to know when to rotate.
//!
//! Built on RustCrypto's `x509-cert` because Kubernetes identities need several O attributes,
//! which rcgen's one-value-per-type names cannot express; rcgen only generates the key.

use std::{str::FromStr, time::SystemTime};

use const_oid::db::rfc4519;
use der::{Decode, DecodePem, EncodePem, asn1::Ia5String, pem::LineEnding};
use p256::{
    ecdsa::{DerSignature, SigningKey},
    pkcs8::{DecodePrivateKey, EncodePrivateKey},
};
use x509_cert::{
    Certificate,
    builder::{Builder, RequestBuilder},
    ext::pkix::{SubjectAltName, name::GeneralName},
    name::Name,
    request::CertReq,
};

/// Why X.509 data could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum X509Error {
    /// Generating or encoding a key failed.
    #[error("generate key: {0}")]
    Key(String),
    /// Building or signing a request failed.
    #[error("build certificate request: {0}")]
    Request(String),
    /// Decoding a request or certificate failed.
    #[error("decode {what}: {message}")]
    Decode {
        /// `certificate request` or `certificate`.
        what: &'static str,
        /// The decoder's message.
        message: String,
    },
}

/// A fresh private key and a certificate request signed with it, both PEM.
#[derive(Clone)]
pub struct KeyAndRequest {
    /// PKCS#8 private key (ECDSA P-256), PEM.
    pub key_pem: String,
    /// PKCS#10 certificate request, PEM (`CERTIFICATE REQUEST`).
    pub request_pem: String,
}

impl std::fmt::Debug for KeyAndRequest {
    // The private key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyAndRequest")
            .field("request_pem", &self.request_pem)
            .finish_non_exhaustive()
    }
}

/// The identity a request or certificate names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subject {
    /// The common name: the Kubernetes user.
    pub common_name: String,
    /// The organizations: the Kubernetes groups, in order.
    pub organizations: Vec<String>,
    /// The organizational units.
    pub organizational_units: Vec<String>,
}

/// What the hub needs from a request to decide on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestInfo {
    /// The requested identity.
    pub subject: Subject,
    /// DNS subject alternative names.
    pub dns_names: Vec<String>,
}

/// What an agent needs from its certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateInfo {
    /// The certified identity.
    pub subject: Subject,
    /// Start of validity.
    pub not_before: SystemTime,
    /// End of validity.
    pub not_after: SystemTime,
}

/// Generates an ECDSA P-256 key and a request for `CN=<user>, O=<group>…, OU=<unit>…` with
/// the given DNS names as subject alternative names.
pub fn client_request(
    user: &str,
    groups: &[&str],
    units: &[&str],
    dns_names: &[&str],
) -> Result<KeyAndRequest, X509Error> {
    let generated = rcgen::KeyPair::generate().map_err(|e| X509Error::Key(e.to_string()))?;
    let key =
        SigningKey::from_pkcs8_pem(&generated.serialize_pem()).map_err(|e| X509Error::Key(e.to_string()))?;
    let mut builder = RequestBuilder::new(subject_name(user, groups, units)?)
        .map_err(|e| X509Error::Request(e.to_string()))?;
    if !dns_names.is_empty() {
        let names = dns_names
            .iter()
            .map(|n| Ia5String::new(n).map(GeneralName::DnsName))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| X509Error::Request(format!("DNS name: {e}")))?;
        builder
            .add_extension(&SubjectAltName(names))
            .map_err(|e| X509Error::Request(e.to_string()))?;
    }
    let request = builder
        .build::<_, DerSignature>(&key)
        .map_err(|e| X509Error::Request(e.to_string()))?;
    Ok(KeyAndRequest {
        key_pem: key
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(|e| X509Error::Key(e.to_string()))?
            .to_string(),
        request_pem: request
            .to_pem(LineEnding::LF)
            .map_err(|e| X509Error::Request(e.to_string()))?,
    })
}

/// The name `O=<group>…, OU=<unit>…, CN=<user>` in that (Go's) order, escaped per RFC 4514 so
/// that values holding `,`, `+` or `=` stay one attribute each.
pub fn subject_name(user: &str, groups: &[&str], units: &[&str]) -> Result<Name, X509Error> {
    let mut parts: Vec<String> = groups.iter().map(|g| format!("O={}", escape(g))).collect();
    parts.extend(units.iter().map(|u| format!("OU={}", escape(u))));
    parts.push(format!("CN={}", escape(user)));
    // An RFC 4514 string lists the RDNs last-first.
    parts.reverse();
    let text = parts.join(",");
    Name::from_str(&text).map_err(|e| X509Error::Request(format!("subject {text:?}: {e}")))
}

fn escape(value: &str) -> String {
    let count = value.chars().count();
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        let edge = (i == 0 && (c == '#' || c == ' ')) || (i + 1 == count && c == ' ');
        if edge || matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Reads a PEM (or DER) certificate request.
pub fn parse_request(bytes: &[u8]) -> Result<RequestInfo, X509Error> {
    let decode = |message: String| X509Error::Decode {
        what: "certificate request",
        message,
    };
    let request = CertReq::from_pem(bytes)
        .or_else(|_| CertReq::from_der(bytes))
        .map_err(|e| decode(e.to_string()))?;
    let mut dns_names = Vec::new();
    for attribute in request.info.attributes.iter() {
        if attribute.oid != const_oid::db::rfc5912::ID_EXTENSION_REQ {
            continue;
        }
        for value in attribute.values.iter() {
            let extensions: x509_cert::request::ExtensionReq = value
                .decode_as()
                .map_err(|e| decode(format!("extension request: {e}")))?;
            for extension in extensions.0 {
                if extension.extn_id != const_oid::db::rfc5280::ID_CE_SUBJECT_ALT_NAME {
                    continue;
                }
                let san = SubjectAltName::from_der(extension.extn_value.as_bytes())
                    .map_err(|e| decode(format!("subject alternative names: {e}")))?;
                for name in san.0 {
                    if let GeneralName::DnsName(dns) = name {
                        dns_names.push(dns.to_string());
                    }
                }
            }
        }
    }
    Ok(RequestInfo {
        subject: subject_of(&request.info.subject),
        dns_names,
    })
}

/// Reads the first certificate of a PEM bundle (or DER).
pub fn parse_certificate(bytes: &[u8]) -> Result<CertificateInfo, X509Error> {
    let certificate = Certificate::load_pem_chain(bytes)
        .ok()
        .and_then(|chain| chain.into_iter().next())
        .map_or_else(|| Certificate::from_der(bytes), Ok)
        .map_err(|e| X509Error::Decode {
            what: "certificate",
            message: e.to_string(),
        })?;
    let tbs = certificate.tbs_certificate();
    Ok(CertificateInfo {
        subject: subject_of(tbs.subject()),
        not_before: tbs.validity().not_before.to_system_time(),
        not_after: tbs.validity().not_after.to_system_time(),
    })
}

fn subject_of(name: &Name) -> Subject {
    let mut subject = Subject::default();
    for rdn in name.iter_rdn() {
        for attribute in rdn.iter() {
            let Some(value) = attribute_text(&attribute.value) else {
                continue;
            };
            if attribute.oid == rfc4519::CN {
                subject.common_name = value;
            } else if attribute.oid == rfc4519::O {
                subject.organizations.push(value);
            } else if attribute.oid == rfc4519::OU {
                subject.organizational_units.push(value);
            }
        }
    }
    subject
}

fn attribute_text(value: &der::Any) -> Option<String> {
    use der::asn1::{PrintableStringRef, Utf8StringRef};
    value
        .decode_as::<Utf8StringRef<'_>>()
        .map(|s| s.as_str().to_owned())
        .or_else(|_| {
            value
                .decode_as::<PrintableStringRef<'_>>()
                .map(|s| s.as_str().to_owned())
        })
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_carries_user_every_group_and_dns_names() {
        let made = client_request(
            "system:open-cluster-management:cluster1:agent1",
            &[
                "system:open-cluster-management:cluster1",
                "system:open-cluster-management:managed-clusters",
            ],
            &["unit-a"],
            &["helloworld.addon.open-cluster-management.io"],
        )
        .unwrap();
        assert!(
            made.request_pem
                .starts_with("-----BEGIN CERTIFICATE REQUEST-----")
        );
        let info = parse_request(made.request_pem.as_bytes()).unwrap();
        assert_eq!(
            info.subject.common_name,
            "system:open-cluster-management:cluster1:agent1"
        );
        assert_eq!(
            info.subject.organizations,
            [
                "system:open-cluster-management:cluster1",
                "system:open-cluster-management:managed-clusters"
            ]
        );
        assert_eq!(info.subject.organizational_units, ["unit-a"]);
        assert_eq!(info.dns_names, ["helloworld.addon.open-cluster-management.io"]);
    }

    #[test]
    fn special_characters_stay_inside_one_attribute() {
        let made = client_request("a,b+c=d", &["g=1", "g,2"], &[], &[]).unwrap();
        let info = parse_request(made.request_pem.as_bytes()).unwrap();
        assert_eq!(info.subject.common_name, "a,b+c=d");
        assert_eq!(info.subject.organizations, ["g=1", "g,2"]);
    }

    #[test]
    fn garbage_is_a_decode_error_not_a_panic() {
        assert!(matches!(
            parse_request(b"not a request"),
            Err(X509Error::Decode { .. })
        ));
        assert!(matches!(
            parse_certificate(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
            Err(X509Error::Decode { .. })
        ));
    }
}
