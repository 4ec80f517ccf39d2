//! Content digests (`sha256:<hex>`) that name plugin revisions and cache entries.
//!
//! The `AddOnPlugin` CR pins `spec.digest`; the loader hashes the bytes it received once
//! ([`ComponentBytes`]) and refuses a mismatch before the sandbox sees them. The same digest
//! names the revision and keys the compiled-artifact cache.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

/// A SHA-256 content digest, written `sha256:<64 lower-case hex digits>` as in OCI.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// The raw 32 bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 64 lower-case hex digits, without the `sha256:` prefix.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A component's bytes with their digest, hashed once when the bytes arrive: the pin check, the
/// registry's "already serving this" test and the artifact cache all read this digest.
#[derive(Clone)]
pub struct ComponentBytes {
    bytes: Vec<u8>,
    digest: Digest,
}

impl ComponentBytes {
    /// `bytes`, hashed.
    pub fn new(bytes: Vec<u8>) -> Self {
        let digest = Digest::of(&bytes);
        Self { bytes, digest }
    }

    /// The digest of the bytes.
    pub const fn digest(&self) -> Digest {
        self.digest
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes
    }

    /// How many bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes, giving up the digest.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

impl From<Vec<u8>> for ComponentBytes {
    fn from(bytes: Vec<u8>) -> Self {
        Self::new(bytes)
    }
}

impl fmt::Debug for ComponentBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ComponentBytes")
            .field("digest", &self.digest)
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// A string that is not `sha256:<64 hex digits>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a sha256 digest (want `sha256:<64 hex digits>`): {0:?}")]
pub struct ParseDigestError(pub String);

impl FromStr for Digest {
    type Err = ParseDigestError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseDigestError(s.to_owned());
        let hex_part = s.strip_prefix("sha256:").ok_or_else(err)?;
        // Upper-case hex would name the same bytes twice; OCI digests are lower-case.
        if hex_part.len() != 64 || hex_part.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(err());
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut out).map_err(|_| err())?;
        Ok(Self(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_round_trips_through_its_text_form() {
        let d = Digest::of(b"hello");
        let text = d.to_string();
        assert!(text.starts_with("sha256:2cf24dba"));
        assert_eq!(text.parse::<Digest>(), Ok(d));
    }

    #[test]
    fn digest_parse_refuses_other_algorithms_and_upper_case() {
        assert!("sha512:00".parse::<Digest>().is_err());
        let upper = format!("sha256:{}", Digest::of(b"x").hex().to_uppercase());
        assert!(upper.parse::<Digest>().is_err());
        assert!("sha256:zz".parse::<Digest>().is_err());
    }
}
