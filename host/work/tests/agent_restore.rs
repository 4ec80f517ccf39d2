//! The hub changes under a running agent.
//!
//! Restored from a backup: its etcd data directory is copied while the hub is stopped, a work
//! is created and applied after that, and the copy is put back (etcd and the apiserver
//! restarted on it), as an admin restoring a backup does. The agent notices the hub went back
//! (its watch would wait for a resourceVersion the hub has not reached) and reads it afresh.
//! The work made after the backup is gone from the hub, but the agent holds its record's
//! eviction — the hub's state is older than the record — instead of deleting what it applied
//! once the grace runs out; when the work is created again, the record is released and nothing
//! was re-created.
//!
//! Reached under another URL: the records made under the old one are superseded.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use crate::agent_support;

use std::{path::Path, process::Command, time::Duration};

use agent_support::*;
use flotilla_api::work::v1::AppliedManifestWork;
use flotilla_core::work::agent::eviction::EVICTION_HELD_ANNOTATION;
use flotilla_core::work::agent::names::{applied_manifest_work_name, hub_hash};
use flotilla_testing::{ControlPlane, events};
use flotilla_work::agent::AgentOptions;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const GRACE: Duration = Duration::from_secs(3);
/// Writes to the hub between the backup and the restore.
const FILLER_WRITES: usize = 300;

fn config_map(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name, "namespace": namespace },
        "data": { "name": name },
    })
}

fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    let copied = Command::new("cp").arg("-a").arg(from).arg(to).status().unwrap();
    assert!(copied.success(), "copy {} to {}", from.display(), to.display());
}

/// Stops the hub's apiserver and etcd, runs `with_data` on etcd's data directory, and starts
/// both again.
async fn with_hub_stopped(hub: &mut ControlPlane, with_data: impl FnOnce(&Path)) {
    hub.stop_apiserver().unwrap();
    hub.stop_etcd().unwrap();
    with_data(&hub.dir().join("etcd"));
    hub.start_etcd().await.unwrap();
    hub.start_apiserver().await.unwrap();
}

#[tokio::test]
async fn a_work_lost_to_a_hub_restored_from_a_backup_is_held_not_evicted() {
    let (_, managed) = planes().await;
    let mut hub = ControlPlane::start("work-restore-hub").await.unwrap();
    let cluster = "cluster-restore";
    let options = AgentOptions {
        eviction_grace_period: GRACE,
        ..options(cluster)
    };
    let agent = start_agent_on(&hub, managed, cluster, options, None).await;
    let ns = "work-restore";
    namespace(&agent.managed, ns).await;
    agent
        .create(&work("before", vec![config_map(ns, "before")]))
        .await;
    agent.wait_condition("before", "Applied", "True").await;

    let backup = hub.dir().join("etcd-backup");
    with_hub_stopped(&mut hub, |data| copy_dir(data, &backup)).await;
    // Time passes on the hub, as it does between a backup and its restore: writes move its
    // resourceVersion well past the backup's.
    let filler: Api<ConfigMap> = Api::namespaced(agent.hub.clone(), "default");
    filler
        .create(
            &Default::default(),
            &serde_json::from_value(config_map("default", "filler")).unwrap(),
        )
        .await
        .unwrap();
    for n in 0..FILLER_WRITES {
        let patch = json!({"data": {"n": n.to_string()}});
        filler
            .patch("filler", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    agent.create(&work("after", vec![config_map(ns, "after")])).await;
    agent.wait_condition("after", "Applied", "True").await;
    let cms: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), ns);
    let applied = cms.get("after").await.unwrap();

    with_hub_stopped(&mut hub, |data| copy_dir(&backup, data)).await;
    assert!(
        agent.works().get_opt("after").await.unwrap().is_none(),
        "the restored hub has no work `after`"
    );

    let name = applied_manifest_work_name(&hub_hash(hub.server()), "after");
    let records: Api<AppliedManifestWork> = Api::all(agent.managed.clone());
    let held = wait_object(&records, &name, "record held", |r| {
        r.is_some_and(|r| r.annotations().contains_key(EVICTION_HELD_ANNOTATION))
    })
    .await
    .unwrap();
    let why = &held.annotations()[EVICTION_HELD_ANNOTATION];
    assert!(why.contains("restored from a backup"), "{why}");
    let event = events::wait_for(
        &agent.managed,
        "AppliedManifestWork",
        &name,
        "AppliedManifestWorkEvictionHeld",
        TIMEOUT,
    )
    .await
    .unwrap();
    assert_eq!(event.type_.as_deref(), Some("Warning"));

    // Well past the grace, nothing the work applied is gone.
    tokio::time::sleep(GRACE * 3).await;
    let record = records.get(&name).await.expect("the record is kept");
    assert!(record.status.unwrap_or_default().eviction_start_time.is_none());
    assert_eq!(cms.get("after").await.unwrap().uid(), applied.uid());

    // The admin creates the work again: the record is released and the object kept as it was.
    agent.create(&work("after", vec![config_map(ns, "after")])).await;
    agent.wait_condition("after", "Applied", "True").await;
    wait_object(&records, &name, "record released", |r| {
        r.is_some_and(|r| !r.annotations().contains_key(EVICTION_HELD_ANNOTATION))
    })
    .await;
    assert_eq!(cms.get("after").await.unwrap().uid(), applied.uid());
    assert!(cms.get_opt("before").await.unwrap().is_some());
}

