//! The agent's hub credential: the hub kubeconfig secret the registration agent writes
//! (`kubeconfig`, and `tls.crt`/`tls.key` when the kubeconfig refers to them as files, as
//! OCM's does), turned into a hub client. The secret is re-read every credential poll; a
//! change (a rotated certificate) restarts the controllers on a new client.

use std::time::Duration;

use flotilla_registration::{
    agent::kubeconfig::{self, HubKubeconfig},
    names::{CLUSTER_NAME_KEY, KUBECONFIG_KEY, TLS_CERT_KEY, TLS_KEY_KEY},
};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client, config::Kubeconfig};

use super::{AgentOptions, Error, Result};

/// A usable hub connection.
pub struct Connection {
    /// The hub client.
    pub client: Client,
    /// The hub's server URL (hashed into AppliedManifestWork names).
    pub server: String,
    /// The cluster namespace on the hub.
    pub cluster: String,
    /// The secret data it was built from, to notice a rotation.
    pub fingerprint: Vec<u8>,
}

fn data<'a>(secret: &'a Secret, key: &str) -> Option<&'a [u8]> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.as_slice())
        .filter(|b| !b.is_empty())
}

fn fingerprint(secret: &Secret) -> Vec<u8> {
    let mut bytes = Vec::new();
    for key in [KUBECONFIG_KEY, TLS_CERT_KEY, TLS_KEY_KEY, CLUSTER_NAME_KEY] {
        bytes.extend_from_slice(data(secret, key).unwrap_or_default());
        bytes.push(0);
    }
    bytes
}

/// Reads the secret from `agent`, the cluster holding the agent's objects.
async fn read(agent: &Client, options: &AgentOptions) -> Result<Option<Secret>> {
    Api::<Secret>::namespaced(agent.clone(), &options.agent_namespace)
        .get_opt(&options.hub_kubeconfig_secret)
        .await
        .map_err(|source| Error::ReadHubSecret {
            namespace: options.agent_namespace.clone(),
            name: options.hub_kubeconfig_secret.clone(),
            source,
        })
}

async fn connect(secret: &Secret, options: &AgentOptions) -> Result<Connection> {
    let invalid = |message: String| Error::InvalidHubSecret {
        namespace: options.agent_namespace.clone(),
        name: options.hub_kubeconfig_secret.clone(),
        message,
    };
    let text = data(secret, KUBECONFIG_KEY)
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .ok_or_else(|| invalid(format!("no {KUBECONFIG_KEY} key yet")))?;
    let parsed = HubKubeconfig::parse(&text, "hub kubeconfig").map_err(|e| invalid(e.to_string()))?;
    let kubeconfig = match (data(secret, TLS_CERT_KEY), data(secret, TLS_KEY_KEY)) {
        (Some(cert), Some(key)) => {
            let rendered = parsed
                .render_hub_kubeconfig(cert, key)
                .map_err(|e| invalid(e.to_string()))?;
            Kubeconfig::from_yaml(&rendered).map_err(|e| invalid(e.to_string()))?
        }
        _ => parsed.kubeconfig.clone(),
    };
    // The secret is written by the registration agent, but anyone who may write secrets in the
    // agent namespace could put a command or a host file into it.
    flotilla_kube::kubeconfig::check_from_secret(&kubeconfig, &[])
        .map_err(|refused| invalid(format!("refused: {refused}")))?;
    let cluster = options
        .cluster_name
        .clone()
        .or_else(|| data(secret, CLUSTER_NAME_KEY).map(|b| String::from_utf8_lossy(b).trim().to_owned()))
        .filter(|c| !c.is_empty())
        .ok_or_else(|| invalid(format!("no {CLUSTER_NAME_KEY} key and no cluster name given")))?;
    // The registration agent's hub client builder: proxy-url, and errors naming the proxy.
    let client = kubeconfig::client_from_kubeconfig(kubeconfig, "hub kubeconfig", None)
        .await
        .map_err(|e| Error::HubClient(e.to_string()))?;
    Ok(Connection {
        client,
        server: parsed.server().to_owned(),
        cluster,
        fingerprint: fingerprint(secret),
    })
}

/// Waits until the secret holds a usable credential, logging why not meanwhile.
pub async fn wait_for(agent: &Client, options: &AgentOptions) -> Connection {
    let mut delay = Duration::from_millis(200);
    loop {
        let attempt = match read(agent, options).await {
            Ok(Some(secret)) => connect(&secret, options).await,
            Ok(None) => Err(Error::InvalidHubSecret {
                namespace: options.agent_namespace.clone(),
                name: options.hub_kubeconfig_secret.clone(),
                message: "not found yet (the registration agent writes it once the cluster is accepted)"
                    .into(),
            }),
            Err(error) => Err(error),
        };
        match attempt {
            Ok(connection) => return connection,
            Err(error) => tracing::info!(%error, "work agent waiting for its hub credential"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(options.credential_poll_interval);
    }
}

/// Returns once the secret's data differs from `fingerprint` (a read error is not a change).
pub async fn wait_for_change(agent: &Client, options: &AgentOptions, fingerprint: &[u8]) {
    loop {
        tokio::time::sleep(options.credential_poll_interval).await;
        match read(agent, options).await {
            Ok(Some(secret)) if self::fingerprint(&secret) != fingerprint => return,
            Ok(_) => {}
            Err(error) => tracing::debug!(%error, "work agent: re-reading the hub credential failed"),
        }
    }
}
