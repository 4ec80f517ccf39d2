//! The project-wide integration tests, one module per file, in one test binary: one link
//! instead of one per file, and tests that wait on control planes overlap (`cargo test` runs
//! test binaries in turn, the tests of one binary in parallel).
//!
//! Run one file's tests with `cargo test -p flotilla-tests --test integration <module>::`.

mod api_crds;
mod controlplane_auth;
mod controlplane_lifecycle;
mod csr_oracle;
mod deploy_manifests;
