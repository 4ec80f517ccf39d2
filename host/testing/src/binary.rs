//! Finds or builds the control-plane multi-call binary (`tests/controlplane`, a Go module that
//! links the upstream etcd, kube-apiserver, kube-controller-manager and kubectl).
//!
//! The binary is cached outside the source tree under a key made of the module's sources, so a
//! source change rebuilds it and a warm machine never does. Test binaries run in parallel and
//! may all ask at once: a file lock serialises the build across processes, and the result is
//! renamed into place atomically so nobody ever runs a half-written file.

use std::{
    fs::{self, File},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Mutex,
};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// The Kubernetes version the Go module pins (`tests/controlplane/go.mod`).
pub const KUBERNETES_VERSION: &str = "v1.33.13";

/// Overrides the binary (skips building): a path to a prebuilt `controlplane` binary.
pub const BINARY_ENV: &str = "FLOTILLA_CONTROLPLANE_BIN";
/// Overrides the cache directory (default `$XDG_CACHE_HOME/flotilla` or `~/.cache/flotilla`).
pub const CACHE_ENV: &str = "FLOTILLA_CACHE_DIR";

/// Serialises builds inside one process; the file lock does it across processes.
static BUILD: Mutex<()> = Mutex::new(());

/// The directory holding the Go module sources.
pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/controlplane")
}

/// Flotilla's cache directory for built tools.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(CACHE_ENV) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("flotilla");
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".cache/flotilla"),
        None => std::env::temp_dir().join("flotilla-cache"),
    }
}

/// Returns the path of the control-plane binary, building it first if needed.
pub fn controlplane_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(BINARY_ENV) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(Error::Binary(format!(
                "{BINARY_ENV}={} is not a file",
                path.display()
            )));
        }
        return Ok(path);
    }
    let source = source_dir();
    let key = source_key(&source)?;
    let dir = cache_dir().join("controlplane").join(&key[..16]);
    let binary = dir.join("controlplane");
    if binary.is_file() {
        return Ok(binary);
    }

    let _in_process = BUILD.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    fs::create_dir_all(&dir).map_err(|e| Error::Binary(format!("create {}: {e}", dir.display())))?;
    let lock =
        File::create(dir.join(".lock")).map_err(|e| Error::Binary(format!("create build lock: {e}")))?;
    lock.lock()
        .map_err(|e| Error::Binary(format!("take build lock: {e}")))?;
    if binary.is_file() {
        return Ok(binary);
    }
    build(&source, &dir, &binary)?;
    Ok(binary)
}

fn build(source: &Path, dir: &Path, binary: &Path) -> Result<()> {
    let partial = dir.join("controlplane.partial");
    let minor = KUBERNETES_VERSION.split('.').nth(1).unwrap_or("33");
    let mut ldflags = vec!["-s".to_owned(), "-w".to_owned()];
    for pkg in ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"] {
        ldflags.push(format!("-X {pkg}.gitVersion={KUBERNETES_VERSION}"));
        ldflags.push(format!("-X {pkg}.gitMajor=1"));
        ldflags.push(format!("-X {pkg}.gitMinor={minor}"));
    }
    eprintln!(
        "flotilla-testing: building the control-plane binary ({KUBERNETES_VERSION}) into {}; the first build takes several minutes",
        dir.display()
    );
    let started = std::time::Instant::now();
    let output = Command::new("go")
        .current_dir(source)
        .args(["build", "-trimpath", "-mod=readonly", "-ldflags"])
        .arg(ldflags.join(" "))
        .arg("-o")
        .arg(&partial)
        .arg(".")
        .env("CGO_ENABLED", "0")
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-buildvcs=false")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::Binary(format!("run `go build` (is Go installed and on PATH?): {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(Error::Binary(format!(
            "`go build` in {} failed:\n{}",
            source.display(),
            tail.join("\n")
        )));
    }
    fs::rename(&partial, binary).map_err(|e| Error::Binary(format!("move built binary into place: {e}")))?;
    eprintln!(
        "flotilla-testing: built the control-plane binary in {:.0?}",
        started.elapsed()
    );
    Ok(())
}

/// Hashes every input of the Go build: go.mod, go.sum and the `.go` files, in name order.
fn source_key(source: &Path) -> Result<String> {
    let read_dir =
        fs::read_dir(source).map_err(|e| Error::Binary(format!("read {}: {e}", source.display())))?;
    let mut files: Vec<PathBuf> = read_dir
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name == "go.mod" || name == "go.sum" || name.ends_with(".go")
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::Binary(format!("no Go sources in {}", source.display())));
    }
    let mut hasher = Sha256::new();
    hasher.update(KUBERNETES_VERSION.as_bytes());
    for file in files {
        let bytes = fs::read(&file).map_err(|e| Error::Binary(format!("read {}: {e}", file.display())))?;
        hasher.update(file.file_name().map(|n| n.as_encoded_bytes()).unwrap_or_default());
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(hex::encode(hasher.finalize()))
}
