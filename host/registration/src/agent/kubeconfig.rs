//! Kubeconfigs of the agent: reading the bootstrap kubeconfig, writing the hub kubeconfig, and
//! building hub clients from either.
//!
//! The hub kubeconfig copies the bootstrap kubeconfig's current cluster entry (server, CA,
//! proxy, TLS server name) under the same name, with context `default-context`, user
//! `default-auth` and namespace `configuration`, as OCM does. OCM's user entry refers to the
//! files `tls.crt` and `tls.key` next to the mounted kubeconfig; ours embeds the certificate
//! and key data, because Flotilla's agents build their clients from the secret's bytes rather
//! than from a mounted directory, and an embedded kubeconfig works both ways (a Go client
//! reading the mounted file accepts it too). The hub client is always built from the
//! secret's `tls.crt` and `tls.key`, so a secret written by OCM's agent (file references) is
//! used as well.

use std::time::Duration;

use base64::{Engine as _, engine::general_purpose::STANDARD};
use flotilla_core::registration::agent::identity::HubEndpoint;
use kube::config::{Cluster, KubeConfigOptions, Kubeconfig};
use serde_json::json;

use super::{
    error::{Error, Result},
    proxy,
};

/// Context of the hub kubeconfig.
pub const CONTEXT: &str = "default-context";
/// User of the hub kubeconfig.
pub const USER: &str = "default-auth";
/// Namespace of the hub kubeconfig's context.
pub const NAMESPACE: &str = "configuration";

/// A parsed kubeconfig and the cluster entry its current context uses.
#[derive(Clone, Debug)]
pub struct HubKubeconfig {
    /// The whole kubeconfig.
    pub kubeconfig: Kubeconfig,
    /// Name of the current context's cluster entry.
    pub cluster_name: String,
    /// That cluster entry.
    pub cluster: Cluster,
}

impl HubKubeconfig {
    /// Parses `text` and resolves its current context; `what` names it in errors.
    pub fn parse(text: &str, what: &str) -> Result<Self> {
        let parse_error = |message: String| Error::ParseKubeconfig {
            what: what.to_owned(),
            message,
        };
        let kubeconfig = Kubeconfig::from_yaml(text).map_err(|e| parse_error(e.to_string()))?;
        let current = kubeconfig
            .current_context
            .clone()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| parse_error("no current-context".into()))?;
        let context = kubeconfig
            .contexts
            .iter()
            .find(|c| c.name == current)
            .and_then(|c| c.context.as_ref())
            .ok_or_else(|| parse_error(format!("context {current:?} not found")))?;
        let cluster_name = context.cluster.clone();
        let cluster = kubeconfig
            .clusters
            .iter()
            .find(|c| c.name == cluster_name)
            .and_then(|c| c.cluster.clone())
            .ok_or_else(|| parse_error(format!("cluster {cluster_name:?} not found")))?;
        match cluster.server.as_deref() {
            None | Some("") => return Err(parse_error(format!("cluster {cluster_name:?} has no server"))),
            Some(server) => {
                server
                    .parse::<http::Uri>()
                    .map_err(|e| parse_error(format!("server {server:?}: {e}")))?;
            }
        }
        Ok(Self {
            kubeconfig,
            cluster_name,
            cluster,
        })
    }

    /// Where the current context points, for comparing with another kubeconfig.
    pub fn endpoint(&self) -> HubEndpoint {
        HubEndpoint {
            cluster_name: self.cluster_name.clone(),
            server: self.cluster.server.clone().unwrap_or_default(),
            proxy_url: self.cluster.proxy_url.clone(),
            ca_data: self.cluster.certificate_authority_data.as_ref().map(|data| {
                STANDARD
                    .decode(data.trim())
                    .unwrap_or_else(|_| data.as_bytes().to_vec())
            }),
        }
    }

    /// The server URL.
    pub fn server(&self) -> &str {
        self.cluster.server.as_deref().unwrap_or_default()
    }

    /// The hub kubeconfig text for this endpoint with an embedded client certificate and key.
    pub fn render_hub_kubeconfig(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<String> {
        let cluster =
            serde_json::to_value(&self.cluster).map_err(|e| Error::RenderKubeconfig(e.to_string()))?;
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{ "name": self.cluster_name, "cluster": cluster }],
            "users": [{
                "name": USER,
                "user": {
                    "client-certificate-data": STANDARD.encode(cert_pem),
                    "client-key-data": STANDARD.encode(key_pem),
                },
            }],
            "contexts": [{
                "name": CONTEXT,
                "context": { "cluster": self.cluster_name, "user": USER, "namespace": NAMESPACE },
            }],
            "current-context": CONTEXT,
        });
        serde_yaml::to_string(&config).map_err(|e| Error::RenderKubeconfig(e.to_string()))
    }

    /// A client with this kubeconfig's own credentials (the bootstrap identity).
    pub async fn client(&self, what: &str, timeout: Duration) -> Result<kube::Client> {
        client_from(self.kubeconfig.clone(), what, timeout).await
    }

    /// A client for this endpoint authenticating with `cert_pem`/`key_pem`.
    pub async fn client_with_certificate(
        &self,
        cert_pem: &[u8],
        key_pem: &[u8],
        what: &str,
        timeout: Duration,
    ) -> Result<kube::Client> {
        let text = self.render_hub_kubeconfig(cert_pem, key_pem)?;
        let kubeconfig = Kubeconfig::from_yaml(&text).map_err(|e| Error::ParseKubeconfig {
            what: what.to_owned(),
            message: e.to_string(),
        })?;
        client_from(kubeconfig, what, timeout).await
    }
}

