//! The Flotilla add-on plugin host: runs each add-on's hub-side logic as a sandboxed WebAssembly
//! component (contract: `wit/flotilla-addon@0.1.0`).
//!
//! ```text
//!   bytes, digest, limits ──▶ PluginRegistry ── slot per add-on ──▶ Arc<Plugin>
//!                                                  │ install: validate + compile +
//!                                                  ▼ describe beside the running revision
//!   Runtime: one Engine · epoch ticker thread · Linker (host log + WASI, nothing granted)
//!            · pool permits · artifact cache (<digest>-<engine>.cwasm) · metrics
//!
//!   Plugin::{manifests, approve_csr, hub_permissions, probe_health}
//!        └─ per call: fresh Store (memory limit, epoch deadline, bounded stdout/stderr)
//!                     → instantiate from InstancePre → call → check output caps → fail safe
//! ```
//!
//! Everything a plugin can do to the host is bounded: CPU time (epoch deadline that yields to
//! tokio every tick, plus a wall-clock timeout), memory (per-store limits), output (bytes and
//! count), logs (per-call budget), and capabilities (WASI is linked so standard-library guests
//! link, but with no directories, environment, arguments or network; only the components the
//! hub ships itself are granted an environment, through [`Runtime::load_granting`]). A fault affects only the
//! call that caused it; see [`Plugin`] for what each hook returns on a fault. Each revision
//! keeps a fault record ([`Plugin::faults`]): runtime faults per hook and kind over a recent
//! window, which the controller writes into `AddOnPlugin` status, and a quarantine after
//! [`FaultPolicy::threshold`] faults in a row, with backoff, during which calls answer their
//! fail-safe result without running the guest.
//!
//! The sandbox knows nothing of Kubernetes or registries: `flotilla-plugin-loader` fetches and
//! checks the bytes (its `AddOnPlugin` controller installs them here), and the add-on manager
//! looks plugins up with [`PluginRegistry::get`] by add-on name. Start with [`Runtime::new`],
//! then [`PluginRegistry::install`] and [`PluginRegistry::get`]. [`inspect`] serves
//! `flotilla plugin inspect`; [`inputs`] turns Kubernetes objects into hook inputs for
//! `flotilla plugin run` and the add-on manager alike.
#![deny(missing_docs)]

mod bindings;
mod cache;
mod digest;
mod error;
mod host;
pub mod inputs;
pub mod inspect;
mod limits;
mod metrics;
mod plugin;
mod registry;
mod runtime;
mod state;
pub mod types;
pub mod validate;

pub use digest::{ComponentBytes, Digest, ParseDigestError};
pub use error::{Error, Fault, Result, TimeoutBy, ValidationError};
pub use flotilla_core::plugin_faults::{FaultCount, FaultPolicy, FaultSummary};
pub use limits::Limits;
pub use metrics::{CacheResult, Metrics};
pub use plugin::{Hook, Plugin};
pub use registry::{PluginRegistry, PluginSlot};
pub use runtime::{
    AllocatorChoice, AllocatorKind, DEFAULT_MEMORY_BUDGET_BYTES, FAIR_SHARES, Interruption, Runtime,
    RuntimeConfig,
};
