//! Fuzzes the check of cosign signatures of plugin images (`flotilla_core::cosign::verify`):
//! the payload and the signature come from the registry. The first input byte picks what the
//! rest is:
//!
//! ```text
//!  0 mod 3   a signature line, then a payload: checked as they are
//!  1 mod 3   a payload, signed with the fixed key (so mutations get past the signature check),
//!            and the same signature with one bit changed
//!  2 mod 3   a docker reference line, then a manifest digest, put in a payload and signed
//! ```
//!
//! Properties: no panic; the same verdict twice; a payload passes only when an untyped reading
//! of its JSON finds the simple-signing type and the expected digest; a signature with a bit
//! changed never verifies; any reference and digest `payload` writes and `sign` signs verify,
//! and verify for no other digest.

#![no_main]

use std::sync::LazyLock;

use flotilla_core::cosign::{self, CosignError, PAYLOAD_TYPE};
use libfuzzer_sys::fuzz_target;
use p256::pkcs8::{EncodePrivateKey as _, EncodePublicKey as _, LineEnding};
use serde_json::Value;

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// A fixed key pair (private, public), as PEM.
static KEYS: LazyLock<(String, String)> = LazyLock::new(|| {
    let secret = p256::SecretKey::from_slice(&[7; 32]).expect("a valid scalar");
    let private = secret.to_pkcs8_pem(LineEnding::LF).expect("encode").to_string();
    let public = secret
        .public_key()
        .to_public_key_pem(LineEnding::LF)
        .expect("encode");
    (private, public)
});

fn verify(payload: &[u8], signature: &str, digest: &str) -> Result<(), CosignError> {
    let verdict = cosign::verify(&KEYS.1, payload, signature, digest);
    assert_eq!(
        verdict,
        cosign::verify(&KEYS.1, payload, signature, digest),
        "two verdicts differ"
    );
    if verdict.is_ok() {
        let untyped: Value = serde_json::from_slice(payload).expect("an accepted payload is JSON");
        assert_eq!(
            untyped.pointer("/critical/type").and_then(Value::as_str),
            Some(PAYLOAD_TYPE)
        );
        assert_eq!(
            untyped
                .pointer("/critical/image/docker-manifest-digest")
                .and_then(Value::as_str),
            Some(digest)
        );
    }
    verdict
}

fn sign(payload: &[u8]) -> String {
    cosign::sign(&KEYS.0, payload).expect("the fixed key signs")
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => {
            let split = rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len());
            let (signature, payload) = rest.split_at(split);
            let payload = payload.get(1..).unwrap_or_default();
            let _ = verify(payload, &String::from_utf8_lossy(signature), DIGEST);
        }
        1 => {
            let signature = sign(rest);
            let _ = verify(rest, &signature, DIGEST);
            let mut der = base64_decode(&signature);
            let bit = (usize::from(*mode) * 31 + rest.len()) % (der.len() * 8);
            der[bit / 8] ^= 1 << (bit % 8);
            assert!(
                verify(rest, &base64_encode(&der), DIGEST).is_err(),
                "a signature with bit {bit} changed verifies"
            );
        }
        _ => {
            let Ok(text) = std::str::from_utf8(rest) else {
                return;
            };
            let (reference, digest) = text.split_once('\n').unwrap_or((text, DIGEST));
            let payload = cosign::payload(reference, digest);
            let signature = sign(&payload);
            assert_eq!(
                verify(&payload, &signature, digest),
                Ok(()),
                "{reference:?} {digest:?}"
            );
            let other = format!("{digest}0");
            assert!(
                matches!(
                    verify(&payload, &signature, &other),
                    Err(CosignError::WrongDigest { .. })
                ),
                "{reference:?} {digest:?} verifies for {other:?}"
            );
        }
    }
});

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("sign writes base64")
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
