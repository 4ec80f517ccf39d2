//! Hostile plugin: `manifests` answers with something that is not a Kubernetes object, chosen by
//! the add-on's name so one component shows every case:
//!
//! | add-on name ends with | manifest returned                           |
//! |-----------------------|---------------------------------------------|
//! | `not-json`            | `{"apiVersion": "v1", "kind":` (cut short)  |
//! | `no-kind`             | a ConfigMap without `kind`                  |
//! | `no-name`             | a ConfigMap without `metadata.name`         |
//! | anything else         | a JSON array, not an object                 |
//!
//! The SDK always serializes what an add-on returns, so the not-JSON answer needs the raw WIT
//! export: this crate implements the generated `Guest` trait itself and hands every other hook
//! to the SDK's adapter over a plain add-on.

#[cfg(target_arch = "wasm32")]
mod raw {
    use flotilla_addon_sdk::bindings::Adapter;
    use flotilla_addon_sdk::bindings::exports::flotilla::addon::hooks::Guest;
    use flotilla_addon_sdk::bindings::flotilla::addon::types as wit;

    /// The hooks the SDK's adapter answers for this plugin.
    type Base = Adapter<super::Plain>;

    /// The hostile add-on's raw export.
    pub struct Malformed;

    impl Guest for Malformed {
        fn describe() -> wit::AddonOptions {
            Base::describe()
        }

        fn manifests(
            _: wit::Cluster,
            addon: wit::Addon,
            _: Vec<wit::ResolvedConfig>,
        ) -> Result<Vec<wit::Manifest>, wit::PluginError> {
            Ok(vec![super::answer(&addon.name, &addon.install_namespace)])
        }

        fn approve_csr(cluster: wit::Cluster, addon: wit::Addon, request: wit::Csr) -> wit::CsrDecision {
            Base::approve_csr(cluster, addon, request)
        }

        fn hub_permissions(
            cluster: wit::Cluster,
            addon: wit::Addon,
        ) -> Result<Vec<wit::Manifest>, wit::PluginError> {
            Base::hub_permissions(cluster, addon)
        }

        fn probe_health(
            cluster: wit::Cluster,
            addon: wit::Addon,
            fields: Vec<wit::FeedbackField>,
        ) -> wit::HealthResult {
            Base::probe_health(cluster, addon, fields)
        }
    }

    flotilla_addon_sdk::bindings::__export_addon_plugin!(Malformed with_types_in flotilla_addon_sdk::bindings);
}

use flotilla_addon_sdk::{AddOn, Addon, AddonError, AddonOptions, Cluster, Manifest, ResolvedConfig};

/// The plain add-on behind every hook but `manifests`.
pub struct Plain;

impl Addon for Plain {
    fn describe() -> AddonOptions {
        AddonOptions::default()
    }

    fn manifests(_: &Cluster, _: &AddOn, _: &[ResolvedConfig]) -> Result<Vec<Manifest>, AddonError> {
        Ok(Vec::new())
    }
}

/// The text `manifests` returns for add-on `addon` installed in `namespace`.
pub fn answer(addon: &str, namespace: &str) -> String {
    if addon.ends_with("not-json") {
        return r#"{"apiVersion": "v1", "kind":"#.to_owned();
    }
    if addon.ends_with("no-kind") {
        return format!(
            r#"{{"apiVersion": "v1", "metadata": {{"name": "no-kind", "namespace": "{namespace}"}}}}"#
        );
    }
    if addon.ends_with("no-name") {
        return format!(
            r#"{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"namespace": "{namespace}"}}}}"#
        );
    }
    "[1, 2, 3]".to_owned()
}

#[cfg(not(target_arch = "wasm32"))]
flotilla_addon_sdk::export_addon!(Plain);
