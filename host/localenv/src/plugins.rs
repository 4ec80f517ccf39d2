//! Builds an example plugin of the repository's `plugins/` workspace for `wasm32-wasip2`, as
//! `flotilla up` needs the helloworld component: the same cargo invocation and target directory
//! (`$CARGO_TARGET_DIR/plugins`, else `<repo>/target/plugins`) as the test plugins' build
//! script, so a machine that ran the tests has it already, and cargo decides what is fresh.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use crate::error::{Error, Result};

/// Overrides the build: a path to a prebuilt helloworld component.
pub const HELLOWORLD_ENV: &str = "FLOTILLA_HELLOWORLD_WASM";

/// Environment of an outer cargo that must not leak into the nested build.
const SCRUB: &[&str] = &[
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTC_WRAPPER",
    "RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
];

/// The repository's plugin workspace.
pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins")
}

/// The cargo target directory of the plugin workspace.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
        .join("plugins")
}

/// The helloworld plugin component, built (release, wasm32-wasip2) if needed.
pub fn helloworld() -> Result<PathBuf> {
    if let Some(prebuilt) = crate::binary::prebuilt(HELLOWORLD_ENV) {
        return prebuilt;
    }
    build("helloworld")
}

/// Builds plugin crate `name` of `plugins/` and returns its component.
pub fn build(name: &str) -> Result<PathBuf> {
    let source = source_dir();
    let target = target_dir();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(&cargo);
    command
        .current_dir(&source)
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            "wasm32-wasip2",
            "-p",
            name,
        ])
        .arg("--manifest-path")
        .arg(source.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .stdin(Stdio::null());
    for var in SCRUB {
        command.env_remove(var);
    }
    let output = command.output().map_err(|e| {
        Error::Binary(format!(
            "run {} to build plugin {name} (is Rust installed, with rustup?): {e}",
            Path::new(&cargo).display()
        ))
    })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(Error::Binary(format!(
            "building plugin {name} for wasm32-wasip2 in {} failed (if the target is missing: \
             `rustup target add wasm32-wasip2`):\n{}",
            source.display(),
            tail.join("\n")
        )));
    }
    let component = target
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", name.replace('-', "_")));
    if component.is_file() {
        Ok(component)
    } else {
        Err(Error::Binary(format!(
            "cargo built plugin {name} but {} is missing",
            component.display()
        )))
    }
}