/// A hub client from `kubeconfig` (its current context), made by [`hub_client`]. The
/// kubeconfig comes from a Secret (bootstrap or hub kubeconfig secret), so it may neither run
/// a command nor read a file of this host ([`flotilla_kube::kubeconfig::check_from_secret`]).
pub async fn client_from(kubeconfig: Kubeconfig, what: &str, timeout: Duration) -> Result<kube::Client> {
    flotilla_kube::kubeconfig::check_from_secret(&kubeconfig, &[]).map_err(|source| {
        Error::UnsafeKubeconfig {
            what: what.to_owned(),
            source,
        }
    })?;
    client_from_kubeconfig(kubeconfig, what, Some(timeout)).await
}

/// A hub client from `kubeconfig` (its current context), made by [`hub_client`]; `timeout`
/// bounds connecting, reading and writing (`None`: kube's defaults, for clients that watch).
pub async fn client_from_kubeconfig(
    kubeconfig: Kubeconfig,
    what: &str,
    timeout: Option<Duration>,
) -> Result<kube::Client> {
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::BuildHubClient {
            what: what.to_owned(),
            message: flotilla_core::report::error_chain(&e),
        })?;
    hub_client(config, timeout).map_err(|e| Error::BuildHubClient {
        what: what.to_owned(),
        message: flotilla_core::report::error_chain(&e),
    })
}

/// The one way the klusterlet builds a client for the hub (registration agent, work agent,
/// add-on agents, `flotilla join`'s discovery): kube's client stack for `config`, honouring
/// the cluster entry's `proxy-url`, plus a layer that turns a failure of the way through the
/// proxy into a message naming the proxy and what to fix ([`proxy::ProxyError`]).
///
/// Proxies: kube's builder (feature `http-proxy`) opens an HTTP CONNECT tunnel through
/// `http://` proxies, and through `https://` proxies over TLS verified with the same roots as
/// the hub (`certificate-authority-data`, into which the proxy's CA is appended, as OCM
/// documents); the hub's TLS, with the agent's client certificate, runs inside the tunnel,
/// so mTLS is never terminated at the proxy. kube 5's builder does both schemes, so nothing is
/// composed by hand here. Its limits, which follow client-go's: a `tls-server-name` in the
/// kubeconfig applies to the proxy's certificate too, and the agent's client certificate is
/// offered to a proxy that asks for one.
pub fn hub_client(mut config: kube::Config, timeout: Option<Duration>) -> Result<kube::Client, kube::Error> {
    if let Some(timeout) = timeout {
        // Every request of these clients is short (no watches), so a hung hub shows up as an
        // error.
        config.connect_timeout = Some(timeout);
        config.read_timeout = Some(timeout);
        config.write_timeout = Some(timeout);
        config.reset_reader_on_write = true;
    }
    let diagnosis = proxy::Diagnosis::new(&config);
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(match diagnosis {
        None => builder.build(),
        Some(diagnosis) => builder
            .with_layer(&tower::util::MapFutureLayer::new(move |future: ClientFuture| {
                let diagnosis = diagnosis.clone();
                async move {
                    match future.await {
                        Ok(response) => Ok(response),
                        Err(error) => Err(diagnosis.explain(error).await),
                    }
                }
            }))
            .build(),
    })
}

/// The future of kube's client stack.
type ClientFuture = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = Result<http::Response<Box<kube::client::DynBody>>, proxy::BoxError>>
            + Send,
    >,
>;

#[cfg(test)]
mod tests {
    use super::*;

    const BOOTSTRAP: &str = r#"
apiVersion: v1
kind: Config
clusters:
- name: hub
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: Q0EtREFUQQ==
    proxy-url: http://proxy:3128
contexts:
- name: bootstrap
  context: { cluster: hub, user: bootstrap }
current-context: bootstrap
users:
- name: bootstrap
  user: { token: abc }
"#;

    #[test]
    fn the_hub_kubeconfig_copies_the_bootstrap_cluster_and_uses_ocm_names() {
        let bootstrap = HubKubeconfig::parse(BOOTSTRAP, "bootstrap").unwrap();
        let text = bootstrap.render_hub_kubeconfig(b"CERT", b"KEY").unwrap();
        let hub = HubKubeconfig::parse(&text, "hub").unwrap();
        assert_eq!(hub.endpoint(), bootstrap.endpoint());
        assert_eq!(hub.endpoint().ca_data.as_deref(), Some(&b"CA-DATA"[..]));
        assert_eq!(hub.kubeconfig.current_context.as_deref(), Some(CONTEXT));
        let context = hub.kubeconfig.contexts[0].context.as_ref().unwrap();
        assert_eq!(context.user.as_deref(), Some(USER));
        assert_eq!(context.namespace.as_deref(), Some(NAMESPACE));
        let user = hub.kubeconfig.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(user.client_certificate_data.as_deref(), Some("Q0VSVA=="));
    }

    #[test]
    fn broken_kubeconfigs_say_what_is_wrong() {
        let message = |text: &str| HubKubeconfig::parse(text, "bootstrap").unwrap_err().to_string();
        assert!(message("{not yaml").starts_with("parse bootstrap:"));
        assert!(message("apiVersion: v1").contains("no current-context"));
        assert!(message("current-context: x").contains("context \"x\" not found"));
        assert!(
            message(&BOOTSTRAP.replace("server: https://127.0.0.1:6443", "server: ''"))
                .contains("has no server")
        );
    }
}
