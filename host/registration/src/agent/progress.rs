//! What callers see of a running agent: its phase, its names, and the last error that has not
//! been followed by a success of the same step. `flotilla klusterlet` logs it; tests wait on
//! it. Errors never end the agent (except a name that can never be registered): they show up
//! here and the step is retried with backoff.

use std::{
    sync::Arc,
    time::{Instant, SystemTime},
};

use tokio::sync::watch;

/// Where the agent is in registration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Phase {
    /// Resolving names; nothing done yet.
    #[default]
    Starting,
    /// Reading the bootstrap kubeconfig, creating the ManagedCluster and a CSR.
    Bootstrapping,
    /// Waiting for the hub to approve and the signer to issue a CSR.
    WaitingForCertificate {
        /// The CSR's name.
        csr: String,
    },
    /// Holding a hub certificate; waiting for the hub admin to accept the cluster.
    WaitingForAcceptance,
    /// Accepted: `ManagedClusterJoined` is set, the lease is renewed, status reported.
    Joined,
    /// Stopped for good; `last_error` says why.
    Failed,
}

/// One step whose failures are tracked separately, so a success of one step does not hide
/// another step's error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Step {
    /// Names, bootstrap, ManagedCluster creation, the first CSR.
    Registration,
    /// ManagedCluster status: joined, available, version, resources, claims.
    Status,
    /// Renewing the cluster lease.
    Lease,
    /// Renewing the client certificate.
    Rotation,
    /// Hosted mode: reaching the managed cluster through the `external-managed-kubeconfig`
    /// secret on the hosting cluster.
    ManagedCluster,
}

/// A snapshot of the agent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentStatus {
    /// Where the agent is.
    pub phase: Phase,
    /// The cluster name, once resolved.
    pub cluster_name: Option<String>,
    /// The agent name, once resolved.
    pub agent_name: Option<String>,
    /// The most recent error not yet followed by a success of the same step.
    pub last_error: Option<String>,
    /// Errors so far (grows with every failed try, so a caller can see retries happen).
    pub error_count: u64,
    /// `notAfter` of the hub client certificate in use.
    pub certificate_not_after: Option<SystemTime>,
    /// Certificates issued by rotation (not counting the first).
    pub rotations: u64,
    /// Successful lease renewals.
    pub lease_renewals: u64,
}

/// Publishes the agent's [`AgentStatus`]; cheap to clone. Subscribe before calling
/// [`run`](super::run) to see every change.
#[derive(Clone, Debug)]
pub struct StatusReporter {
    sender: Arc<watch::Sender<AgentStatus>>,
    errors: Arc<std::sync::Mutex<Vec<(Step, Instant, String)>>>,
}

impl Default for StatusReporter {
    fn default() -> Self {
        Self {
            sender: Arc::new(watch::Sender::new(AgentStatus::default())),
            errors: Arc::default(),
        }
    }
}

impl StatusReporter {
    /// A receiver of every future change.
    pub fn subscribe(&self) -> watch::Receiver<AgentStatus> {
        self.sender.subscribe()
    }

    /// The current snapshot.
    pub fn current(&self) -> AgentStatus {
        self.sender.borrow().clone()
    }

    pub(crate) fn update(&self, change: impl FnOnce(&mut AgentStatus)) {
        self.sender.send_modify(change);
    }

    pub(crate) fn phase(&self, phase: Phase) {
        self.sender.send_if_modified(|status| {
            let changed = status.phase != phase;
            status.phase = phase;
            changed
        });
    }

    /// Records a failure of `step`.
    pub(crate) fn failed(&self, step: Step, message: String) {
        let last = {
            let mut errors = self.errors.lock().unwrap_or_else(|p| p.into_inner());
            errors.retain(|(s, _, _)| *s != step);
            errors.push((step, Instant::now(), message));
            latest(&errors)
        };
        self.update(|status| {
            status.last_error = last;
            status.error_count += 1;
        });
    }

    /// Records a success of `step`, clearing its error.
    pub(crate) fn succeeded(&self, step: Step) {
        let (had, last) = {
            let mut errors = self.errors.lock().unwrap_or_else(|p| p.into_inner());
            let before = errors.len();
            errors.retain(|(s, _, _)| *s != step);
            (errors.len() != before, latest(&errors))
        };
        if had {
            self.update(|status| status.last_error = last);
        }
    }
}

fn latest(errors: &[(Step, Instant, String)]) -> Option<String> {
    errors
        .iter()
        .max_by_key(|(_, at, _)| *at)
        .map(|(_, _, m)| m.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_success_clears_only_its_own_steps_error() {
        let reporter = StatusReporter::default();
        reporter.failed(Step::Status, "status broke".into());
        reporter.failed(Step::Lease, "lease broke".into());
        assert_eq!(reporter.current().last_error.as_deref(), Some("lease broke"));
        reporter.succeeded(Step::Lease);
        assert_eq!(reporter.current().last_error.as_deref(), Some("status broke"));
        reporter.succeeded(Step::Status);
        assert_eq!(reporter.current().last_error, None);
        assert_eq!(reporter.current().error_count, 2);
    }
}
