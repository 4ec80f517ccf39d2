//! The pure core's golden integration tests, one module per file, in one test binary: one link
//! instead of one per file, and tests that wait on control planes overlap (`cargo test` runs
//! test binaries in turn, the tests of one binary in parallel).
//!
//! Run one file's tests with `cargo test -p flotilla-core --test integration <module>::`.

mod placement_golden;
mod rollout_golden;
mod spec_hash_golden;
