//! Paths of the plugin components under `plugins/`, built for `wasm32-wasip2` by `build.rs`.
//!
//! A dev-dependency of `flotilla-wasm`: its tests load these files into the real host runtime.
//! Adding a plugin crate means adding it to `plugins/Cargo.toml` and to `PLUGINS` in `build.rs`;
//! the test `every_plugin_is_used_by_a_test` in `host/wasm/tests/runtime.rs` then fails until a
//! test loads it.

include!(concat!(env!("OUT_DIR"), "/plugins.rs"));
