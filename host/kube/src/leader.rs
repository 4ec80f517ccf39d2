//! Lease-based leader election, so two replicas of a component never both act.
//!
//! Hand-written over the pure rules in `flotilla_core::leader` because the Rust crates for it
//! (kube-leader-election, kube-lease-manager) pin older `kube` majors than the workspace's, and
//! the part that needs care — expiry on the candidate's own clock, writes guarded by
//! `resourceVersion` so two candidates cannot both win one round — is a few dozen lines.
//!
//! The leader renews every `retry_period`; when it has not renewed for `renew_deadline` (shorter
//! than the lease duration) it stops — the caller's work future is dropped and [`run`] returns
//! [`Error::LeadershipLost`] — before any follower may take over.

use std::future::Future;
use std::time::Duration;

use flotilla_core::leader::{Decision, LeaseRecord, decide};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use tokio::time::Instant;

/// Who competes for which lease, and the timing of the contest.
#[derive(Clone, Debug)]
pub struct LeaderElection {
    /// Namespace of the lease.
    pub namespace: String,
    /// Name of the lease.
    pub name: String,
    /// This candidate's identity (`spec.holderIdentity`): unique per process.
    pub identity: String,
    /// `spec.leaseDurationSeconds`: how long followers wait after the last renewal they saw.
    pub lease_duration: Duration,
    /// How long the leader keeps acting without a successful renewal.
    pub renew_deadline: Duration,
    /// How often candidates try to acquire and the leader renews.
    pub retry_period: Duration,
}

/// Why leading stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The lease could not be renewed within the renew deadline, or another holder took it.
    #[error("lost leadership of lease {namespace}/{name}: {reason}")]
    LeadershipLost {
        /// Namespace of the lease.
        namespace: String,
        /// Name of the lease.
        name: String,
        /// What happened.
        reason: String,
    },
}

/// The state one candidate keeps between rounds: the last record it saw and when it changed.
struct Observed {
    record: Option<LeaseRecord>,
    resource_version: Option<String>,
    changed_at: Instant,
}

/// Reports leadership changes (e.g. to a metrics gauge).
pub trait LeaderObserver: Send + Sync {
    /// Called with true when this candidate starts leading and false when it stops.
    fn leading(&self, leading: bool);
}

impl LeaderObserver for () {
    fn leading(&self, _: bool) {}
}

impl LeaderElection {
    /// Waits until this candidate leads, then runs `work` while renewing; returns `work`'s output
    /// (releasing the lease so a successor need not wait) or [`Error::LeadershipLost`].
    pub async fn run<F: Future>(
        &self,
        api: Api<Lease>,
        observer: &dyn LeaderObserver,
        work: F,
    ) -> Result<F::Output, Error> {
        let mut observed = Observed {
            record: None,
            resource_version: None,
            changed_at: Instant::now(),
        };
        loop {
            match tokio::time::timeout(self.renew_deadline, self.try_round(&api, &mut observed)).await {
                Ok(Ok(true)) => break,
                Ok(Ok(false)) => {}
                Ok(Err(error)) => {
                    tracing::debug!(lease = %self.name, %error, "leader election round failed");
                }
                Err(_) => tracing::debug!(lease = %self.name, "leader election round timed out"),
            }
            tokio::time::sleep(self.retry_period).await;
        }
        tracing::info!(lease = %self.name, identity = %self.identity, "leading");
        observer.leading(true);
        let outcome = tokio::select! {
            output = work => Ok(output),
            reason = self.renew(&api, &mut observed) => Err(Error::LeadershipLost {
                namespace: self.namespace.clone(),
                name: self.name.clone(),
                reason,
            }),
        };
        observer.leading(false);
        if outcome.is_ok() {
            self.release(&api).await;
        }
        outcome
    }

