//! Certificate requests assembled byte by byte, for tests and tools that must show what the hub
//! does with requests Flotilla's agents never make: subjects with other string types, repeated
//! or multi-valued attributes, unknown attributes, bad signatures, trailing bytes.
//!
//! Nothing here is checked: the caller writes whatever DER it wants. [`client_request`] is how
//! Flotilla makes its own requests.
//!
//! ```text
//!   name([rdn([atv(O, PRINTABLE, b"g1")]), rdn([atv(CN, IA5, b"u")])])   subject DER
//!   P256Key::generate()?.request(&subject, &[])                          signed PKCS#10 DER
//!   pem(&der)                                                            -----BEGIN CERTIFICATE REQUEST-----
//! ```
//!
//! [`client_request`]: super::client_request

use base64::Engine as _;
use p256::{
    ecdsa::{DerSignature, SigningKey, signature::Signer as _},
    pkcs8::{DecodePrivateKey, EncodePrivateKey, EncodePublicKey},
};

use super::{KeyAndRequest, X509Error};

/// Universal tags of the ASN.1 string types an attribute value may carry.
pub mod tag {
    /// UTF8String.
    pub const UTF8: u8 = 0x0c;
    /// PrintableString.
    pub const PRINTABLE: u8 = 0x13;
    /// IA5String.
    pub const IA5: u8 = 0x16;
    /// T61String (TeletexString).
    pub const T61: u8 = 0x14;
    /// BMPString.
    pub const BMP: u8 = 0x1e;
    /// NumericString.
    pub const NUMERIC: u8 = 0x12;
    /// VisibleString.
    pub const VISIBLE: u8 = 0x1a;
    /// UniversalString.
    pub const UNIVERSAL: u8 = 0x1c;
    /// GeneralString.
    pub const GENERAL: u8 = 0x1b;
    /// OCTET STRING.
    pub const OCTET_STRING: u8 = 0x04;
    /// INTEGER.
    pub const INTEGER: u8 = 0x02;
    /// OBJECT IDENTIFIER.
    pub const OID: u8 = 0x06;
    /// SEQUENCE (constructed).
    pub const SEQUENCE: u8 = 0x30;
    /// SET (constructed).
    pub const SET: u8 = 0x31;
    /// BIT STRING.
    pub const BIT_STRING: u8 = 0x03;
}

/// Contents of attribute type OIDs.
pub mod oid {
    /// 2.5.4.3, commonName.
    pub const CN: &[u8] = &[0x55, 0x04, 0x03];
    /// 2.5.4.10, organizationName.
    pub const O: &[u8] = &[0x55, 0x04, 0x0a];
    /// 2.5.4.11, organizationalUnitName.
    pub const OU: &[u8] = &[0x55, 0x04, 0x0b];
    /// 2.5.4.6, countryName.
    pub const C: &[u8] = &[0x55, 0x04, 0x06];
    /// 2.5.4.5, serialNumber.
    pub const SERIAL_NUMBER: &[u8] = &[0x55, 0x04, 0x05];
    /// 0.9.2342.19200300.100.1.1, userId (uid).
    pub const UID: &[u8] = &[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01];
    /// 1.2.840.113549.1.9.14, extensionRequest (a PKCS#10 attribute).
    pub const EXTENSION_REQUEST: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x0e];
    /// 1.2.840.113549.1.9.7, challengePassword (a PKCS#10 attribute).
    pub const CHALLENGE_PASSWORD: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x07];
    /// 2.5.29.17, subjectAltName.
    pub const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
    /// 1.2.840.10045.4.3.2, ecdsa-with-SHA256.
    pub const ECDSA_WITH_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
}

/// One DER element: `tag`, its definite minimal length, `content`.
pub fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + 6);
    out.push(tag);
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
    out
}

/// `SEQUENCE { OBJECT IDENTIFIER oid, value }` with the value's tag and contents as given.
pub fn atv(oid: &[u8], value_tag: u8, value: &[u8]) -> Vec<u8> {
    let mut content = tlv(tag::OID, oid);
    content.extend(tlv(value_tag, value));
    tlv(tag::SEQUENCE, &content)
}

/// A relative distinguished name: a SET of the given attributes, in the given order (not
/// sorted, so a test can write any order).
pub fn rdn(attributes: &[Vec<u8>]) -> Vec<u8> {
    tlv(tag::SET, &attributes.concat())
}

/// A Name: a SEQUENCE of the given RDNs.
pub fn name(rdns: &[Vec<u8>]) -> Vec<u8> {
    tlv(tag::SEQUENCE, &rdns.concat())
}

/// `value` as BMPString contents (UCS-2, big-endian).
pub fn bmp(value: &str) -> Vec<u8> {
    value.encode_utf16().flat_map(u16::to_be_bytes).collect()
}

/// The PKCS#10 `extensionRequest` attribute carrying `extensions` (each an Extension's DER).
pub fn extension_request(extensions: &[Vec<u8>]) -> Vec<u8> {
    let list = tlv(tag::SEQUENCE, &extensions.concat());
    let mut content = tlv(tag::OID, oid::EXTENSION_REQUEST);
    content.extend(tlv(tag::SET, &list));
    tlv(tag::SEQUENCE, &content)
}

