//! Shared pieces of the agent integration tests (`tests/agent_*.rs`): a hub and a managed
//! cluster as separate real control planes, the bootstrap RBAC and identity a hub admin hands
//! out, the agent started with short intervals in its own namespace, and the test acting as
//! the hub admin (`flotilla accept`: approve the first CSR, accept the cluster, create what
//! acceptance creates) where a test does not run the hub controllers.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    dead_code,
    reason = "test support: fail loudly; not every binary uses every helper"
)]

use std::{collections::BTreeMap, time::Duration};

use flotilla_api::cluster::{consts::CLUSTER_NAME_LABEL, v1::ManagedCluster};
use flotilla_registration::{
    agent::{self, AgentOptions, AgentStatus, StatusReporter},
    names,
};
use flotilla_testing::{ControlPlane, wait};
use k8s_openapi::{
    ByteString,
    api::{
        certificates::v1::{CertificateSigningRequest, CertificateSigningRequestCondition},
        coordination::v1::Lease,
        core::v1::{Namespace, Secret},
        rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding},
    },
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams},
};
use serde_json::json;

/// How long the tests wait for the agent or the API.
pub const TIMEOUT: Duration = Duration::from_secs(60);
/// Field manager of what the test applies as the hub admin.
const MANAGER: &str = "agent-test-admin";
/// User of the bootstrap identity the tests hand out.
pub const BOOTSTRAP_USER: &str = "system:bootstrap:agent-test";

/// Logs of the agent in test output (`RUST_LOG=flotilla_registration=debug`).
pub fn init_tracing() {
    flotilla_testing::init_tracing();
}

/// The shared hub and managed control planes of this test binary.
pub async fn planes() -> (&'static ControlPlane, &'static ControlPlane) {
    let hub = flotilla_testing::shared("agent-hub").await.expect("start hub");
    let managed = flotilla_testing::shared("agent-managed")
        .await
        .expect("start managed cluster");
    (hub, managed)
}

/// Options with intervals short enough for tests, in namespace `namespace`.
pub fn options(namespace: &str, cluster: Option<&str>) -> AgentOptions {
    AgentOptions {
        cluster_name: cluster.map(str::to_owned),
        agent_namespace: namespace.to_owned(),
        status_interval: Duration::from_secs(1),
        acceptance_poll_interval: Duration::from_millis(500),
        csr_poll_interval: Duration::from_millis(300),
        health_retry_interval: Duration::from_millis(500),
        backoff_initial: Duration::from_millis(200),
        backoff_max: Duration::from_secs(2),
        request_timeout: Duration::from_secs(10),
        ..AgentOptions::default()
    }
}

/// A running agent; aborted when dropped.
pub struct RunningAgent {
    /// The agent task.
    pub task: tokio::task::JoinHandle<agent::Result<()>>,
    /// Its status.
    pub status: StatusReporter,
}

impl Drop for RunningAgent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RunningAgent {
    /// Starts the agent against `managed` with `options`.
    pub async fn start(managed: &ControlPlane, options: AgentOptions) -> Self {
        let client = managed.admin_client().await.expect("managed admin client");
        let status = options.status.clone();
        let task = tokio::spawn(agent::run(client, options));
        Self { task, status }
    }

    /// Stops the agent and waits until it is gone.
    pub async fn stop(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }

    /// The agent's result once it ends, or `None` if it is still running after `timeout`.
    pub async fn finished(&mut self, timeout: Duration) -> Option<agent::Result<()>> {
        tokio::time::timeout(timeout, &mut self.task)
            .await
            .ok()
            .map(|joined| joined.expect("the agent does not panic"))
    }

    /// Waits until the status satisfies `check`, and returns it.
    pub async fn wait(&self, what: &str, check: impl Fn(&AgentStatus) -> bool) -> AgentStatus {
        wait_status(&self.status, what, TIMEOUT, check).await
    }
}

