//! A second, distinguishable plugin revision for the host's swap tests: renders a single
//! ConfigMap whose data says `revision: b`, so every answer shows which revision produced it.

use flotilla_addon_sdk::serde_json::json;
use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, Manifest, Registration, ResolvedConfig,
};

/// Revision "b".
pub struct RevisionB;

impl Addon for RevisionB {
    fn describe() -> AddonOptions {
        AddonOptions {
            registrations: vec![Registration::KubeClient { subject: None }],
            ..AddonOptions::default()
        }
    }

    fn manifests(
        cluster: &Cluster,
        addon: &AddOn,
        _: &[ResolvedConfig],
    ) -> Result<Vec<Manifest>, AddonError> {
        Ok(vec![json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "revision", "namespace": addon.install_namespace},
            "data": {"revision": "b", "cluster": cluster.name},
        })])
    }
}

flotilla_addon_sdk::export_addon!(RevisionB);
