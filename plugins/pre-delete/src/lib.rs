//! An add-on with a pre-delete hook, for the hub's uninstall path: it deploys one ConfigMap and
//! marks a Job with `addon.open-cluster-management.io/addon-pre-delete`, which the hub must run
//! (through the `addon-<name>-pre-delete` ManifestWork) and see complete before it removes the
//! add-on from the cluster.

use flotilla_addon_sdk::serde_json::json;
use flotilla_addon_sdk::{AddOn, Addon, AddonError, AddonOptions, Cluster, Manifest, ResolvedConfig};

/// The add-on.
pub struct PreDelete;

impl Addon for PreDelete {
    fn describe() -> AddonOptions {
        AddonOptions::default()
    }

    fn manifests(
        cluster: &Cluster,
        addon: &AddOn,
        _: &[ResolvedConfig],
    ) -> Result<Vec<Manifest>, AddonError> {
        let namespace = &addon.install_namespace;
        Ok(vec![
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": format!("{}-settings", addon.name), "namespace": namespace},
                "data": {"cluster": cluster.name},
            }),
            json!({
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": format!("{}-cleanup", addon.name),
                    "namespace": namespace,
                    "annotations": {"addon.open-cluster-management.io/addon-pre-delete": ""},
                },
                "spec": {"template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "cleanup", "image": "busybox", "command": ["true"]}],
                }}},
            }),
        ])
    }
}

flotilla_addon_sdk::export_addon!(PreDelete);
