//! The stand-in for the managed clusters' work agents: the only place these tests play the
//! agent. It writes what a work agent writes on the hub — its finalizer, and the work's
//! `Applied`/`Available`/`Progressing`/`Degraded` conditions at the work's current generation —
//! so the replica set controller sees each cluster's rollout state. Once the real agent runs in
//! these tests, calls to this module are replaced by starting it.

#![allow(clippy::expect_used, reason = "test support: fail loudly")]

use flotilla_api::work::consts::MANIFEST_WORK_FINALIZER;
use flotilla_api::work::v1::ManifestWork;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

/// What a cluster's agent reports about its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Report {
    /// Applied and available, still converging (`Progressing` True).
    Progressing,
    /// Applied, available and converged (`Progressing` False).
    Done,
    /// Applied but failing (`Progressing` True, `Degraded` True).
    Failed,
}

/// Writes `report` as `work`'s status at its current generation, as the cluster's agent would.
pub async fn report(client: &Client, work: &ManifestWork, report: Report) {
    let generation = work.metadata.generation.unwrap_or_default();
    let now = Time(Timestamp::now());
    let condition = |type_: &str, status: &str, reason: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": "",
               "observedGeneration": generation, "lastTransitionTime": now})
    };
    let mut conditions = vec![
        condition("Applied", "True", "AppliedManifestWorkComplete"),
        condition("Available", "True", "ResourcesAvailable"),
    ];
    match report {
        Report::Progressing => conditions.push(condition("Progressing", "True", "Applying")),
        Report::Done => conditions.push(condition("Progressing", "False", "Completed")),
        Report::Failed => {
            conditions.push(condition("Progressing", "True", "Applying"));
            conditions.push(condition("Degraded", "True", "Degraded"));
        }
    }
    Api::<ManifestWork>::namespaced(client.clone(), &work.namespace().unwrap_or_default())
        .patch_status(
            &work.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": conditions}})),
        )
        .await
        .expect("report work status");
}

/// Puts the agent's finalizer on `work`, as the agent does before applying it.
pub async fn adopt(client: &Client, work: &ManifestWork) {
    finalizers(client, work, json!([MANIFEST_WORK_FINALIZER])).await;
}

/// Removes the agent's finalizer from `work`, as the agent does once it cleaned up.
pub async fn release(client: &Client, work: &ManifestWork) {
    finalizers(client, work, json!(null)).await;
}

async fn finalizers(client: &Client, work: &ManifestWork, value: serde_json::Value) {
    Api::<ManifestWork>::namespaced(client.clone(), &work.namespace().unwrap_or_default())
        .patch(
            &work.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": value}})),
        )
        .await
        .expect("patch work finalizers");
}
