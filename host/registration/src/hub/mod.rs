//! The hub side of registration: the controllers `flotilla hub` runs so that clusters can
//! join, stay isolated from each other, report health and leave cleanly.
//!
//! ```text
//!  watches                          controller          writes
//!  ManagedCluster, cluster RBAC ──▶ accept ───────────▶ namespace, RBAC, lease, HubAccepted,
//!                                                       api-resource-cleanup, clusterset label
//!  CSR (cluster-name label) ──────▶ csr ──────────────▶ /approval (renewals of accepted agents)
//!  ManagedCluster, Lease, MCA ────▶ lease ────────────▶ Available Unknown (cluster, add-ons)
//!  ManagedCluster ────────────────▶ taint ────────────▶ spec.taints unreachable/unavailable
//!  ManagedCluster, MCA ───────────▶ addon_feature ────▶ feature.open-cluster-management.io/
//!                                                       addon-<name> labels
//!  ManagedClusterSet, clusters ───▶ clusterset ───────▶ ClusterSetEmpty; default/global sets
//!  ManagedClusterSetBinding, sets ▶ clustersetbinding ▶ Bound
//!  ManagedCluster ────────────────▶ deletion ─────────▶ resource-cleanup, add-on/work removal,
//!                                                       Deleting, RBAC removal
//! ```
//!
//! Each controller is a module with `mod.rs` (what it watches), `reconcile.rs` (one reconcile
//! of one object) and, where the module has logic of its own, `tests.rs`; the decisions
//! themselves are pure functions in `flotilla_core::registration::hub`. [`run`] starts them
//! all and runs until the returned future is dropped.

mod accept;
mod addon_feature;
mod clusterset;
mod clustersetbinding;
mod csr;
mod deletion;
pub mod error;
mod feeds;
mod lease;
pub mod rbac;
mod taint;
mod write;

use std::time::Duration;

use flotilla_api::cluster::v1::ManagedCluster;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::{Api, Client, api::ListParams};

pub use csr::{RENEWAL_BURST, RENEWAL_REFILL};
pub use error::{Error, Result};
pub use rbac::hub_cluster_roles;

/// Settings of the hub controllers; the defaults are OCM's.
#[derive(Clone, Debug)]
pub struct HubOptions {
    /// How often every object is looked at again without a change: repairs drift (a deleted
    /// RoleBinding, an edited set) and revisits CSRs whose cluster has since been accepted.
    pub resync: Duration,
    /// How soon a deleted cluster's clean-up looks again while add-ons or works remain.
    pub cleanup_requeue: Duration,
    /// How often the hub checks that the `default` and `global` cluster sets exist.
    pub hub_sets_interval: Duration,
    /// How long a deleted cluster's agent must have been gone (Available Unknown) before its
    /// clean-up stops waiting for the agent's finalizers (a Flotilla extension; OCM waits
    /// forever). The OCM cluster-deletion proposal's 10 minutes.
    pub force_cleanup_after: Duration,
    /// How long a deleted cluster's clean-up waits on the finalizers of an agent that still
    /// reports before its Deleting condition and an Event say it is stalled and name the way
    /// forward ([`flotilla_core::registration::hub::cleanup::stalled`]).
    pub cleanup_stalled_after: Duration,
}

impl Default for HubOptions {
    fn default() -> Self {
        Self {
            resync: Duration::from_secs(300),
            cleanup_requeue: Duration::from_secs(5),
            hub_sets_interval: Duration::from_secs(10),
            force_cleanup_after: Duration::from_secs(600),
            cleanup_stalled_after: Duration::from_secs(600),
        }
    }
}

/// Installs the hub-wide ClusterRoles, then runs every hub registration controller
/// concurrently, with feeds of their own. The controllers run until the future is dropped; an
/// error means the ClusterRoles could not be installed.
pub async fn run(client: Client, options: HubOptions) -> Result<()> {
    let mut feeds = flotilla_kube::feed::Feeds::new(client.clone());
    let controllers = start(&mut feeds, client, options);
    tokio::select! {
        result = controllers => result,
        () = feeds.run() => Ok(()),
    }
}