/// The same hub reached under another URL (the agent's hub kubeconfig rewritten from
/// `127.0.0.1` to `localhost`): the agent records its works under the new hub hash, and the
/// records made under the old one are removed with an Event rather than left behind, while the
/// objects both recorded keep their uid and end owned by the new record alone.
#[tokio::test]
async fn records_made_under_a_former_url_of_the_hub_are_superseded_not_left_behind() {
    use k8s_openapi::api::core::v1::Secret;
    let (hub, _) = planes().await;
    let cluster = "cluster-new-url";
    let options = options(cluster);
    let agent = start_agent_with(cluster, options.clone()).await;
    let ns = "work-new-url";
    namespace(&agent.managed, ns).await;
    agent.create(&work("moved", vec![config_map(ns, "moved")])).await;
    agent.wait_condition("moved", "Applied", "True").await;
    let cms: Api<ConfigMap> = Api::namespaced(agent.managed.clone(), ns);
    let object = cms.get("moved").await.unwrap();
    let old = applied_manifest_work_name(&hub_hash(hub.server()), "moved");

    let new_server = hub.server().replace("127.0.0.1", "localhost");
    assert_ne!(new_server, hub.server());
    let secrets: Api<Secret> = Api::namespaced(agent.managed.clone(), &options.agent_namespace);
    let mut secret = secrets.get(&options.hub_kubeconfig_secret).await.unwrap();
    let data = secret.data.as_mut().unwrap();
    let kubeconfig = data
        .get_mut(flotilla_registration::names::KUBECONFIG_KEY)
        .unwrap();
    kubeconfig.0 = String::from_utf8(kubeconfig.0.clone())
        .unwrap()
        .replace(hub.server(), &new_server)
        .into_bytes();
    secrets
        .replace(&options.hub_kubeconfig_secret, &Default::default(), &secret)
        .await
        .unwrap();

    let new = applied_manifest_work_name(&hub_hash(&new_server), "moved");
    let records: Api<AppliedManifestWork> = Api::all(agent.managed.clone());
    let record = wait_object(&records, &new, "record under the new URL", |r| r.is_some())
        .await
        .unwrap();
    wait_object(&records, &old, "record under the old URL removed", |r| {
        r.is_none()
    })
    .await;
    let event = events::wait_for(
        &agent.managed,
        "AppliedManifestWork",
        &old,
        "AppliedManifestWorkSuperseded",
        TIMEOUT,
    )
    .await
    .unwrap();
    assert!(event.note.unwrap_or_default().contains(&new));
    let after = cms.get("moved").await.unwrap();
    assert_eq!(after.uid(), object.uid(), "the object was kept");
    let owners: Vec<String> = after.owner_references().iter().map(|o| o.uid.clone()).collect();
    assert_eq!(owners, [record.uid().unwrap()], "owned by the new record alone");
}
