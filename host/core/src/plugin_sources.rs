//! What an `AddOnPlugin` may make the hub read and send on its behalf.
//!
//! The hub reads Secrets across the cluster (its own namespace, bootstrap tokens, add-on
//! templates' signing CAs), and an `AddOnPlugin` names Secrets by namespace and name:
//!
//! - `spec.source.oci.pullSecretRef`: registry credentials, which the hub sends to the registry
//!   the plugin's reference names — a registry the plugin's author chooses;
//! - `spec.signers[].caSecretRef`: a CA whose key signs the client certificates the plugin
//!   approves.
//!
//! Were any namespace allowed, whoever may write an `AddOnPlugin` could have the hub send
//! another team's registry credentials to a registry of theirs, or sign certificates with any
//! `kubernetes.io/tls` Secret of the cluster. Both must therefore be in one namespace the hub
//! admin sets aside for plugins (`flotilla hub --plugin-secrets-namespace`, by default the
//! hub's own namespace).
//!
//! ConfigMap sources (`spec.source.configMap`) are not confined: their bytes become the
//! plugin's own code, which the author chooses anyway, ConfigMaps hold no credentials by
//! Kubernetes' convention, and the hub already watches every ConfigMap's metadata to notice a
//! changed source. What an author learns by naming another namespace's ConfigMap is whether a
//! key exists and the digest of its bytes (`status.digest`), not its content.
//!
//! Registry credentials never travel over plain HTTP: `spec.source.oci.insecure` (plain HTTP,
//! for test registries) together with a `pullSecretRef` is refused before any request, since
//! every hop on the way would read the Basic credentials.

use flotilla_api::plugins::v1alpha1::AddOnPluginSpec;

/// Why an `AddOnPlugin`'s sources are refused before anything is read for it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceRefusal {
    /// A Secret reference names a namespace other than the plugins' one.
    #[error(
        "{field} names a Secret in namespace {namespace:?}; the hub reads an AddOnPlugin's Secrets only \
         from namespace {allowed:?} (flotilla hub --plugin-secrets-namespace)"
    )]
    SecretOutsideNamespace {
        /// The field, e.g. `spec.source.oci.pullSecretRef`.
        field: String,
        /// The namespace it names.
        namespace: String,
        /// The one namespace allowed.
        allowed: String,
    },
    /// A pull secret with a plain-HTTP registry.
    #[error(
        "spec.source.oci.insecure (plain HTTP) and spec.source.oci.pullSecretRef are both set: the hub never \
         sends registry credentials over plain HTTP; serve the registry over HTTPS or drop the pull secret"
    )]
    CredentialsOverPlainHttp,
}

impl SourceRefusal {
    /// The `Fetched` condition reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::SecretOutsideNamespace { .. } => "SecretOutsideNamespace",
            Self::CredentialsOverPlainHttp => "CredentialsOverPlainHttp",
        }
    }
}

/// Refuses a spec whose Secret references leave `secrets_namespace`, or that would send pull
/// credentials over plain HTTP.
pub fn check(spec: &AddOnPluginSpec, secrets_namespace: &str) -> Result<(), SourceRefusal> {
    let outside = |field: String, namespace: &str| {
        (namespace != secrets_namespace).then(|| SourceRefusal::SecretOutsideNamespace {
            field,
            namespace: namespace.to_owned(),
            allowed: secrets_namespace.to_owned(),
        })
    };
    let oci = spec.source.oci.as_ref();
    if let Some(secret) = oci.and_then(|o| o.pull_secret_ref.as_ref())
        && let Some(refusal) = outside("spec.source.oci.pullSecretRef".to_owned(), &secret.namespace)
    {
        return Err(refusal);
    }
    for signer in &spec.signers {
        let field = format!("spec.signers[{:?}].caSecretRef", signer.signer_name);
        if let Some(refusal) = outside(field, &signer.ca_secret_ref.namespace) {
            return Err(refusal);
        }
    }
    if oci.is_some_and(|o| o.insecure && o.pull_secret_ref.is_some()) {
        return Err(SourceRefusal::CredentialsOverPlainHttp);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use flotilla_api::plugins::v1alpha1::{OciSource, PluginSigner, PluginSource, SecretReference};

    use super::*;

    fn spec(pull_secret: Option<&str>, insecure: bool, signer_ca: Option<&str>) -> AddOnPluginSpec {
        let reference = |namespace: &str| SecretReference {
            namespace: namespace.into(),
            name: "s".into(),
        };
        AddOnPluginSpec {
            source: PluginSource {
                config_map: None,
                oci: Some(OciSource {
                    reference: "registry.example/p:v1".into(),
                    pull_secret_ref: pull_secret.map(reference),
                    insecure,
                }),
            },
            signers: signer_ca
                .map(|ns| PluginSigner {
                    signer_name: "example.com/signer".into(),
                    ca_secret_ref: reference(ns),
                })
                .into_iter()
                .collect(),
            ..AddOnPluginSpec::default()
        }
    }

    #[rstest::rstest]
    #[case::nothing(None, false, None)]
    #[case::pull_secret_at_home(Some("plugins"), false, None)]
    #[case::signer_at_home(None, false, Some("plugins"))]
    #[case::insecure_anonymous(None, true, Some("plugins"))]
    fn secrets_in_the_plugins_namespace_pass(
        #[case] pull: Option<&str>,
        #[case] insecure: bool,
        #[case] ca: Option<&str>,
    ) {
        assert_eq!(check(&spec(pull, insecure, ca), "plugins"), Ok(()));
    }

    #[rstest::rstest]
    #[case::pull_secret(Some("kube-system"), None, "spec.source.oci.pullSecretRef")]
    #[case::signer_ca(
        Some("plugins"),
        Some("kube-system"),
        "spec.signers[\"example.com/signer\"].caSecretRef"
    )]
    fn a_secret_elsewhere_is_refused_naming_the_field_and_the_namespace(
        #[case] pull: Option<&str>,
        #[case] ca: Option<&str>,
        #[case] field: &str,
    ) {
        let refusal = check(&spec(pull, false, ca), "plugins").unwrap_err();
        assert_eq!(refusal.reason(), "SecretOutsideNamespace");
        let message = refusal.to_string();
        assert!(
            message.starts_with(field)
                && message.contains("\"kube-system\"")
                && message.contains("\"plugins\""),
            "{message}"
        );
    }

    #[test]
    fn a_pull_secret_over_plain_http_is_refused() {
        let refusal = check(&spec(Some("plugins"), true, None), "plugins").unwrap_err();
        assert_eq!(refusal, SourceRefusal::CredentialsOverPlainHttp);
        assert!(refusal.to_string().contains("plain HTTP"), "{refusal}");
    }
}
