//! The webhook server's integration tests, one module per file, in one test binary.
//!
//! Run one file's tests with `cargo test -p flotilla-webhook --test integration <module>::`.

mod conversion;
mod limits;
