//! Add-on registration on the hub, as pure rules: what goes into a ManagedClusterAddOn's
//! `status.registrations` and `status.namespace`, which add-on CSRs the host lets the plugin
//! approve, how the hub signs custom-signer CSRs, and which `hub-permissions` objects it applies.
//!
//! ```text
//!  plugin describe() registrations ──expand {cluster-name}/{addon-name}, default subject──▶
//!      check identities (own add-on on own cluster only) ──▶ status.registrations
//!  add-on CSR ──host checks (labels, requester, add-on enabled, signer, subject)──▶ plugin
//!      approve-csr ──both yes──▶ Approved AutoApprovedByHubCSRApprovingController
//!      custom signer + approved ──▶ certificate signed with the AddOnPlugin's CA (24 h)
//!  plugin hub-permissions() ──Roles/RoleBindings in the cluster namespace, bound to the
//!      add-on's own identities──▶ applied with the add-on as owner, RegistrationApplied
//! ```
//!
//! Every rule fails closed: anything that could let one add-on act as another add-on, another
//! cluster's agent or a privileged identity is refused with a reason a person can act on
//! (OCM facts: ocm-reference §5 "Registration").

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use flotilla_api::addon::consts::{
    DEFAULT_INSTALL_NAMESPACE, KUBE_APISERVER_CLIENT_SIGNER, managed_cluster_addon as mca,
};
use flotilla_api::addon::v1alpha1::{RegistrationConfig, Subject};

use crate::conditions::{FALSE, NewCondition, TRUE};

/// Placeholder for the cluster name in plugin subjects.
pub const CLUSTER_PLACEHOLDER: &str = "{cluster-name}";
/// Placeholder for the add-on name in plugin subjects.
pub const ADDON_PLACEHOLDER: &str = "{addon-name}";
/// Lifetime of certificates the hub signs for custom signers (OCM's `DefaultSignerWithExpiry`
/// as used by add-ons: 24 h).
pub const CUSTOM_SIGNER_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// Prefix of every Kubernetes built-in signer; never a custom registration's.
pub const KUBERNETES_SIGNER_PREFIX: &str = "kubernetes.io/";

/// One credential a plugin declared in `describe()`, before expansion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Declared {
    /// A hub kube-apiserver client certificate; `None` is the OCM default subject.
    KubeClient(Option<Subject>),
    /// A certificate from the add-on's own signer.
    CustomSigner {
        /// `<domain>/<path>`.
        signer_name: String,
        /// The subject; `None` is the OCM default subject.
        subject: Option<Subject>,
    },
}

/// The OCM default agent user of `addon` on `cluster` (agent name = add-on name).
pub fn default_user(cluster: &str, addon: &str) -> String {
    format!("{}:agent:{addon}", cluster_addon_group(cluster, addon))
}

/// The per-cluster add-on group `system:open-cluster-management:cluster:<cluster>:addon:<addon>`.
pub fn cluster_addon_group(cluster: &str, addon: &str) -> String {
    format!("system:open-cluster-management:cluster:{cluster}:addon:{addon}")
}

/// The add-on group `system:open-cluster-management:addon:<addon>`.
pub fn addon_group(addon: &str) -> String {
    format!("system:open-cluster-management:addon:{addon}")
}

/// OCM's default subject: the default user and both default groups.
pub fn default_subject(cluster: &str, addon: &str) -> Subject {
    Subject {
        user: default_user(cluster, addon),
        groups: vec![cluster_addon_group(cluster, addon), addon_group(addon)],
        organization_units: Vec::new(),
    }
}

/// `template` with `{cluster-name}` and `{addon-name}` replaced.
pub fn expand(template: &Subject, cluster: &str, addon: &str) -> Subject {
    let expand = |s: &String| {
        s.replace(CLUSTER_PLACEHOLDER, cluster)
            .replace(ADDON_PLACEHOLDER, addon)
    };
    Subject {
        user: expand(&template.user),
        groups: template.groups.iter().map(expand).collect(),
        organization_units: template.organization_units.iter().map(expand).collect(),
    }
}

