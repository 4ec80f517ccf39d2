//! Kubeconfig files with embedded certificate data, one user each.

use base64::{Engine as _, engine::general_purpose::STANDARD};
use serde_json::json;

use crate::error::{Error, Result};

/// Renders a kubeconfig for `server` trusting `ca_pem`, authenticating with a client certificate.
pub fn render(
    context: &str,
    server: &str,
    ca_pem: &str,
    user: &str,
    cert_pem: &str,
    key_pem: &str,
) -> Result<String> {
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": context,
            "cluster": {
                "server": server,
                "certificate-authority-data": STANDARD.encode(ca_pem),
            },
        }],
        "users": [{
            "name": user,
            "user": {
                "client-certificate-data": STANDARD.encode(cert_pem),
                "client-key-data": STANDARD.encode(key_pem),
            },
        }],
        "contexts": [{
            "name": context,
            "context": { "cluster": context, "user": user },
        }],
        "current-context": context,
        "preferences": {},
    });
    serde_yaml::to_string(&config).map_err(|e| Error::Kubeconfig(format!("render kubeconfig: {e}")))
}

/// Builds a kube client from kubeconfig text.
pub async fn client_from_yaml(yaml: &str) -> Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(yaml)
        .map_err(|e| Error::Kubeconfig(format!("parse kubeconfig: {e}")))?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| Error::Kubeconfig(format!("load kubeconfig: {e}")))?;
    kube::Client::try_from(config).map_err(|e| Error::Kubeconfig(format!("build client: {e}")))
}
