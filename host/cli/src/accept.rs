//! `flotilla accept --clusters c1,c2`: approve the first certificate request of each cluster and
//! let it in (`spec.hubAcceptsClient: true`), as `clusteradm accept` does.
//!
//! Only pending requests labelled with the cluster's name, made by a bootstrap identity and
//! asking for that cluster's own agent identity
//! ([`flotilla_core::registration::hub::csr::check_bootstrap`]) are approved. Everyone joining
//! shares the bootstrap token, so a request under one cluster's label may ask for another
//! cluster's identity; such requests, and requests from anyone else, are left pending and named
//! with the rule they break, for a person to look at.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Args;
use flotilla_api::cluster::{consts::CLUSTER_NAME_LABEL, v1::ManagedCluster};
use flotilla_core::registration::hub::csr::{self, BootstrapRequest, ExpectedGroups};
use flotilla_registration::names;
use k8s_openapi::{
    api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestCondition},
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::Timestamp,
};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::json;

use crate::{cli::GlobalArgs, kube::client};

#[derive(Debug, Args)]
pub struct AcceptArgs {
    /// Comma-separated cluster names.
    #[arg(long, value_delimiter = ',', required = true)]
    pub clusters: Vec<String>,
    /// Also wait for clusters that have not registered yet (no ManagedCluster: a klusterlet
    /// just joined); without it such a cluster is refused at once.
    #[arg(long)]
    pub wait: bool,
    /// How long to wait for each cluster's request (and, with --wait, its registration).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let value: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 30s, 5m or 1h"))?;
    match unit {
        "" | "s" => Ok(Duration::from_secs(value)),
        "m" => Ok(Duration::from_secs(value * 60)),
        "h" => Ok(Duration::from_secs(value * 3600)),
        _ => Err(format!("{text:?} is not a duration like 30s, 5m or 1h")),
    }
}

pub async fn accept(global: &GlobalArgs, args: &AcceptArgs) -> anyhow::Result<()> {
    let (hub, _) = client(global).await?;
    let mut failed = Vec::new();
    for cluster in &args.clusters {
        match accept_one(&hub, cluster, args.wait, args.timeout).await {
            Ok(approved) => {
                eprintln!("cluster {cluster:?} accepted ({approved} certificate request(s) approved)")
            }
            Err(e) => failed.push((cluster, e)),
        }
    }
    match failed.len() {
        0 => Ok(()),
        // One failure is the command's error, told once.
        1 => {
            let (cluster, error) = failed.remove(0);
            Err(error.context(format!("accept cluster {cluster:?}")))
        }
        _ => {
            for (cluster, error) in &failed {
                eprintln!("cluster {cluster:?} not accepted: {}", crate::report::line(error));
            }
            let names: Vec<&str> = failed.iter().map(|(c, _)| c.as_str()).collect();
            bail!("could not accept {}", names.join(", "))
        }
    }
}

