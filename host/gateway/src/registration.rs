//! Putting the gateway behind the hub's kube-apiserver: the APIService for
//! `v1alpha1.cluster.core.oam.dev` and the Service it names, and reading which front proxy the
//! apiserver calls aggregated servers with.

use std::net::IpAddr;

use base64::{Engine as _, engine::general_purpose::STANDARD};
use flotilla_api::gateway::{
    GROUP,
    consts::{API_SERVICE_NAME, VERSION},
};
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Service};
use kube::{
    Api,
    api::{DynamicObject, GroupVersionKind, Patch, PatchParams},
    discovery::ApiResource,
};
use serde_json::json;

use crate::server::FrontProxy;

/// The field manager of the gateway's registration.
const FIELD_MANAGER: &str = "flotilla-gateway";
/// Where the apiserver publishes how aggregated servers authenticate it.
const AUTHENTICATION_CONFIGMAP: (&str, &str) = ("kube-system", "extension-apiserver-authentication");
/// The Service port the APIService names.
const SERVICE_PORT: i32 = 443;

/// Why the registration failed.
#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    /// A request to the hub failed.
    #[error("{0}: {1}")]
    Kube(&'static str, kube::Error),
    /// The apiserver publishes no front proxy: it was started without `--requestheader-*`.
    #[error(
        "the kube-apiserver has no aggregation layer configured (ConfigMap kube-system/extension-apiserver-authentication has no requestheader-client-ca-file)"
    )]
    NoFrontProxy,
    /// The apiserver publishes no client CA: it was started without `--client-ca-file`.
    #[error(
        "the kube-apiserver verifies no client certificates (ConfigMap kube-system/extension-apiserver-authentication has no client-ca-file)"
    )]
    NoClientCa,
}

/// The front proxy the hub's kube-apiserver calls aggregated servers as.
pub async fn front_proxy(client: &kube::Client) -> Result<FrontProxy, RegistrationError> {
    let (namespace, name) = AUTHENTICATION_CONFIGMAP;
    let map = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(|e| RegistrationError::Kube("read the apiserver's authentication ConfigMap", e))?;
    let data = map.data.unwrap_or_default();
    let ca_pem = data
        .get("requestheader-client-ca-file")
        .filter(|ca| !ca.trim().is_empty())
        .ok_or(RegistrationError::NoFrontProxy)?
        .clone();
    // A JSON list, as the apiserver writes it; unreadable means no name is allowed, never all.
    let allowed_names = data
        .get("requestheader-allowed-names")
        .map(|names| serde_json::from_str::<Vec<String>>(names).unwrap_or_else(|_| vec![String::new()]))
        .unwrap_or_default();
    Ok(FrontProxy {
        ca_pem,
        allowed_names,
    })
}

/// The CA the hub's kube-apiserver verifies client certificates with (`client-ca-file`): what
/// signs the add-on credentials the klusterlets obtain, and so the cluster-proxy agents'.
pub async fn client_ca(client: &kube::Client) -> Result<String, RegistrationError> {
    let (namespace, name) = AUTHENTICATION_CONFIGMAP;
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(|e| RegistrationError::Kube("read the apiserver's authentication ConfigMap", e))?
        .data
        .unwrap_or_default()
        .remove("client-ca-file")
        .filter(|ca| !ca.trim().is_empty())
        .ok_or(RegistrationError::NoClientCa)
}

/// Where the apiserver reaches the gateway: Service `namespace/service`, port 443.
#[derive(Clone, Debug)]
pub struct Backend {
    /// The Service's namespace (the hub's).
    pub namespace: String,
    /// The Service's name.
    pub service: String,
    /// For a gateway outside the cluster: its address (not loopback: the apiserver refuses
    /// loopback endpoints) and port, which the Service's Endpoints name. `None`: the Service
    /// selects the hub's pods and is installed with them (deploy/hub).
    pub address: Option<(IpAddr, u16)>,
}

impl Backend {
    /// The host name the apiserver verifies the gateway's certificate for.
    pub fn host(&self) -> String {
        format!("{}.{}.svc", self.service, self.namespace)
    }
}

/// Applies the APIService whose `caBundle` is `ca_pem` and, for a gateway outside the cluster,
/// the Service and Endpoints it names.
pub async fn register(
    client: &kube::Client,
    backend: &Backend,
    ca_pem: &str,
) -> Result<(), RegistrationError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    if let Some((ip, port)) = backend.address {
        let service = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": { "name": backend.service, "namespace": backend.namespace },
            "spec": {
                "ports": [{ "name": "https", "port": SERVICE_PORT, "targetPort": i32::from(port), "protocol": "TCP" }],
            },
        });
        Api::<Service>::namespaced(client.clone(), &backend.namespace)
            .patch(&backend.service, &params, &Patch::Apply(service))
            .await
            .map_err(|e| RegistrationError::Kube("apply the gateway's Service", e))?;
        let endpoints = json!({
            "apiVersion": "v1", "kind": "Endpoints",
            "metadata": { "name": backend.service, "namespace": backend.namespace },
            "subsets": [{
                "addresses": [{ "ip": ip.to_string() }],
                "ports": [{ "name": "https", "port": i32::from(port), "protocol": "TCP" }],
            }],
        });
        Api::<Endpoints>::namespaced(client.clone(), &backend.namespace)
            .patch(&backend.service, &params, &Patch::Apply(endpoints))
            .await
            .map_err(|e| RegistrationError::Kube("apply the gateway's Endpoints", e))?;
    }
    let api_service = json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": { "name": API_SERVICE_NAME },
        "spec": {
            "group": GROUP, "version": VERSION,
            "service": { "namespace": backend.namespace, "name": backend.service, "port": SERVICE_PORT },
            "caBundle": STANDARD.encode(ca_pem),
            "groupPriorityMinimum": 5000, "versionPriority": 10,
        },
    });
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "apiregistration.k8s.io",
        "v1",
        "APIService",
    ));
    Api::<DynamicObject>::all_with(client.clone(), &resource)
        .patch(API_SERVICE_NAME, &params, &Patch::Apply(api_service))
        .await
        .map_err(|e| RegistrationError::Kube("apply the gateway's APIService", e))?;
    Ok(())
}
