//! Finds or builds the control-plane multi-call binary (`tests/controlplane`, a Go module that
//! links the upstream etcd, kube-apiserver, kube-controller-manager and kubectl), and the
//! shared machinery other built-on-first-use tools reuse ([`cached_artifact`], [`source_key`],
//! [`go_build`]: the OCI registry of `crate::registry`, the JavaScript test plugin).
//!
//! Artifacts are cached outside the source tree under a key made of their sources, so a source
//! change rebuilds and a warm machine never does. Test binaries run in parallel and may all ask
//! at once: a file lock serialises the build across processes, and the result is renamed into
//! place atomically so nobody ever runs a half-written file.

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

/// The prebuilt binary that environment variable `env` names, if it is set.
pub(crate) fn prebuilt(env: &str) -> Option<Result<PathBuf>> {
    let path = PathBuf::from(std::env::var_os(env)?);
    Some(if path.is_file() {
        Ok(path)
    } else {
        Err(Error::Binary(format!("{env}={} is not a file", path.display())))
    })
}

/// Returns the path of the control-plane binary, building it first if needed.
pub fn controlplane_binary() -> Result<PathBuf> {
    if let Some(prebuilt) = prebuilt(BINARY_ENV) {
        return prebuilt;
    }
    let source = source_dir();
    let key = source_key(&source, KUBERNETES_VERSION, is_go_input)?;
    cached_artifact("controlplane", &key, "controlplane", |partial| {
        let minor = KUBERNETES_VERSION.split('.').nth(1).unwrap_or("33");
        let mut ldflags = vec!["-s".to_owned(), "-w".to_owned()];
        for pkg in ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"] {
            ldflags.push(format!("-X {pkg}.gitVersion={KUBERNETES_VERSION}"));
            ldflags.push(format!("-X {pkg}.gitMajor=1"));
            ldflags.push(format!("-X {pkg}.gitMinor={minor}"));
        }
        go_build(
            &source,
            partial,
            &ldflags,
            "local",
            &format!("the control-plane binary ({KUBERNETES_VERSION})"),
        )
    })
}

/// The file `file` under `<cache>/<kind>/<key prefix>/`, made by `build` on first use.
///
/// `build` writes to the path it is given; the result is then renamed into place, so nobody
/// ever sees a half-written file. A file lock in the directory serialises builds across
/// processes (test binaries run in parallel), a mutex within this one. `key` is a hash of every
/// input (see [`source_key`]): a changed input builds anew beside the old result.
pub fn cached_artifact(
    kind: &str,
    key: &str,
    file: &str,
    build: impl FnOnce(&Path) -> Result<()>,
) -> Result<PathBuf> {
    let dir = cache_dir().join(kind).join(&key[..key.len().min(16)]);
    let artifact = dir.join(file);
    if artifact.is_file() {
        return Ok(artifact);
    }

    let _in_process = BUILD.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    fs::create_dir_all(&dir).map_err(|e| Error::Binary(format!("create {}: {e}", dir.display())))?;
    let lock =
        File::create(dir.join(".lock")).map_err(|e| Error::Binary(format!("create build lock: {e}")))?;
    lock.lock()
        .map_err(|e| Error::Binary(format!("take build lock: {e}")))?;
    if artifact.is_file() {
        return Ok(artifact);
    }
    let partial = dir.join(format!("{file}.partial"));
    build(&partial)?;
    fs::rename(&partial, &artifact)
        .map_err(|e| Error::Binary(format!("move built {file} into place: {e}")))?;
    Ok(artifact)
}

/// The Go toolchain of modules whose dependencies need a newer Go than the machine's: the go
/// command fetches this approved release from the module proxy once, like a module.
pub const NEWER_GO: &str = "go1.27.3";

/// Builds the Go main package in module directory `source` into `out` (static, trimmed, with
/// the module's committed go.sum). `toolchain` is `GOTOOLCHAIN`: `local`, or [`NEWER_GO`].
pub fn go_build(source: &Path, out: &Path, ldflags: &[String], toolchain: &str, what: &str) -> Result<()> {
    require_go(what)?;
    eprintln!(
        "flotilla: building {what} from {}; the first build takes minutes",
        source.display()
    );
    let started = std::time::Instant::now();
    let output = Command::new("go")
        .current_dir(source)
        // No DWARF from the compiler: every caller links with `-w`, which drops it anyway,
        // and making it is compile work for nothing.
        .args([
            "build",
            "-trimpath",
            "-mod=readonly",
            "-gcflags=all=-dwarf=false",
            "-ldflags",
        ])
        .arg(ldflags.join(" "))
        .arg("-o")
        .arg(out)
        .arg(".")
        .env("CGO_ENABLED", "0")
        .env("GOTOOLCHAIN", toolchain)
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
    eprintln!("flotilla: built {what} in {:.0?}", started.elapsed());
    Ok(())
}

/// Fails at once, with what to do, when the `go` tool cannot be run: nothing is built then.
fn require_go(what: &str) -> Result<()> {
    match Command::new("go")
        .arg("version")
        .env("GOTOOLCHAIN", "local")
        .stdin(Stdio::null())
        .output()
    {
        Ok(output) if output.status.success() => Ok(()),
        Ok(output) => Err(Error::Binary(format!(
            "building {what} needs Go, and `go version` failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))),
        Err(e) => Err(Error::Binary(format!(
            "building {what} needs the Go toolchain, and `go` cannot be run ({e}): install Go \
             (https://go.dev/dl) and put it on PATH, or name prebuilt binaries in {BINARY_ENV} \
             and {}; it is built once and cached in {}",
            crate::registry::BINARY_ENV,
            cache_dir().display()
        ))),
    }
}

/// Whether a file name is an input of a Go build: go.mod, go.sum or a `.go` file.
pub fn is_go_input(name: &str) -> bool {
    name == "go.mod" || name == "go.sum" || name.ends_with(".go")
}

/// Hashes `salt` and every file directly in `source` whose name `include` accepts, in name
/// order: the cache key of what is built from them.
pub fn source_key(source: &Path, salt: &str, include: impl Fn(&str) -> bool) -> Result<String> {
    let read_dir =
        fs::read_dir(source).map_err(|e| Error::Binary(format!("read {}: {e}", source.display())))?;
    let mut files: Vec<PathBuf> = read_dir
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && include(p.file_name().and_then(|n| n.to_str()).unwrap_or_default()))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::Binary(format!("no build inputs in {}", source.display())));
    }
    let mut hasher = Sha256::new();
    hasher.update(salt.as_bytes());
    for file in files {
        let bytes = fs::read(&file).map_err(|e| Error::Binary(format!("read {}: {e}", file.display())))?;
        hasher.update(file.file_name().map(|n| n.as_encoded_bytes()).unwrap_or_default());
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(hex::encode(hasher.finalize()))
}
