//! The kube helpers' integration tests, one module per file, in one test binary: one link
//! instead of one per file, and tests that wait on control planes overlap (`cargo test` runs
//! test binaries in turn, the tests of one binary in parallel).
//!
//! Run one file's tests with `cargo test -p flotilla-kube --test integration <module>::`.

mod events;
mod feeds;
mod server_limits;
