//! Hostile plugin: never returns. Busy-loops in `manifests`, `approve-csr` and `probe-health`
//! (stopped by the epoch deadline) and sleeps in `hub-permissions` (parked in a WASI host call,
//! where epochs do not tick: stopped by the wall-clock timeout).

use std::hint::black_box;

use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, Csr, CsrDecision, FeedbackField, HealthResult, Manifest,
    ResolvedConfig,
};

/// Spins forever.
fn spin() -> ! {
    let mut n: u64 = 0;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

/// The hostile add-on.
pub struct Loop;

impl Addon for Loop {
    fn describe() -> AddonOptions {
        AddonOptions::default()
    }

    fn manifests(_: &Cluster, _: &AddOn, _: &[ResolvedConfig]) -> Result<Vec<Manifest>, AddonError> {
        spin()
    }

    fn approve_csr(_: &Cluster, _: &AddOn, _: &Csr) -> CsrDecision {
        spin()
    }

    fn hub_permissions(_: &Cluster, _: &AddOn) -> Result<Vec<Manifest>, AddonError> {
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }

    fn probe_health(_: &Cluster, _: &AddOn, _: &[FeedbackField]) -> HealthResult {
        spin()
    }
}

flotilla_addon_sdk::export_addon!(Loop);
