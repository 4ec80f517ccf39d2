//! The plugin loader's integration tests, one module per file, in one test binary: one link
//! instead of one per file, and tests that wait on control planes overlap (`cargo test` runs
//! test binaries in turn, the tests of one binary in parallel).
//!
//! Run one file's tests with `cargo test -p flotilla-plugin-loader --test integration <module>::`.

/// The plugin host's fixtures (runtime, hook inputs), shared with its tests rather than copied.
#[path = "../../wasm/tests/common/mod.rs"]
mod common;

mod controller;
mod oci;
mod oci_bounds;
