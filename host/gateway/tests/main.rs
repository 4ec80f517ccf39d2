//! The gateway's integration tests, one binary: the tunnel with real processes (the Go tunnel
//! server and agent, a managed kube-apiserver in a network namespace the hub cannot reach).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

mod aggregated;
mod hostile;
mod tunnel;
