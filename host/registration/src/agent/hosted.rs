//! Hosted mode: the klusterlet runs outside the cluster it manages (on a hosting cluster, or
//! anywhere) and reaches the managed cluster through a kubeconfig held in Secret
//! `external-managed-kubeconfig` (key `kubeconfig`) in its agent namespace on the hosting
//! cluster, as OCM's hosted klusterlet does.
//!
//! ```text
//!  hosting cluster                               managed cluster
//!   <agent ns>/bootstrap-hub-kubeconfig           nodes, version, ClusterClaims, /livez
//!   <agent ns>/hub-kubeconfig-secret              AppliedManifestWorks (kept here, as OCM
//!   <agent ns>/external-managed-kubeconfig ──▶      does in hosted mode too)
//!   add-on credential secrets                     what the ManifestWorks apply
//! ```
//!
//! A missing or unusable secret is a [`Step::ManagedCluster`] error in the agent's status and
//! in the log, retried with backoff until someone fixes it; the agents start once it works.
//! A kubeconfig that would run a command or read a file of the klusterlet's host (`exec`,
//! `auth-provider`, file references: [`flotilla_kube::kubeconfig::check_from_secret`]) is
//! unusable in the same way, and no client is ever built from it.
//! The secret is read again every [`CHANGE_POLL`]: a changed kubeconfig (a rotated credential,
//! a corrected address) restarts the agents on a new client ([`wait_for_change`]).

use flotilla_core::registration::agent::backoff::Backoff;
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api,
    config::{KubeConfigOptions, Kubeconfig},
};

use super::{AgentOptions, Error, Result, Step};
use crate::names::{EXTERNAL_MANAGED_KUBECONFIG_SECRET, KUBECONFIG_KEY};

/// How often the secret is read again to notice a changed kubeconfig.
pub const CHANGE_POLL: std::time::Duration = std::time::Duration::from_secs(10);

/// A client of the managed cluster and the kubeconfig text it was made from.
pub struct ManagedClient {
    /// The client.
    pub client: kube::Client,
    /// The secret's kubeconfig, to notice a change.
    pub kubeconfig: String,
}

/// Waits until the `external-managed-kubeconfig` secret in `options.agent_namespace` on
/// `hosting` yields a client of the managed cluster; every failure is published in
/// `options.status` and logged, then retried with the options' backoff.
pub async fn managed_client(hosting: &kube::Client, options: &AgentOptions) -> ManagedClient {
    let mut backoff = Backoff::new(options.backoff_initial, options.backoff_max);
    loop {
        match try_managed_client(hosting, &options.agent_namespace).await {
            Ok(client) => {
                options.status.succeeded(Step::ManagedCluster);
                return client;
            }
            Err(error) => {
                let delay = backoff.next_delay();
                tracing::warn!(error = %error, retry_in = ?delay, "hosted mode: cannot reach the managed cluster yet");
                options.status.failed(Step::ManagedCluster, error.to_string());
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// Returns once the secret's kubeconfig differs from `current` (gone, or changed); a failed
/// read is not a change.
pub async fn wait_for_change(hosting: &kube::Client, namespace: &str, current: &str) {
    loop {
        tokio::time::sleep(CHANGE_POLL).await;
        match read(hosting, namespace).await {
            Ok(text) if text.as_deref() != Some(current) => return,
            Ok(_) => {}
            Err(error) => {
                tracing::debug!(%error, "hosted mode: re-reading the managed cluster's kubeconfig failed")
            }
        }
    }
}

/// The secret's kubeconfig text: `None` when the secret or its key is missing or empty.
async fn read(hosting: &kube::Client, namespace: &str) -> Result<Option<String>> {
    Ok(get_secret(hosting, namespace)
        .await?
        .as_ref()
        .and_then(kubeconfig_text))
}

/// Secret `external-managed-kubeconfig` of `namespace` on the hosting cluster, if it exists.
async fn get_secret(hosting: &kube::Client, namespace: &str) -> Result<Option<Secret>> {
    let name = EXTERNAL_MANAGED_KUBECONFIG_SECRET;
    Api::<Secret>::namespaced(hosting.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|source| Error::ReadExternalManagedKubeconfig {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        })
}

/// The secret's non-empty kubeconfig text.
fn kubeconfig_text(secret: &Secret) -> Option<String> {
    secret
        .data
        .as_ref()
        .and_then(|data| data.get(KUBECONFIG_KEY))
        .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
        .filter(|text| !text.trim().is_empty())
}

/// One attempt of [`managed_client`].
async fn try_managed_client(hosting: &kube::Client, namespace: &str) -> Result<ManagedClient> {
    let name = EXTERNAL_MANAGED_KUBECONFIG_SECRET;
    let problem = |problem: String| Error::ExternalManagedKubeconfig {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        problem,
    };
    let missing = format!(
        "does not exist; create it with key {KUBECONFIG_KEY:?} holding a kubeconfig of the managed cluster \
         (`flotilla join --mode hosted` writes it)"
    );
    let secret = get_secret(hosting, namespace)
        .await?
        .ok_or_else(|| problem(missing))?;
    let text = kubeconfig_text(&secret).ok_or_else(|| {
        problem(format!(
            "has no key {KUBECONFIG_KEY:?} with the managed cluster's kubeconfig"
        ))
    })?;
    let kubeconfig = Kubeconfig::from_yaml(&text).map_err(|e| {
        problem(format!(
            "key {KUBECONFIG_KEY:?} is not a kubeconfig: {}",
            flotilla_core::report::error_chain(&e)
        ))
    })?;
    // Whoever may write this secret on the hosting cluster must not run commands or read files
    // on the klusterlet's host through it.
    flotilla_kube::kubeconfig::check_from_secret(&kubeconfig, &[])
        .map_err(|refused| problem(format!("key {KUBECONFIG_KEY:?} is refused: {refused}")))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| {
            problem(format!(
                "key {KUBECONFIG_KEY:?} is not a usable kubeconfig: {}",
                flotilla_core::report::error_chain(&e)
            ))
        })?;
    let client = kube::Client::try_from(config).map_err(|e| {
        problem(format!(
            "key {KUBECONFIG_KEY:?} gives no client of the managed cluster: {}",
            flotilla_core::report::error_chain(&e)
        ))
    })?;
    Ok(ManagedClient {
        client,
        kubeconfig: text,
    })
}
