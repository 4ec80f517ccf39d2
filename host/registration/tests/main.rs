//! Registration's integration tests, one module per file, in one test binary: one link
//! instead of one per file, and tests that wait on control planes overlap (`cargo test` runs
//! test binaries in turn, the tests of one binary in parallel).
//!
//! Run one file's tests with `cargo test -p flotilla-registration --test integration <module>::`.

mod agent_support;
mod hub_support;

mod admission;
mod agent_addon_credentials;
mod agent_addon_health;
mod agent_bad_input;
mod agent_join;
mod agent_proxy;
mod agent_rotation;
mod agent_with_hub;
mod hub_accept;
mod hub_addon_feature;
mod hub_availability;
mod hub_clustersets;
mod hub_csr;
mod hub_deletion;
