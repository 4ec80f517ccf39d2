//! Hostile plugin: traps in every hook but `describe`, each a different way — a panic, the
//! `unreachable` instruction, `abort`, and a failed `expect`. `manifests` answers for a cluster
//! named `answers` (and panics for any other), so calls alternating between the two show that a
//! trap never poisons the next call on the same revision.

use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, Csr, CsrDecision, FeedbackField, HealthResult, Manifest,
    ResolvedConfig,
};

/// The hostile add-on.
pub struct Trap;

impl Addon for Trap {
    fn describe() -> AddonOptions {
        AddonOptions::default()
    }

    fn manifests(
        cluster: &Cluster,
        addon: &AddOn,
        _: &[ResolvedConfig],
    ) -> Result<Vec<Manifest>, AddonError> {
        if cluster.name == "answers" {
            return Ok(vec![flotilla_addon_sdk::serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "answered", "namespace": addon.install_namespace},
            })]);
        }
        panic!("hostile-trap: panic in manifests")
    }

    fn approve_csr(_: &Cluster, _: &AddOn, _: &Csr) -> CsrDecision {
        #[cfg(target_arch = "wasm32")]
        core::arch::wasm32::unreachable();
        #[cfg(not(target_arch = "wasm32"))]
        unreachable!("hostile-trap: unreachable in approve-csr")
    }

    fn hub_permissions(cluster: &Cluster, _: &AddOn) -> Result<Vec<Manifest>, AddonError> {
        let missing: Option<Manifest> = std::hint::black_box(None);
        Ok(vec![missing.expect(&cluster.name)])
    }

    fn probe_health(_: &Cluster, _: &AddOn, _: &[FeedbackField]) -> HealthResult {
        std::process::abort()
    }
}

flotilla_addon_sdk::export_addon!(Trap);
