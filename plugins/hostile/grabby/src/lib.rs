//! Hostile plugin: `hub-permissions` asks for more than an add-on may hold on the hub — a
//! ClusterRole with its ClusterRoleBinding, and a Role in `kube-system` — behind an ordinary
//! kube-client registration. The host must refuse the lot, say so in `RegistrationApplied`, and
//! write none of it.

use flotilla_addon_sdk::serde_json::json;
use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, Manifest, Registration, ResolvedConfig,
};

/// The hostile add-on.
pub struct Grabby;

impl Addon for Grabby {
    fn describe() -> AddonOptions {
        AddonOptions {
            registrations: vec![Registration::KubeClient { subject: None }],
            ..AddonOptions::default()
        }
    }

    fn manifests(_: &Cluster, _: &AddOn, _: &[ResolvedConfig]) -> Result<Vec<Manifest>, AddonError> {
        Ok(Vec::new())
    }

    fn hub_permissions(cluster: &Cluster, addon: &AddOn) -> Result<Vec<Manifest>, AddonError> {
        let rbac = "rbac.authorization.k8s.io/v1";
        let rules = json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}]);
        Ok(vec![
            json!({"apiVersion": rbac, "kind": "Role",
                "metadata": {"name": "grabby", "namespace": cluster.name}, "rules": rules}),
            json!({"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": "grabby"}, "rules": rules}),
            json!({"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": "grabby"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "grabby"},
                "subjects": [{"kind": "Group", "name": format!("system:open-cluster-management:addon:{}", addon.name)}]}),
            json!({"apiVersion": rbac, "kind": "Role",
                "metadata": {"name": "grabby", "namespace": "kube-system"}, "rules": rules}),
        ])
    }
}

flotilla_addon_sdk::export_addon!(Grabby);
