//! Telling the apiserver where the webhook is: the ValidatingWebhookConfiguration for
//! ManifestWorks and the add-on CRDs' conversion, kept pointed at this hub.

use k8s_openapi::{
    api::admissionregistration::v1::ValidatingWebhookConfiguration,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use serde_json::json;

use crate::{CONFIGURATION_NAME, CONVERT_PATH, CONVERTED_CRDS, Error, VALIDATE_PATH};

/// Where the apiserver reaches the webhook server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// An HTTPS URL (a server outside the cluster, or on the apiserver's own host).
    Url(String),
    /// A Service in the hub cluster (port 443), in front of the hub replicas.
    Service {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
    },
}

impl Endpoint {
    /// The host name the serving certificate must name for this endpoint, if not the URL's.
    pub fn service_host(&self) -> Option<String> {
        match self {
            Self::Url(_) => None,
            Self::Service { namespace, name } => Some(format!("{name}.{namespace}.svc")),
        }
    }

    /// The webhook's `clientConfig` for `path` (a URL endpoint carries its own) without the
    /// `caBundle`.
    fn client_config(&self, path: &str) -> serde_json::Value {
        match self {
            Self::Url(url) => json!({ "url": url }),
            Self::Service { namespace, name } => json!({
                "service": { "namespace": namespace, "name": name, "port": 443, "path": path }
            }),
        }
    }
}

/// The configuration sending ManifestWork creates and updates to `url` (trusting `ca_pem`).
pub fn configuration(url: &str, ca_pem: &str) -> ValidatingWebhookConfiguration {
    configuration_for(&Endpoint::Url(url.to_owned()), ca_pem)
}

/// The configuration sending ManifestWork creates and updates to `endpoint` (trusting
/// `ca_pem`).
pub fn configuration_for(endpoint: &Endpoint, ca_pem: &str) -> ValidatingWebhookConfiguration {
    use base64::Engine as _;
    let mut client_config = endpoint.client_config(VALIDATE_PATH);
    client_config["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(ca_pem));
    serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": { "name": CONFIGURATION_NAME },
        "webhooks": [{
            "name": "manifestwork-size.flotilla.dev",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "clientConfig": client_config,
            "rules": [{
                "apiGroups": ["work.open-cluster-management.io"],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["manifestworks"],
            }],
        }],
    }))
    .unwrap_or_default()
}

/// Registers (server-side applies) the configuration for `url` and `ca_pem`.
pub async fn register(client: &kube::Client, url: &str, ca_pem: &str) -> Result<(), Error> {
    register_endpoint(client, &Endpoint::Url(url.to_owned()), ca_pem).await
}

/// Registers (server-side applies) the configuration for `endpoint` and `ca_pem`.
pub async fn register_endpoint(
    client: &kube::Client,
    endpoint: &Endpoint,
    ca_pem: &str,
) -> Result<(), Error> {
    let api: kube::Api<ValidatingWebhookConfiguration> = kube::Api::all(client.clone());
    flotilla_kube::apply::apply(&api, &configuration_for(endpoint, ca_pem)).await?;
    Ok(())
}

