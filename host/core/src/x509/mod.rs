//! X.509 pieces of cluster and add-on registration: agents make PKCS#10 requests whose subject
//! carries a user (CN) and several groups (O), the hub reads them back to decide approval, and
//! agents read their certificate's validity to know when to rotate.
//!
//! The hub's reading must be Go's: the controller manager's signer copies the subject that Go's
//! crypto/x509 reads into the certificate, and the apiserver authenticates its CN as the user and
//! each O as a group. So [`parse_request`] reads only what Go itself writes and refuses the rest
//! (Go also reads IA5String, T61String, BMPString and NumericString values, and the last of
//! several CNs; a reader that skipped those would approve identities it never saw).
//! `tests/csr-oracle` (Go) and `tests/tests/csr_oracle.rs` compare the two readings on generated
//! requests; `tests/fuzz` fuzzes the reader.
//!
//! Built on RustCrypto's `x509-cert` because Kubernetes identities need several O attributes,
//! which rcgen's one-value-per-type names cannot express; rcgen only generates the key. The
//! subject and the signed bytes are read from the request's bytes as received (`walk`), never
//! from a re-encoding.

pub mod craft;
mod name;
mod pem;
mod signature;
mod walk;

use std::{str::FromStr, time::SystemTime};

use der::{Decode, EncodePem, asn1::Ia5String, pem::LineEnding};
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
    /// A request or certificate that Flotilla does not read because it could read it otherwise
    /// than Go's crypto/x509 (the apiserver, the controller manager's signer) does.
    #[error("refused {what}: {reason}")]
    Refused {
        /// `certificate request` or `certificate`.
        what: &'static str,
        /// What was refused.
        reason: Refusal,
    },
}

