//! `flotilla accept --clusters c1,c2`: approve the first certificate request of each cluster and
//! let it in (`spec.hubAcceptsClient: true`), as `clusteradm accept` does.
//!
//! Only pending requests labelled with the cluster's name and made by a bootstrap identity are
//! approved: a request from anyone else is left for a person to look at.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Args;
use flotilla_api::cluster::{consts::CLUSTER_NAME_LABEL, v1::ManagedCluster};
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
    /// How long to wait for each cluster's request to appear.
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
        match accept_one(&hub, cluster, args.timeout).await {
            Ok(approved) => {
                eprintln!("cluster {cluster:?} accepted ({approved} certificate request(s) approved)")
            }
            Err(e) => {
                eprintln!("cluster {cluster:?} not accepted: {e:#}");
                failed.push(cluster.as_str());
            }
        }
    }
    if !failed.is_empty() {
        bail!("could not accept {}", failed.join(", "));
    }
    Ok(())
}

async fn accept_one(hub: &Client, cluster: &str, timeout: Duration) -> anyhow::Result<usize> {
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    let csrs: Api<CertificateSigningRequest> = Api::all(hub.clone());
    let deadline = Instant::now() + timeout;
    let selector = format!("{CLUSTER_NAME_LABEL}={cluster}");
    loop {
        let found = clusters.get_opt(cluster).await.context("read ManagedCluster")?;
        let pending: Vec<CertificateSigningRequest> = csrs
            .list(&ListParams::default().labels(&selector))
            .await
            .context("list certificate requests")?
            .items
            .into_iter()
            .filter(|csr| is_pending(csr) && from_bootstrap_identity(csr))
            .collect();
        let accepted = found.as_ref().is_some_and(|c| c.spec.hub_accepts_client);
        if found.is_some() && (!pending.is_empty() || accepted) {
            let mut approved = 0;
            for csr in &pending {
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
        if Instant::now() >= deadline {
            bail!(
                "no ManagedCluster with a pending certificate request from a bootstrap identity after {timeout:?}; \
                 is its klusterlet running (`flotilla join`)?"
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
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