/// Subscribes every hub registration controller to `feeds` now, and returns them: they
/// install the hub-wide ClusterRoles, then run until dropped. Run `feeds` beside them.
pub fn start(
    feeds: &mut flotilla_kube::feed::Feeds,
    client: Client,
    options: HubOptions,
) -> impl Future<Output = Result<()>> + use<> {
    let mut feeds = feeds::Feeds(feeds);
    let feeds = &mut feeds;
    // Every controller subscribes before the feeds run, so none misses the first list.
    let accept = accept::run(feeds, client.clone(), options.clone());
    let lease = lease::run(feeds, client.clone(), options.clone());
    let taint = run_on_clusters(
        feeds,
        "taint",
        (&client, &options),
        taint::inputs,
        taint::reconcile,
    );
    let addon_feature = addon_feature::run(feeds, client.clone(), options.clone());
    let clusterset = clusterset::run(feeds, client.clone(), options.clone());
    let clustersetbinding = clustersetbinding::run(feeds, client.clone(), options.clone());
    let deletion = run_on_clusters(
        feeds,
        "deletion",
        (&client, &options),
        deletion::inputs,
        deletion::reconcile,
    );
    async move {
        ensure_hub_cluster_roles(&client).await?;
        tracing::info!("hub registration controllers starting");
        // Each on the heap: together they are too large a future for a thread's stack in debug builds.
        use futures::FutureExt as _;
        futures::join!(
            accept.boxed(),
            csr::run(client.clone(), options.clone()).boxed(),
            lease.boxed(),
            taint.boxed(),
            addon_feature.boxed(),
            clusterset.boxed(),
            clustersetbinding.boxed(),
            deletion.boxed(),
        );
        Ok(())
    }
}

/// How soon a reconcile that found a cache still listing runs again.
const CACHE_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// Runs `reconcile` as controller `name` over every ManagedCluster, woken when the part of one
/// that `inputs` hashes changes: the controllers that watch nothing else (taint, deletion).
fn run_on_clusters<F, Fut>(
    feeds: &mut feeds::Feeds<'_>,
    name: &'static str,
    (client, options): (&Client, &HubOptions),
    inputs: flotilla_kube::feed::Inputs<ManagedCluster>,
    reconcile: F,
) -> impl Future<Output = ()> + use<F, Fut>
where
    F: FnMut(std::sync::Arc<ManagedCluster>, std::sync::Arc<Context>) -> Fut,
    Fut: Future<Output = Result<kube::runtime::controller::Action>> + Send + 'static,
{
    let controller = feeds.cluster_controller(inputs);
    let context = std::sync::Arc::new(Context::new(client.clone(), options.clone()));
    flotilla_kube::controller::run(name, controller, reconcile, context)
}

/// Applies each of [`hub_cluster_roles`] server-side (field manager `flotilla`) that is missing
/// or grants other rules than this version's. The admin installs them (deploy/hub, `flotilla
/// init`): a hub running as deploy/hub's service account may not write them (it holds neither
/// their rules nor `escalate`), so a role it cannot fix is logged and the clusters get what the
/// admin installed.
pub async fn ensure_hub_cluster_roles(client: &Client) -> Result<()> {
    let api: Api<ClusterRole> = Api::all(client.clone());
    for role in hub_cluster_roles() {
        let name = role.metadata.name.clone().unwrap_or_default();
        let installed = api
            .list(&ListParams::default().fields(&format!("metadata.name={name}")))
            .await
            .map_err(|source| error::Error::List {
                kind: "ClusterRole",
                scope: format!("metadata.name={name}"),
                source,
            })?;
        if installed.items.first().is_some_and(|r| r.rules == role.rules) {
            continue;
        }
        match flotilla_kube::apply::apply(&api, &role).await {
            Ok(_) => {}
            Err(flotilla_kube::Error::Apply {
                source: kube::Error::Api(status),
                ..
            }) if status.code == 403 => tracing::warn!(
                role = %name,
                "hub-wide ClusterRole missing or out of date, and the hub may not write it: \
                 apply deploy/hub or run `flotilla init` as an admin"
            ),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// What a reconcile of a hub controller without caches of its own needs.
pub(super) struct Context {
    /// Client with the hub's identity.
    pub(super) client: Client,
    /// Resync interval and requeue delays.
    pub(super) options: HubOptions,
    /// Events on the objects acted on.
    pub(super) events: flotilla_kube::events::Events,
}

impl Context {
    pub(super) fn new(client: Client, options: HubOptions) -> Self {
        let events = flotilla_kube::events::Events::new(client.clone(), EVENT_REPORTER);
        Self {
            client,
            options,
            events,
        }
    }
}

/// The `reportingController` of the hub's Events (every hub controller's).
pub const EVENT_REPORTER: &str = "flotilla-hub";
