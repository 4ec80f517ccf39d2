//! Hosted mode end to end, with the real `flotilla` binary and three control planes (hub,
//! hosting, managed): the klusterlet's namespace and secrets live on the hosting cluster, it
//! reaches the managed cluster through Secret `external-managed-kubeconfig` there, registers
//! it, reports its claims and applies a work on it, and leaves nothing of itself on the
//! managed cluster. A missing or unparsable secret is a clear error, retried; a changed one
//! restarts the agents on it.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::{path::Path, process::Command, time::Duration};

use common::{Klusterlets, Running, flotilla_at, hub_token, join_local, ok, start_hub};
use flotilla_api::{
    cluster::{consts::managed_cluster as mc, v1::ManagedCluster, v1alpha1::ClusterClaim},
    work::v1::AppliedManifestWork,
};
use flotilla_core::conditions;
use flotilla_testing::{ControlPlane, wait};
use k8s_openapi::api::{
    core::v1::{ConfigMap, Namespace, Secret},
    rbac::v1::ClusterRoleBinding,
};
use kube::{
    Api, ResourceExt as _,
    api::{ListParams, Patch, PatchParams},
};

const CLUSTER: &str = "hosted1";
const AGENT: &str = "klusterlet-hosted1";
const SECRET: &str = "external-managed-kubeconfig";

