//! Shared pieces of the work agent's integration tests (`tests/agent_*.rs`): a hub and a
//! managed cluster as separate real control planes, the cluster namespace and work RBAC the
//! hub's accept controller creates (OCM's `open-cluster-management:managedcluster:work`), a
//! hub kubeconfig secret with a client certificate of the cluster's group — what the
//! registration agent writes —, and the work agent started on it with short intervals.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    dead_code,
    reason = "test support: fail loudly; not every binary uses every helper"
)]

use std::{collections::BTreeMap, time::Duration};

use flotilla_api::work::v1::{Manifest, ManifestWork, ManifestWorkSpec, ManifestsTemplate};
use flotilla_registration::{hub::rbac, names};
use flotilla_testing::{ControlPlane, wait};
use flotilla_work::agent::{self, AgentOptions};
use k8s_openapi::{
    ByteString,
    api::{
        core::v1::{Namespace, Secret},
        rbac::v1::{ClusterRole, RoleBinding},
    },
};
use kube::{
    Api, Client, Resource,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
};
use serde_json::Value;

/// How long the tests wait for the agent.
pub const TIMEOUT: Duration = Duration::from_secs(90);

/// Logs of the agent in test output (`RUST_LOG=flotilla_work=debug`).
pub fn init_tracing() {
    flotilla_testing::init_tracing();
}

/// The shared hub and managed control planes of this test binary.
pub async fn planes() -> (&'static ControlPlane, &'static ControlPlane) {
    let hub = flotilla_testing::shared("work-hub").await.expect("start hub");
    let managed = flotilla_testing::shared("work-managed")
        .await
        .expect("start managed cluster");
    (hub, managed)
}

/// Creates `name` (cluster-scoped object) unless it exists.
async fn create<K>(api: &Api<K>, object: &K)
where
    K: Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => panic!("create: {e}"),
    }
}

/// Creates namespace `name` through `client` unless it exists.
pub async fn namespace(client: &Client, name: &str) {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    create(&Api::all(client.clone()), &ns).await;
}

/// A running work agent for one cluster; aborted when dropped.
pub struct Agent {
    /// The agent task.
    pub task: tokio::task::JoinHandle<agent::Result<()>>,
    /// The cluster (namespace on the hub).
    pub cluster: String,
    /// Hub admin client.
    pub hub: Client,
    /// Managed admin client.
    pub managed: Client,
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Options with intervals short enough for tests.
pub fn options(cluster: &str) -> AgentOptions {
    AgentOptions {
        agent_namespace: format!("agent-{cluster}"),
        agent_id: Some(cluster.to_owned()),
        status_sync_interval: Duration::from_secs(1),
        resync_interval: Duration::from_secs(4),
        credential_poll_interval: Duration::from_secs(1),
        crd_established_timeout: Duration::from_secs(10),
        executor_retry_interval: Duration::from_secs(2),
        ..AgentOptions::default()
    }
}

/// Prepares cluster `cluster` as an accepted cluster would be (namespace and work RBAC on the
/// hub, hub kubeconfig secret on the managed cluster) and starts its work agent with `options`.
pub async fn start_agent_with(cluster: &str, options: AgentOptions) -> Agent {
    start_agent_at(cluster, options, None).await
}

/// [`start_agent_with`], reaching the hub at `server` instead of its own URL when given.
pub async fn start_agent_at(cluster: &str, options: AgentOptions, server: Option<&str>) -> Agent {
    let (hub, managed) = planes().await;
    start_agent_on(hub, managed, cluster, options, server).await
}

/// [`start_agent_at`] with a hub control plane of the test's own (one it may stop).
pub async fn start_agent_on(
    hub: &ControlPlane,
    managed: &ControlPlane,
    cluster: &str,
    options: AgentOptions,
    server: Option<&str>,
) -> Agent {
    init_tracing();
    let hub_admin = hub.admin_client().await.unwrap();
    let managed_admin = managed.admin_client().await.unwrap();
    namespace(&hub_admin, cluster).await;
    let role = rbac::work_cluster_role();
    Api::<ClusterRole>::all(hub_admin.clone())
        .patch(
            names::WORK_CLUSTER_ROLE,
            &PatchParams::apply("work-test").force(),
            &Patch::Apply(&role),
        )
        .await
        .unwrap();
    create(
        &Api::<RoleBinding>::namespaced(hub_admin.clone(), cluster),
        &rbac::work_role_binding(cluster),
    )
    .await;

    namespace(&managed_admin, &options.agent_namespace).await;
    let user = names::agent_user(cluster, "agent");
    let group = names::cluster_group(cluster);
    let mut kubeconfig = hub
        .kubeconfig_for(&user, &[&group, names::MANAGED_CLUSTERS_GROUP])
        .unwrap();
    if let Some(server) = server {
        kubeconfig = kubeconfig.replace(hub.server(), server);
    }
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(options.hub_kubeconfig_secret.clone()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            (
                names::KUBECONFIG_KEY.to_owned(),
                ByteString(kubeconfig.into_bytes()),
            ),
            (
                names::CLUSTER_NAME_KEY.to_owned(),
                ByteString(cluster.as_bytes().to_vec()),
            ),
        ])),
        ..Default::default()
    };
    create(
        &Api::namespaced(managed_admin.clone(), &options.agent_namespace),
        &secret,
    )
    .await;

    let task = tokio::spawn(agent::run(managed_admin.clone(), options));
    Agent {
        task,
        cluster: cluster.to_owned(),
        hub: hub_admin,
        managed: managed_admin,
    }
}