/// Waits until `reporter`'s status satisfies `check`.
pub async fn wait_status(
    reporter: &StatusReporter,
    what: &str,
    timeout: Duration,
    check: impl Fn(&AgentStatus) -> bool,
) -> AgentStatus {
    let check = &check;
    wait::until(what, timeout, || async move {
        let status = reporter.current();
        if check(&status) {
            Ok(Some(status))
        } else {
            Err(format!("{status:?}"))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Applies `object` server-side as the test admin.
async fn apply<K>(api: &Api<K>, name: &str, object: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(object))
        .await
        .unwrap_or_else(|e| panic!("apply {name}: {e}"));
}

/// Binds OCM's bootstrap ClusterRole (made by the hub controllers) to the bootstrap group.
pub async fn ensure_bootstrap_binding(hub_admin: &Client) {
    apply(
        &Api::<ClusterRoleBinding>::all(hub_admin.clone()),
        names::BOOTSTRAP_CLUSTER_ROLE,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": { "name": names::BOOTSTRAP_CLUSTER_ROLE },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": names::BOOTSTRAP_CLUSTER_ROLE },
            "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                           "name": names::BOOTSTRAP_GROUP }],
        }),
    )
    .await;
}

/// OCM's bootstrap ClusterRole, bound to the bootstrap group, on the hub.
pub async fn ensure_bootstrap_rbac(hub_admin: &Client) {
    apply(
        &Api::<ClusterRole>::all(hub_admin.clone()),
        names::BOOTSTRAP_CLUSTER_ROLE,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": { "name": names::BOOTSTRAP_CLUSTER_ROLE },
            "rules": [
                { "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"] },
                { "apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
                  "verbs": ["create", "get", "list", "watch"] },
                { "apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclusters"],
                  "verbs": ["get", "create", "list", "watch"] },
                { "apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclustersets/join"],
                  "verbs": ["create"] },
            ],
        }),
    )
    .await;
    ensure_bootstrap_binding(hub_admin).await;
}

/// A bootstrap kubeconfig for `hub`: a client certificate in the bootstrap group.
pub fn bootstrap_kubeconfig(hub: &ControlPlane) -> String {
    hub.kubeconfig_for(BOOTSTRAP_USER, &[names::BOOTSTRAP_GROUP])
        .expect("bootstrap kubeconfig")
}

/// Creates namespace `namespace` on the managed cluster with the bootstrap secret holding
/// `kubeconfig` (any bytes, so tests can hand in broken ones).
pub async fn prepare_namespace(managed_admin: &Client, namespace: &str, kubeconfig: &[u8]) {
    let namespaces: Api<Namespace> = Api::all(managed_admin.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => panic!("create namespace {namespace}: {e}"),
    }
    put_bootstrap_secret(managed_admin, namespace, kubeconfig).await;
}

/// Creates or replaces the bootstrap secret in `namespace`.
pub async fn put_bootstrap_secret(managed_admin: &Client, namespace: &str, kubeconfig: &[u8]) {
    let secrets: Api<Secret> = Api::namespaced(managed_admin.clone(), namespace);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(names::BOOTSTRAP_SECRET.to_owned()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            names::KUBECONFIG_KEY.to_owned(),
            ByteString(kubeconfig.to_vec()),
        )])),
        ..Default::default()
    };
    let _ = secrets.delete(names::BOOTSTRAP_SECRET, &Default::default()).await;
    wait::until("bootstrap secret replaced", TIMEOUT, || async {
        match secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => Ok(Some(())),
            Err(e) => Err(e),
        }
    })
    .await
    .expect("create bootstrap secret");
}

/// The hub kubeconfig secret in `namespace`, if any.
pub async fn hub_secret(managed_admin: &Client, namespace: &str) -> Option<Secret> {
    Api::<Secret>::namespaced(managed_admin.clone(), namespace)
        .get_opt(names::HUB_KUBECONFIG_SECRET)
        .await
        .expect("read hub kubeconfig secret")
}

/// The bytes of `key` in `secret`.
pub fn secret_data<'a>(secret: &'a Secret, key: &str) -> &'a [u8] {
    &secret.data.as_ref().expect("secret data")[key].0
}

