//! Work's integration tests, one module per file, in one test binary: one link
//! instead of one per file, and tests that wait on control planes overlap (`cargo test` runs
//! test binaries in turn, the tests of one binary in parallel).
//!
//! Run one file's tests with `cargo test -p flotilla-work --test integration <module>::`.

mod agent_support;
mod mwrs_support;

mod agent_apply;
mod agent_bad_input;
mod agent_events;
mod agent_outage;
mod agent_restore;
mod agent_watch;
mod hub_admission;
mod mwrs_agents;
mod mwrs_events;
mod mwrs_rollout;
