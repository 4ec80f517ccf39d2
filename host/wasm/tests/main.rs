//! The plugin host's integration tests, one module per file, in one test binary: one link
//! instead of one per file, and tests that wait on control planes overlap (`cargo test` runs
//! test binaries in turn, the tests of one binary in parallel).
//!
//! Run one file's tests with `cargo test -p flotilla-wasm --test integration <module>::`.

mod common;

mod cache;
mod ecosystem;
mod examples;
mod grant;
mod helloworld;
mod hostile;
mod pre_delete_plugin;
mod revisions;
mod runtime;
mod validation;
mod wit_frozen;