/// Why a plugin's registrations were not written to `status.registrations`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("registration refused: {0}")]
pub struct Refused(pub String);

/// `status.registrations` of `addon` on `cluster` from the plugin's declarations: placeholders
/// expanded, the default subject where none is given, every identity checked by
/// [`check_identity`].
pub fn registrations(
    declared: &[Declared],
    cluster: &str,
    addon: &str,
) -> Result<Vec<RegistrationConfig>, Refused> {
    declared
        .iter()
        .map(|d| {
            let (signer, template, kube) = match d {
                Declared::KubeClient(subject) => (KUBE_APISERVER_CLIENT_SIGNER, subject, true),
                Declared::CustomSigner { signer_name, subject } => {
                    if signer_name.starts_with(KUBERNETES_SIGNER_PREFIX) || !signer_name.contains('/') {
                        return Err(Refused(format!(
                            "custom signer {signer_name:?} is not a `<domain>/<path>` signer of the add-on's own"
                        )));
                    }
                    (signer_name.as_str(), subject, false)
                }
            };
            let subject = match template {
                Some(t) if !t.user.is_empty() => expand(t, cluster, addon),
                Some(t) => Subject {
                    user: default_user(cluster, addon),
                    ..expand(t, cluster, addon)
                },
                None => default_subject(cluster, addon),
            };
            let subject = if kube && subject.groups.is_empty() {
                Subject {
                    groups: default_subject(cluster, addon).groups,
                    ..subject
                }
            } else {
                subject
            };
            check_identity(&subject, kube, cluster, addon).map_err(Refused)?;
            Ok(RegistrationConfig {
                signer_name: signer.to_owned(),
                subject,
            })
        })
        .collect()
}

/// Whether `user` is an agent user of `addon` on `cluster`:
/// `system:open-cluster-management:cluster:<cluster>:addon:<addon>:agent:<agent>`, `<agent>`
/// non-empty without `:`.
fn is_own_agent_user(user: &str, cluster: &str, addon: &str) -> bool {
    let prefix = format!("{}:agent:", cluster_addon_group(cluster, addon));
    user.strip_prefix(&prefix)
        .is_some_and(|agent| !agent.is_empty() && !agent.contains(':'))
}

/// Checks that a (expanded) subject names only `addon`'s own identities on `cluster`.
///
/// A kube-client certificate authenticates to the hub, so its user must be an agent user of
/// this add-on on this cluster and its groups the add-on's default groups. A custom-signer
/// certificate is not trusted by the hub's apiserver, but it may still not claim a `system:`
/// identity other than the add-on's own (another cluster's or add-on's, `system:masters`,
/// bootstrap groups...). Unexpanded placeholders are refused.
pub fn check_identity(
    subject: &Subject,
    kube_client: bool,
    cluster: &str,
    addon: &str,
) -> Result<(), String> {
    let own_groups = [cluster_addon_group(cluster, addon), addon_group(addon)];
    let texts = std::iter::once(&subject.user)
        .chain(&subject.groups)
        .chain(&subject.organization_units);
    for text in texts {
        if text.contains('{') || text.contains('}') || text.chars().any(char::is_control) {
            return Err(format!(
                "subject value {text:?} has an unknown placeholder or control characters"
            ));
        }
    }
    if subject.user.is_empty() {
        return Err("the subject has no user".to_owned());
    }
    let own_user = is_own_agent_user(&subject.user, cluster, addon);
    if kube_client && !own_user {
        return Err(format!(
            "kube-client user {:?} is not an agent of add-on {addon} on cluster {cluster} ({}:agent:<agent>)",
            subject.user,
            cluster_addon_group(cluster, addon)
        ));
    }
    if !own_user && subject.user.starts_with("system:") {
        return Err(format!(
            "user {:?} is a privileged or foreign identity (another cluster's or add-on's, or a system user)",
            subject.user
        ));
    }
    for group in &subject.groups {
        let own = own_groups.contains(group);
        if (kube_client || group.starts_with("system:")) && !own {
            return Err(format!(
                "group {group:?} is not one of add-on {addon}'s own groups on cluster {cluster} {own_groups:?}"
            ));
        }
    }
    Ok(())
}

