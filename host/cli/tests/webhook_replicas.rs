//! Hub replicas share the webhook's serving certificate: two real `flotilla hub` processes, as
//! deploy/hub's service account, serve the very same certificate (the first made it and kept it
//! in Secret `flotilla-hub-webhook-serving`, the second read it there), and the `caBundle` the
//! leader registered verifies the certificate each of them serves.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::{path::Path, sync::Arc, time::Duration};

use common::{flotilla, hub_service_account, ok, spawn_hub};
use flotilla_testing::{ControlPlane, wait};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::Api;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject as _};

/// The webhook address (`host:port`) a hub announced in `log`.
async fn webhook_address(log: &Path) -> String {
    wait::until(
        "the webhook address in the hub's log",
        Duration::from_secs(120),
        || async {
            let text = std::fs::read_to_string(log).map_err(|e| e.to_string())?;
            Ok::<_, String>(
                text.split("webhook server at https://")
                    .nth(1)
                    .and_then(|rest| rest.split_whitespace().next())
                    .map(str::to_owned),
            )
        },
    )
    .await
    .unwrap()
}

/// The certificate served at `address`, accepted only if `ca_pem` verifies it for 127.0.0.1.
async fn served_certificate(address: &str, ca_pem: &[u8]) -> CertificateDer<'static> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap_or_else(|e| panic!("the registered caBundle does not verify {address}: {e}"));
    tls.get_ref().1.peer_certificates().unwrap()[0]
        .clone()
        .into_owned()
}

#[tokio::test]
async fn two_hub_replicas_serve_one_certificate_that_the_registered_ca_bundle_verifies() {
    let hub = ControlPlane::start("webhook-replicas").await.unwrap();
    let state = tempfile::tempdir().unwrap();
    ok(flotilla(hub.admin_kubeconfig(), &["init"]));
    let identity = hub_service_account(&hub, state.path());
    let logs = [state.path().join("hub-a.log"), state.path().join("hub-b.log")];
    let _replicas: Vec<_> = logs
        .iter()
        .map(|log| spawn_hub(&identity, log, &["--no-plugin-host"]))
        .collect();
    let addresses = [webhook_address(&logs[0]).await, webhook_address(&logs[1]).await];
    assert_ne!(addresses[0], addresses[1]);

    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(hub.admin_client().await.unwrap());
    let ca_bundle = wait::until(
        "the leader registers the webhook",
        Duration::from_secs(120),
        || async {
            let found = configurations
                .get_opt(flotilla_webhook::CONFIGURATION_NAME)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(found.and_then(|c| c.webhooks?.first()?.client_config.ca_bundle.clone()))
        },
    )
    .await
    .unwrap();

    let first = served_certificate(&addresses[0], &ca_bundle.0).await;
    let second = served_certificate(&addresses[1], &ca_bundle.0).await;
    assert_eq!(first, second, "both replicas serve the same certificate");
}
