//! Builds the built-in plugin components from `plugins/` for `wasm32-wasip2` and copies them
//! into `OUT_DIR`, where `src/lib.rs` embeds them with `include_bytes!`.
//!
//! Same approach as `host/wasm/test-plugins/build.rs` (which builds every plugin for the tests),
//! but only the crates the hub ships, and into a target directory of its own,
//! `$CARGO_TARGET_DIR/builtin-plugins` (or `<repo>/target/builtin-plugins`), so it neither waits
//! on the outer cargo's lock nor on the test plugins' build. It runs with `--locked` against
//! `plugins/Cargo.lock`; variables that only make sense for the outer build are removed.

use std::env;
use std::path::PathBuf;

#[path = "../wasm/test-plugins/wasm_target.rs"]
mod wasm_target;

/// (crate in `plugins/`, file name in `OUT_DIR`).
const BUILTINS: &[&str] = &["addon-template"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?);
    let repo = manifest_dir
        .ancestors()
        .nth(2)
        .ok_or("cannot find the repository root")?
        .to_owned();
    let plugins = repo.join("plugins");
    for watched in [
        plugins.join("Cargo.toml"),
        plugins.join("Cargo.lock"),
        repo.join("sdk/rust"),
        repo.join("wit"),
    ]
    .into_iter()
    .chain(BUILTINS.iter().map(|k| plugins.join(k)))
    {
        println!("cargo:rerun-if-changed={}", watched.display());
    }
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");

    wasm_target::ensure_wasm_target()?;
    let target_dir = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("target"))
        .join("builtin-plugins");
    // The hub embeds them, so the wasm32-wasip2 target must be installed.
    wasm_target::build_plugins(&plugins.join("Cargo.toml"), &target_dir, BUILTINS)?;
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    for krate in BUILTINS {
        let file = format!("{}.wasm", krate.replace('-', "_"));
        let built = target_dir.join("wasm32-wasip2").join("release").join(&file);
        std::fs::copy(&built, out_dir.join(&file))
            .map_err(|e| format!("copy the built plugin {}: {e}", built.display()))?;
    }
    Ok(())
}