/// `status.namespace`: the install namespace the agent and its credentials live in, with the
/// precedence the hub renders manifests with (OCM: default < install-namespace annotation, here
/// v1alpha1 `spec.installNamespace` < `AddOnDeploymentConfig.agentInstallNamespace`); the
/// plugin's default sits just above the built-in default.
pub fn install_namespace(
    deployment_config: Option<&str>,
    spec_install_namespace: &str,
    plugin_default: Option<&str>,
) -> String {
    [deployment_config, Some(spec_install_namespace), plugin_default]
        .into_iter()
        .flatten()
        .find(|ns| !ns.is_empty())
        .unwrap_or(DEFAULT_INSTALL_NAMESPACE)
        .to_owned()
}

/// An add-on CSR as the host's checks see it.
#[derive(Clone, Debug, Default)]
pub struct CsrFacts<'a> {
    /// `open-cluster-management.io/cluster-name` label.
    pub cluster_label: Option<&'a str>,
    /// `open-cluster-management.io/addon-name` label.
    pub addon_label: Option<&'a str>,
    /// `spec.username`: who created the CSR.
    pub username: &'a str,
    /// `spec.groups` of the creator.
    pub groups: &'a [String],
    /// `spec.signerName`.
    pub signer_name: &'a str,
    /// Subject CN of the request.
    pub common_name: &'a str,
    /// Subject O of the request.
    pub organizations: &'a [String],
    /// Subject OU of the request.
    pub organizational_units: &'a [String],
}

/// Why the host does not let an add-on CSR be approved; the `Display` goes into an Event.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CsrRefusal {
    /// No cluster-name or addon-name label.
    #[error("the CSR lacks the open-cluster-management.io/cluster-name or addon-name label")]
    Unlabelled,
    /// Created with a bootstrap identity.
    #[error("requested by bootstrap identity {0:?}; add-on CSRs come from an accepted cluster's agent")]
    BootstrapRequester(String),
    /// The creator is not the registration agent of the labelled cluster.
    #[error(
        "requested by {username:?}, not by cluster {cluster}'s registration agent (system:open-cluster-management:{cluster}:<agent>)"
    )]
    RequesterNotClusterAgent {
        /// `spec.username`.
        username: String,
        /// The cluster label.
        cluster: String,
    },
    /// No ManagedClusterAddOn (or it is being deleted, or its plugin is unknown).
    #[error("add-on {addon} is not enabled on cluster {cluster}")]
    AddonNotEnabled {
        /// The add-on label.
        addon: String,
        /// The cluster label.
        cluster: String,
    },
    /// A Kubernetes signer requested for a custom registration's subject.
    #[error("signer {0:?} is a Kubernetes signer but the subject is the add-on's custom registration's")]
    KubeSignerForCustom(String),
    /// The add-on registered no credential for the signer.
    #[error("add-on {addon} registered no credential for signer {signer:?}")]
    SignerNotDeclared {
        /// The add-on.
        addon: String,
        /// The requested signer.
        signer: String,
    },
    /// The request's subject is not the registration's.
    #[error("subject {requested} is not the registration's {registered}")]
    SubjectMismatch {
        /// The requested subject, as `(CN …, O […], OU […])`.
        requested: String,
        /// The registered subject, same form.
        registered: String,
    },
}

fn same_set(a: &[String], b: &[String]) -> bool {
    a.iter().collect::<BTreeSet<_>>() == b.iter().collect::<BTreeSet<_>>()
}

fn subject_matches(csr: &CsrFacts<'_>, subject: &Subject) -> bool {
    csr.common_name == subject.user
        && same_set(csr.organizations, &subject.groups)
        && same_set(csr.organizational_units, &subject.organization_units)
}

