//! Lease health of the cluster's add-ons, as OCM's registration agent judges it: for each
//! ManagedClusterAddOn of this cluster in health mode Lease (the default), the agent looks at
//! Lease `<addon>` in the add-on's install namespace on the managed cluster and sets the add-on's
//! `Available` condition on the hub (`flotilla_core::addon::health::lease_verdict`).
//!
//! ```text
//!  hub: ManagedClusterAddOn (cluster ns) ───────────────┐
//!  managed: Lease <addon> in the install namespace ─────┼─▶ reconcile(add-on) ─▶ MCA Available
//!  hub: Lease <addon> in the cluster ns (fallback) ─────┘     requeue when the lease would go stale
//! ```
//!
//! When the managed cluster has no such lease, the agent looks for Lease `<addon>` in the cluster
//! namespace on the hub: an agent holding only its hub credential (the `<addon>-hub-kubeconfig`
//! secret) renews its lease there. OCM's agent did the same until it dropped the fallback in
//! 2025 (ocm#901); Flotilla keeps it so such agents are judged rather than reported missing.
//!
//! A lease found on the hub gets the add-on as its owner, so it goes with the add-on. The
//! managed cluster's lease of a removed add-on is deleted by the add-on credentials pass.
//!
//! The controller runs on the agent's current hub identity and starts again on a rotated one.
//! Both lease watches only wake the add-on a lease belongs to (same name, install namespace or
//! cluster namespace), so leader-election leases elsewhere on the cluster cost nothing.

mod reconcile;

use std::{convert::Infallible, sync::Arc, time::Duration};

use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_core::addon::health::install_namespace;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{
    Api, ResourceExt,
    runtime::{Controller, reflector::ObjectRef, watcher},
};
use tokio::sync::watch;

use super::{Context, Names, identity::HubIdentity, status::ClusterView};

/// How often every add-on is judged again without any change (the requeue at the moment a
/// lease goes stale does the real work).
const RESYNC: Duration = Duration::from_secs(300);

/// What one reconcile needs.
pub(crate) struct HealthContext {
    /// The hub, with the agent's current identity.
    hub: kube::Client,
    /// The managed cluster.
    managed: kube::Client,
    /// This cluster's name (its namespace on the hub).
    cluster: String,
    /// The period add-on agents renew their leases at; stale after five of them.
    lease_duration: Duration,
}

/// Why one reconcile stopped; retried with backoff.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HealthError {
    /// Reading a lease failed.
    #[error("read Lease {namespace}/{name} on the {side}: {source}")]
    ReadLease {
        /// `managed cluster` or `hub`.
        side: &'static str,
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Writing the add-on's `Available` condition failed.
    #[error("patch status of ManagedClusterAddOn {namespace}/{name}: {source}")]
    PatchAddon {
        /// The cluster namespace.
        namespace: String,
        /// Add-on name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// Judges the cluster's add-ons forever: once the hub accepts the cluster, on the current hub
/// identity, restarting on a new one.
pub(crate) async fn run(
    ctx: &Context,
    names: &Names,
    mut identity: watch::Receiver<Arc<HubIdentity>>,
    mut view: watch::Receiver<ClusterView>,
) -> Infallible {
    loop {
        if !view.borrow_and_update().accepted {
            if view.changed().await.is_err() {
                // The status loop is gone; the agent is ending this session.
                return std::future::pending().await;
            }
            continue;
        }
        let hub = identity.borrow_and_update().client.clone();
        let context = Arc::new(HealthContext {
            hub,
            managed: ctx.managed.clone(),
            cluster: names.cluster.clone(),
            lease_duration: ctx.options.addon_lease_duration,
        });
        tokio::select! {
            () = controller(context) => {}
            changed = identity.changed() => {
                if changed.is_err() {
                    return std::future::pending().await;
                }
            }
        }
    }
}

/// The add-ons in `store` that a lease `name` in `namespace` speaks for.
fn owners(
    store: &kube::runtime::reflector::Store<ManagedClusterAddOn>,
    cluster: &str,
    lease: &Lease,
) -> Option<ObjectRef<ManagedClusterAddOn>> {
    let (name, namespace) = (lease.name_any(), lease.namespace()?);
    let addon = store.get(&ObjectRef::new(&name).within(cluster))?;
    (namespace == cluster || install_namespace(&addon) == namespace)
        .then(|| ObjectRef::from_obj(addon.as_ref()))
}

/// Runs the controller on one hub identity until dropped.
async fn controller(ctx: Arc<HealthContext>) {
    let cluster = ctx.cluster.clone();
    let controller = Controller::new(
        Api::<ManagedClusterAddOn>::namespaced(ctx.hub.clone(), &cluster),
        watcher::Config::default(),
    );
    let (on_managed, on_hub) = (controller.store(), controller.store());
    let (cluster_a, cluster_b) = (cluster.clone(), cluster.clone());
    let controller = controller
        .watches(
            Api::<Lease>::all(ctx.managed.clone()),
            watcher::Config::default(),
            move |lease| owners(&on_managed, &cluster_a, &lease),
        )
        .watches(
            Api::<Lease>::namespaced(ctx.hub.clone(), &cluster),
            watcher::Config::default(),
            move |lease| owners(&on_hub, &cluster_b, &lease),
        );
    flotilla_kube::controller::run("addon-lease", controller, reconcile::reconcile, ctx).await;
}
