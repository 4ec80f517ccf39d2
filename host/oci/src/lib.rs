//! Pure readers of what an OCI registry serves when the hub pulls a plugin, kept apart from the
//! pulls themselves (flotilla-plugin-loader `fetch::oci`) so that they are unit-tested and
//! fuzzed without a registry or wasmtime.
//!
//! ```text
//!  manifest bytes ──index? refuse──▶ CNCF Wasm layout ──▶ config + the one application/wasm layer
//!  signature manifest bytes ──▶ simple-signing layers, each with its cosign signature annotation
//!  docker config bytes (pull secret, config.json) ──▶ credentials for one registry
//! ```
//!
//! Every input is the registry's or a Secret's, so each reader returns a reason rather than
//! trusting the shape; the caller puts the reason into its own error with the reference.

#![deny(missing_docs)]

mod artifact;
mod credentials;

pub use artifact::{
    SignatureLayer, WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE, WasmArtifact, read_signature_manifest,
    read_wasm_manifest, wasm_layer,
};
pub use credentials::{credentials_for, credentials_in_dockercfg};
pub use oci_client::secrets::RegistryAuth;
