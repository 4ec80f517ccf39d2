//! Hostile plugin: answers with more than the host accepts — 5 000 manifests, a 2 MiB object,
//! a 2 MiB deny reason, a 2 MiB health message.

use flotilla_addon_sdk::serde_json::json;
use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, Csr, CsrDecision, FeedbackField, HealthResult,
    HealthStatus, Manifest, ResolvedConfig,
};

const HUGE: usize = 2 << 20;

/// The hostile add-on.
pub struct Output;

impl Addon for Output {
    fn describe() -> AddonOptions {
        AddonOptions::default()
    }

    fn manifests(_: &Cluster, addon: &AddOn, _: &[ResolvedConfig]) -> Result<Vec<Manifest>, AddonError> {
        Ok((0..5_000)
            .map(|i| {
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i}"), "namespace": addon.install_namespace}})
            })
            .collect())
    }

    fn approve_csr(_: &Cluster, _: &AddOn, _: &Csr) -> CsrDecision {
        CsrDecision::Deny("x".repeat(HUGE))
    }

    fn hub_permissions(cluster: &Cluster, _: &AddOn) -> Result<Vec<Manifest>, AddonError> {
        Ok(vec![
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "huge", "namespace": cluster.name, "annotations": {"pad": "x".repeat(HUGE)}}}),
        ])
    }

    fn probe_health(_: &Cluster, _: &AddOn, _: &[FeedbackField]) -> HealthResult {
        HealthResult::new(HealthStatus::Available, "x".repeat(HUGE))
    }
}

flotilla_addon_sdk::export_addon!(Output);
