//! Local Kubernetes environments on loopback: real control planes (etcd, kube-apiserver,
//! kube-controller-manager) built from upstream sources, nodes that run pods (containerd, runc,
//! kubelet, kube-scheduler), a real OCI registry and the images pushed to it, the binaries they
//! are built from, and the bookkeeping of background processes.
//!
//! This is product code: `flotilla up` and `flotilla controlplane up` run these, and the tests
//! start the very same ones (through `flotilla-testing`, which re-exports this crate and adds
//! test-only helpers), so what the tests exercise is what a user runs.
//!
//! ```no_run
//! # async fn demo() -> flotilla_localenv::Result<()> {
//! let hub = flotilla_localenv::ControlPlane::start("hub").await?;
//! let admin = hub.admin_client().await?;
//! let intruder = hub.client_for("mallory", &["nobody"]).await?;
//! # let _ = (admin, intruder); Ok(()) }
//! ```

pub mod binary;
pub mod controlplane;
pub mod error;
pub mod image;
pub mod klusterlets;
pub mod kubeconfig;
pub mod node;
pub mod pki;
pub mod plugins;
pub mod ports;
pub mod processes;
pub mod registry;
mod scratch;
pub mod service_route;
pub mod tunnel;
pub mod up;
pub mod wait;

pub use controlplane::{ControlPlane, ControlPlaneBuilder, ControlPlaneState, Ports};
pub use error::{Error, Result};
pub use node::Node;
