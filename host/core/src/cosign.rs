//! Cosign-style signatures of OCI artifacts with a key pair, verified offline: the "simple
//! signing" payload naming the signed manifest digest, signed with ECDSA P-256 over SHA-256,
//! the signature base64-encoded DER. Pure: the registry round trips live in the plugin host.
//!
//! ```text
//!   payload = {"critical": {"identity": {"docker-reference": "<registry>/<repository>"},
//!                           "image": {"docker-manifest-digest": "sha256:…"},
//!                           "type": "cosign container image signature"},
//!              "optional": null}
//!   signature = base64(DER(ECDSA-P256-SHA256(payload)))       public key: PEM `PUBLIC KEY`
//!   stored at <repository>:sha256-<hex>.sig as a layer of media type
//!   application/vnd.dev.cosign.simplesigning.v1+json with the signature in the annotation
//!   dev.cosignproject.cosign/signature
//! ```
//!
//! Written on RustCrypto's `p256` (already the project's ECDSA crate) rather than the `sigstore`
//! crate, whose transparency-log, Fulcio and TUF machinery a key-pair check does not need and
//! whose dependency tree would double the build of the plugin host.

use base64::Engine as _;
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _};
use serde::Deserialize;

/// Media type of a simple-signing payload layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// Annotation of the payload layer holding the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The `critical.type` of a payload.
pub const PAYLOAD_TYPE: &str = "cosign container image signature";

/// Why a signature does not verify, or a key cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CosignError {
    /// The public key is not a PEM `PUBLIC KEY` of an ECDSA P-256 key.
    #[error("public key is not a PEM ECDSA P-256 public key: {0}")]
    PublicKey(String),
    /// The private key is not a PEM PKCS#8 (or SEC1) ECDSA P-256 key.
    #[error("private key is not a PEM PKCS#8 or SEC1 ECDSA P-256 key: {0}")]
    PrivateKey(String),
    /// The signature is not base64 DER ECDSA.
    #[error("signature is not base64-encoded DER ECDSA: {0}")]
    Encoding(String),
    /// The signature does not match the payload and key.
    #[error("signature does not verify with the given public key")]
    Mismatch,
    /// The payload is not a simple-signing payload.
    #[error("payload is not a cosign simple-signing payload: {0}")]
    Payload(String),
    /// The payload signs another manifest.
    #[error("payload signs manifest {signed}, not {expected}")]
    WrongDigest {
        /// The digest the payload names.
        signed: String,
        /// The digest being verified.
        expected: String,
    },
}

/// The simple-signing payload for `manifest_digest` of `docker_reference`
/// (`registry/repository`, no tag).
pub fn payload(docker_reference: &str, manifest_digest: &str) -> Vec<u8> {
    let value = serde_json::json!({
        "critical": {
            "identity": {"docker-reference": docker_reference},
            "image": {"docker-manifest-digest": manifest_digest},
            "type": PAYLOAD_TYPE,
        },
        "optional": null,
    });
    value.to_string().into_bytes()
}

/// Signs `payload` with the PEM private key; returns the base64 DER signature.
pub fn sign(private_key_pem: &str, payload: &[u8]) -> Result<String, CosignError> {
    let key = SigningKey::from_pkcs8_pem(private_key_pem)
        .or_else(|e| {
            p256::SecretKey::from_sec1_pem(private_key_pem)
                .map(SigningKey::from)
                .map_err(|_| e)
        })
        .map_err(|e| CosignError::PrivateKey(e.to_string()))?;
    let signature: Signature = key.sign(payload);
    Ok(base64::engine::general_purpose::STANDARD.encode(signature.to_der().as_bytes()))
}

#[derive(Deserialize)]
struct Payload {
    critical: Critical,
}

#[derive(Deserialize)]
struct Critical {
    image: Image,
    #[serde(rename = "type")]
    type_: String,
}

