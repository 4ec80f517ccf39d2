//! Getting add-on plugins into the sandbox: the `AddOnPlugin` controller, fetching a plugin's
//! bytes from its source, and checking them (pinned digest, cosign signature) before the sandbox
//! (`flotilla-wasm`) sees them.
//!
//! ```text
//!   AddOnPlugin CR ─▶ controller (reconcile, status conditions, backoff)
//!                       └─ fetch: ConfigMap (gzip) | OCI (CNCF Wasm layout, pull secret),
//!                          capped before reading, layer and spec digests checked,
//!                          signature verified
//!                  ──bytes, digest, limits──▶ flotilla_wasm::PluginRegistry (slot per add-on)
//! ```
//!
//! The split follows the trust boundary: everything here talks to the apiserver and to
//! registries and decides whether bytes may be loaded; the sandbox runs loaded bytes and knows
//! nothing of Kubernetes. [`controller::run`] is what a hub starts; [`fetch::oci::push`] serves
//! `flotilla plugin push`; [`reasons`] names every condition reason written on `AddOnPlugin`
//! status.
#![deny(missing_docs)]

pub mod controller;
mod error;
pub mod fetch;
pub mod reasons;

pub use error::FetchError;

// The sandbox's vocabulary, under the names the modules here use.
use flotilla_wasm::{
    ComponentBytes, Digest, Error, Limits, ParseDigestError, Plugin, PluginRegistry, inspect, types, validate,
};