/// The cluster's CSRs (cluster-name label), oldest first.
pub async fn cluster_csrs(hub_admin: &Client, cluster: &str) -> Vec<CertificateSigningRequest> {
    let mut csrs = Api::<CertificateSigningRequest>::all(hub_admin.clone())
        .list(&ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={cluster}")))
        .await
        .expect("list CSRs")
        .items;
    csrs.sort_by_key(|c| c.metadata.creation_timestamp.clone().map(|t| t.0));
    csrs
}

/// Waits for the cluster to have at least `count` CSRs, and returns them.
pub async fn wait_csrs(hub_admin: &Client, cluster: &str, count: usize) -> Vec<CertificateSigningRequest> {
    wait::until(&format!("{count} CSR(s) of {cluster}"), TIMEOUT, || async {
        let csrs = cluster_csrs(hub_admin, cluster).await;
        Ok::<_, String>((csrs.len() >= count).then_some(csrs))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Sets the CSR's `Approved` (or `Denied`) condition as the hub admin.
pub async fn decide_csr(hub_admin: &Client, name: &str, approve: bool) {
    let condition = CertificateSigningRequestCondition {
        type_: if approve { "Approved" } else { "Denied" }.into(),
        status: "True".into(),
        reason: Some(if approve { "ApprovedByTest" } else { "DeniedByTest" }.into()),
        message: Some("decided by the test as hub admin".into()),
        last_update_time: Some(Time(Timestamp::now())),
        ..Default::default()
    };
    Api::<CertificateSigningRequest>::all(hub_admin.clone())
        .patch_approval(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "conditions": [condition] } })),
        )
        .await
        .unwrap_or_else(|e| panic!("decide CSR {name}: {e}"));
}

/// Approves every pending CSR of `cluster`; returns their names.
pub async fn approve_pending(hub_admin: &Client, cluster: &str) -> Vec<String> {
    let mut approved = Vec::new();
    for csr in cluster_csrs(hub_admin, cluster).await {
        let decided = csr
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| !c.is_empty());
        if !decided {
            let name = csr.metadata.name.clone().unwrap_or_default();
            decide_csr(hub_admin, &name, true).await;
            approved.push(name);
        }
    }
    approved
}

/// The ManagedCluster `name`, if it exists.
pub async fn managed_cluster(hub_admin: &Client, name: &str) -> Option<ManagedCluster> {
    Api::<ManagedCluster>::all(hub_admin.clone())
        .get_opt(name)
        .await
        .expect("get ManagedCluster")
}

