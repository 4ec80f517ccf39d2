//! Lease `<addon>` in the add-on's install namespace on the managed cluster, renewed every
//! period: the klusterlet judges the add-on Available while it is fresh (health mode `Lease`),
//! as addon-framework's lease updater keeps it for OCM's agents.
//!
//! ```text
//!   every period:  GET Lease <name> ──found──▶ renewTime = now ──▶ PUT (replace)
//!                                  └─absent──▶ holder, duration = period, renewTime = now ──▶ POST
//! ```
//!
//! A replace carries the resourceVersion it read, so a concurrent writer makes it fail with a
//! conflict rather than be overwritten; the next period reads the Lease again.

use std::time::Duration;

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
};

use crate::{Error, Result, chain};

/// Keeps one Lease fresh. Cheap to build; holds a client of the managed cluster.
#[derive(Clone)]
pub struct LeaseRenewer {
    /// Leases of the namespace the Lease is in.
    leases: Api<Lease>,
    /// The Lease's name: the add-on's, where the klusterlet looks.
    name: String,
    /// The agent: `holderIdentity` of a Lease it creates, and the prefix of its log lines.
    holder: String,
    /// Time between renewals, and `leaseDurationSeconds` of a Lease it creates.
    period: Duration,
}

// === impl LeaseRenewer ===

impl LeaseRenewer {
    /// Renews Lease `name` in `namespace` through `managed` every `period`. `holder` (the
    /// agent's name) holds a Lease it creates, and prefixes what [`run`](Self::run) logs.
    pub fn new(managed: Client, namespace: &str, name: &str, holder: &str, period: Duration) -> Self {
        Self {
            leases: Api::namespaced(managed, namespace),
            name: name.to_owned(),
            holder: holder.to_owned(),
            period,
        }
    }

    /// Renews now and then every period, for as long as it is polled; a failure is logged to
    /// stderr (`<holder>: <error and its causes>`) and retried at the next period.
    pub async fn run(&self) {
        loop {
            if let Err(error) = self.renew().await {
                eprintln!("{}: {}", self.holder, chain(&error));
            }
            tokio::time::sleep(self.period).await;
        }
    }

    /// Sets `renewTime` of the Lease to now, creating it if needed.
    pub async fn renew(&self) -> Result<()> {
        let name = self.name.as_str();
        let now = MicroTime(Timestamp::now());
        let found = self
            .leases
            .get_opt(name)
            .await
            .map_err(|source| Error::ReadLease {
                name: name.to_owned(),
                source,
            })?;
        match found {
            Some(mut lease) => {
                lease.spec.get_or_insert_with(LeaseSpec::default).renew_time = Some(now);
                self.leases
                    .replace(name, &PostParams::default(), &lease)
                    .await
                    .map_err(|source| Error::RenewLease {
                        name: name.to_owned(),
                        source,
                    })?;
            }
            None => {
                self.leases
                    .create(&PostParams::default(), &self.fresh(now))
                    .await
                    .map_err(|source| Error::CreateLease {
                        name: name.to_owned(),
                        source,
                    })?;
            }
        }
        Ok(())
    }

    /// A new Lease renewed at `now`, held by the agent for one period (whole seconds).
    fn fresh(&self, now: MicroTime) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.holder.clone()),
                lease_duration_seconds: i32::try_from(self.period.as_secs()).ok(),
                renew_time: Some(now),
                ..LeaseSpec::default()
            }),
        }
    }
}

impl std::fmt::Debug for LeaseRenewer {
    /// Leaves out the client.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseRenewer")
            .field("name", &self.name)
            .field("holder", &self.holder)
            .field("period", &self.period)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
