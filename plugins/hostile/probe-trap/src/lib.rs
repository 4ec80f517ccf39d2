//! Hostile plugin: an add-on whose health is `customized` — the agent Deployment `agent` is
//! probed — and whose `probe-health` traps (a panic). `describe` and `manifests` answer, so the
//! host deploys the add-on and collects the feedback; its `Available` must end Unknown naming the
//! fault, never True.

use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, FeedbackField, FeedbackRule, HealthMode, HealthResult,
    Manifest, ProbeField, ResolvedConfig, ResourceIdentifier,
};

/// The hostile add-on.
pub struct ProbeTrap;

/// Name of the probed Deployment.
pub const AGENT: &str = "agent";
/// Install namespace the probe field names.
pub const NAMESPACE: &str = "open-cluster-management-agent-addon";

impl Addon for ProbeTrap {
    fn describe() -> AddonOptions {
        AddonOptions {
            health: HealthMode::Customized(vec![ProbeField {
                resource: ResourceIdentifier {
                    group: "apps".into(),
                    resource: "deployments".into(),
                    name: AGENT.into(),
                    namespace: NAMESPACE.into(),
                },
                rules: vec![FeedbackRule::WellKnownStatus],
            }]),
            ..AddonOptions::default()
        }
    }

    fn manifests(_: &Cluster, _: &AddOn, _: &[ResolvedConfig]) -> Result<Vec<Manifest>, AddonError> {
        Ok(vec![flotilla_addon_sdk::serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": AGENT, "namespace": NAMESPACE},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": AGENT}},
                     "template": {"metadata": {"labels": {"app": AGENT}},
                                  "spec": {"containers": [{"name": AGENT, "image": "flotilla.local/flotilla/pause:3.10"}]}}},
        })])
    }

    fn probe_health(cluster: &Cluster, _: &AddOn, _: &[FeedbackField]) -> HealthResult {
        panic!("hostile-probe-trap: probe-health panics on {}", cluster.name)
    }
}

flotilla_addon_sdk::export_addon!(ProbeTrap);
