//! A request's self-signature, checked as the apiserver's CSR validation (Go's
//! `CertificateRequest.CheckSignature`) does, for the algorithms `ring` offers. An algorithm
//! or key outside that list is refused rather than taken on trust: ECDSA P-256 and P-384 with
//! SHA-256 or SHA-384, RSA PKCS#1 v1.5 with SHA-256/384/512 (2048 to 8192 bits, exponent
//! 65537), and Ed25519. Go also takes SHA-1, RSA-PSS, P-521 and smaller RSA keys; the agents
//! of OCM and Flotilla sign with ECDSA P-256 and SHA-256.

use ring::signature::{self as sig, VerificationAlgorithm};

use super::{
    Refusal,
    craft::tag,
    walk::{Reader, Tlv, single},
};

// Whole AlgorithmIdentifier encodings, parameters as RFC 5758 / RFC 4055 / RFC 8410 give them.
const ECDSA_SHA256: &[u8] = &[
    0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02,
];
const ECDSA_SHA384: &[u8] = &[
    0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03,
];
const RSA_SHA256: &[u8] = &[
    0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b, 0x05, 0x00,
];
const RSA_SHA384: &[u8] = &[
    0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0c, 0x05, 0x00,
];
const RSA_SHA512: &[u8] = &[
    0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0d, 0x05, 0x00,
];
const ED25519: &[u8] = &[0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70];
// Public key algorithms.
const EC_P256: &[u8] = &[
    0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce,
    0x3d, 0x03, 0x01, 0x07,
];
const EC_P384: &[u8] = &[
    0x30, 0x10, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x05, 0x2b, 0x81, 0x04, 0x00,
    0x22,
];
const RSA: &[u8] = &[
    0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00,
];

/// The contents of a BIT STRING with no unused bits.
fn whole_bytes<'a>(bits: Tlv<'a>, what: &str) -> Result<&'a [u8], Refusal> {
    match bits.content.split_first() {
        Some((0, bytes)) => Ok(bytes),
        _ => Err(Refusal::Signature(format!(
            "{what} is not a whole number of bytes"
        ))),
    }
}

/// Checks `signature` (a BIT STRING element) over `signed` with the key of `spki` (a
/// SubjectPublicKeyInfo's whole encoding) under `algorithm` (an AlgorithmIdentifier's).
pub(crate) fn verify(
    spki: &[u8],
    algorithm: &[u8],
    signature: Tlv<'_>,
    signed: &[u8],
) -> Result<(), Refusal> {
    let key_info = single(spki, tag::SEQUENCE, "public key info")?;
    let mut fields = Reader::new(key_info.content);
    let key_algorithm = fields.expect(tag::SEQUENCE, "public key algorithm")?.whole;
    let key = whole_bytes(fields.expect(tag::BIT_STRING, "public key")?, "the public key")?;
    fields.finish("public key info")?;
    let signature = whole_bytes(signature, "the signature")?;

    let verifier: &dyn VerificationAlgorithm = match (algorithm, key_algorithm) {
        (ECDSA_SHA256, EC_P256) => &sig::ECDSA_P256_SHA256_ASN1,
        (ECDSA_SHA256, EC_P384) => &sig::ECDSA_P384_SHA256_ASN1,
        (ECDSA_SHA384, EC_P256) => &sig::ECDSA_P256_SHA384_ASN1,
        (ECDSA_SHA384, EC_P384) => &sig::ECDSA_P384_SHA384_ASN1,
        (RSA_SHA256 | RSA_SHA384 | RSA_SHA512, RSA) => {
            check_rsa_exponent(key)?;
            match algorithm {
                RSA_SHA256 => &sig::RSA_PKCS1_2048_8192_SHA256,
                RSA_SHA384 => &sig::RSA_PKCS1_2048_8192_SHA384,
                _ => &sig::RSA_PKCS1_2048_8192_SHA512,
            }
        }
        (ED25519, ED25519) => &sig::ED25519,
        _ => {
            return Err(Refusal::Signature(format!(
                "signature algorithm {} with public key algorithm {} is not one Flotilla verifies",
                describe(algorithm),
                describe(key_algorithm)
            )));
        }
    };
    sig::UnparsedPublicKey::new(verifier, key)
        .verify(signed, signature)
        .map_err(|_| Refusal::Signature("the signature does not verify with the request's key".to_owned()))
}

/// `RSAPublicKey ::= SEQUENCE { modulus INTEGER, publicExponent INTEGER }` with exponent 65537,
/// the only one Go's and every common key generator use (ring would take others Go refuses).
fn check_rsa_exponent(key: &[u8]) -> Result<(), Refusal> {
    let rsa = single(key, tag::SEQUENCE, "RSA public key")?;
    let mut fields = Reader::new(rsa.content);
    fields.expect(tag::INTEGER, "RSA modulus")?;
    let exponent = fields.expect(tag::INTEGER, "RSA exponent")?;
    fields.finish("RSA public key")?;
    if exponent.content == [0x01, 0x00, 0x01] {
        Ok(())
    } else {
        Err(Refusal::Signature(
            "RSA public exponent other than 65537".to_owned(),
        ))
    }
}

fn describe(algorithm: &[u8]) -> String {
    let oid = single(algorithm, tag::SEQUENCE, "algorithm")
        .ok()
        .and_then(|seq| Reader::new(seq.content).expect(tag::OID, "algorithm").ok())
        .map(|oid| super::walk::dotted(oid.content));
    oid.unwrap_or_else(|| "(malformed)".to_owned())
}
