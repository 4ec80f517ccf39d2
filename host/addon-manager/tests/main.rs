//! The add-on manager's integration tests, one module per file, in one test binary: one link
//! instead of one per file, and tests that wait on control planes overlap (`cargo test` runs
//! test binaries in turn, the tests of one binary in parallel).
//!
//! Run one file's tests with `cargo test -p flotilla-addon-manager --test integration <module>::`.

mod support;

mod addon_template;
mod addons;
mod config_inputs;
mod events;
mod health;
mod registration;
mod rollout;
