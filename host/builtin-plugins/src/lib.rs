//! The plugin components the hub ships inside its own binary, so `flotilla hub` needs nothing
//! else to serve them: today the AddOnTemplate plugin (`plugins/addon-template`).
//!
//! ```text
//!   build.rs: cargo build --release --locked --target wasm32-wasip2 -p addon-template
//!             (manifest plugins/Cargo.toml, target dir <target>/builtin-plugins)
//!        └─▶ OUT_DIR/addon_template.wasm ── include_bytes! ──▶ ADDON_TEMPLATE
//! ```

/// The WASI environment variable through which the host grants the AddOnTemplate plugin its
/// template (JSON `{"name", "spec"}`); the plugin's only capability.
pub const ADDON_TEMPLATE_ENV: &str = "FLOTILLA_ADDON_TEMPLATE";

/// The AddOnTemplate plugin component (`plugins/addon-template`), built for `wasm32-wasip2`.
pub const ADDON_TEMPLATE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/addon_template.wasm"));

#[cfg(test)]
mod tests {
    #[test]
    fn the_addon_template_component_is_embedded() {
        // A component's preamble: magic `\0asm`, then the component-model layer (0x0d, 0x01).
        assert_eq!(&super::ADDON_TEMPLATE[..4], b"\0asm");
        assert_eq!(super::ADDON_TEMPLATE[6..8], [0x01, 0x00]);
    }
}
