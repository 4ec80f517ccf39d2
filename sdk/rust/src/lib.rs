//! The Rust SDK for Flotilla add-on plugins.
//!
//! An add-on's hub-side logic — the objects to deploy on each managed cluster, which agent CSRs
//! to approve, what the agent may do on the hub, how health is judged — is a WebAssembly component
//! implementing the `flotilla:addon@0.1.0` contract (`wit/`). With this SDK it is a plain Rust
//! type implementing [`Addon`]:
//!
//! ```text
//!   your crate (cdylib, wasm32-wasip2)            the hub (flotilla-wasm)
//!   ┌───────────────────────────────┐             ┌──────────────────────────────┐
//!   │ impl Addon for MyAddon        │  describe   │ validates options at load    │
//!   │ export_addon!(MyAddon)   ─────┼──manifests─▶│ fresh sandbox per call,      │
//!   │   ├ manifest::to_manifest     │  approve-csr│ limits, fail-safe results    │
//!   │   ├ config::addon_deployment… │  hub-perms  │                              │
//!   │   └ log::info                 │  probe      │                              │
//!   └───────────────────────────────┘             └──────────────────────────────┘
//! ```
//!
//! * [`Addon`]: `describe` and `manifests` are required; `approve_csr` defaults to OCM's
//!   `DefaultCSRApprover` rules ([`csr`]), `hub_permissions` to none, `probe_health` to lease-mode
//!   behaviour ([`health`]).
//! * [`manifest`]: manifests from `k8s-openapi` types, `apiVersion`/`kind` included.
//! * [`config`]: `AddOnDeploymentConfig` from the resolved configs.
//! * [`testing`]: a native harness; `cargo test` on the host target runs the hooks directly.
//!
//! Build with `cargo build --release --target wasm32-wasip2`; the `.wasm` in
//! `target/wasm32-wasip2/release/` is the component to register in an `AddOnPlugin`.
#![deny(missing_docs)]

mod addon;
#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod bindings;
pub mod config;
pub mod csr;
pub mod health;
pub mod log;
pub mod manifest;
pub mod testing;
mod types;

pub use addon::Addon;
pub use types::{
    AddOn, AddonError, AddonOptions, Cluster, ConfigRef, ConfigType, Csr, CsrDecision, FeedbackField,
    FeedbackRule, FeedbackValue, HealthMode, HealthResult, HealthStatus, JsonPath, Manifest, ProbeField,
    Registration, ResolvedConfig, ResourceIdentifier, Subject,
};

// Re-exported so add-on crates need not depend on these directly.
pub use k8s_openapi;
pub use serde_json;

/// Exports an [`Addon`] implementation as the component's hooks.
///
/// Use it once per plugin crate, at the crate root: `flotilla_addon_sdk::export_addon!(MyAddon);`.
/// On targets other than `wasm32` it only checks that the type implements [`Addon`], so the
/// crate still builds for native tests.
#[cfg(target_arch = "wasm32")]
#[macro_export]
macro_rules! export_addon {
    ($addon:ty) => {
        #[doc(hidden)]
        type __FlotillaAddonExport = $crate::bindings::Adapter<$addon>;
        $crate::bindings::__export_addon_plugin!(__FlotillaAddonExport with_types_in $crate::bindings);
    };
}

/// Exports an [`Addon`] implementation as the component's hooks.
///
/// Use it once per plugin crate, at the crate root: `flotilla_addon_sdk::export_addon!(MyAddon);`.
/// On targets other than `wasm32` it only checks that the type implements [`Addon`], so the
/// crate still builds for native tests.
#[cfg(not(target_arch = "wasm32"))]
#[macro_export]
macro_rules! export_addon {
    ($addon:ty) => {
        const _: fn() = || {
            fn exported<A: $crate::Addon>() {}
            exported::<$addon>();
        };
    };
}
