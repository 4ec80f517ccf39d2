//! Hostile plugin: a valid component whose `describe` panics, so it can never become ready. Used
//! as the bad new revision that must not replace a good one.

use flotilla_addon_sdk::{AddOn, Addon, AddonError, AddonOptions, Cluster, Manifest, ResolvedConfig};

/// The hostile add-on.
pub struct DescribeTrap;

impl Addon for DescribeTrap {
    fn describe() -> AddonOptions {
        panic!("hostile-describe-trap: describe panics")
    }

    fn manifests(_: &Cluster, _: &AddOn, _: &[ResolvedConfig]) -> Result<Vec<Manifest>, AddonError> {
        Ok(Vec::new())
    }
}

flotilla_addon_sdk::export_addon!(DescribeTrap);
