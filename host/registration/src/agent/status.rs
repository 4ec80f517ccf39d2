//! The ManagedCluster's status, written by the agent with its hub identity, in OCM's order:
//!
//! 1. joined: once the hub accepts the cluster, `ManagedClusterJoined` True; until then
//!    nothing else is written;
//! 2. available: `/livez` (or `/healthz`) of the managed kube-apiserver; True
//!    `ManagedClusterAvailable`, False `ManagedClusterKubeAPIServerUnavailable` after 20 s of
//!    failures (the rest is skipped while it fails, and the probe repeats every 5 s until it
//!    passes);
//! 3. version, capacity and allocatable (sums over nodes);
//! 4. cluster claims (reserved first, spoke-only hidden, custom capped).
//!
//! One merge patch of `/status` per pass, only when something changed. Each pass also
//! publishes whether the cluster is accepted and its lease duration for the lease loop.
//! Between passes the agent watches its ManagedCluster, so a spec change (a new
//! `leaseDurationSeconds`, acceptance revoked) starts the next pass at once rather than after
//! the status interval; and it watches the managed cluster's ClusterClaims, so a claim added,
//! changed or removed reaches the hub within a pass, as OCM's agent reacts to claim events.

use std::{
    collections::BTreeMap,
    convert::Infallible,
    time::{Duration, Instant},
};

use flotilla_api::cluster::{
    consts::{RESERVED_CLUSTER_CLAIM_NAMES, SPOKE_ONLY_LABEL, managed_cluster as mc},
    v1::{ManagedCluster, ManagedClusterClaim, ManagedClusterStatus},
    v1alpha1::ClusterClaim,
};
use flotilla_core::{
    conditions::{self, NewCondition},
    registration::agent::{
        backoff::Backoff,
        claims::{self, FoundClaim},
        cluster::hub_accepted,
        health::{self, HealthDecision, HealthTracker, Probe},
        lease::lease_duration,
        resources::{self, NodeResources},
    },
};
use futures::{FutureExt as _, StreamExt};
use k8s_openapi::{api::core::v1::Node, jiff::Timestamp};
use kube::{
    Api,
    api::ListParams,
    runtime::{WatchStreamExt, watcher},
};
use tokio::sync::watch;

use super::{
    Context, Names,
    error::{Error, Result},
    identity::HubIdentity,
    progress::{Phase, Step},
};

/// How soon a status write that lost a race is redone (from a fresh read).
const CONFLICT_RETRY: Duration = Duration::from_millis(100);

/// What the lease loop needs to know about the ManagedCluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClusterView {
    /// The hub accepts the cluster.
    pub accepted: bool,
    /// The lease renewal period.
    pub lease_duration: Duration,
}

impl Default for ClusterView {
    fn default() -> Self {
        Self {
            accepted: false,
            lease_duration: lease_duration(0),
        }
    }
}

/// How a pass ended, which decides when the next one runs.
enum Pass {
    /// Not accepted yet: look again soon.
    NotAccepted,
    /// The apiserver probe failed within the threshold: probe again soon.
    Undecided,
    /// Everything written: next pass after the status interval, or sooner when the spec
    /// moves past this `metadata.generation`.
    Done(Option<i64>),
    /// Written as unavailable: probe again after the retry interval, so the apiserver's return
    /// shows within seconds rather than a status interval later.
    Unavailable(Option<i64>),
}

/// Reports status forever.
pub(crate) async fn run(
    ctx: &Context,
    names: &Names,
    identity: watch::Receiver<std::sync::Arc<HubIdentity>>,
    view: &watch::Sender<ClusterView>,
) -> Infallible {
    let options = &ctx.options;
    let mut tracker = HealthTracker::default();
    let mut backoff = Backoff::new(options.backoff_initial, options.backoff_max);
    // One watch for the whole session: changes that land during a pass are kept by the stream
    // and start the next pass as soon as this one has waited.
    let mut claims = std::pin::pin!(claim_changes(ctx.managed.clone()));
    loop {
        let current = identity.borrow().clone();
        let mut seen_generation = None;
        let wait = match pass(ctx, names, &current, &mut tracker, view).await {
            Ok(pass) => {
                options.status.succeeded(Step::Status);
                backoff.reset();
                match pass {
                    Pass::NotAccepted => options.acceptance_poll_interval,
                    Pass::Undecided => options.health_retry_interval,
                    Pass::Done(generation) => {
                        seen_generation = generation;
                        options.status_interval
                    }
                    Pass::Unavailable(generation) => {
                        seen_generation = generation;
                        options.health_retry_interval
                    }
                }
            }
            Err(error) if error.is_conflict() => {
                tracing::debug!("ManagedCluster changed while writing its status; writing again");
                CONFLICT_RETRY
            }
            Err(error) => {
                tracing::warn!(error = %error, "ManagedCluster status");
                options.status.failed(Step::Status, error.to_string());
                backoff.next_delay().min(options.status_interval)
            }
        };
        match seen_generation {
            Some(seen) => {
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = spec_changed(current.client.clone(), &names.cluster, seen) => {
                        tracing::debug!("ManagedCluster spec changed; reporting status now");
                    }
                    Some(()) = claims.next() => {
                        // One pass for a burst of changes (claims are often made together).
                        while claims.next().now_or_never().flatten().is_some() {}
                        tracing::debug!("ClusterClaims changed; reporting status now");
                    }
                }
            }
            None => tokio::time::sleep(wait).await,
        }
    }
}

