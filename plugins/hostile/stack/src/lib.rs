//! Hostile plugin: recurses without bound in every hook but `describe` until the wasm stack
//! overflows.

use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, Csr, CsrDecision, FeedbackField, HealthResult,
    HealthStatus, Manifest, ResolvedConfig,
};

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

/// Recursion whose end depends on the input, so the compiler cannot know where it stops.
fn overflow(cluster: &Cluster) -> String {
    deeper(0, u64::MAX - cluster.name.len() as u64).to_string()
}

/// The hostile add-on.
pub struct Stack;

impl Addon for Stack {
    fn describe() -> AddonOptions {
        AddonOptions::default()
    }

    fn manifests(cluster: &Cluster, _: &AddOn, _: &[ResolvedConfig]) -> Result<Vec<Manifest>, AddonError> {
        Err(AddonError::Internal(overflow(cluster)))
    }

    fn approve_csr(cluster: &Cluster, _: &AddOn, _: &Csr) -> CsrDecision {
        // An approval only if the recursion ever ended.
        let _ = overflow(cluster);
        CsrDecision::Approve
    }

    fn hub_permissions(cluster: &Cluster, _: &AddOn) -> Result<Vec<Manifest>, AddonError> {
        Err(AddonError::Internal(overflow(cluster)))
    }

    fn probe_health(cluster: &Cluster, _: &AddOn, _: &[FeedbackField]) -> HealthResult {
        HealthResult::new(HealthStatus::Available, overflow(cluster))
    }
}

flotilla_addon_sdk::export_addon!(Stack);
