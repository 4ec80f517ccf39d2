//! The managed-cluster side of registration: the registration agent that `flotilla
//! klusterlet` runs, speaking OCM's protocol (ocm-reference §2) so OCM hubs and Flotilla's
//! hub both accept it.
//!
//! ```text
//!            ┌──────────── bad input / unreachable hub: error in AgentStatus, backoff ─┐
//!            ▼                                                                          │
//!  names ─▶ identity (stored hub-kubeconfig-secret, or bootstrap: ManagedCluster + CSR) ┤
//!            │                                                                          │
//!            ▼  joined session, four loops on the current identity                     │
//!     status: Joined, Available, version, capacity, claims   (interval; claim event)    │
//!     lease:  renewTime of managed-cluster-lease            (every lease duration +≤25 %)│
//!     add-on health: Available of Lease-mode add-ons        (lease watches; when stale) │
//!     rotation: CSR at 20–25 % life left, swap identity     (certificate expired ───────┘
//! ```
//!
//! In hosted mode ([`run_with`], [`hosted`]) the agent's secrets live on a hosting cluster and
//! only health, version, nodes, claims and add-on leases are read from the managed cluster.
//!
//! [`run`] never returns while it can still make progress: every failure is published in
//! the [`AgentStatus`] the options' [`StatusReporter`] carries and retried with capped
//! exponential backoff. Only a cluster or agent name that can never be registered ends it,
//! with [`Error::InvalidName`].
//!
//! Every call to the hub is a short request (polling, no watches): the client is taken from
//! the current identity on each call, so a rotated certificate is used from the next request
//! on, and a hung hub shows up as a timeout instead of a silent stall. The add-on health loop
//! is the exception: it watches add-ons and leases, and restarts its watches on a new identity.

pub mod addon_credentials;
pub mod error;
pub mod hosted;
pub mod kubeconfig;
pub mod progress;
pub mod proxy;

mod addon_health;
mod bootstrap;
mod csr;
mod identity;
mod lease;
mod rotation;
mod secret;
mod status;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use flotilla_api::cluster::v1::ClientConfig;
use flotilla_core::registration::agent::{backoff::Backoff, lease::DEFAULT_LEASE_DURATION_SECONDS};
use tokio::sync::watch;

pub use error::{Error, Result};
pub use progress::{AgentStatus, Phase, StatusReporter, Step};

use crate::names::{AGENT_NAMESPACE, BOOTSTRAP_SECRET, HUB_KUBECONFIG_SECRET, agent_user};

/// How the agent runs. [`AgentOptions::default`] gives OCM's defaults.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// The cluster name; when `None`, the `cluster-name` stored in the hub kubeconfig secret,
    /// else a random UUID. Must be a valid namespace name.
    pub cluster_name: Option<String>,
    /// The agent name; when `None`, the stored `agent-name`, else five random letters.
    pub agent_name: Option<String>,
    /// Namespace on the managed cluster holding the bootstrap and hub kubeconfig secrets
    /// (`open-cluster-management-agent`). Agents sharing a managed cluster need one each.
    pub agent_namespace: String,
    /// Secret with the bootstrap kubeconfig (`bootstrap-hub-kubeconfig`, key `kubeconfig`).
    pub bootstrap_secret: String,
    /// Secret the agent writes its hub kubeconfig into (`hub-kubeconfig-secret`).
    pub hub_kubeconfig_secret: String,
    /// Addresses of the managed cluster's kube-apiserver put into a new ManagedCluster's
    /// `spec.managedClusterClientConfigs` (added to an existing one where allowed).
    pub cluster_client_configs: Vec<ClientConfig>,
    /// Annotations for a new ManagedCluster; only `agent.open-cluster-management.io/` keys
    /// are used.
    pub cluster_annotations: BTreeMap<String, String>,
    /// `spec.leaseDurationSeconds` of a new ManagedCluster (60).
    pub lease_duration_seconds: i32,
    /// `spec.expirationSeconds` of the agent's CSRs; `None` leaves it to the signer.
    pub expiration_seconds: Option<i32>,
    /// Most custom cluster claims reported (20).
    pub max_custom_claims: usize,
    /// How often status (availability, version, capacity, claims) is reported once joined
    /// (1 minute, like OCM's resync).
    pub status_interval: Duration,
    /// How often the agent looks whether the hub has accepted the cluster yet (5 s).
    pub acceptance_poll_interval: Duration,
    /// How often a pending CSR is looked at (2 s).
    pub csr_poll_interval: Duration,
    /// How long apiserver probes must fail before Available turns False (20 s).
    pub health_failure_threshold: Duration,
    /// How soon a failed probe is repeated within that threshold (5 s).
    pub health_retry_interval: Duration,
    /// First delay after an error (1 s).
    pub backoff_initial: Duration,
    /// Longest delay after repeated errors (1 minute).
    pub backoff_max: Duration,
    /// Limit for one request to the hub, and for one health probe (30 s).
    pub request_timeout: Duration,
    /// Where the agent publishes its [`AgentStatus`]; subscribe before [`run`].
    pub status: StatusReporter,
    /// The period add-on agents renew their leases at (60 s); an add-on lease older than five
    /// of these makes the add-on unavailable.
    pub addon_lease_duration: Duration,
}