/// Resolves once the ManagedCluster's `metadata.generation` differs from `seen`, which only a
/// spec change does (status writes keep it). Watch errors are retried with backoff; the
/// caller's status interval bounds the wait either way.
async fn spec_changed(hub: kube::Client, cluster: &str, seen: i64) {
    let api: Api<ManagedCluster> = Api::all(hub);
    let config = watcher::Config::default().fields(&format!("metadata.name={cluster}"));
    let mut changes = std::pin::pin!(watcher(api, config).default_backoff().applied_objects());
    while let Some(change) = changes.next().await {
        match change {
            Ok(cluster) if cluster.metadata.generation.is_some_and(|g| g != seen) => return,
            Ok(_) => {}
            Err(error) => tracing::debug!(%error, "watching the ManagedCluster for spec changes"),
        }
    }
    std::future::pending().await
}

/// Yields whenever the managed cluster's ClusterClaims may have changed: an added, changed or
/// removed claim, and each (re)list, which may hide changes missed while the watch was down.
/// Watch errors (also no ClusterClaim CRD) are retried with backoff; the status interval still
/// reports claims then.
fn claim_changes(managed: kube::Client) -> impl futures::Stream<Item = ()> {
    watcher(Api::<ClusterClaim>::all(managed), watcher::Config::default())
        .default_backoff()
        .filter_map(|event| {
            futures::future::ready(match event {
                Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone) => {
                    Some(())
                }
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => None,
                Err(error) => {
                    tracing::debug!(%error, "watching ClusterClaims");
                    None
                }
            })
        })
}

async fn pass(
    ctx: &Context,
    names: &Names,
    identity: &HubIdentity,
    tracker: &mut HealthTracker,
    view: &watch::Sender<ClusterView>,
) -> Result<Pass> {
    let api: Api<ManagedCluster> = Api::all(identity.client.clone());
    let cluster = match api.get(&names.cluster).await {
        Ok(cluster) => cluster,
        // Until the hub accepts the cluster, no RBAC lets the agent's own identity read its
        // ManagedCluster (and after the hub revokes acceptance, none does any more). The same
        // answer comes once the cluster was deleted on the hub (its RBAC goes with it): then
        // the agent creates it again through the bootstrap identity, as OCM's agent does, and
        // waits for the admin to accept it again.
        Err(kube::Error::Api(status)) if status.code == 403 || status.code == 404 => {
            super::bootstrap::recreate_managed_cluster(ctx, names).await;
            publish(view, false, lease_duration(0));
            ctx.options.status.phase(Phase::WaitingForAcceptance);
            return Ok(Pass::NotAccepted);
        }
        Err(source) => {
            return Err(Error::GetManagedCluster {
                cluster: names.cluster.clone(),
                source,
            });
        }
    };
    let mut status = cluster.status.clone().unwrap_or_default();
    let mut conditions = status.conditions.take().unwrap_or_default();
    let accepted = hub_accepted(cluster.spec.hub_accepts_client, &conditions);
    publish(
        view,
        accepted,
        lease_duration(cluster.spec.lease_duration_seconds),
    );
    if !accepted {
        ctx.options.status.phase(Phase::WaitingForAcceptance);
        return Ok(Pass::NotAccepted);
    }
    ctx.options.status.phase(Phase::Joined);

    let now = Timestamp::now();
    conditions::set(
        &mut conditions,
        NewCondition {
            type_: mc::CONDITION_JOINED,
            status: conditions::TRUE,
            reason: mc::REASON_JOINED,
            message: "Managed cluster joined".into(),
            observed_generation: None,
        },
        now,
    );

    let probe = probe(&ctx.managed, ctx.options.request_timeout).await;
    let mut error = None;
    let pass = match tracker.observe(probe, Instant::now(), ctx.options.health_failure_threshold) {
        HealthDecision::Undecided => Pass::Undecided,
        HealthDecision::Unavailable(message) => {
            conditions::set(
                &mut conditions,
                available(conditions::FALSE, mc::REASON_KUBE_APISERVER_UNAVAILABLE, message),
                now,
            );
            Pass::Unavailable(cluster.metadata.generation)
        }
        HealthDecision::Available => {
            conditions::set(
                &mut conditions,
                available(
                    conditions::TRUE,
                    mc::REASON_AVAILABLE,
                    health::AVAILABLE_MESSAGE.into(),
                ),
                now,
            );
            if let Err(e) = observe_cluster(ctx, &mut status).await {
                error = Some(e);
            }
            Pass::Done(cluster.metadata.generation)
        }
    };
    status.conditions = Some(conditions);
    flotilla_kube::status::patch_if_changed(&api, &cluster, cluster.status.as_ref(), &status)
        .await
        .map_err(|source| Error::PatchStatus {
            cluster: names.cluster.clone(),
            source: Box::new(source),
        })?;
    match error {
        Some(error) => Err(error),
        None => Ok(pass),
    }
}

