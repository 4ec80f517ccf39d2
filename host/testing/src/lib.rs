//! Real parts for tests: local Kubernetes control planes (etcd, kube-apiserver,
//! kube-controller-manager) built from upstream sources and started on loopback, plus
//! helpers to act as any user against them and to await conditions.
//!
//! The same control plane backs `flotilla controlplane up` and the local quickstart, so what
//! the tests exercise is what a user runs.
//!
//! ```no_run
//! # async fn demo() -> flotilla_testing::Result<()> {
//! let hub = flotilla_testing::ControlPlane::start("hub").await?;
//! let admin = hub.admin_client().await?;
//! let intruder = hub.client_for("mallory", &["nobody"]).await?;
//! # let _ = (admin, intruder); Ok(()) }
//! ```

pub mod binary;
pub mod controlplane;
pub mod error;
pub mod kubeconfig;
pub mod pki;
pub mod registry;
mod scratch;
pub mod shared;
pub mod wait;

pub use controlplane::{ControlPlane, ControlPlaneBuilder, ControlPlaneState};
pub use error::{Error, Result};
pub use shared::{init_tracing, shared, spawn_controllers_once};
