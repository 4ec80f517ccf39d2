//! On-disk cache of compiled components, so a restart does not recompile every plugin.
//!
//! ```text
//!   <dir>/<component sha256>-<engine key>.cwasm    Component::serialize output
//!   <dir>/<component sha256>-<engine key>.sha256   hex sha256 of the .cwasm bytes
//! ```
//!
//! The engine key is a SHA-256 over `Engine::precompile_compatibility_hash`, so artifacts from
//! another wasmtime version or engine configuration (pooling vs on-demand, other tunables) are
//! never looked up. Deserializing is `unsafe` in wasmtime because the bytes are trusted to be
//! machine code wasmtime produced; this cache trusts an artifact only when
//! 1. its sidecar hash matches the bytes read (catches truncation, bit flips, half-written files),
//! 2. `Engine::detect_precompiled` says it is a precompiled component,
//! 3. wasmtime's own header checks in `Component::deserialize` accept it for this engine,
//!
//! and it deserializes from the bytes it verified (in memory), not by re-opening the file, so the
//! file cannot change between check and use. Anything else counts as `invalid`: the entry is
//! removed and the component recompiled. The directory must be private to this host (it is
//! created 0700): the sidecar detects corruption, not an attacker who can write both files.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};
use wasmtime::component::Component;
use wasmtime::{Engine, Precompiled};

use crate::Digest;
use crate::metrics::CacheResult;

/// The compiled-artifact cache directory of one engine.
#[derive(Debug)]
pub(crate) struct ArtifactCache {
    dir: PathBuf,
    engine_key: String,
}

/// Feeds `Hash` output into SHA-256, giving a key that is stable across processes (unlike
/// `DefaultHasher`, whose algorithm is unspecified).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        // Not used: the full digest is read with `finalize`.
        0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

impl ArtifactCache {
    /// Opens (creating, mode 0700) the cache directory for `engine`.
    pub(crate) fn open(dir: &Path, engine: &Engine) -> io::Result<Self> {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir)?;
        let mut hasher = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = hex::encode(&hasher.0.finalize()[..16]);
        Ok(Self {
            dir: dir.to_owned(),
            engine_key,
        })
    }

    /// Path of the artifact for `digest`.
    pub(crate) fn artifact_path(&self, digest: &Digest) -> PathBuf {
        self.dir
            .join(format!("{}-{}.cwasm", digest.hex(), self.engine_key))
    }

    fn sidecar_path(&self, digest: &Digest) -> PathBuf {
        self.dir
            .join(format!("{}-{}.sha256", digest.hex(), self.engine_key))
    }

    /// Looks `digest` up. Never returns an artifact it has not verified; removes invalid ones.
    pub(crate) fn load(&self, engine: &Engine, digest: &Digest) -> (Option<Component>, CacheResult) {
        let (artifact, sidecar) = (self.artifact_path(digest), self.sidecar_path(digest));
        let (bytes, expected) = match (fs::read(&artifact), fs::read_to_string(&sidecar)) {
            (Ok(bytes), Ok(expected)) => (bytes, expected),
            (Err(e), _) | (_, Err(e)) if e.kind() == io::ErrorKind::NotFound => {
                return (None, CacheResult::Miss);
            }
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(%digest, error = %e, "cannot read compiled-artifact cache entry; recompiling");
                self.remove(digest);
                return (None, CacheResult::Invalid);
            }
        };
        match self.verify_and_deserialize(engine, &bytes, expected.trim()) {
            Ok(component) => (Some(component), CacheResult::Hit),
            Err(reason) => {
                tracing::warn!(%digest, %reason, path = %artifact.display(), "invalid compiled artifact; recompiling");
                self.remove(digest);
                (None, CacheResult::Invalid)
            }
        }
    }

    fn verify_and_deserialize(
        &self,
        engine: &Engine,
        bytes: &[u8],
        expected_hex: &str,
    ) -> Result<Component, String> {
        let actual_hex = hex::encode(Sha256::digest(bytes));
        if actual_hex != expected_hex {
            return Err(format!(
                "sidecar hash {expected_hex:?} does not match artifact hash {actual_hex}"
            ));
        }
        if Engine::detect_precompiled(bytes) != Some(Precompiled::Component) {
            return Err("not a precompiled wasmtime component".to_owned());
        }
        // SAFETY: `Component::deserialize` requires bytes produced by `Component::serialize` (or
        // `Engine::precompile_component`) of a compatible wasmtime. These bytes are the ones this
        // host wrote with `serialize` in `store` below: the file name carries this engine's
        // compatibility hash, the SHA-256 recorded beside them when they were written matches the
        // exact in-memory buffer handed to wasmtime here (no re-read of the file), and
        // `detect_precompiled` accepted the header. wasmtime additionally checks version and
        // engine settings and returns an error, not UB, on mismatch. The cache directory is
        // private to this host (0700).
        #[expect(
            unsafe_code,
            reason = "deserializing a verified artifact this host compiled itself"
        )]
        let component = unsafe { Component::deserialize(engine, bytes) };
        component.map_err(|e| format!("wasmtime refused the artifact: {e}"))
    }

    /// Writes the compiled form of `component`. Failures are logged, not returned: the cache is
    /// an optimisation and the component is already compiled.
    pub(crate) fn store(&self, digest: &Digest, component: &Component) {
        let result = component
            .serialize()
            .map_err(|e| io::Error::other(e.to_string()))
            .and_then(|bytes| {
                let sum = hex::encode(Sha256::digest(&bytes));
                write_atomically(&self.artifact_path(digest), &bytes)?;
                write_atomically(&self.sidecar_path(digest), sum.as_bytes())
            });
        if let Err(e) = result {
            tracing::warn!(%digest, error = %e, "cannot write compiled-artifact cache entry");
        }
    }

    fn remove(&self, digest: &Digest) {
        for path in [self.artifact_path(digest), self.sidecar_path(digest)] {
            if let Err(e) = fs::remove_file(&path)
                && e.kind() != io::ErrorKind::NotFound
            {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove invalid cache entry");
            }
        }
    }
}

/// Write to a temporary file in the same directory, then rename: readers see the old file or
/// the new one, never a prefix.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp-{}-{n}", std::process::id()));
    fs::write(&tmp, bytes)?;
    fs::rename(&tmp, path).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}