impl Default for AgentOptions {
    fn default() -> Self {
        Self {
            cluster_name: None,
            agent_name: None,
            agent_namespace: AGENT_NAMESPACE.to_owned(),
            bootstrap_secret: BOOTSTRAP_SECRET.to_owned(),
            hub_kubeconfig_secret: HUB_KUBECONFIG_SECRET.to_owned(),
            cluster_client_configs: Vec::new(),
            cluster_annotations: BTreeMap::new(),
            lease_duration_seconds: DEFAULT_LEASE_DURATION_SECONDS,
            expiration_seconds: None,
            max_custom_claims: flotilla_api::cluster::consts::MAX_CUSTOM_CLUSTER_CLAIMS,
            status_interval: Duration::from_secs(60),
            acceptance_poll_interval: Duration::from_secs(5),
            csr_poll_interval: Duration::from_secs(2),
            health_failure_threshold: flotilla_core::registration::agent::health::FAILURE_THRESHOLD,
            health_retry_interval: flotilla_core::registration::agent::health::RETRY_INTERVAL,
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
            status: StatusReporter::default(),
            addon_lease_duration: flotilla_core::addon::health::DEFAULT_LEASE_DURATION,
        }
    }
}

/// The names the agent registers under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Names {
    /// The cluster name (a valid namespace name).
    pub cluster: String,
    /// The agent name.
    pub agent: String,
}

impl Names {
    /// The agent's user: `system:open-cluster-management:<cluster>:<agent>`.
    pub fn user(&self) -> String {
        agent_user(&self.cluster, &self.agent)
    }
}

/// The two clusters a klusterlet talks to besides the hub. In the default mode both are the
/// managed cluster; in hosted mode the agent's own objects live on a hosting cluster and
/// only what describes or changes the managed cluster goes to it.
#[derive(Clone)]
pub struct Clients {
    /// Where the agent's own objects live: the agent namespace with the bootstrap and hub
    /// kubeconfig secrets, and the add-on credential secrets.
    pub agent: kube::Client,
    /// The managed cluster: health, version, nodes, ClusterClaims, add-on agents' leases.
    pub managed: kube::Client,
}

impl Clients {
    /// The default mode: the agent runs on (and keeps its objects in) the managed cluster.
    pub fn same(managed: kube::Client) -> Self {
        Self {
            agent: managed.clone(),
            managed,
        }
    }
}

/// What every step needs: the two clusters and the options.
pub(crate) struct Context {
    /// Client of the cluster holding the agent's objects (secrets); see [`Clients::agent`].
    pub agent: kube::Client,
    /// Client of the managed cluster (claims, nodes, health).
    pub managed: kube::Client,
    /// The options.
    pub options: AgentOptions,
}

/// Runs the registration agent against the managed cluster `managed`, which also holds its
/// objects, until it fails for good (an invalid name). Progress and errors are published
/// through `options.status`.
pub async fn run(managed: kube::Client, options: AgentOptions) -> Result<()> {
    run_with(Clients::same(managed), options).await
}

/// [`run`] with the agent's objects on [`Clients::agent`] (hosted mode) and the managed
/// cluster reached through [`Clients::managed`].
pub async fn run_with(clients: Clients, options: AgentOptions) -> Result<()> {
    let ctx = Context {
        agent: clients.agent,
        managed: clients.managed,
        options,
    };
    let reporter = ctx.options.status.clone();
    let mut backoff = Backoff::new(ctx.options.backoff_initial, ctx.options.backoff_max);

    let names = loop {
        match bootstrap::resolve_names(&ctx).await {
            Ok(names) => break names,
            Err(error) if error.is_terminal() => {
                tracing::error!(error = %error, "registration agent stopped");
                reporter.failed(Step::Registration, error.to_string());
                reporter.phase(Phase::Failed);
                return Err(error);
            }
            Err(error) => retry(&reporter, &error, &mut backoff).await,
        }
    };
    tracing::info!(cluster = %names.cluster, agent = %names.agent, "registration agent starting");
    reporter.update(|s| {
        s.cluster_name = Some(names.cluster.clone());
        s.agent_name = Some(names.agent.clone());
    });
    backoff.reset();

    loop {
        let identity = match bootstrap::obtain_identity(&ctx, &names).await {
            Ok(identity) => identity,
            Err(error) => {
                retry(&reporter, &error, &mut backoff).await;
                continue;
            }
        };
        reporter.succeeded(Step::Registration);
        backoff.reset();
        let lost = session(&ctx, &names, identity).await;
        retry(&reporter, &lost, &mut backoff).await;
    }
}

async fn retry(reporter: &StatusReporter, error: &Error, backoff: &mut Backoff) {
    let delay = backoff.next_delay();
    tracing::warn!(error = %error, retry_in = ?delay, "registration");
    reporter.failed(Step::Registration, error.to_string());
    tokio::time::sleep(delay).await;
}

/// Runs status, lease and rotation on `identity` until the identity is lost.
async fn session(ctx: &Context, names: &Names, identity: identity::HubIdentity) -> Error {
    ctx.options
        .status
        .update(|s| s.certificate_not_after = Some(identity.info.not_after));
    ctx.options.status.phase(Phase::WaitingForAcceptance);
    let (identity_tx, identity_rx) = watch::channel(Arc::new(identity));
    let (view_tx, view_rx) = watch::channel(status::ClusterView::default());
    tokio::select! {
        never = status::run(ctx, names, identity_rx.clone(), &view_tx) => match never {},
        never = addon_credentials::run(ctx, names, identity_rx.clone()) => match never {},
        never = lease::run(ctx, names, identity_rx.clone(), view_rx.clone()) => match never {},
        never = addon_health::run(ctx, names, identity_rx, view_rx) => match never {},
        lost = rotation::run(ctx, names, &identity_tx) => lost,
    }
}