/// The merge patch switching an add-on CRD to conversion through `endpoint` (a URL endpoint
/// names [`CONVERT_PATH`] itself), trusting `ca_pem`; the other kind of reference an installer
/// may have left is dropped.
pub fn conversion_patch(endpoint: &Endpoint, ca_pem: &str) -> serde_json::Value {
    use base64::Engine as _;
    let mut client_config = endpoint.client_config(CONVERT_PATH);
    let other = if matches!(endpoint, Endpoint::Url(_)) {
        "service"
    } else {
        "url"
    };
    client_config[other] = serde_json::Value::Null;
    client_config["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(ca_pem));
    json!({ "spec": { "conversion": {
        "strategy": "Webhook",
        "webhook": { "conversionReviewVersions": ["v1"], "clientConfig": client_config },
    }}})
}

/// Points the add-on CRDs' conversion at `endpoint`: from then on the apiserver serves
/// v1beta1 by asking this server.
pub async fn register_conversion(
    client: &kube::Client,
    endpoint: &Endpoint,
    ca_pem: &str,
) -> Result<(), Error> {
    let api: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    let patch = conversion_patch(endpoint, ca_pem);
    for name in CONVERTED_CRDS {
        api.patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .map_err(|source| Error::Conversion {
            crd: name.to_owned(),
            source,
        })?;
    }
    Ok(())
}

/// Whether `crd` converts through `endpoint`, trusting `ca_pem`.
pub fn converts_through(crd: &CustomResourceDefinition, endpoint: &Endpoint, ca_pem: &str) -> bool {
    crd.spec.conversion.as_ref().is_some_and(|conversion| {
        let Some(config) = conversion.webhook.as_ref().and_then(|w| w.client_config.as_ref()) else {
            return false;
        };
        let target = match endpoint {
            Endpoint::Url(url) => config.url.as_deref() == Some(url.as_str()) && config.service.is_none(),
            Endpoint::Service { namespace, name } => {
                config.url.is_none()
                    && config.service.as_ref().is_some_and(|s| {
                        s.namespace == *namespace
                            && s.name == *name
                            && s.path.as_deref() == Some(CONVERT_PATH)
                    })
            }
        };
        conversion.strategy == "Webhook"
            && target
            && config.ca_bundle.as_ref().map(|b| b.0.as_slice()) == Some(ca_pem.as_bytes())
    })
}

/// Keeps the add-on CRDs converting through `endpoint` for as long as it runs: an installer that
/// resets their conversion to `None` (Flotilla's own keep a hub's webhook, see
/// `flotilla_kube::crds::keep_live_conversion`), and the hub points it back at once.
pub async fn keep_conversion(client: kube::Client, endpoint: Endpoint, ca_pem: String) {
    use futures::StreamExt as _;
    use kube_runtime::{WatchStreamExt as _, watcher};

    let api: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    let watches = CONVERTED_CRDS.map(|name| {
        watcher(
            api.clone(),
            watcher::Config::default().fields(&format!("metadata.name={name}")),
        )
        .default_backoff()
        .applied_objects()
    });
    let mut changes = futures::stream::select_all(watches.map(Box::pin));
    while let Some(change) = changes.next().await {
        match change {
            Ok(crd) if !converts_through(&crd, &endpoint, &ca_pem) => {
                let name = crd.metadata.name.unwrap_or_default();
                tracing::info!(crd = %name, "conversion was reset; pointing it at the hub's webhook again");
                let patch = conversion_patch(&endpoint, &ca_pem);
                if let Err(error) = api
                    .patch(
                        &name,
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(&patch),
                    )
                    .await
                {
                    tracing::warn!(crd = %name, %error, "switch the conversion to the hub's webhook");
                }
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "watch the add-on CRDs"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_endpoint_is_registered_by_service_reference_and_named_in_the_certificate() {
        let endpoint = Endpoint::Service {
            namespace: "open-cluster-management-hub".to_owned(),
            name: "flotilla-hub-webhook".to_owned(),
        };
        assert_eq!(
            endpoint.service_host().as_deref(),
            Some("flotilla-hub-webhook.open-cluster-management-hub.svc")
        );
        let config = configuration_for(&endpoint, "PEM");
        let client = &config.webhooks.unwrap()[0].client_config;
        assert_eq!(client.url, None);
        let service = client.service.as_ref().unwrap();
        assert_eq!(
            (service.name.as_str(), service.port, service.path.as_deref()),
            ("flotilla-hub-webhook", Some(443), Some(VALIDATE_PATH))
        );
        assert_eq!(Endpoint::Url("https://x".to_owned()).service_host(), None);
    }

    #[rstest::rstest]
    #[case::url(Endpoint::Url("https://10.0.0.1:9443/convert".into()), "service")]
    #[case::service(Endpoint::Service { namespace: "hub".into(), name: "webhook".into() }, "url")]
    fn the_conversion_goes_to_the_endpoint_and_drops_the_other_reference(
        #[case] endpoint: Endpoint,
        #[case] dropped: &str,
    ) {
        let patch = conversion_patch(&endpoint, "PEM");
        let client = &patch["spec"]["conversion"]["webhook"]["clientConfig"];
        assert_eq!(client[dropped], serde_json::Value::Null);
        assert_eq!(patch["spec"]["conversion"]["strategy"], "Webhook");
        // The CRD as the apiserver stores it after the patch (nulls removed) converts there.
        let mut stored = patch["spec"]["conversion"].clone();
        if let Some(config) = stored["webhook"]["clientConfig"].as_object_mut() {
            config.remove(dropped);
        }
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": { "name": CONVERTED_CRDS[0] },
            "spec": { "group": "g", "names": { "kind": "K", "plural": "ks" }, "scope": "Cluster",
                      "versions": [], "conversion": stored },
        }))
        .unwrap();
        assert!(converts_through(&crd, &endpoint, "PEM"));
        assert!(!converts_through(&crd, &endpoint, "OTHER"));
        let elsewhere = Endpoint::Url("https://10.0.0.2:9443/convert".into());
        assert!(!converts_through(&crd, &elsewhere, "PEM"));
    }

    #[test]
    fn the_configuration_trusts_the_ca_and_matches_work_writes() {
        let config = configuration("https://127.0.0.1:9443/validate-manifestwork", "PEM");
        let hook = &config.webhooks.unwrap()[0];
        assert_eq!(
            hook.client_config.ca_bundle.as_ref().map(|b| b.0.as_slice()),
            Some(&b"PEM"[..])
        );
        assert_eq!(hook.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(
            hook.rules.as_ref().unwrap()[0].resources.as_deref(),
            Some(&["manifestworks".to_owned()][..])
        );
    }
}
