//! Health helpers for [`crate::Addon::probe_health`].
//!
//! In lease mode (the default) the klusterlet reports health from the agent's lease and the hub
//! never asks the plugin; [`lease_mode`] is the answer if it is asked anyway. In `customized`
//! mode the hub passes the probe fields' status feedback; [`deployments_available`] applies OCM's
//! DeploymentAvailability rule to well-known Deployment feedback.

use crate::types::{FeedbackField, FeedbackValue, HealthResult, HealthStatus};

/// The default `probe-health` answer: `unknown`, because in lease mode the lease decides.
pub fn lease_mode() -> HealthResult {
    HealthResult::new(
        HealthStatus::Unknown,
        "health is reported from the add-on agent's lease (health mode lease); probe-health is not used",
    )
}

/// OCM's DeploymentAvailability rule over well-known feedback: every probed Deployment is
/// available if it reports `Replicas` 0 or `ReadyReplicas` ≥ 1; no feedback at all is `unknown`.
pub fn deployments_available(fields: &[FeedbackField]) -> HealthResult {
    let int = |name: &str, resource: &crate::types::ResourceIdentifier| {
        fields
            .iter()
            .find_map(|f| match (&f.value, f.name == name && &f.resource == resource) {
                (FeedbackValue::Integer(v), true) => Some(*v),
                _ => None,
            })
    };
    let mut probed: Vec<&crate::types::ResourceIdentifier> = Vec::new();
    for f in fields {
        if !probed.contains(&&f.resource) {
            probed.push(&f.resource);
        }
    }
    if probed.is_empty() {
        return HealthResult::new(HealthStatus::Unknown, "no status feedback yet");
    }
    for r in probed {
        let ok = int("Replicas", r) == Some(0) || int("ReadyReplicas", r).is_some_and(|n| n >= 1);
        if !ok {
            return HealthResult::new(
                HealthStatus::Unavailable,
                format!("deployment {}/{} has no ready replicas", r.namespace, r.name),
            );
        }
    }
    HealthResult::new(
        HealthStatus::Available,
        "all probed deployments have ready replicas",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ResourceIdentifier;

    fn field(name: &str, value: i64) -> FeedbackField {
        let resource = ResourceIdentifier {
            group: "apps".into(),
            resource: "deployments".into(),
            name: "agent".into(),
            namespace: "ns".into(),
        };
        FeedbackField {
            resource,
            name: name.into(),
            value: FeedbackValue::Integer(value),
        }
    }

    #[test]
    fn deployments_with_ready_replicas_are_available() {
        assert_eq!(
            deployments_available(&[field("ReadyReplicas", 1)]).status,
            HealthStatus::Available
        );
        assert_eq!(
            deployments_available(&[field("Replicas", 0)]).status,
            HealthStatus::Available
        );
        assert_eq!(
            deployments_available(&[field("ReadyReplicas", 0)]).status,
            HealthStatus::Unavailable
        );
        assert_eq!(deployments_available(&[]).status, HealthStatus::Unknown);
    }
}