#[derive(Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// Checks that `signature_b64` is a signature of `payload` by the PEM public key, and that the
/// payload signs `manifest_digest`.
pub fn verify(
    public_key_pem: &str,
    payload: &[u8],
    signature_b64: &str,
    manifest_digest: &str,
) -> Result<(), CosignError> {
    let key = VerifyingKey::from_public_key_pem(public_key_pem.trim())
        .map_err(|e| CosignError::PublicKey(e.to_string()))?;
    let der = base64::engine::general_purpose::STANDARD
        .decode(signature_b64.trim())
        .map_err(|e| CosignError::Encoding(e.to_string()))?;
    let signature = Signature::from_der(&der).map_err(|e| CosignError::Encoding(e.to_string()))?;
    key.verify(payload, &signature)
        .map_err(|_| CosignError::Mismatch)?;
    // Whole UTF-8 first: serde_json checks the bytes of the fields it reads, not of those it
    // skips, and a payload is read whole or refused.
    let text = std::str::from_utf8(payload).map_err(|e| CosignError::Payload(e.to_string()))?;
    let parsed: Payload = serde_json::from_str(text).map_err(|e| CosignError::Payload(e.to_string()))?;
    if parsed.critical.type_ != PAYLOAD_TYPE {
        return Err(CosignError::Payload(format!(
            "type is {:?}",
            parsed.critical.type_
        )));
    }
    if parsed.critical.image.docker_manifest_digest != manifest_digest {
        return Err(CosignError::WrongDigest {
            signed: parsed.critical.image.docker_manifest_digest,
            expected: manifest_digest.to_owned(),
        });
    }
    Ok(())
}

/// The tag a signature of `manifest_digest` (`sha256:<hex>`) is stored under: `sha256-<hex>.sig`.
pub fn signature_tag(manifest_digest: &str) -> String {
    format!("{}.sig", manifest_digest.replacen(':', "-", 1))
}

#[cfg(test)]
mod tests {
    use p256::pkcs8::{EncodePrivateKey as _, EncodePublicKey as _, LineEnding};

    use super::*;

    /// A fixed key pair, so the tests need no random numbers.
    fn key_pair(seed: u8) -> (String, String) {
        let secret = p256::SecretKey::from_slice(&[seed; 32]).unwrap();
        let private = secret.to_pkcs8_pem(LineEnding::LF).unwrap().to_string();
        let public = secret.public_key().to_public_key_pem(LineEnding::LF).unwrap();
        (private, public)
    }

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_signed_payload_verifies_with_the_matching_public_key() {
        let (private, public) = key_pair(7);
        let payload = payload("127.0.0.1:5000/plugins/hello", DIGEST);
        let signature = sign(&private, &payload).unwrap();
        assert_eq!(verify(&public, &payload, &signature, DIGEST), Ok(()));
    }

    /// Found by the `cosign_signature` fuzz target: a signed payload with bytes that are not
    /// UTF-8 in a field the reader skips was accepted.
    #[test]
    fn a_signed_payload_that_is_not_utf8_is_refused() {
        let (private, public) = key_pair(7);
        let mut signed = payload("r/p", DIGEST);
        let at = signed.windows(3).position(|w| w == b"r/p").unwrap();
        signed[at + 1] = 0xa2;
        let signature = sign(&private, &signed).unwrap();
        assert!(matches!(
            verify(&public, &signed, &signature, DIGEST),
            Err(CosignError::Payload(_))
        ));
    }

    #[test]
    fn another_key_a_changed_payload_or_another_digest_is_refused() {
        let (private, public) = key_pair(7);
        let (_, other_public) = key_pair(9);
        let signed = payload("r/p", DIGEST);
        let signature = sign(&private, &signed).unwrap();
        assert_eq!(
            verify(&other_public, &signed, &signature, DIGEST),
            Err(CosignError::Mismatch)
        );
        let other = payload("r/p", &DIGEST.replace('0', "f"));
        assert_eq!(
            verify(&public, &other, &signature, DIGEST),
            Err(CosignError::Mismatch)
        );
        let err = verify(&public, &signed, &signature, "sha256:ff").unwrap_err();
        assert!(matches!(err, CosignError::WrongDigest { .. }), "{err}");
    }

    #[test]
    fn garbage_keys_and_signatures_are_named() {
        let (private, public) = key_pair(7);
        let p = payload("r/p", DIGEST);
        assert!(matches!(
            verify("not a key", &p, "AAAA", DIGEST),
            Err(CosignError::PublicKey(_))
        ));
        assert!(matches!(
            verify(&public, &p, "!!!", DIGEST),
            Err(CosignError::Encoding(_))
        ));
        assert!(matches!(
            verify(&public, &p, "AAAA", DIGEST),
            Err(CosignError::Encoding(_))
        ));
        assert!(matches!(sign(&public, &p), Err(CosignError::PrivateKey(_))));
        assert!(sign(&private, &p).is_ok());
    }

    #[test]
    fn the_signature_tag_replaces_the_colon() {
        assert_eq!(signature_tag("sha256:abc"), "sha256-abc.sig");
    }
}