/// [`start_agent_with`] the test [`options`].
pub async fn start_agent(cluster: &str) -> Agent {
    start_agent_with(cluster, options(cluster)).await
}

/// A work named `name` with `manifests`.
pub fn work(name: &str, manifests: Vec<Value>) -> ManifestWork {
    ManifestWork::new(
        name,
        ManifestWorkSpec {
            workload: ManifestsTemplate {
                manifests: manifests.into_iter().map(Manifest).collect(),
            },
            ..Default::default()
        },
    )
}

impl Agent {
    /// The works API of this cluster on the hub (as admin).
    pub fn works(&self) -> Api<ManifestWork> {
        Api::namespaced(self.hub.clone(), &self.cluster)
    }

    /// Creates `work` on the hub.
    pub async fn create(&self, work: &ManifestWork) -> ManifestWork {
        self.works()
            .create(&PostParams::default(), work)
            .await
            .expect("create work")
    }

    /// Replaces the spec of work `name` with `spec`.
    pub async fn set_spec(&self, name: &str, spec: &ManifestWorkSpec) {
        let patch = serde_json::json!({ "spec": spec });
        self.works()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("update work");
    }

    /// Waits until work `name` satisfies `check`, and returns it.
    pub async fn wait_work(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&ManifestWork) -> bool,
    ) -> ManifestWork {
        let api = self.works();
        let check = &check;
        let api = &api;
        wait::until(what, TIMEOUT, || async move {
            match api.get_opt(name).await {
                Ok(Some(work)) if check(&work) => Ok(Some(work)),
                Ok(other) => Err(format!("{:#?}", other.and_then(|w| w.status))),
                Err(e) => Err(e.to_string()),
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Waits until work `name` has observed its generation with condition `type_` = `status`.
    pub async fn wait_condition(&self, name: &str, type_: &str, status: &str) -> ManifestWork {
        self.wait_work(name, &format!("{name} {type_}={status}"), |w| {
            let generation = w.metadata.generation;
            w.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == type_ && c.status == status && c.observed_generation == generation)
            })
        })
        .await
    }

    /// Waits until work `name` is gone from the hub.
    pub async fn wait_gone(&self, name: &str) {
        let api = self.works();
        let api = &api;
        wait::until(&format!("work {name} gone"), TIMEOUT, || async move {
            match api.get_opt(name).await {
                Ok(None) => Ok(Some(())),
                Ok(Some(w)) => Err(format!("still there: {:?}", w.metadata.finalizers)),
                Err(e) => Err(e.to_string()),
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Waits until `check` holds for the object `name` read from `api` (`None` = absent).
pub async fn wait_object<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    check: impl Fn(Option<&K>) -> bool,
) -> Option<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let check = &check;
    wait::until(what, TIMEOUT, || async move {
        match api.get_opt(name).await {
            Ok(object) if check(object.as_ref()) => Ok(Some(object)),
            Ok(object) => Err(format!("{object:?}")),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The manifest condition `type_` of the manifest with `ordinal`.
pub fn manifest_condition<'a>(
    work: &'a ManifestWork,
    ordinal: i32,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    work.status
        .as_ref()?
        .resource_status
        .manifests
        .iter()
        .find(|m| m.resource_meta.ordinal == ordinal)?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// The work-level condition `type_`.
pub fn work_condition<'a>(
    work: &'a ManifestWork,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    work.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)
}

/// A TCP forwarder between the agent and the hub that a test can cut: while cut, every open
/// connection is dropped and new ones are closed at once, so the hub is unreachable for the
/// agent while the test (connecting directly) keeps changing works.
pub struct HubProxy {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    cut: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HubProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HubProxy {
    /// Forwards a fresh loopback port to `upstream` (`host:port`).
    pub async fn start(upstream: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (cut, watch) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                if *watch.borrow() {
                    drop(inbound);
                    continue;
                }
                let upstream = upstream.clone();
                let mut cut = watch.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        Self {
            url: format!("https://127.0.0.1:{port}"),
            cut,
            task,
        }
    }

    /// Makes the hub unreachable through this proxy.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Makes the hub reachable again.
    pub fn restore(&self) {
        self.cut.send_replace(false);
    }
}

/// Like [`start_agent`], but the agent reaches the hub through `proxy`.
pub async fn start_agent_via(cluster: &str, proxy: &HubProxy) -> Agent {
    start_agent_at(cluster, options(cluster), Some(&proxy.url)).await
}