/// The host's checks on an add-on CSR before the plugin is asked. `registrations` are the
/// add-on's registrations on the labelled cluster as the hub computes them from its plugin
/// ([`registrations`]), never its `status.registrations`, which the cluster's own agent may
/// write; `None` when the add-on is not enabled there (no ManagedClusterAddOn, being deleted,
/// or no plugin). Returns the registration the CSR is for.
pub fn check_csr<'r>(
    csr: &CsrFacts<'_>,
    registrations: Option<&'r [RegistrationConfig]>,
) -> Result<&'r RegistrationConfig, CsrRefusal> {
    let (Some(cluster), Some(addon)) = (csr.cluster_label, csr.addon_label) else {
        return Err(CsrRefusal::Unlabelled);
    };
    if csr.username.starts_with("system:bootstrap:")
        || csr.groups.iter().any(|g| g.starts_with("system:bootstrappers"))
    {
        return Err(CsrRefusal::BootstrapRequester(csr.username.to_owned()));
    }
    let agent = csr
        .username
        .strip_prefix(&format!("system:open-cluster-management:{cluster}:"))
        .filter(|agent| !agent.is_empty() && !agent.contains(':'));
    let cluster_group = format!("system:open-cluster-management:{cluster}");
    if agent.is_none() || !csr.groups.contains(&cluster_group) {
        return Err(CsrRefusal::RequesterNotClusterAgent {
            username: csr.username.to_owned(),
            cluster: cluster.to_owned(),
        });
    }
    let Some(registrations) = registrations else {
        return Err(CsrRefusal::AddonNotEnabled {
            addon: addon.to_owned(),
            cluster: cluster.to_owned(),
        });
    };
    if csr.signer_name.starts_with(KUBERNETES_SIGNER_PREFIX)
        && registrations
            .iter()
            .any(|r| r.signer_name != KUBE_APISERVER_CLIENT_SIGNER && subject_matches(csr, &r.subject))
    {
        return Err(CsrRefusal::KubeSignerForCustom(csr.signer_name.to_owned()));
    }
    let registration = registrations
        .iter()
        .find(|r| r.signer_name == csr.signer_name)
        .filter(|r| {
            // A stored custom registration naming a Kubernetes signer is never honoured.
            r.signer_name == KUBE_APISERVER_CLIENT_SIGNER
                || !r.signer_name.starts_with(KUBERNETES_SIGNER_PREFIX)
        })
        .ok_or_else(|| CsrRefusal::SignerNotDeclared {
            addon: addon.to_owned(),
            signer: csr.signer_name.to_owned(),
        })?;
    if !subject_matches(csr, &registration.subject) {
        let show = |cn: &str, o: &[String], ou: &[String]| format!("(CN {cn:?}, O {o:?}, OU {ou:?})");
        return Err(CsrRefusal::SubjectMismatch {
            requested: show(csr.common_name, csr.organizations, csr.organizational_units),
            registered: show(
                &registration.subject.user,
                &registration.subject.groups,
                &registration.subject.organization_units,
            ),
        });
    }
    Ok(registration)
}

/// `RegistrationApplied` True `NilRegistration`: the add-on registers nothing.
pub fn nil_registration() -> NewCondition<'static> {
    NewCondition {
        type_: mca::CONDITION_REGISTRATION_APPLIED,
        status: TRUE,
        reason: mca::REASON_NIL_REGISTRATION,
        message: "Registration of the addon agent is configured".into(),
        observed_generation: None,
    }
}

/// `RegistrationApplied` True `SetPermissionApplied`.
pub fn permission_applied() -> NewCondition<'static> {
    NewCondition {
        type_: mca::CONDITION_REGISTRATION_APPLIED,
        status: TRUE,
        reason: mca::REASON_SET_PERMISSION_APPLIED,
        message: "Registration of the addon agent is configured".into(),
        observed_generation: None,
    }
}

/// `RegistrationApplied` False `SetPermissionFailed` with `message`.
pub fn permission_failed(message: String) -> NewCondition<'static> {
    NewCondition {
        type_: mca::CONDITION_REGISTRATION_APPLIED,
        status: FALSE,
        reason: mca::REASON_SET_PERMISSION_FAILED,
        message,
        observed_generation: None,
    }
}

/// `RegistrationApplied` False `PermissionConfigPending` with `message`.
pub fn permission_pending(message: String) -> NewCondition<'static> {
    NewCondition {
        type_: mca::CONDITION_REGISTRATION_APPLIED,
        status: FALSE,
        reason: mca::REASON_PERMISSION_CONFIG_PENDING,
        message,
        observed_generation: None,
    }
}