fn kubectl(cp: &ControlPlane, args: &[&str]) {
    let output = cp.kubectl().args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Waits until the log at `path` contains `text`.
async fn log_shows(path: &Path, text: &str) {
    let found = wait::until(
        &format!("the klusterlet log shows {text:?}"),
        Duration::from_secs(60),
        || async {
            Ok::<_, String>(
                std::fs::read_to_string(path)
                    .unwrap_or_default()
                    .contains(text)
                    .then_some(()),
            )
        },
    )
    .await;
    if let Err(e) = found {
        panic!("{e}\n{}", std::fs::read_to_string(path).unwrap_or_default());
    }
}

async fn claim(client: &kube::Client, name: &str) {
    let claim: ClusterClaim = serde_json::from_value(serde_json::json!({
        "apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "ClusterClaim",
        "metadata": { "name": name }, "spec": { "value": "here" },
    }))
    .unwrap();
    Api::<ClusterClaim>::all(client.clone())
        .create(&Default::default(), &claim)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_hosted_klusterlet_manages_a_cluster_it_leaves_no_trace_of_itself_on() {
    let (hub, hosting, managed) = tokio::join!(
        ControlPlane::start("hosted-hub"),
        ControlPlane::start("hosted-hosting"),
        ControlPlane::start("hosted-managed")
    );
    let (hub, hosting, managed) = (hub.unwrap(), hosting.unwrap(), managed.unwrap());
    let state_dir = tempfile::tempdir().unwrap();
    let _klusterlets = Klusterlets(state_dir.path().to_owned());
    let state = state_dir.path();
    let token = hub_token(&ok(flotilla_at(state, hub.admin_kubeconfig(), &["init"])));
    let _hub = start_hub(
        hub.admin_kubeconfig(),
        &state.join("hub.log"),
        &["--no-plugin-host"],
    );

    // Bad input: a hosted klusterlet without the secret, then with an unparsable one, says
    // what is wrong and keeps trying.
    let broken_log = state.join("broken.log");
    let file = std::fs::File::create(&broken_log).unwrap();
    let broken = Running(
        Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args(["klusterlet", "--mode", "hosted", "--cluster-name", "broken"])
            .args(["--agent-namespace", "broken-agent", "--kubeconfig"])
            .arg(hosting.admin_kubeconfig())
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap(),
    );
    log_shows(
        &broken_log,
        "secret broken-agent/external-managed-kubeconfig on the hosting cluster does not exist",
    )
    .await;
    kubectl(&hosting, &["create", "namespace", "broken-agent"]);
    kubectl(
        &hosting,
        &[
            "create",
            "secret",
            "generic",
            SECRET,
            "-n",
            "broken-agent",
            "--from-literal=kubeconfig=clusters: [this is not",
        ],
    );
    log_shows(&broken_log, "key \"kubeconfig\" is not a kubeconfig").await;
    // A kubeconfig at last (of an address nothing serves): the agents start on it, and start
    // again when the secret is corrected.
    let broken_secrets: Api<Secret> = Api::namespaced(hosting.admin_client().await.unwrap(), "broken-agent");
    let set_kubeconfig = async |text: &str| {
        broken_secrets
            .patch(
                SECRET,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "stringData": { "kubeconfig": text } })),
            )
            .await
            .unwrap();
    };
    set_kubeconfig(
        "apiVersion: v1\nkind: Config\ncurrent-context: dead\n\
         clusters: [{name: dead, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n\
         users: [{name: u, user: {token: t}}]\n\
         contexts: [{name: dead, context: {cluster: dead, user: u}}]\n",
    )
    .await;
    log_shows(&broken_log, "running the registration agent and the work agent").await;
    set_kubeconfig(&std::fs::read_to_string(managed.admin_kubeconfig()).unwrap()).await;
    log_shows(
        &broken_log,
        "broken-agent/external-managed-kubeconfig changed; restarting the agents",
    )
    .await;
    drop(broken);

    // Claims on both clusters: the hub must see the managed cluster's only.
    let (hosting_client, managed_client) = (
        hosting.admin_client().await.unwrap(),
        managed.admin_client().await.unwrap(),
    );
    claim(&managed_client, "managed.example.com").await;
    claim(&hosting_client, "hosting.example.com").await;

    // The current kubeconfig is the managed cluster's; the agent goes to the hosting cluster.
    ok(join_local(
        state,
        managed.admin_kubeconfig(),
        hub.server(),
        &token,
        CLUSTER,
        &[
            "--agent-namespace",
            AGENT,
            "--mode",
            "hosted",
            "--hosting-kubeconfig",
            hosting.admin_kubeconfig().to_str().unwrap(),
        ],
    ));
    ok(flotilla_at(
        state,
        hub.admin_kubeconfig(),
        &["accept", "--wait", "--clusters", CLUSTER, "--timeout", "120s"],
    ));
    let log = state
        .join("klusterlets")
        .join(format!("{CLUSTER}@{AGENT}"))
        .join("klusterlet.log");
    let clusters: Api<ManagedCluster> = Api::all(hub.admin_client().await.unwrap());
    let registered = wait::until(
        "joined, available, with the managed cluster's claim",
        Duration::from_secs(120),
        || async {
            let cluster = clusters.get_opt(CLUSTER).await.map_err(|e| e.to_string())?;
            Ok::<_, String>(cluster.filter(|c| {
                let status = c.status.clone().unwrap_or_default();
                let conditions = status.conditions.unwrap_or_default();
                let up = [mc::CONDITION_JOINED, mc::CONDITION_AVAILABLE]
                    .iter()
                    .all(|t| conditions::find(&conditions, t).is_some_and(|c| c.status == "True"));
                up && status
                    .cluster_claims
                    .iter()
                    .any(|c| c.name == "managed.example.com")
            }))
        },
    )
    .await;
    let registered = match registered {
        Ok(cluster) => cluster,
        Err(e) => panic!("{e}\n{}", std::fs::read_to_string(&log).unwrap_or_default()),
    };
    let claims = registered.status.unwrap().cluster_claims;
    assert!(
        claims.iter().all(|c| c.name != "hosting.example.com"),
        "{claims:?}"
    );

    // A work lands on the managed cluster, recorded there by an AppliedManifestWork.
    let manifest = state.join("work.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hosted-work, namespace: default}\ndata: {k: v}\n",
    )
    .unwrap();
    ok(flotilla_at(
        state,
        hub.admin_kubeconfig(),
        &[
            "create",
            "work",
            "hosted-work",
            "-f",
            manifest.to_str().unwrap(),
            "--clusters",
            CLUSTER,
        ],
    ));
    let configmaps: Api<ConfigMap> = Api::namespaced(managed_client.clone(), "default");
    let applied = wait::until(
        "the work applied on the managed cluster",
        Duration::from_secs(90),
        || configmaps.get_opt("hosted-work"),
    )
    .await;
    if let Err(e) = applied {
        panic!("{e}\n{}", std::fs::read_to_string(&log).unwrap_or_default());
    }
    let records = Api::<AppliedManifestWork>::all(managed_client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        records
            .items
            .iter()
            .any(|r| r.name_any().ends_with("-hosted-work")),
        "the AppliedManifestWork lives on the managed cluster"
    );
    assert!(
        Api::<ConfigMap>::namespaced(hosting_client.clone(), "default")
            .get_opt("hosted-work")
            .await
            .unwrap()
            .is_none()
    );

    // The agent's objects are on the hosting cluster, and none of them on the managed one.
    let hosted_secrets: Api<Secret> = Api::namespaced(hosting_client.clone(), AGENT);
    for name in ["bootstrap-hub-kubeconfig", "hub-kubeconfig-secret", SECRET] {
        assert!(
            hosted_secrets.get_opt(name).await.unwrap().is_some(),
            "{name} on the hosting cluster"
        );
    }
    let namespaces: Api<Namespace> = Api::all(managed_client.clone());
    for name in [
        AGENT,
        "open-cluster-management-agent",
        "open-cluster-management-agent-addon",
    ] {
        assert!(
            namespaces.get_opt(name).await.unwrap().is_none(),
            "namespace {name} on the managed cluster"
        );
    }
    let secrets = Api::<Secret>::all(managed_client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let agent_secrets: Vec<String> = secrets
        .items
        .iter()
        .map(|s| s.name_any())
        .filter(|n| ["bootstrap-hub-kubeconfig", "hub-kubeconfig-secret", SECRET].contains(&n.as_str()))
        .collect();
    assert!(agent_secrets.is_empty(), "{agent_secrets:?}");
    let bindings = Api::<ClusterRoleBinding>::all(managed_client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        bindings
            .items
            .iter()
            .all(|b| !b.name_any().starts_with("flotilla-klusterlet")),
        "no klusterlet RBAC on the managed cluster"
    );
    let leases = Api::<k8s_openapi::api::coordination::v1::Lease>::all(managed_client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        leases
            .items
            .iter()
            .all(|l| l.namespace().as_deref() == Some("kube-system")
                || l.namespace().as_deref() == Some("kube-node-lease")),
        "only the control plane's own leases: {:?}",
        leases
            .items
            .iter()
            .map(|l| (l.namespace(), l.name_any()))
            .collect::<Vec<_>>()
    );

    ok(flotilla_at(
        state,
        managed.admin_kubeconfig(),
        &[
            "unjoin",
            "--cluster-name",
            CLUSTER,
            "--agent-namespace",
            AGENT,
            "--hosting-kubeconfig",
            hosting.admin_kubeconfig().to_str().unwrap(),
        ],
    ));
}
