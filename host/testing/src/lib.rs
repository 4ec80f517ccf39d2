//! Real parts for tests: local Kubernetes control planes and OCI registries on loopback (from
//! `flotilla-localenv`, the product crate behind `flotilla up`, re-exported here so tests name
//! one crate), plus test-only helpers: control planes and controllers shared by the tests of
//! one test binary, the Events about an object, test logging, a real forward proxy (tinyproxy,
//! stunnel) on loopback, a network namespace that reaches the host at one address only, a
//! black-holing TCP proxy for partitions, and snapshots of fleet state to compare runs.
//!
//! ```no_run
//! # async fn demo() -> flotilla_testing::Result<()> {
//! let hub = flotilla_testing::ControlPlane::start("hub").await?;
//! let admin = hub.admin_client().await?;
//! let intruder = hub.client_for("mallory", &["nobody"]).await?;
//! # let _ = (admin, intruder); Ok(()) }
//! ```

pub mod blackhole;
pub mod convergence;
pub mod events;
pub mod netns;
pub mod proxy;
pub mod shared;

pub use flotilla_localenv::{
    ControlPlane, ControlPlaneBuilder, ControlPlaneState, Error, Result, binary, controlplane, error,
    kubeconfig, pki, plugins, ports, processes, registry, wait,
};
pub use shared::{init_tracing, shared, spawn_controllers_once};
