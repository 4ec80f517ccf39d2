//! Hostile plugin: recurses without bound in `manifests` until the wasm stack overflows.

use flotilla_addon_sdk::{AddOn, Addon, AddonError, AddonOptions, Cluster, Manifest, ResolvedConfig};

/// Recurses until `depth == stop`, which never happens in practice. Locals stay in wasm locals
/// (no address taken), so each level uses the engine's native wasm stack rather than the shadow
/// stack in linear memory, and the result feeds a rotate so the recursion is not turned into a
/// loop.
#[inline(never)]
fn deeper(depth: u64, stop: u64) -> u64 {
    if depth == stop {
        return depth;
    }
    deeper(depth + 1, stop).rotate_left(1) ^ depth
}

/// The hostile add-on.
pub struct Stack;

impl Addon for Stack {
    fn describe() -> AddonOptions {
        AddonOptions::default()
    }

    fn manifests(cluster: &Cluster, _: &AddOn, _: &[ResolvedConfig]) -> Result<Vec<Manifest>, AddonError> {
        // Depends on the input so the compiler cannot know where it stops.
        let stop = u64::MAX - cluster.name.len() as u64;
        Err(AddonError::Internal(deeper(0, stop).to_string()))
    }
}

flotilla_addon_sdk::export_addon!(Stack);