/// Tells the lease loop about a change of acceptance or lease duration.
fn publish(view: &watch::Sender<ClusterView>, accepted: bool, lease_duration: Duration) {
    view.send_if_modified(|v| {
        let new = ClusterView {
            accepted,
            lease_duration,
        };
        let changed = *v != new;
        *v = new;
        changed
    });
}

fn available(status: &'static str, reason: &'static str, message: String) -> NewCondition<'static> {
    NewCondition {
        type_: mc::CONDITION_AVAILABLE,
        status,
        reason,
        message,
        observed_generation: None,
    }
}

/// Version, resources and claims of the managed cluster into `status`; on an error the
/// parts read so far are kept.
async fn observe_cluster(ctx: &Context, status: &mut ManagedClusterStatus) -> Result<()> {
    let version = ctx.managed.apiserver_version().await.map_err(Error::GetVersion)?;
    status.version.kubernetes = version.git_version;

    let nodes = Api::<Node>::all(ctx.managed.clone())
        .list(&ListParams::default())
        .await
        .map_err(Error::ListNodes)?;
    let mut totals = resources::sum_nodes(nodes.items.iter().map(|node| {
        let node_status = node.status.as_ref();
        NodeResources {
            capacity: node_status.and_then(|s| s.capacity.as_ref()),
            allocatable: node_status.and_then(|s| s.allocatable.as_ref()),
            unschedulable: node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
        }
    }))
    .map_err(Error::SumResources)?;
    resources::keep_foreign_capacity(&mut totals.capacity, &status.capacity);
    status.capacity = totals.capacity;
    status.allocatable = totals.allocatable;

    status.cluster_claims = cluster_claims(ctx).await?;
    Ok(())
}

async fn cluster_claims(ctx: &Context) -> Result<Vec<ManagedClusterClaim>> {
    let found = match Api::<ClusterClaim>::all(ctx.managed.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list.items,
        // No ClusterClaim CRD on the managed cluster: nothing to report.
        Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
        Err(e) => return Err(Error::ListClaims(e)),
    };
    let empty = BTreeMap::new();
    let (reported, dropped) = claims::reported(
        found.iter().map(|claim| FoundClaim {
            name: claim.metadata.name.as_deref().unwrap_or_default(),
            value: &claim.spec.value,
            spoke_only: claim
                .metadata
                .labels
                .as_ref()
                .unwrap_or(&empty)
                .contains_key(SPOKE_ONLY_LABEL),
        }),
        &RESERVED_CLUSTER_CLAIM_NAMES,
        ctx.options.max_custom_claims,
    );
    if dropped > 0 {
        tracing::info!(
            dropped,
            max = ctx.options.max_custom_claims,
            "custom cluster claims beyond the limit are not reported"
        );
    }
    Ok(reported
        .into_iter()
        .map(|c| ManagedClusterClaim {
            name: c.name,
            value: c.value,
        })
        .collect())
}

/// Probes `/livez`, falling back to `/healthz` when `/livez` is missing or forbidden.
async fn probe(managed: &kube::Client, timeout: Duration) -> Probe {
    let livez = get(managed, "/livez", timeout).await;
    let answer = match livez {
        Ok((status, _)) if health::falls_back_to_healthz(status) => get(managed, "/healthz", timeout).await,
        other => other,
    };
    match answer {
        Ok((200, _)) => Probe::Healthy,
        Ok((status, body)) => Probe::Unhealthy(health::unavailable_message(status, &body)),
        Err(error) => Probe::Unhealthy(health::unavailable_message(0, &error)),
    }
}

async fn get(
    client: &kube::Client,
    path: &str,
    timeout: Duration,
) -> std::result::Result<(u16, String), String> {
    let request = http::Request::get(path)
        .body(kube::client::Body::empty())
        .map_err(|e| e.to_string())?;
    let answer = async {
        let response = client
            .send(request)
            .await
            .map_err(|e| flotilla_core::report::error_chain(&e))?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect_bytes()
            .await
            .map_err(|e| flotilla_core::report::error_chain(&e))?;
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    };
    tokio::time::timeout(timeout, answer)
        .await
        .unwrap_or_else(|_| Err(format!("GET {path}: no answer within {} s", timeout.as_secs())))
}
