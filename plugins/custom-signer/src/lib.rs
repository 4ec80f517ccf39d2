//! An add-on whose agent gets, besides its hub client certificate, a certificate from the
//! add-on's own signer, `example.com/custom-signer`, under an approval policy of its own.
//!
//! ```text
//!   describe: kube-client (OCM default subject)
//!             custom-signer example.com/custom-signer
//!               user   custom-signer-agent:{cluster-name}
//!               groups custom-signer:{cluster-name}, custom-signer:agents   OU flotilla
//!   approve-csr (the host signs with the CA named in the AddOnPlugin's spec.signers; the plugin
//!   only decides):
//!     kubernetes.io/kube-apiserver-client ─▶ OCM's default rules
//!     example.com/custom-signer ─▶ approve only if
//!        the cluster opted in (label custom-signer.example.com/enabled=true),
//!        the request came from that cluster's registration agent,
//!        CN, O and OU are exactly the registered subject, no DNS names,
//!        usages ⊆ {digital signature, key encipherment, client auth} ∋ client auth
//!     any other signer ─▶ deny
//! ```

use flotilla_addon_sdk::csr::{KUBE_CLIENT_SIGNER, default_approve, expand_subject};
use flotilla_addon_sdk::k8s_openapi::api::core::v1::{
    Container, PodSpec, SecretVolumeSource, ServiceAccount, Volume, VolumeMount,
};
use flotilla_addon_sdk::manifest::{agent_deployment, labels, meta, to_manifest};
use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, Csr, CsrDecision, HealthMode, Manifest, Registration,
    ResolvedConfig, Subject,
};

/// The add-on's own signer.
pub const SIGNER: &str = "example.com/custom-signer";
/// The label a cluster carries to opt in to custom certificates.
pub const OPT_IN_LABEL: &str = "custom-signer.example.com/enabled";
/// Name of the agent's Deployment and ServiceAccount.
pub const AGENT_NAME: &str = "custom-signer-agent";
/// Usages a custom certificate may have.
pub const ALLOWED_USAGES: &[&str] = &["digital signature", "key encipherment", "client auth"];

/// The add-on.
pub struct CustomSigner;

/// The subject template registered for [`SIGNER`].
pub fn custom_subject() -> Subject {
    Subject {
        user: "custom-signer-agent:{cluster-name}".into(),
        groups: vec![
            "custom-signer:{cluster-name}".into(),
            "custom-signer:agents".into(),
        ],
        organization_units: vec!["flotilla".into()],
    }
}

/// The custom-signer approval policy (see the module docs).
pub fn approve_custom(cluster: &Cluster, addon: &AddOn, csr: &Csr) -> CsrDecision {
    let deny = |reason: String| CsrDecision::Deny(reason);
    if cluster.labels.get(OPT_IN_LABEL).map(String::as_str) != Some("true") {
        return deny(format!(
            "cluster {} has not opted in to {SIGNER} certificates (label {OPT_IN_LABEL}=true)",
            cluster.name
        ));
    }
    let agent = format!("system:open-cluster-management:{}:", cluster.name);
    if !csr.username.starts_with(&agent) {
        return deny(format!(
            "requested by {:?}, not by cluster {}'s registration agent",
            csr.username, cluster.name
        ));
    }
    let want = expand_subject(&custom_subject(), &cluster.name, &addon.name);
    if csr.common_name != want.user {
        return deny(format!(
            "common name {:?} is not {:?}",
            csr.common_name, want.user
        ));
    }
    let mut have = csr.organizations.clone();
    let mut expected = want.groups.clone();
    have.sort();
    expected.sort();
    if have != expected {
        return deny(format!(
            "organizations {:?} are not exactly {:?}",
            csr.organizations, want.groups
        ));
    }
    if csr.organizational_units != want.organization_units {
        return deny(format!(
            "organizational units {:?} are not {:?}",
            csr.organizational_units, want.organization_units
        ));
    }
    // OCM's registration agent puts the one DNS name `<addon>.addon.open-cluster-management.io`
    // in every add-on CSR; nothing else is allowed.
    let agent_san = format!("{}.addon.open-cluster-management.io", addon.name);
    if csr.dns_names.iter().any(|n| *n != agent_san) {
        return deny(format!(
            "custom certificates carry no DNS names but {agent_san:?}, got {:?}",
            csr.dns_names
        ));
    }
    if let Some(u) = csr.usages.iter().find(|u| !ALLOWED_USAGES.contains(&u.as_str())) {
        return deny(format!("usage {u:?} is not allowed ({ALLOWED_USAGES:?})"));
    }
    if !csr.usages.iter().any(|u| u == "client auth") {
        return deny("the certificate must allow client auth".to_owned());
    }
    CsrDecision::Approve
}

impl Addon for CustomSigner {
    fn describe() -> AddonOptions {
        AddonOptions {
            registrations: vec![
                Registration::KubeClient { subject: None },
                Registration::CustomSigner {
                    signer_name: SIGNER.into(),
                    subject: Some(custom_subject()),
                },
            ],
            health: HealthMode::DeploymentAvailability,
            supported_configs: Vec::new(),
            default_install_namespace: None,
        }
    }

    fn manifests(
        cluster: &Cluster,
        addon: &AddOn,
        _: &[ResolvedConfig],
    ) -> Result<Vec<Manifest>, AddonError> {
        let ns = addon.install_namespace.as_str();
        let pod_labels = labels([("app", AGENT_NAME)]);
        // The registration agent writes the signed certificate to this secret.
        let cert_secret = format!("{}-{}-client-cert", addon.name, SIGNER.replace('/', "-"));
        let deployment = agent_deployment(
            AGENT_NAME,
            ns,
            pod_labels,
            1,
            PodSpec {
                service_account_name: Some(AGENT_NAME.to_owned()),
                containers: vec![Container {
                    name: AGENT_NAME.to_owned(),
                    image: Some("quay.io/open-cluster-management/addon-examples:latest".to_owned()),
                    args: Some(vec![
                        "/helloworld".to_owned(),
                        "agent".to_owned(),
                        format!("--cluster-name={}", cluster.name),
                        "--client-cert=/var/run/custom/tls.crt".to_owned(),
                    ]),
                    volume_mounts: Some(vec![VolumeMount {
                        name: "custom-cert".to_owned(),
                        mount_path: "/var/run/custom".to_owned(),
                        read_only: Some(true),
                        ..VolumeMount::default()
                    }]),
                    ..Container::default()
                }],
                volumes: Some(vec![Volume {
                    name: "custom-cert".to_owned(),
                    secret: Some(SecretVolumeSource {
                        secret_name: Some(cert_secret),
                        ..SecretVolumeSource::default()
                    }),
                    ..Volume::default()
                }]),
                ..PodSpec::default()
            },
        );
        Ok(vec![
            to_manifest(&ServiceAccount {
                metadata: meta(AGENT_NAME, ns),
                ..ServiceAccount::default()
            })?,
            to_manifest(&deployment)?,
        ])
    }

    fn approve_csr(cluster: &Cluster, addon: &AddOn, csr: &Csr) -> CsrDecision {
        match csr.signer_name.as_str() {
            KUBE_CLIENT_SIGNER => default_approve(&Self::describe(), cluster, addon, csr),
            SIGNER => approve_custom(cluster, addon, csr),
            other => CsrDecision::Deny(format!("add-on {} registers no signer {other:?}", addon.name)),
        }
    }
}

flotilla_addon_sdk::export_addon!(CustomSigner);
