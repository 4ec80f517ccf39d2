//! Hostile plugin: allocates (and touches) memory until something stops it, in every hook but
//! `describe`.

use std::hint::black_box;

use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, Csr, CsrDecision, FeedbackField, HealthResult, Manifest,
    ResolvedConfig,
};

/// Grows the heap 1 MiB at a time, forever.
fn bomb() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(vec![0xa5; 1 << 20]);
        black_box(&hoard);
    }
}

/// The hostile add-on.
pub struct Memory;

impl Addon for Memory {
    fn describe() -> AddonOptions {
        AddonOptions::default()
    }

    fn manifests(_: &Cluster, _: &AddOn, _: &[ResolvedConfig]) -> Result<Vec<Manifest>, AddonError> {
        bomb()
    }

    fn approve_csr(_: &Cluster, _: &AddOn, _: &Csr) -> CsrDecision {
        bomb()
    }

    fn hub_permissions(_: &Cluster, _: &AddOn) -> Result<Vec<Manifest>, AddonError> {
        bomb()
    }

    fn probe_health(_: &Cluster, _: &AddOn, _: &[FeedbackField]) -> HealthResult {
        bomb()
    }
}

flotilla_addon_sdk::export_addon!(Memory);
