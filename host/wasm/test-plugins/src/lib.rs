//! Paths of the plugin components under `plugins/`, built for `wasm32-wasip2` by `build.rs`, and
//! the JavaScript plugin, built on first use by [`js::hello_js`].
//!
//! A dev-dependency of the host crates whose tests load these files into the real runtime.
//! Adding a plugin crate means adding it to `plugins/Cargo.toml` and to `PLUGINS` in `build.rs`;
//! the test `every_plugin_is_used_by_a_test` in `host/wasm/tests/runtime.rs` then fails until a
//! test of a host crate names it.

pub mod js;

include!(concat!(env!("OUT_DIR"), "/plugins.rs"));