/// Why a custom-signer certificate could not be signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The CA secret's certificate or key is unusable.
    #[error("CA: {0}")]
    Ca(String),
    /// The CSR's request is unusable.
    #[error("request: {0}")]
    Request(String),
    /// Building or signing the certificate failed.
    #[error("sign: {0}")]
    Sign(String),
}

/// A client certificate for `request_pem` signed by the CA (`ca_cert_pem`, ECDSA P-256
/// `ca_key_pem`, PKCS#8 or SEC1), valid from `now` (5 minutes back, for clock skew) for
/// `lifetime`: the request's subject and key, key usages digital signature + key encipherment,
/// extended usage client auth, not a CA. Returns the PEM.
pub fn sign_client_certificate(
    request_pem: &[u8],
    ca_cert_pem: &[u8],
    ca_key_pem: &[u8],
    now: SystemTime,
    lifetime: Duration,
) -> Result<String, SignError> {
    use der::pem::LineEnding;
    use der::{Decode, DecodePem, EncodePem};
    use p256::ecdsa::{DerSignature, SigningKey};
    use p256::pkcs8::DecodePrivateKey;
    use x509_cert::builder::{Builder, CertificateBuilder};
    use x509_cert::request::CertReq;
    use x509_cert::time::Validity;

    let ca = x509_cert::Certificate::load_pem_chain(ca_cert_pem)
        .ok()
        .and_then(|c| c.into_iter().next())
        .ok_or_else(|| SignError::Ca("tls.crt holds no PEM certificate".into()))?;
    let key_text = std::str::from_utf8(ca_key_pem).map_err(|e| SignError::Ca(format!("tls.key: {e}")))?;
    let key = SigningKey::from_pkcs8_pem(key_text)
        .or_else(|_| p256::SecretKey::from_sec1_pem(key_text).map(SigningKey::from))
        .map_err(|e| SignError::Ca(format!("tls.key is not an ECDSA P-256 key (PKCS#8 or SEC1): {e}")))?;
    let request = CertReq::from_pem(request_pem)
        .or_else(|_| CertReq::from_der(request_pem))
        .map_err(|e| SignError::Request(e.to_string()))?;
    let not_before = now.checked_sub(Duration::from_secs(300)).unwrap_or(now);
    let time = |t: SystemTime| x509_cert::time::Time::try_from(t).map_err(|e| SignError::Sign(e.to_string()));
    let validity = Validity::new(time(not_before)?, time(now + lifetime)?);
    let serial = serial_number(request_pem, now)?;
    let profile = ClientLeaf {
        issuer: ca.tbs_certificate().subject().clone(),
        subject: request.info.subject.clone(),
    };
    let builder = CertificateBuilder::new(profile, serial, validity, request.info.public_key.clone())
        .map_err(|e| SignError::Sign(e.to_string()))?;
    let certificate = builder
        .build::<_, DerSignature>(&key)
        .map_err(|e| SignError::Sign(e.to_string()))?;
    certificate
        .to_pem(LineEnding::LF)
        .map_err(|e| SignError::Sign(e.to_string()))
}

