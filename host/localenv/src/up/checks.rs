//! Whether what `up` started is ready yet: each check answers `None` when it is, else what is
//! missing, which [`await_ready`] reports when time runs out.

use std::time::Duration;

use anyhow::anyhow;
use flotilla_api::{
    addon::{consts::ADDON_NAME_LABEL, v1alpha1::ManagedClusterAddOn},
    cluster::{consts::managed_cluster as mc, v1::ManagedCluster},
    plugins::{consts::condition as plugin_condition, v1alpha1::AddOnPlugin},
    work::{consts::manifest_work as mw, v1::ManifestWork},
};
use flotilla_core::conditions;
use kube::{Api, Client, api::ListParams};

use super::ADDON;

/// `None` when Deployment `namespace/name` has all its replicas ready; else what it has.
pub async fn deployment_unready(
    client: &Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Option<String>> {
    let deployment = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await?;
    let Some(deployment) = deployment else {
        return Ok(Some(format!("no Deployment {namespace}/{name}")));
    };
    let wanted = deployment.spec.and_then(|s| s.replicas).unwrap_or(1);
    let ready = deployment.status.and_then(|s| s.ready_replicas).unwrap_or(0);
    Ok((ready < wanted).then(|| format!("Deployment {namespace}/{name}: {ready}/{wanted} ready")))
}

/// Whether add-on `name` is `Available` on every cluster; else what is not yet.
pub(super) async fn addons_available(
    client: Client,
    clusters: &[String],
    name: &str,
) -> anyhow::Result<Option<String>> {
    let mut missing = Vec::new();
    for cluster in clusters {
        let addon = Api::<ManagedClusterAddOn>::namespaced(client.clone(), cluster)
            .get_opt(name)
            .await?;
        let available = addon
            .and_then(|a| a.status)
            .map(|s| status_of(&s.conditions, "Available"))
            .unwrap_or_else(|| "Unknown".into());
        if available != conditions::TRUE {
            missing.push(format!("{cluster}: {name} Available={available}"));
        }
    }
    Ok((!missing.is_empty()).then(|| missing.join(", ")))
}

/// Polls `check` until it says ready (`Ok(None)`), failing after `timeout` with its last
/// answer (`Ok(Some(what is missing))`).
pub(super) async fn await_ready<F, Fut>(client: &Client, timeout: Duration, check: F) -> anyhow::Result<()>
where
    F: Fn(Client) -> Fut,
    Fut: Future<Output = anyhow::Result<Option<String>>>,
{
    crate::wait::until("it", timeout, || async {
        match check(client.clone()).await {
            Ok(None) => Ok(Some(())),
            Ok(Some(missing)) => Err(missing),
            Err(e) => Err(format!("{e:#}")),
        }
    })
    .await
    .map_err(|e| match e {
        crate::Error::NotReady { message, .. } => anyhow!("{message}"),
        other => other.into(),
    })
}

pub fn status_of(list: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition], type_: &str) -> String {
    conditions::find(list, type_).map_or_else(|| "Unknown".to_owned(), |c| c.status.clone())
}

pub(super) async fn clusters_available(
    client: Client,
    clusters: &[String],
) -> anyhow::Result<Option<String>> {
    let api = Api::<ManagedCluster>::all(client);
    let mut missing = Vec::new();
    for name in clusters {
        let available = api.get_opt(name).await?.and_then(|c| c.status).map(|s| {
            status_of(
                s.conditions.as_deref().unwrap_or_default(),
                mc::CONDITION_AVAILABLE,
            )
        });
        if available.as_deref() != Some(conditions::TRUE) {
            missing.push(format!(
                "{name} Available={}",
                available.unwrap_or_else(|| "absent".into())
            ));
        }
    }
    Ok((!missing.is_empty()).then(|| missing.join(", ")))
}

pub(super) async fn plugin_ready(client: Client) -> anyhow::Result<Option<String>> {
    let plugin = Api::<AddOnPlugin>::all(client).get_opt(ADDON).await?;
    let ready = plugin
        .and_then(|p| p.status)
        .and_then(|s| conditions::find(&s.conditions, plugin_condition::READY).cloned());
    Ok(match ready {
        Some(c) if c.status == conditions::TRUE => None,
        Some(c) => Some(format!(
            "AddOnPlugin {ADDON} Ready={} ({}: {})",
            c.status, c.reason, c.message
        )),
        None => Some(format!("AddOnPlugin {ADDON} has no Ready condition yet")),
    })
}

pub async fn addon_works(client: &Client, cluster: &str) -> anyhow::Result<Vec<ManifestWork>> {
    Ok(Api::<ManifestWork>::namespaced(client.clone(), cluster)
        .list(&ListParams::default().labels(&format!("{ADDON_NAME_LABEL}={ADDON}")))
        .await?
        .items)
}

pub(super) async fn works_applied(client: Client, clusters: &[String]) -> anyhow::Result<Option<String>> {
    let mut missing = Vec::new();
    for cluster in clusters {
        let works = addon_works(&client, cluster).await?;
        if works.is_empty() {
            missing.push(format!("{cluster}: no {ADDON} work yet"));
        }
        for work in works {
            let applied = work
                .status
                .as_ref()
                .map(|s| status_of(&s.conditions, mw::CONDITION_APPLIED))
                .unwrap_or_else(|| "Unknown".into());
            if applied != conditions::TRUE {
                missing.push(format!(
                    "{cluster}/{} Applied={applied}",
                    work.metadata.name.unwrap_or_default()
                ));
            }
        }
    }
    Ok((!missing.is_empty()).then(|| missing.join(", ")))
}
