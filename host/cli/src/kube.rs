//! Clients for the clusters a command talks to, from `--kubeconfig` and `--context`
//! (default `$KUBECONFIG`, then `~/.kube/config`); inside a pod with neither, the pod's service
//! account (what `deploy/hub` and `deploy/klusterlet` rely on).

use std::path::Path;

use anyhow::Context as _;
use kube::{
    Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};

use crate::cli::GlobalArgs;

/// The kubeconfig a command uses: the given path, else kube's default search.
pub fn kubeconfig(path: Option<&Path>) -> anyhow::Result<Kubeconfig> {
    match path {
        Some(path) => {
            Kubeconfig::read_from(path).with_context(|| format!("read kubeconfig {}", path.display()))
        }
        None => Kubeconfig::read()
            .context("read kubeconfig ($KUBECONFIG or ~/.kube/config; or pass --kubeconfig)"),
    }
}

/// A client for the cluster named by `path` (or the default) and the global `--context`.
pub async fn client_for(path: Option<&Path>, global: &GlobalArgs) -> anyhow::Result<(Client, Config)> {
    if in_cluster_only(path, global) {
        let config = Config::incluster().context("load the pod's in-cluster configuration")?;
        let client = Client::try_from(config.clone()).context("build Kubernetes client")?;
        return Ok((client, config));
    }
    let kubeconfig = kubeconfig(path)?;
    let options = KubeConfigOptions {
        context: global.context.clone(),
        ..Default::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .context("load kubeconfig")?;
    let client = Client::try_from(config.clone()).context("build Kubernetes client")?;
    Ok((client, config))
}

/// Whether the in-cluster configuration is the one to use: inside a pod (the kubelet set
/// `KUBERNETES_SERVICE_HOST`) with no kubeconfig named or found and no `--context`.
fn in_cluster_only(path: Option<&Path>, global: &GlobalArgs) -> bool {
    let named = path.is_some()
        || global.context.is_some()
        || std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty());
    let home_config = std::env::var_os("HOME")
        .map(|home| Path::new(&home).join(".kube/config").is_file())
        .unwrap_or(false);
    !named && !home_config && std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
}

/// A client for the cluster of the global `--kubeconfig`.
pub async fn client(global: &GlobalArgs) -> anyhow::Result<(Client, Config)> {
    client_for(global.kubeconfig.as_deref(), global).await
}

/// A client for the cluster of the global `--kubeconfig` whose requests are counted in the
/// process's `flotilla_apiserver_requests_total` (for the long-running components).
pub async fn instrumented_client(global: &GlobalArgs) -> anyhow::Result<(Client, Config)> {
    let (_, config) = client(global).await?;
    let client = kube::client::ClientBuilder::try_from(config.clone())
        .context("build Kubernetes client")?
        .with_layer(&flotilla_kube::metrics::CountRequestsLayer)
        .build();
    Ok((client, config))
}