    /// Renews until it fails for longer than the renew deadline; returns why.
    ///
    /// Each round may take only what is left of the renew deadline: a connection that stops
    /// moving bytes without closing (a partition) would otherwise hold a round for the
    /// client's read timeout, minutes, while followers take the lease after its duration and
    /// act beside a leader that still believes it leads.
    async fn renew(&self, api: &Api<Lease>, observed: &mut Observed) -> String {
        let mut renewed_at = Instant::now();
        loop {
            tokio::time::sleep(self.retry_period).await;
            let left = self.renew_deadline.saturating_sub(renewed_at.elapsed());
            let Ok(round) = tokio::time::timeout(left, self.try_round(api, observed)).await else {
                return format!(
                    "not renewed for {:?} (renew deadline {:?}): the renewal did not finish in time",
                    renewed_at.elapsed(),
                    self.renew_deadline
                );
            };
            match round {
                Ok(true) => renewed_at = Instant::now(),
                Ok(false) => {
                    let holder = observed
                        .record
                        .as_ref()
                        .and_then(|r| r.holder.clone())
                        .unwrap_or_default();
                    return format!("the lease is now held by {holder:?}");
                }
                Err(error) => {
                    if renewed_at.elapsed() >= self.renew_deadline {
                        return format!(
                            "not renewed for {:?} (renew deadline {:?}): {error}",
                            renewed_at.elapsed(),
                            self.renew_deadline
                        );
                    }
                    tracing::warn!(lease = %self.name, %error, "lease renewal failed; retrying");
                }
            }
        }
    }

    /// One read-decide-write round; true when this candidate holds the lease afterwards.
    async fn try_round(&self, api: &Api<Lease>, observed: &mut Observed) -> kube::Result<bool> {
        let current = api.get_opt(&self.name).await?;
        let record = current.as_ref().map(record_of);
        let version = current.as_ref().and_then(|l| l.metadata.resource_version.clone());
        if version != observed.resource_version || record != observed.record {
            observed.changed_at = Instant::now();
            observed.record = record.clone();
            observed.resource_version = version;
        }
        let Decision::Lead { acquire, transitions } =
            decide(record.as_ref(), &self.identity, observed.changed_at.elapsed())
        else {
            return Ok(false);
        };
        let now = MicroTime(Timestamp::now());
        let previous = current.as_ref().and_then(|l| l.spec.as_ref());
        let spec = LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)),
            acquire_time: if acquire {
                Some(now.clone())
            } else {
                previous.and_then(|s| s.acquire_time.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        };
        // The write carries the resourceVersion read above: of two candidates deciding on the
        // same record, the apiserver lets exactly one write through (the other gets 409).
        let written = match current {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(self.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec),
                };
                api.create(&PostParams::default(), &lease).await
            }
            Some(mut lease) => {
                lease.spec = Some(spec);
                api.replace(&self.name, &PostParams::default(), &lease).await
            }
        };
        match written {
            Ok(lease) => {
                observed.record = Some(record_of(&lease));
                observed.resource_version = lease.metadata.resource_version;
                observed.changed_at = Instant::now();
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Clears the holder so a successor takes over at once (client-go's release on cancel).
    async fn release(&self, api: &Api<Lease>) {
        let read = tokio::time::timeout(self.renew_deadline, api.get_opt(&self.name)).await;
        let Ok(Ok(Some(mut lease))) = read else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        let written = tokio::time::timeout(
            self.renew_deadline,
            api.replace(&self.name, &PostParams::default(), &lease),
        )
        .await;
        match written {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => tracing::warn!(lease = %self.name, %error, "could not release the lease"),
            Err(_) => tracing::warn!(lease = %self.name, "could not release the lease in time"),
        }
    }
}

/// The part of a Lease the election rules read.
fn record_of(lease: &Lease) -> LeaseRecord {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseRecord {
        holder: spec.holder_identity,
        duration: Duration::from_secs(u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0)),
        transitions: spec.lease_transitions.unwrap_or(0),
    }
}
