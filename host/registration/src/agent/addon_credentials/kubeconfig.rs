//! The kubeconfig of an add-on's `<addon>-hub-kubeconfig` secret, shaped as OCM's agent writes
//! it so an addon-framework agent that mounts the secret finds what it expects: the hub
//! cluster entry copied from the klusterlet's own (server, CA, proxy, same cluster name),
//! context `default-context` with namespace `configuration`, user `default-auth` whose client
//! certificate and key are the FILES `tls.crt` and `tls.key` beside the kubeconfig in the
//! mounted secret (client-go resolves them relative to the kubeconfig's directory).

use serde_json::json;

use crate::agent::kubeconfig::{CONTEXT, HubKubeconfig, NAMESPACE, USER};
use crate::names::{TLS_CERT_KEY, TLS_KEY_KEY};

/// The kubeconfig text for the hub of `endpoint`.
pub fn render(endpoint: &HubKubeconfig) -> Result<String, String> {
    let cluster = serde_json::to_value(&endpoint.cluster).map_err(|e| e.to_string())?;
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": endpoint.cluster_name, "cluster": cluster }],
        "users": [{
            "name": USER,
            "user": { "client-certificate": TLS_CERT_KEY, "client-key": TLS_KEY_KEY },
        }],
        "contexts": [{
            "name": CONTEXT,
            "context": { "cluster": endpoint.cluster_name, "user": USER, "namespace": NAMESPACE },
        }],
        "current-context": CONTEXT,
    });
    serde_yaml::to_string(&config).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_addon_kubeconfig_points_at_the_hub_and_refers_to_the_secrets_files() {
        let hub = HubKubeconfig::parse(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: hub\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority-data: Q0E=\ncontexts:\n- name: c\n  context: {cluster: hub, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n",
            "test",
        )
        .unwrap();
        let text = render(&hub).unwrap();
        let parsed = HubKubeconfig::parse(&text, "add-on").unwrap();
        assert_eq!(parsed.endpoint(), hub.endpoint());
        assert_eq!(
            parsed.kubeconfig.current_context.as_deref(),
            Some("default-context")
        );
        let context = parsed.kubeconfig.contexts[0].context.as_ref().unwrap();
        assert_eq!(context.namespace.as_deref(), Some("configuration"));
        let user = parsed.kubeconfig.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(parsed.kubeconfig.auth_infos[0].name, "default-auth");
        assert_eq!(user.client_certificate.as_deref(), Some("tls.crt"));
        assert_eq!(user.client_key.as_deref(), Some("tls.key"));
        assert!(user.client_certificate_data.is_none());
    }

    #[test]
    fn the_addon_kubeconfig_keeps_the_proxy_and_the_whole_ca_bundle() {
        // Hub CA and proxy CA in one bundle, as `flotilla join --proxy-ca` writes it.
        let bundle = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            "-----BEGIN CERTIFICATE-----\nHUB\n-----END CERTIFICATE-----\n\
             -----BEGIN CERTIFICATE-----\nPROXY\n-----END CERTIFICATE-----\n",
        );
        let hub = HubKubeconfig::parse(
            &format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: hub\n  cluster:\n    server: https://hub:6443\n    certificate-authority-data: {bundle}\n    proxy-url: https://proxy:3129\ncontexts:\n- name: c\n  context: {{cluster: hub, user: u}}\ncurrent-context: c\nusers:\n- name: u\n  user: {{token: t}}\n"
            ),
            "test",
        )
        .unwrap();
        let parsed = HubKubeconfig::parse(&render(&hub).unwrap(), "add-on").unwrap();
        assert_eq!(parsed.cluster.proxy_url.as_deref(), Some("https://proxy:3129"));
        assert_eq!(
            parsed.cluster.certificate_authority_data.as_deref(),
            Some(bundle.as_str())
        );
    }
}
