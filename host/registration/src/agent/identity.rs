//! The agent's hub identity: the certificate and key issued through a CSR, the hub endpoint
//! they are for, and a client built from them. The agent holds the current identity in a
//! `watch` channel; every request takes the client from it afresh, so when rotation swaps
//! in a new identity the next request uses the new certificate and the old client's
//! connections close once the requests still using them finish.

use std::{collections::BTreeMap, time::SystemTime};

use flotilla_core::{registration::agent::identity, x509::CertificateInfo};

use super::{
    Context, Names,
    error::{Error, Result},
    kubeconfig::HubKubeconfig,
    secret,
};
use crate::names::{AGENT_NAME_KEY, CLUSTER_NAME_KEY, KUBECONFIG_KEY, TLS_CERT_KEY, TLS_KEY_KEY};

/// A usable hub identity.
#[derive(Clone)]
pub(crate) struct HubIdentity {
    /// A client authenticating with [`Self::cert_pem`].
    pub client: kube::Client,
    /// The hub endpoint (cluster entry of the bootstrap kubeconfig).
    pub endpoint: HubKubeconfig,
    /// The client certificate, PEM.
    pub cert_pem: Vec<u8>,
    /// The client key, PEM.
    pub key_pem: Vec<u8>,
    /// Subject and validity of the certificate.
    pub info: CertificateInfo,
    /// The remaining-life share at which this certificate is renewed (drawn once).
    pub renewal_threshold: f64,
}

impl std::fmt::Debug for HubIdentity {
    // The key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubIdentity")
            .field("server", &self.endpoint.server())
            .field("info", &self.info)
            .field("renewal_threshold", &self.renewal_threshold)
            .finish_non_exhaustive()
    }
}

impl HubIdentity {
    /// An identity for `endpoint` from a certificate already checked by
    /// [`identity::check_certificate`].
    pub async fn new(
        ctx: &Context,
        endpoint: HubKubeconfig,
        cert_pem: Vec<u8>,
        key_pem: Vec<u8>,
        info: CertificateInfo,
    ) -> Result<Self> {
        let client = endpoint
            .client_with_certificate(
                &cert_pem,
                &key_pem,
                &format!(
                    "hub kubeconfig for secret {}/{}",
                    ctx.options.agent_namespace, ctx.options.hub_kubeconfig_secret
                ),
                ctx.options.request_timeout,
            )
            .await?;
        Ok(Self {
            client,
            endpoint,
            cert_pem,
            key_pem,
            info,
            renewal_threshold: flotilla_core::registration::agent::rotation::threshold(fastrand::f64()),
        })
    }

    /// Reads `hub-kubeconfig-secret` and returns the identity in it if it is usable for
    /// `names` and, when the bootstrap kubeconfig could be read, points at the same hub.
    /// `Ok(None)` when there is no usable identity (the reason is logged).
    pub async fn stored(
        ctx: &Context,
        names: &Names,
        bootstrap: Option<&HubKubeconfig>,
    ) -> Result<Option<Self>> {
        let options = &ctx.options;
        let Some(stored) = secret::read(
            &ctx.agent,
            &options.agent_namespace,
            &options.hub_kubeconfig_secret,
        )
        .await?
        else {
            return Ok(None);
        };
        let unusable = |reason: &dyn std::fmt::Display| {
            tracing::info!(
                secret = %options.hub_kubeconfig_secret,
                %reason,
                "stored hub identity is not usable; bootstrapping"
            );
            Ok(None)
        };
        let (Some(kubeconfig), Some(cert_pem), Some(key_pem)) = (
            secret::text(&stored, KUBECONFIG_KEY),
            secret::data(&stored, TLS_CERT_KEY),
            secret::data(&stored, TLS_KEY_KEY),
        ) else {
            return unusable(&"kubeconfig, tls.crt or tls.key missing");
        };
        let endpoint = match HubKubeconfig::parse(&kubeconfig, "stored hub kubeconfig") {
            Ok(endpoint) => endpoint,
            Err(e) => return unusable(&e),
        };
        let info = match identity::check_certificate(cert_pem, key_pem, &names.user(), SystemTime::now()) {
            Ok(info) => info,
            Err(e) => return unusable(&e),
        };
        if let Some(bootstrap) = bootstrap
            && let Err(e) = identity::check_same_hub(&bootstrap.endpoint(), &endpoint.endpoint())
        {
            return unusable(&e);
        }
        let (cert_pem, key_pem) = (cert_pem.to_vec(), key_pem.to_vec());
        Ok(Some(Self::new(ctx, endpoint, cert_pem, key_pem, info).await?))
    }

    /// Writes this identity into `hub-kubeconfig-secret`.
    pub async fn save(&self, ctx: &Context, names: &Names) -> Result<()> {
        let kubeconfig = self
            .endpoint
            .render_hub_kubeconfig(&self.cert_pem, &self.key_pem)?;
        let data = BTreeMap::from([
            (KUBECONFIG_KEY.to_owned(), kubeconfig.into_bytes()),
            (TLS_CERT_KEY.to_owned(), self.cert_pem.clone()),
            (TLS_KEY_KEY.to_owned(), self.key_pem.clone()),
            (CLUSTER_NAME_KEY.to_owned(), names.cluster.clone().into_bytes()),
            (AGENT_NAME_KEY.to_owned(), names.agent.clone().into_bytes()),
        ]);
        secret::write(
            &ctx.agent,
            &ctx.options.agent_namespace,
            &ctx.options.hub_kubeconfig_secret,
            data,
        )
        .await
    }
}

/// Checks a freshly issued certificate against the agent's key and user.
pub(crate) fn check_issued(
    csr: &str,
    cert_pem: &[u8],
    key_pem: &[u8],
    names: &Names,
) -> Result<CertificateInfo> {
    identity::check_certificate(cert_pem, key_pem, &names.user(), SystemTime::now()).map_err(|problem| {
        Error::IssuedCertificate {
            name: csr.to_owned(),
            problem,
        }
    })
}