/// A subjectAltName extension listing `dns_names` as dNSName entries.
pub fn san_dns(dns_names: &[&str]) -> Vec<u8> {
    let names: Vec<u8> = dns_names.iter().flat_map(|n| tlv(0x82, n.as_bytes())).collect();
    extension(oid::SUBJECT_ALT_NAME, &tlv(tag::SEQUENCE, &names))
}

/// An Extension `SEQUENCE { OID, OCTET STRING value }` (not critical).
pub fn extension(oid: &[u8], value_der: &[u8]) -> Vec<u8> {
    let mut content = tlv(tag::OID, oid);
    content.extend(tlv(tag::OCTET_STRING, value_der));
    tlv(tag::SEQUENCE, &content)
}

/// `CertificationRequestInfo`: version 0, `subject` (a Name's DER, as given), `spki`, and
/// `[0] attributes`.
pub fn request_info(subject: &[u8], spki: &[u8], attributes: &[Vec<u8>]) -> Vec<u8> {
    let mut content = tlv(tag::INTEGER, &[0]);
    content.extend_from_slice(subject);
    content.extend_from_slice(spki);
    content.extend(tlv(0xa0, &attributes.concat()));
    tlv(tag::SEQUENCE, &content)
}

/// `CertificationRequest`: `info`, the signature algorithm (an AlgorithmIdentifier's DER) and
/// `signature` as a BIT STRING with no unused bits.
pub fn assemble(info: &[u8], algorithm: &[u8], signature: &[u8]) -> Vec<u8> {
    let mut bits = vec![0];
    bits.extend_from_slice(signature);
    let mut content = info.to_vec();
    content.extend_from_slice(algorithm);
    content.extend(tlv(tag::BIT_STRING, &bits));
    tlv(tag::SEQUENCE, &content)
}

/// `der` as a `CERTIFICATE REQUEST` PEM block, 64 columns, LF line ends.
pub fn pem(der: &[u8]) -> String {
    pem_block("CERTIFICATE REQUEST", der)
}

/// `der` as a PEM block labelled `label`, 64 columns, LF line ends.
pub fn pem_block(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// An ECDSA P-256 key that signs crafted requests with ecdsa-with-SHA256.
pub struct P256Key(SigningKey);

impl P256Key {
    /// A fresh key.
    pub fn generate() -> Result<Self, X509Error> {
        let generated = rcgen::KeyPair::generate().map_err(|e| X509Error::Key(e.to_string()))?;
        SigningKey::from_pkcs8_pem(&generated.serialize_pem())
            .map(Self)
            .map_err(|e| X509Error::Key(e.to_string()))
    }

    /// The SubjectPublicKeyInfo DER.
    pub fn spki(&self) -> Result<Vec<u8>, X509Error> {
        self.0
            .verifying_key()
            .to_public_key_der()
            .map(|d| d.as_bytes().to_vec())
            .map_err(|e| X509Error::Key(e.to_string()))
    }

    /// The AlgorithmIdentifier DER of ecdsa-with-SHA256 (no parameters).
    pub fn algorithm() -> Vec<u8> {
        tlv(tag::SEQUENCE, &tlv(tag::OID, oid::ECDSA_WITH_SHA256))
    }

    /// The DER ECDSA-SHA256 signature of `message`.
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        let signature: DerSignature = self.0.sign(message);
        signature.to_bytes().to_vec()
    }

    /// A request for `subject` (a Name's DER, used as given) with `attributes`, signed.
    pub fn request(&self, subject: &[u8], attributes: &[Vec<u8>]) -> Result<Vec<u8>, X509Error> {
        let info = request_info(subject, &self.spki()?, attributes);
        Ok(assemble(&info, &Self::algorithm(), &self.sign(&info)))
    }

    /// A certificate for `subject` (a Name's DER, used as given; also the issuer) with this
    /// key, valid from 2000 to 2049, self-signed.
    pub fn certificate(&self, subject: &[u8]) -> Result<Vec<u8>, X509Error> {
        let mut tbs = tlv(0xa0, &tlv(tag::INTEGER, &[2]));
        tbs.extend(tlv(tag::INTEGER, &[1]));
        tbs.extend(Self::algorithm());
        tbs.extend_from_slice(subject);
        let mut validity = tlv(0x17, b"000101000000Z");
        validity.extend(tlv(0x17, b"491231235959Z"));
        tbs.extend(tlv(tag::SEQUENCE, &validity));
        tbs.extend_from_slice(subject);
        tbs.extend(self.spki()?);
        let tbs = tlv(tag::SEQUENCE, &tbs);
        Ok(assemble(&tbs, &Self::algorithm(), &self.sign(&tbs)))
    }

    /// The private key, PKCS#8 PEM.
    pub fn pem(&self) -> Result<String, X509Error> {
        self.0
            .to_pkcs8_pem(der::pem::LineEnding::LF)
            .map(|k| k.to_string())
            .map_err(|e| X509Error::Key(e.to_string()))
    }
}

/// A fresh key and a request for `subject` (a Name's DER, used as given), signed, both PEM.
pub fn signed_request(subject: &[u8], attributes: &[Vec<u8>]) -> Result<KeyAndRequest, X509Error> {
    let key = P256Key::generate()?;
    let der = key.request(subject, attributes)?;
    Ok(KeyAndRequest {
        key_pem: key.pem()?,
        request_pem: pem(&der),
    })
}
