//! Shared by the build scripts that compile `plugins/` (`host/wasm/test-plugins/build.rs` and
//! `host/builtin-plugins/build.rs`, which include it with `#[path]`): adds the `wasm32-wasip2`
//! target to the toolchain when it is missing, and runs the nested cargo build.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Environment of the outer build that must not leak into the nested one.
const SCRUB: &[&str] = &[
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTC_WRAPPER",
    "RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
];

/// Builds the plugins workspace `manifest` (only `crates`, or all when empty) for
/// `wasm32-wasip2` in release into `target_dir`, its own directory so the nested cargo never
/// waits on the lock the outer one holds. The jobserver is inherited, so the nested build
/// shares the outer build's parallelism.
pub fn build_plugins(
    manifest: &Path,
    target_dir: &Path,
    crates: &[&str],
) -> Result<(), Box<dyn std::error::Error>> {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "--locked",
        "--target",
        "wasm32-wasip2",
        "--manifest-path",
    ])
    .arg(manifest)
    .arg("--target-dir")
    .arg(target_dir);
    for krate in crates {
        cmd.args(["-p", krate]);
    }
    for var in SCRUB {
        cmd.env_remove(var);
    }
    let output = cmd.output()?;
    if !output.status.success() {
        return Err(format!(
            "building the plugins for wasm32-wasip2 failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(())
}

/// Makes sure the compiler has the standard library for `wasm32-wasip2`. rustup installs the
/// targets of `rust-toolchain.toml` only when it installs the toolchain itself, so a machine
/// whose toolchain was already there lacks it: add it with rustup, or say how when rustup is
/// not the installer.
pub fn ensure_wasm_target() -> Result<(), Box<dyn std::error::Error>> {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(&rustc).args(["--print", "sysroot"]).output()?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    if sysroot.join("lib/rustlib/wasm32-wasip2/lib").is_dir() {
        return Ok(());
    }
    // A rustup toolchain lives in `<rustup home>/toolchains/<name>`.
    let toolchain = sysroot
        .parent()
        .filter(|parent| parent.file_name().is_some_and(|name| name == "toolchains"))
        .and_then(|_| sysroot.file_name())
        .map(|name| name.to_string_lossy().into_owned());
    let mut add = vec!["target".to_owned(), "add".to_owned(), "wasm32-wasip2".to_owned()];
    if let Some(toolchain) = &toolchain {
        add.extend(["--toolchain".to_owned(), toolchain.clone()]);
    }
    let command = format!("rustup {}", add.join(" "));
    println!("cargo:warning=the wasm32-wasip2 target is missing; running `{command}`");
    match Command::new("rustup").args(&add).status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!(
            "`{command}` failed ({status}); the plugins build for wasm32-wasip2, so run it by hand and try again"
        )
        .into()),
        Err(_) => Err(format!(
            "the plugins build for wasm32-wasip2, but the compiler at {} has no standard library for it and \
             rustup is not on the PATH to add it: install Rust with rustup (https://rustup.rs) or add the \
             wasm32-wasip2 target to this toolchain (with rustup: `{command}`)",
            sysroot.display()
        )
        .into()),
    }
}