/// Waits until the ManagedCluster exists and satisfies `check`.
pub async fn wait_cluster(
    hub_admin: &Client,
    name: &str,
    what: &str,
    check: impl Fn(&ManagedCluster) -> bool,
) -> ManagedCluster {
    let check = &check;
    wait::until(what, TIMEOUT, || async move {
        match managed_cluster(hub_admin, name).await {
            Some(cluster) if check(&cluster) => Ok(Some(cluster)),
            Some(cluster) => Err(format!("{:?}", cluster.status)),
            None => Err("no ManagedCluster".to_owned()),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The condition `type_` of a ManagedCluster.
pub fn condition<'a>(cluster: &'a ManagedCluster, type_: &str) -> Option<&'a Condition> {
    cluster
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
}

/// Whether the cluster has condition `type_` with `status` and `reason`.
pub fn has_condition(cluster: &ManagedCluster, type_: &str, status: &str, reason: &str) -> bool {
    condition(cluster, type_).is_some_and(|c| c.status == status && c.reason == reason)
}

/// Does what the hub does on acceptance, as the admin: `spec.hubAcceptsClient`, the cluster
/// namespace, the per-cluster ClusterRole and binding, the registration RoleBinding, the
/// lease, and `HubAcceptedManagedCluster` True.
pub async fn accept(hub_admin: &Client, cluster: &str) {
    Api::<ManagedCluster>::all(hub_admin.clone())
        .patch(
            cluster,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "hubAcceptsClient": true } })),
        )
        .await
        .expect("accept cluster");
    apply(
        &Api::<Namespace>::all(hub_admin.clone()),
        cluster,
        json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": { "name": cluster, "labels": { CLUSTER_NAME_LABEL: cluster } },
        }),
    )
    .await;
    let groups = [names::cluster_group(cluster), names::cluster_group_alt(cluster)];
    let group_subjects: Vec<_> = groups
        .iter()
        .map(|g| json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g }))
        .collect();
    let role = names::cluster_role(cluster);
    apply(
        &Api::<ClusterRole>::all(hub_admin.clone()),
        &role,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": { "name": role },
            "rules": [
                { "apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
                  "verbs": ["create", "get", "list", "watch"] },
                { "apiGroups": ["register.open-cluster-management.io"],
                  "resources": ["managedclusters/clientcertificates"], "verbs": ["renew"] },
                { "apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclusters"],
                  "resourceNames": [cluster], "verbs": ["get", "list", "update", "watch"] },
                { "apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclusters/status"],
                  "resourceNames": [cluster], "verbs": ["patch", "update"] },
            ],
        }),
    )
    .await;
    apply(
        &Api::<ClusterRoleBinding>::all(hub_admin.clone()),
        &role,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": { "name": role },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
            "subjects": group_subjects,
        }),
    )
    .await;
    apply(
        &Api::<ClusterRole>::all(hub_admin.clone()),
        names::REGISTRATION_CLUSTER_ROLE,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": { "name": names::REGISTRATION_CLUSTER_ROLE },
            "rules": [
                { "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                  "verbs": ["get", "list", "watch", "update"] },
                { "apiGroups": ["events.k8s.io"], "resources": ["events"],
                  "verbs": ["list", "watch", "create"] },
            ],
        }),
    )
    .await;
    let binding = names::registration_role_binding(cluster);
    apply(
        &Api::<RoleBinding>::namespaced(hub_admin.clone(), cluster),
        &binding,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": { "name": binding, "namespace": cluster },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": names::REGISTRATION_CLUSTER_ROLE },
            "subjects": group_subjects,
        }),
    )
    .await;
    apply(
        &Api::<Lease>::namespaced(hub_admin.clone(), cluster),
        names::CLUSTER_LEASE,
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": { "name": names::CLUSTER_LEASE, "namespace": cluster,
                          "labels": { CLUSTER_NAME_LABEL: cluster } },
            "spec": { "holderIdentity": names::CLUSTER_LEASE,
                      "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(Timestamp::now()) },
        }),
    )
    .await;
    let accepted = Condition {
        type_: "HubAcceptedManagedCluster".into(),
        status: "True".into(),
        reason: "HubClusterAdminAccepted".into(),
        message: "Accepted by the test as hub admin".into(),
        observed_generation: None,
        last_transition_time: Time(Timestamp::now()),
    };
    wait::until("HubAcceptedManagedCluster set", TIMEOUT, || async {
        let api: Api<ManagedCluster> = Api::all(hub_admin.clone());
        let current = api.get(cluster).await?;
        let mut conditions = current
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        conditions.retain(|c| c.type_ != accepted.type_);
        conditions.push(accepted.clone());
        api.patch_status(
            cluster,
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": { "resourceVersion": current.metadata.resource_version },
                "status": { "conditions": conditions },
            })),
        )
        .await
        .map(|_| Some(()))
    })
    .await
    .expect("set HubAcceptedManagedCluster");
}

/// The `renewTime` of the cluster lease.
pub async fn lease_renew_time(hub_admin: &Client, cluster: &str) -> Option<Timestamp> {
    Api::<Lease>::namespaced(hub_admin.clone(), cluster)
        .get_opt(names::CLUSTER_LEASE)
        .await
        .expect("get lease")
        .and_then(|l| l.spec)
        .and_then(|s| s.renew_time)
        .map(|t| t.0)
}