/// What made [`parse_request`] or [`parse_certificate`] refuse its input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Not exactly one PEM block of the expected kind with only whitespace around it.
    #[error("PEM: {0}")]
    Pem(String),
    /// DER that is not strict, or not the expected structure.
    #[error("DER: {0}")]
    Der(String),
    /// Bytes after the end of an element.
    #[error("trailing data after the {0}")]
    TrailingData(&'static str),
    /// A request's subject attribute value of a string type other than UTF8String and
    /// PrintableString (the only ones Go writes).
    #[error("subject attribute {attribute} is {found}; only UTF8String and PrintableString values are read")]
    StringType {
        /// `CN`, `O` or `OU`.
        attribute: String,
        /// The type found, e.g. `an IA5String`.
        found: String,
    },
    /// A subject attribute value that is no string type Go reads.
    #[error("subject attribute {attribute} is {found}, not a string Go's crypto/x509 reads")]
    NotAString {
        /// The attribute type (`CN`, `O`, `OU` or a dotted OID).
        attribute: String,
        /// The type found.
        found: String,
    },
    /// A string value whose contents its type does not allow.
    #[error("subject attribute {attribute}: {problem}")]
    InvalidString {
        /// The attribute type.
        attribute: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// A request's RDN with no attribute, or several that are not all O or all OU.
    #[error("multi-valued RDN: {0}")]
    MultiValuedRdn(String),
    /// A request naming more than one CN.
    #[error("more than one common name (CN)")]
    RepeatedCommonName,
    /// A request naming no CN, or an empty one.
    #[error("no common name (CN)")]
    NoCommonName,
    /// A request's subject attribute other than CN, O and OU.
    #[error("subject attribute type {0}; only CN, O and OU are read")]
    AttributeType(String),
    /// A request attribute other than the extension request.
    #[error("request attribute {0}; only the extension request is read")]
    RequestAttribute(String),
    /// Requested extensions that are not read the same way for sure.
    #[error("extensions: {0}")]
    Extension(String),
    /// A signature that does not verify, or that Flotilla cannot verify.
    #[error("signature: {0}")]
    Signature(String),
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

/// Reads a PEM certificate request exactly as Go's crypto/x509 (Kubernetes' `ParseCSR`: the
/// first PEM block, `x509.ParseCertificateRequest`) reads it, or refuses it.
///
/// The hub decides on what this returns, and the certificate the controller manager signs
/// carries Go's reading of the same bytes, so anything the two could read differently is
/// refused rather than guessed at ([`Refusal`]):
///
/// ```text
///  input      exactly one CERTIFICATE REQUEST PEM block, only whitespace around it
///  DER        strict; nothing after the request
///  subject    CN (exactly one, not empty), O, OU; UTF8String or PrintableString values;
///             one attribute per RDN, or several O (or OU) in one RDN as Go writes them
///  attributes only the extension request; subject alternative names DNS, IP and e-mail
///  signature  checked (ECDSA P-256/P-384, RSA PKCS#1 v1.5 2048-8192, Ed25519)
/// ```
pub fn parse_request(bytes: &[u8]) -> Result<RequestInfo, X509Error> {
    const WHAT: &str = "certificate request";
    let refused = |reason: Refusal| X509Error::Refused { what: WHAT, reason };
    let der = pem::only_block(bytes, "CERTIFICATE REQUEST").map_err(refused)?;

    // The raw pieces, as received: what Go reads and what was signed.
    let outer = walk::single(&der, craft::tag::SEQUENCE, WHAT).map_err(refused)?;
    let mut parts = walk::Reader::new(outer.content);
    let info = parts
        .expect(craft::tag::SEQUENCE, "request info")
        .map_err(refused)?;
    let algorithm = parts
        .expect(craft::tag::SEQUENCE, "signature algorithm")
        .map_err(refused)?;
    let signature = parts
        .expect(craft::tag::BIT_STRING, "signature")
        .map_err(refused)?;
    parts.finish(WHAT).map_err(refused)?;
    let mut fields = walk::Reader::new(info.content);
    fields.expect(craft::tag::INTEGER, "version").map_err(refused)?;
    let subject = fields.expect(craft::tag::SEQUENCE, "subject").map_err(refused)?;
    let spki = fields
        .expect(craft::tag::SEQUENCE, "public key info")
        .map_err(refused)?;

    let subject = name::read(subject.whole, name::Policy::Plain).map_err(refused)?;
    signature::verify(spki.whole, algorithm.whole, signature, info.whole).map_err(refused)?;
    // The rest (the attributes) through the typed decoder, which is no less strict.
    let request = CertReq::from_der(&der).map_err(|e| X509Error::Decode {
        what: WHAT,
        message: e.to_string(),
    })?;
    let dns_names = requested_dns_names(&request).map_err(refused)?;
    Ok(RequestInfo { subject, dns_names })
}

/// The DNS names of the request's subject alternative names. Its only attribute may be one
/// extension request, holding each extension once; of the names, DNS names, IP addresses and
/// e-mail addresses are read (Go also reads URIs, which it checks in ways not repeated here).
fn requested_dns_names(request: &CertReq) -> Result<Vec<String>, Refusal> {
    use const_oid::db::{rfc5280::ID_CE_SUBJECT_ALT_NAME, rfc5912::ID_EXTENSION_REQ};
    let mut dns_names = Vec::new();
    let mut seen_request = false;
    for attribute in request.info.attributes.iter() {
        if attribute.oid != ID_EXTENSION_REQ {
            return Err(Refusal::RequestAttribute(attribute.oid.to_string()));
        }
        if seen_request || attribute.values.len() != 1 {
            return Err(Refusal::Extension("more than one extension request".to_owned()));
        }
        seen_request = true;
        let Some(value) = attribute.values.iter().next() else {
            continue;
        };
        let extensions: x509_cert::request::ExtensionReq = value
            .decode_as()
            .map_err(|e| Refusal::Extension(format!("extension request: {e}")))?;
        let mut ids = std::collections::BTreeSet::new();
        for extension in extensions.0 {
            if !ids.insert(extension.extn_id) {
                return Err(Refusal::Extension(format!(
                    "extension {} requested twice",
                    extension.extn_id
                )));
            }
            if extension.extn_id != ID_CE_SUBJECT_ALT_NAME {
                continue;
            }
            let san = SubjectAltName::from_der(extension.extn_value.as_bytes())
                .map_err(|e| Refusal::Extension(format!("subject alternative names: {e}")))?;
            for name in san.0 {
                match name {
                    GeneralName::DnsName(dns) => dns_names.push(dns.to_string()),
                    GeneralName::Rfc822Name(_) => {}
                    GeneralName::IpAddress(ip) if matches!(ip.as_bytes().len(), 4 | 16) => {}
                    other => {
                        return Err(Refusal::Extension(format!(
                            "subject alternative name {other:?} is not a DNS name, IP address or \
                             e-mail address"
                        )));
                    }
                }
            }
        }
    }
    Ok(dns_names)
}

/// Reads the first certificate of a PEM bundle (or DER). Its subject is read as Go's
/// crypto/x509 reads it (the identity the apiserver authenticates): every string type Go
/// reads, the last CN, O and OU in encoded order; a subject Go would not read is refused.
pub fn parse_certificate(bytes: &[u8]) -> Result<CertificateInfo, X509Error> {
    const WHAT: &str = "certificate";
    let refused = |reason: Refusal| X509Error::Refused { what: WHAT, reason };
    let der = match pem::first_certificate(bytes) {
        Some(der) => der.map_err(refused)?,
        None => bytes.to_vec(),
    };
    let certificate = Certificate::from_der(&der).map_err(|e| X509Error::Decode {
        what: WHAT,
        message: e.to_string(),
    })?;
    let subject = certificate_subject(&der).map_err(refused)?;
    let tbs = certificate.tbs_certificate();
    Ok(CertificateInfo {
        subject,
        not_before: tbs.validity().not_before.to_system_time(),
        not_after: tbs.validity().not_after.to_system_time(),
    })
}

/// The subject of a certificate's DER, read from the bytes as received.
fn certificate_subject(der: &[u8]) -> Result<Subject, Refusal> {
    use craft::tag::{INTEGER, SEQUENCE};
    let outer = walk::single(der, SEQUENCE, "certificate")?;
    let tbs = walk::Reader::new(outer.content).expect(SEQUENCE, "tbsCertificate")?;
    let mut fields = walk::Reader::new(tbs.content);
    let mut first = fields.next("certificate version or serial")?;
    if first.tag == 0xa0 {
        first = fields.next("certificate serial")?;
    }
    if first.tag != INTEGER {
        return Err(Refusal::Der("certificate serial is not an INTEGER".to_owned()));
    }
    for what in ["certificate signature algorithm", "issuer", "validity"] {
        fields.expect(SEQUENCE, what)?;
    }
    let subject = fields.expect(SEQUENCE, "subject")?;
    name::read(subject.whole, name::Policy::Go)
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
    fn garbage_is_refused_not_a_panic() {
        assert!(matches!(
            parse_request(b"not a request"),
            Err(X509Error::Refused {
                reason: Refusal::Pem(_),
                ..
            })
        ));
        assert!(matches!(
            parse_request(b"-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"),
            Err(X509Error::Refused {
                reason: Refusal::Der(_),
                ..
            })
        ));
        assert!(matches!(
            parse_certificate(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
            Err(X509Error::Decode { .. })
        ));
    }

    /// Crafted requests: each refused shape, and the plain shapes Go writes.
    mod strict {
        use rstest::rstest;

        use super::super::{
            craft::{self, P256Key, atv, name, oid, rdn, tag},
            *,
        };

        const C1: &str = "system:open-cluster-management:cluster1";
        const C2: &str = "system:open-cluster-management:cluster2";
        const AGENT: &str = "system:open-cluster-management:cluster1:agent1";

        fn one(oid: &[u8], value_tag: u8, value: &[u8]) -> Vec<u8> {
            rdn(&[atv(oid, value_tag, value)])
        }

        fn printable(oid: &[u8], value: &str) -> Vec<u8> {
            one(oid, tag::PRINTABLE, value.as_bytes())
        }

        /// A signed request for `rdns`, PEM.
        fn request(rdns: &[Vec<u8>]) -> String {
            craft::signed_request(&name(rdns), &[]).unwrap().request_pem
        }

        fn with_attributes(rdns: &[Vec<u8>], attributes: &[Vec<u8>]) -> String {
            craft::signed_request(&name(rdns), attributes)
                .unwrap()
                .request_pem
        }

        fn refusal(pem: &[u8]) -> Refusal {
            match parse_request(pem) {
                Err(X509Error::Refused { reason, .. }) => reason,
                other => panic!("expected a refusal, got {other:?}"),
            }
        }

        #[test]
        fn printable_strings_may_hold_colons_as_agent_identities_do() {
            let pem = request(&[printable(oid::O, C1), printable(oid::CN, AGENT)]);
            let info = parse_request(pem.as_bytes()).unwrap();
            assert_eq!(info.subject.common_name, AGENT);
            assert_eq!(info.subject.organizations, [C1]);
        }

        #[test]
        fn several_organizations_in_one_rdn_as_go_writes_them_are_read_in_encoded_order() {
            // Go's pkix.Name.ToRDNSequence puts all O values in one SET (sorted when encoded);
            // the order read is the order encoded, as Go reads it.
            let pem = request(&[
                rdn(&[
                    atv(oid::O, tag::PRINTABLE, b"zeta"),
                    atv(oid::O, tag::UTF8, b"alpha"),
                ]),
                rdn(&[atv(oid::OU, tag::UTF8, b"u2"), atv(oid::OU, tag::UTF8, b"u1")]),
                printable(oid::CN, AGENT),
            ]);
            let info = parse_request(pem.as_bytes()).unwrap();
            assert_eq!(info.subject.organizations, ["zeta", "alpha"]);
            assert_eq!(info.subject.organizational_units, ["u2", "u1"]);
        }

        #[test]
        fn requested_dns_names_are_read() {
            let pem = with_attributes(
                &[printable(oid::CN, "u")],
                &[craft::extension_request(&[craft::san_dns(&[
                    "a.example",
                    "b.example",
                ])])],
            );
            let info = parse_request(pem.as_bytes()).unwrap();
            assert_eq!(info.dns_names, ["a.example", "b.example"]);
        }

        #[rstest]
        fn other_string_types_are_refused_in_every_attribute(
            #[values(oid::CN, oid::O, oid::OU)] attribute: &[u8],
            #[values(
                tag::IA5,
                tag::T61,
                tag::BMP,
                tag::NUMERIC,
                tag::VISIBLE,
                tag::UNIVERSAL,
                tag::GENERAL,
                tag::INTEGER,
                tag::OCTET_STRING,
                0x2c
            )]
            value_tag: u8,
        ) {
            // NumericString and BMPString contents valid for their type ("1" is ASCII too).
            let value: &[u8] = if value_tag == tag::BMP { &[0, b'1'] } else { b"1" };
            let mut rdns = vec![one(attribute, value_tag, value)];
            if attribute != oid::CN {
                rdns.push(printable(oid::CN, AGENT));
            }
            let reason = refusal(request(&rdns).as_bytes());
            assert!(
                matches!(reason, Refusal::StringType { .. }),
                "{value_tag:#x}: {reason}"
            );
        }

        #[test]
        fn the_smuggled_group_and_user_are_refused() {
            let extra_group = request(&[
                printable(oid::O, C1),
                one(oid::O, tag::IA5, C2.as_bytes()),
                printable(oid::CN, AGENT),
            ]);
            assert_eq!(
                refusal(extra_group.as_bytes()),
                Refusal::StringType {
                    attribute: "O".into(),
                    found: "an IA5String".into()
                }
            );
            let second_user = request(&[
                printable(oid::O, C1),
                printable(oid::CN, AGENT),
                one(
                    oid::CN,
                    tag::IA5,
                    b"system:open-cluster-management:cluster2:agent1",
                ),
            ]);
            assert!(matches!(
                refusal(second_user.as_bytes()),
                Refusal::StringType { .. }
            ));
            let error = parse_request(extra_group.as_bytes()).unwrap_err().to_string();
            assert!(error.contains("O is an IA5String"), "{error}");
        }

        #[rstest]
        #[case::utf8(tag::UTF8, &[0x61, 0xff])]
        #[case::utf8_surrogate(tag::UTF8, &[0xed, 0xa0, 0x80])]
        #[case::printable_underscore(tag::PRINTABLE, b"a_b")]
        #[case::printable_at(tag::PRINTABLE, b"a@b")]
        #[case::printable_ampersand(tag::PRINTABLE, b"a&b")]
        #[case::printable_high(tag::PRINTABLE, &[0x61, 0xe9])]
        fn invalid_contents_are_refused(#[case] value_tag: u8, #[case] value: &[u8]) {
            let reason = refusal(request(&[one(oid::CN, value_tag, value)]).as_bytes());
            assert!(matches!(reason, Refusal::InvalidString { .. }), "{reason}");
        }

        #[test]
        fn a_printable_asterisk_as_go_writes_it_is_read() {
            let pem = request(&[printable(oid::CN, "*.example")]);
            assert_eq!(
                parse_request(pem.as_bytes()).unwrap().subject.common_name,
                "*.example"
            );
        }

        #[rstest]
        #[case::cn_and_o(vec![atv(oid::CN, tag::UTF8, b"u"), atv(oid::O, tag::UTF8, b"g")])]
        #[case::o_and_ou(vec![atv(oid::O, tag::UTF8, b"g"), atv(oid::OU, tag::UTF8, b"u")])]
        #[case::two_cns(vec![atv(oid::CN, tag::UTF8, b"u"), atv(oid::CN, tag::UTF8, b"v")])]
        #[case::o_and_cn(vec![atv(oid::O, tag::UTF8, b"g"), atv(oid::CN, tag::UTF8, b"u")])]
        #[case::empty(vec![])]
        fn multi_valued_rdns_other_than_all_o_or_all_ou_are_refused(#[case] members: Vec<Vec<u8>>) {
            let pem = request(&[rdn(&members), printable(oid::CN, "u")]);
            let reason = refusal(pem.as_bytes());
            assert!(matches!(reason, Refusal::MultiValuedRdn(_)), "{reason}");
        }

        #[test]
        fn a_repeated_common_name_is_refused() {
            let pem = request(&[printable(oid::CN, AGENT), printable(oid::CN, "other")]);
            assert_eq!(refusal(pem.as_bytes()), Refusal::RepeatedCommonName);
            let same = request(&[
                printable(oid::CN, AGENT),
                one(oid::CN, tag::UTF8, AGENT.as_bytes()),
            ]);
            assert_eq!(refusal(same.as_bytes()), Refusal::RepeatedCommonName);
        }

        #[test]
        fn no_or_an_empty_common_name_is_refused() {
            assert_eq!(
                refusal(request(&[printable(oid::O, C1)]).as_bytes()),
                Refusal::NoCommonName
            );
            assert_eq!(refusal(request(&[]).as_bytes()), Refusal::NoCommonName);
            assert_eq!(
                refusal(request(&[printable(oid::CN, "")]).as_bytes()),
                Refusal::NoCommonName
            );
        }

        #[rstest]
        #[case::country(oid::C)]
        #[case::serial_number(oid::SERIAL_NUMBER)]
        #[case::uid(oid::UID)]
        #[case::unknown(&[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37])]
        fn other_attribute_types_are_refused(#[case] attribute: &[u8]) {
            let pem = request(&[printable(attribute, "x"), printable(oid::CN, "u")]);
            let reason = refusal(pem.as_bytes());
            assert!(matches!(reason, Refusal::AttributeType(_)), "{reason}");
        }

        #[test]
        fn a_malformed_attribute_oid_is_refused() {
            for bad in [&[][..], &[0x55, 0x04, 0x83], &[0x55, 0x80, 0x03]] {
                let pem = request(&[printable(bad, "x"), printable(oid::CN, "u")]);
                assert!(parse_request(pem.as_bytes()).is_err(), "{bad:02x?}");
            }
        }

        #[test]
        fn trailing_bytes_are_refused() {
            let key = P256Key::generate().unwrap();
            let der = key.request(&name(&[printable(oid::CN, "u")]), &[]).unwrap();
            let after_request = craft::pem(&[der.clone(), vec![0]].concat());
            assert!(parse_request(after_request.as_bytes()).is_err());
            // Inside an attribute: a third element after the value.
            let mut long_atv = craft::tlv(tag::OID, oid::CN);
            long_atv.extend(craft::tlv(tag::UTF8, b"u"));
            long_atv.extend(craft::tlv(tag::UTF8, b"v"));
            let pem = request(&[rdn(&[craft::tlv(tag::SEQUENCE, &long_atv)])]);
            assert!(parse_request(pem.as_bytes()).is_err());
            // A Name followed by more bytes inside its SEQUENCE that are not an RDN.
            let subject = craft::tlv(
                tag::SEQUENCE,
                &[printable(oid::CN, "u"), vec![0x05, 0x00]].concat(),
            );
            let pem = craft::pem(&key.request(&subject, &[]).unwrap());
            assert!(parse_request(pem.as_bytes()).is_err());
        }

        #[test]
        fn two_pem_blocks_or_anything_around_the_block_are_refused() {
            let pem = request(&[printable(oid::CN, "u")]);
            let other = request(&[printable(oid::CN, "v")]);
            for input in [
                format!("{pem}{other}"),
                format!("{pem}\n-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n"),
                format!("hello\n{pem}"),
                format!("{pem}bye"),
            ] {
                let reason = refusal(input.as_bytes());
                assert!(matches!(reason, Refusal::Pem(_)), "{reason}");
            }
            assert!(parse_request(format!("\n\t \n{pem}\n\n").as_bytes()).is_ok());
            assert!(
                parse_request(format!(" {pem}").as_bytes()).is_err(),
                "Go finds no BEGIN there"
            );
            let key = P256Key::generate().unwrap();
            let der = key.request(&name(&[printable(oid::CN, "u")]), &[]).unwrap();
            assert!(matches!(refusal(&der), Refusal::Pem(_)), "DER is not read");
        }

        #[test]
        fn a_signature_that_does_not_verify_is_refused() {
            let key = P256Key::generate().unwrap();
            let subject = name(&[printable(oid::CN, "u")]);
            let info = craft::request_info(&subject, &key.spki().unwrap(), &[]);
            let signature = key.sign(&info);
            let other = P256Key::generate().unwrap().sign(&info);
            let tampered = craft::request_info(&name(&[printable(oid::CN, "v")]), &key.spki().unwrap(), &[]);
            for der in [
                craft::assemble(&info, &P256Key::algorithm(), &other),
                craft::assemble(&tampered, &P256Key::algorithm(), &signature),
            ] {
                let reason = refusal(craft::pem(&der).as_bytes());
                assert!(matches!(reason, Refusal::Signature(_)), "{reason}");
            }
            // The right signature under an algorithm identifier with NULL parameters, and
            // under RSA: not verified, so refused.
            let with_null = craft::tlv(
                tag::SEQUENCE,
                &[craft::tlv(tag::OID, oid::ECDSA_WITH_SHA256), vec![0x05, 0x00]].concat(),
            );
            let rsa = craft::tlv(
                tag::SEQUENCE,
                &[
                    craft::tlv(tag::OID, &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b]),
                    vec![0x05, 0x00],
                ]
                .concat(),
            );
            for algorithm in [with_null, rsa] {
                let der = craft::assemble(&info, &algorithm, &signature);
                assert!(parse_request(craft::pem(&der).as_bytes()).is_err());
            }
            let good = craft::assemble(&info, &P256Key::algorithm(), &signature);
            assert!(parse_request(craft::pem(&good).as_bytes()).is_ok());
        }

        #[test]
        fn an_ed25519_signature_is_verified() {
            use ring::signature::{Ed25519KeyPair, KeyPair as _};
            let rng = ring::rand::SystemRandom::new();
            let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
            let key = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
            let algorithm = craft::tlv(tag::SEQUENCE, &craft::tlv(tag::OID, &[0x2b, 0x65, 0x70]));
            let spki = craft::tlv(
                tag::SEQUENCE,
                &[
                    algorithm.clone(),
                    craft::tlv(tag::BIT_STRING, &[&[0][..], key.public_key().as_ref()].concat()),
                ]
                .concat(),
            );
            let info = craft::request_info(&name(&[printable(oid::CN, "u")]), &spki, &[]);
            let good = craft::assemble(&info, &algorithm, key.sign(&info).as_ref());
            assert!(parse_request(craft::pem(&good).as_bytes()).is_ok());
            let mut bad_signature = key.sign(&info).as_ref().to_vec();
            bad_signature[0] ^= 1;
            let bad = craft::assemble(&info, &algorithm, &bad_signature);
            assert!(matches!(
                refusal(craft::pem(&bad).as_bytes()),
                Refusal::Signature(_)
            ));
        }

        #[test]
        fn request_attributes_other_than_one_extension_request_are_refused() {
            let cn = [printable(oid::CN, "u")];
            let password = craft::tlv(
                tag::SEQUENCE,
                &[
                    craft::tlv(tag::OID, oid::CHALLENGE_PASSWORD),
                    craft::tlv(tag::SET, &craft::tlv(tag::UTF8, b"secret")),
                ]
                .concat(),
            );
            let reason = refusal(with_attributes(&cn, &[password]).as_bytes());
            assert!(matches!(reason, Refusal::RequestAttribute(_)), "{reason}");
            let san = craft::san_dns(&["a.example"]);
            let twice = craft::extension_request(&[san.clone(), craft::san_dns(&["b.example"])]);
            assert!(parse_request(with_attributes(&cn, &[twice]).as_bytes()).is_err());
            let uri = craft::extension(
                oid::SUBJECT_ALT_NAME,
                &craft::tlv(tag::SEQUENCE, &craft::tlv(0x86, b"spiffe://x/y")),
            );
            let reason = refusal(with_attributes(&cn, &[craft::extension_request(&[uri])]).as_bytes());
            assert!(matches!(reason, Refusal::Extension(_)), "{reason}");
            let ip5 = craft::extension(
                oid::SUBJECT_ALT_NAME,
                &craft::tlv(tag::SEQUENCE, &craft::tlv(0x87, &[1, 2, 3, 4, 5])),
            );
            assert!(
                parse_request(with_attributes(&cn, &[craft::extension_request(&[ip5])]).as_bytes()).is_err()
            );
            let ip4 = craft::extension(
                oid::SUBJECT_ALT_NAME,
                &craft::tlv(tag::SEQUENCE, &craft::tlv(0x87, &[10, 0, 0, 1])),
            );
            assert!(
                parse_request(with_attributes(&cn, &[craft::extension_request(&[ip4])]).as_bytes()).is_ok()
            );
        }

        #[test]
        fn certificates_are_read_as_go_reads_them() {
            let key = P256Key::generate().unwrap();
            let subject = name(&[
                rdn(&[
                    atv(oid::O, tag::PRINTABLE, C1.as_bytes()),
                    atv(oid::O, tag::IA5, C2.as_bytes()),
                ]),
                printable(oid::C, "DE"),
                printable(oid::CN, AGENT),
                one(oid::CN, tag::BMP, &craft::bmp("last")),
            ]);
            let pem = craft::pem_block("CERTIFICATE", &key.certificate(&subject).unwrap());
            let info = parse_certificate(pem.as_bytes()).unwrap();
            assert_eq!(info.subject.common_name, "last", "Go's last CN, not the first");
            assert_eq!(
                info.subject.organizations,
                [C1, C2],
                "the IA5String O is not skipped"
            );
            let visible = name(&[one(oid::CN, tag::VISIBLE, b"u")]);
            let pem = craft::pem_block("CERTIFICATE", &key.certificate(&visible).unwrap());
            assert!(matches!(
                parse_certificate(pem.as_bytes()),
                Err(X509Error::Refused {
                    reason: Refusal::NotAString { .. },
                    ..
                })
            ));
        }
    }
}