/// A positive 128-bit serial: SHA-256 of the request (which holds a fresh public key) and the
/// signing time, so serials never repeat for one CA without a random source in this crate.
fn serial_number(
    request: &[u8],
    now: SystemTime,
) -> Result<x509_cert::serial_number::SerialNumber, SignError> {
    use sha2::Digest as _;
    let nanos = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let digest = sha2::Sha256::new()
        .chain_update(request)
        .chain_update(nanos.to_be_bytes())
        .finalize();
    let mut bytes = [0_u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    // Positive and without a leading zero octet.
    bytes[0] = (bytes[0] & 0x7f) | 0x40;
    x509_cert::serial_number::SerialNumber::new(&bytes).map_err(|e| SignError::Sign(e.to_string()))
}

/// The x509-cert builder profile of an add-on client certificate issued by a CA.
struct ClientLeaf {
    issuer: x509_cert::name::Name,
    subject: x509_cert::name::Name,
}

impl x509_cert::builder::profile::BuilderProfile for ClientLeaf {
    fn get_issuer(&self, _subject: &x509_cert::name::Name) -> x509_cert::name::Name {
        self.issuer.clone()
    }

    fn get_subject(&self) -> x509_cert::name::Name {
        self.subject.clone()
    }

    fn build_extensions(
        &self,
        _spk: x509_cert::spki::SubjectPublicKeyInfoRef<'_>,
        _issuer_spk: x509_cert::spki::SubjectPublicKeyInfoRef<'_>,
        tbs: &x509_cert::TbsCertificate,
    ) -> x509_cert::builder::Result<Vec<x509_cert::ext::Extension>> {
        use x509_cert::ext::ToExtension;
        use x509_cert::ext::pkix::{BasicConstraints, ExtendedKeyUsage, KeyUsage, KeyUsages};
        let not_ca = BasicConstraints {
            ca: false,
            path_len_constraint: None,
        }
        .to_extension(tbs.subject(), &[])?;
        let mut extensions = vec![not_ca];
        extensions.push(
            KeyUsage(KeyUsages::DigitalSignature | KeyUsages::KeyEncipherment)
                .to_extension(tbs.subject(), &extensions)?,
        );
        extensions.push(
            ExtendedKeyUsage(vec![const_oid::db::rfc5280::ID_KP_CLIENT_AUTH])
                .to_extension(tbs.subject(), &extensions)?,
        );
        Ok(extensions)
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn subject(user: &str, groups: &[&str], units: &[&str]) -> Subject {
        Subject {
            user: user.into(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            organization_units: units.iter().map(|u| (*u).to_owned()).collect(),
        }
    }

    fn custom(signer: &str, s: Option<Subject>) -> Declared {
        Declared::CustomSigner {
            signer_name: signer.into(),
            subject: s,
        }
    }

    #[test]
    fn a_kube_client_registration_without_subject_gets_ocms_default_subject() {
        let got = registrations(&[Declared::KubeClient(None)], "c1", "hello").unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].signer_name, "kubernetes.io/kube-apiserver-client");
        assert_eq!(
            got[0].subject.user,
            "system:open-cluster-management:cluster:c1:addon:hello:agent:hello"
        );
        assert_eq!(
            got[0].subject.groups,
            [
                "system:open-cluster-management:cluster:c1:addon:hello",
                "system:open-cluster-management:addon:hello"
            ]
        );
    }

    #[test]
    fn placeholders_are_expanded_per_cluster_and_addon() {
        let declared = custom(
            "example.com/signer",
            Some(subject(
                "agent:{cluster-name}",
                &["team:{addon-name}"],
                &["{cluster-name}-ou"],
            )),
        );
        let got = registrations(&[declared], "c2", "cs").unwrap();
        assert_eq!(got[0].signer_name, "example.com/signer");
        assert_eq!(got[0].subject, subject("agent:c2", &["team:cs"], &["c2-ou"]));
    }

    #[rstest]
    #[case::another_clusters_agent(Declared::KubeClient(Some(subject(
        "system:open-cluster-management:cluster:c2:addon:hello:agent:hello", &[], &[]))))]
    #[case::another_addons_group(Declared::KubeClient(Some(subject(
        "system:open-cluster-management:cluster:{cluster-name}:addon:{addon-name}:agent:x",
        &["system:open-cluster-management:cluster:{cluster-name}:addon:other"], &[]))))]
    #[case::a_plain_user_for_the_hub(Declared::KubeClient(Some(subject("admin", &[], &[]))))]
    #[case::system_masters(custom("example.com/s", Some(subject("me", &["system:masters"], &[]))))]
    #[case::system_admin(custom("example.com/s", Some(subject("system:admin", &[], &[]))))]
    #[case::another_clusters_registration_agent(custom("example.com/s", Some(subject(
        "system:open-cluster-management:c2:agent", &[], &[]))))]
    #[case::the_cluster_agents_group(custom("example.com/s", Some(subject(
        "me", &["system:open-cluster-management:{cluster-name}"], &[]))))]
    #[case::bootstrap_group(custom("example.com/s", Some(subject("me", &["system:bootstrappers"], &[]))))]
    #[case::a_kubernetes_signer_as_custom(custom("kubernetes.io/kube-apiserver-client", None))]
    #[case::an_unknown_placeholder(custom("example.com/s", Some(subject("{namespace}", &[], &[]))))]
    fn foreign_or_privileged_identities_are_refused(#[case] declared: Declared) {
        let refused = registrations(&[declared], "c1", "hello").unwrap_err();
        assert!(
            refused.to_string().starts_with("registration refused: "),
            "{refused}"
        );
    }

    #[rstest]
    #[case::default(None, "", None, "open-cluster-management-agent-addon")]
    #[case::plugin_default(None, "", Some("plugin-ns"), "plugin-ns")]
    #[case::install_namespace_over_plugin(None, "spec-ns", Some("plugin-ns"), "spec-ns")]
    #[case::deployment_config_over_all(Some("adc-ns"), "spec-ns", Some("plugin-ns"), "adc-ns")]
    #[case::empty_deployment_config_ignored(Some(""), "spec-ns", None, "spec-ns")]
    fn the_install_namespace_follows_ocms_precedence(
        #[case] adc: Option<&str>,
        #[case] spec: &str,
        #[case] plugin: Option<&str>,
        #[case] want: &str,
    ) {
        assert_eq!(install_namespace(adc, spec, plugin), want);
    }

    /// A CSR as cluster c1's agent makes it for add-on `hello`'s default kube-client subject.
    struct Forged {
        cluster: Option<&'static str>,
        addon: Option<&'static str>,
        username: String,
        groups: Vec<String>,
        signer: String,
        cn: String,
        orgs: Vec<String>,
    }

    impl Forged {
        fn good() -> Self {
            let s = default_subject("c1", "hello");
            Self {
                cluster: Some("c1"),
                addon: Some("hello"),
                username: "system:open-cluster-management:c1:agent1".into(),
                groups: vec![
                    "system:open-cluster-management:c1".into(),
                    "system:authenticated".into(),
                ],
                signer: KUBE_APISERVER_CLIENT_SIGNER.into(),
                cn: s.user,
                orgs: s.groups,
            }
        }
        fn facts(&self) -> CsrFacts<'_> {
            CsrFacts {
                cluster_label: self.cluster,
                addon_label: self.addon,
                username: &self.username,
                groups: &self.groups,
                signer_name: &self.signer,
                common_name: &self.cn,
                organizations: &self.orgs,
                organizational_units: &[],
            }
        }
    }

    fn hello_registrations() -> Vec<RegistrationConfig> {
        registrations(
            &[
                Declared::KubeClient(None),
                custom(
                    "example.com/s",
                    Some(subject("custom:{cluster-name}", &["custom"], &[])),
                ),
            ],
            "c1",
            "hello",
        )
        .unwrap()
    }

    #[test]
    fn the_agents_own_csr_for_a_declared_registration_passes() {
        let regs = hello_registrations();
        let forged = Forged::good();
        assert_eq!(
            check_csr(&forged.facts(), Some(&regs)).unwrap().signer_name,
            KUBE_APISERVER_CLIENT_SIGNER
        );
        let custom = Forged {
            signer: "example.com/s".into(),
            cn: "custom:c1".into(),
            orgs: vec!["custom".into()],
            ..Forged::good()
        };
        assert_eq!(
            check_csr(&custom.facts(), Some(&regs)).unwrap().signer_name,
            "example.com/s"
        );
    }

    #[rstest]
    #[case::no_cluster_label(Forged { cluster: None, ..Forged::good() }, "lacks")]
    #[case::another_clusters_label(Forged { cluster: Some("c2"), ..Forged::good() }, "not by cluster c2's registration agent")]
    #[case::a_prefix_cluster(Forged { username: "system:open-cluster-management:c10:agent1".into(), ..Forged::good() }, "not by cluster c1's")]
    #[case::bootstrap_requester(Forged { username: "system:bootstrap:abcdef".into(), groups: vec!["system:bootstrappers".into(), "system:bootstrappers:managedcluster".into()], ..Forged::good() }, "bootstrap identity")]
    #[case::bootstrap_service_account(Forged { username: "system:serviceaccount:open-cluster-management:agent-registration-bootstrap".into(), ..Forged::good() }, "not by cluster c1's")]
    #[case::another_addons_subject(Forged { cn: default_user("c1", "other"), orgs: default_subject("c1", "other").groups, ..Forged::good() }, "is not the registration's")]
    #[case::another_clusters_subject(Forged { cn: default_user("c2", "hello"), orgs: default_subject("c2", "hello").groups, ..Forged::good() }, "is not the registration's")]
    #[case::an_extra_group(Forged { orgs: vec![default_subject("c1","hello").groups[0].clone(), "system:masters".into()], ..Forged::good() }, "is not the registration's")]
    #[case::kube_signer_for_custom(Forged { cn: "custom:c1".into(), orgs: vec!["custom".into()], ..Forged::good() }, "Kubernetes signer")]
    #[case::undeclared_signer(Forged { signer: "example.com/other".into(), ..Forged::good() }, "registered no credential")]
    #[case::another_kube_signer(Forged { signer: "kubernetes.io/kubelet-serving".into(), ..Forged::good() }, "registered no credential")]
    fn forged_addon_csrs_are_refused_with_their_reason(#[case] forged: Forged, #[case] reason: &str) {
        let regs = hello_registrations();
        let refusal = check_csr(&forged.facts(), Some(&regs)).unwrap_err();
        assert!(refusal.to_string().contains(reason), "{refusal}");
    }

    #[test]
    fn a_csr_for_an_addon_not_enabled_on_the_cluster_is_refused() {
        let refusal = check_csr(&Forged::good().facts(), None).unwrap_err();
        assert_eq!(
            refusal,
            CsrRefusal::AddonNotEnabled {
                addon: "hello".into(),
                cluster: "c1".into()
            }
        );
    }

    #[test]
    fn custom_signer_certificates_carry_the_request_subject_and_last_24_hours() {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "custom CA");
        let ca = params.self_signed(&ca_key).unwrap();
        let request = crate::x509::client_request("custom:c1", &["g1", "g2"], &["ou"], &[]).unwrap();
        let now = SystemTime::now();
        let pem = sign_client_certificate(
            request.request_pem.as_bytes(),
            ca.pem().as_bytes(),
            ca_key.serialize_pem().as_bytes(),
            now,
            CUSTOM_SIGNER_LIFETIME,
        )
        .unwrap();
        let info = crate::x509::parse_certificate(pem.as_bytes()).unwrap();
        assert_eq!(info.subject.common_name, "custom:c1");
        assert_eq!(info.subject.organizations, ["g1", "g2"]);
        assert_eq!(info.subject.organizational_units, ["ou"]);
        let life = info.not_after.duration_since(now).unwrap().as_secs();
        assert!((CUSTOM_SIGNER_LIFETIME.as_secs() - 1..=CUSTOM_SIGNER_LIFETIME.as_secs()).contains(&life));
        let (_, parsed) = x509_parser_issuer(pem.as_bytes());
        assert_eq!(parsed, "CN=custom CA");
    }

    #[test]
    fn a_ca_without_an_ecdsa_key_is_a_clear_error() {
        let request = crate::x509::client_request("u", &[], &[], &[]).unwrap();
        let error = sign_client_certificate(
            request.request_pem.as_bytes(),
            b"",
            b"",
            SystemTime::now(),
            CUSTOM_SIGNER_LIFETIME,
        )
        .unwrap_err();
        assert!(error.to_string().starts_with("CA: "), "{error}");
    }

    /// The issuer of a PEM certificate, as an RFC 4514 string.
    fn x509_parser_issuer(pem: &[u8]) -> ((), String) {
        use der::DecodePem;
        let cert = x509_cert::Certificate::from_pem(pem).unwrap();
        ((), cert.tbs_certificate().issuer().to_string())
    }
}