async fn accept_one(
    hub: &Client,
    cluster: &str,
    wait_to_register: bool,
    timeout: Duration,
) -> anyhow::Result<usize> {
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    let csrs: Api<CertificateSigningRequest> = Api::all(hub.clone());
    let deadline = Instant::now() + timeout;
    let selector = format!("{CLUSTER_NAME_LABEL}={cluster}");
    let mut announced = None;
    loop {
        let found = clusters.get_opt(cluster).await.context("read ManagedCluster")?;
        if found.is_none() && !wait_to_register {
            bail!(
                "no ManagedCluster {cluster:?} on this hub: its klusterlet has not registered\n\
                 run `flotilla join` on that cluster (or pass --wait if it was just joined); \
                 `flotilla get clusters` lists the clusters that have registered"
            );
        }
        let (approvable, left_alone): (Vec<_>, Vec<_>) = csrs
            .list(&ListParams::default().labels(&selector))
            .await
            .context("list certificate requests")?
            .items
            .into_iter()
            .filter(is_pending)
            .map(|csr| {
                let verdict = judge(cluster, &csr);
                (csr, verdict)
            })
            .partition(|(_, verdict)| verdict.is_ok());
        let accepted = found.as_ref().is_some_and(|c| c.spec.hub_accepts_client);
        let done = found.is_some() && (!approvable.is_empty() || accepted);
        if done || Instant::now() >= deadline {
            for (csr, verdict) in &left_alone {
                if let Err(why) = verdict {
                    eprintln!(
                        "cluster {cluster:?}: certificate request {} left pending: {why}",
                        csr.name_any()
                    );
                }
            }
        }
        if done {
            let mut approved = 0;
            for (csr, _) in &approvable {
                approve(&csrs, csr).await?;
                approved += 1;
            }
            if !accepted {
                let patch = json!({ "spec": { "hubAcceptsClient": true } });
                clusters
                    .patch(cluster, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .context("set hubAcceptsClient (needs update on managedclusters/accept)")?;
            }
            return Ok(approved);
        }
        let waiting_for = if found.is_none() {
            Waiting::Registration
        } else {
            Waiting::Request
        };
        if Instant::now() >= deadline {
            match waiting_for {
                Waiting::Registration => bail!(
                    "no ManagedCluster {cluster:?} registered within {timeout:?}; is its klusterlet running \
                     (`flotilla join`)?"
                ),
                Waiting::Request => bail!(
                    "ManagedCluster {cluster:?} filed no certificate request for its own agent from a \
                     bootstrap identity within {timeout:?}; is its klusterlet running (`flotilla join`)?"
                ),
            }
        }
        if announced != Some(waiting_for) {
            match waiting_for {
                Waiting::Registration => {
                    eprintln!("cluster {cluster:?}: waiting up to {timeout:?} for its klusterlet to register")
                }
                Waiting::Request => eprintln!(
                    "cluster {cluster:?}: waiting up to {timeout:?} for its klusterlet's certificate request"
                ),
            }
            announced = Some(waiting_for);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// What `accept` is waiting for, announced once each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waiting {
    /// The klusterlet to create the ManagedCluster (only with `--wait`).
    Registration,
    /// The klusterlet's first certificate request.
    Request,
}

/// Why accepting `cluster` may not approve this pending request, if it may not: it must come
/// from a bootstrap identity and ask for the cluster's own agent identity.
fn judge(cluster: &str, csr: &CertificateSigningRequest) -> Result<(), String> {
    if !from_bootstrap_identity(csr) {
        return Err(format!(
            "requester {:?} is not a bootstrap identity",
            csr.spec.username.as_deref().unwrap_or_default()
        ));
    }
    let cluster_group = names::cluster_group(cluster);
    let request = BootstrapRequest {
        signer_name: &csr.spec.signer_name,
        cluster,
        request: &csr.spec.request.0,
        usages: csr.spec.usages.as_deref().unwrap_or_default(),
    };
    let expected = ExpectedGroups {
        cluster_group: &cluster_group,
        managed_clusters_group: names::MANAGED_CLUSTERS_GROUP,
    };
    csr::check_bootstrap(&request, expected)
        .map(drop)
        .map_err(|rejection| rejection.to_string())
}

fn is_pending(csr: &CertificateSigningRequest) -> bool {
    let conditions = csr.status.as_ref().and_then(|s| s.conditions.as_ref());
    !conditions.is_some_and(|c| {
        c.iter()
            .any(|c| matches!(c.type_.as_str(), "Approved" | "Denied" | "Failed"))
    })
}

fn from_bootstrap_identity(csr: &CertificateSigningRequest) -> bool {
    let user = csr.spec.username.as_deref().unwrap_or_default();
    let groups = csr.spec.groups.as_deref().unwrap_or_default();
    user.starts_with(names::BOOTSTRAP_USER_PREFIX)
        || user
            == format!(
                "system:serviceaccount:{}:{}",
                names::BOOTSTRAP_SA_NAMESPACE,
                names::BOOTSTRAP_SA_NAME
            )
        || groups.iter().any(|g| g == names::BOOTSTRAP_GROUP)
}

async fn approve(
    csrs: &Api<CertificateSigningRequest>,
    csr: &CertificateSigningRequest,
) -> anyhow::Result<()> {
    let condition = CertificateSigningRequestCondition {
        type_: "Approved".into(),
        status: "True".into(),
        reason: Some("AutoApprovedByHubCSRApprovingController".into()),
        message: Some("approved by `flotilla accept`".into()),
        last_update_time: Some(Time(Timestamp::now())),
        ..Default::default()
    };
    let mut conditions = csr
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    conditions.push(condition);
    let patch = json!({ "status": { "conditions": conditions } });
    csrs.patch_approval(&csr.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("approve certificate request {}", csr.name_any()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_take_seconds_minutes_and_hours() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5d").is_err());
    }
}
