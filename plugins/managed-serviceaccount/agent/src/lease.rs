//! Lease `<addon>` in the install namespace on the managed cluster, renewed every period: the
//! klusterlet judges the add-on Available while it is fresh (health mode Lease), as
//! addon-framework's lease updater keeps it for OCM's agents.

use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
};

use crate::FIELD_MANAGER;

/// Renews Lease `name` in `namespace` every `period`; a failure is logged and retried at the
/// next one.
pub async fn renew_forever(managed: Client, namespace: &str, name: &str, period: Duration) {
    let leases: Api<Lease> = Api::namespaced(managed, namespace);
    loop {
        if let Err(error) = renew(&leases, name, period).await {
            eprintln!("managed-serviceaccount-agent: {error:#}");
        }
        tokio::time::sleep(period).await;
    }
}

/// Sets `renewTime` of Lease `name` to now, creating it if needed.
async fn renew(leases: &Api<Lease>, name: &str, period: Duration) -> anyhow::Result<()> {
    let now = MicroTime(Timestamp::now());
    match leases
        .get_opt(name)
        .await
        .with_context(|| format!("read Lease {name}"))?
    {
        Some(mut lease) => {
            lease.spec.get_or_insert_with(LeaseSpec::default).renew_time = Some(now);
            leases
                .replace(name, &PostParams::default(), &lease)
                .await
                .with_context(|| format!("renew Lease {name}"))?;
        }
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(FIELD_MANAGER.to_owned()),
                    lease_duration_seconds: i32::try_from(period.as_secs()).ok(),
                    renew_time: Some(now),
                    ..LeaseSpec::default()
                }),
            };
            leases
                .create(&PostParams::default(), &lease)
                .await
                .with_context(|| format!("create Lease {name}"))?;
        }
    }
    Ok(())
}
