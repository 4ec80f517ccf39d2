//! `plugins.flotilla.dev`: Flotilla's own kind, AddOnPlugin.
//!
//! ```text
//! AddOnPlugin (cluster) ──source──▶ ConfigMap binaryData / OCI artifact ──digest──▶ wasm component
//!      │ Ready                                                                    │ describe()
//!      ▼                                                                          ▼
//! ClusterManagementAddOn spec.addOnName (lifecycle: addon-manager)        status.describe
//! ```

pub mod consts;
pub mod v1alpha1;

/// The API group.
pub const GROUP: &str = "plugins.flotilla.dev";
