//! The rules a plugin's `describe` answer must obey before the host loads it, on borrowed views
//! of the WIT records (the plugin host converts its generated types at the boundary).
//!
//! A plugin's `describe` is the same for every cluster, so subjects are templates with the
//! placeholders `{cluster-name}` and `{addon-name}` that the host expands per cluster. Any subject
//! string in the `system:` namespace must be one of the OCM default identities *written with the
//! placeholders*; a literal cluster name there would let one cluster's agent act as another, and
//! any other `system:` name (`system:masters`) would be an escalation. Kube-client subjects may
//! only use the default identities. Custom signers may not be `kubernetes.io/` (or `k8s.io/`)
//! signers: those are signed by Kubernetes itself, bypassing the add-on's own CA.

use flotilla_api::addon::consts::KUBE_APISERVER_CLIENT_SIGNER;

use crate::addon::registration::{ADDON_PLACEHOLDER, CLUSTER_PLACEHOLDER, cluster_addon_group};
use crate::names::dns_label_problem;

/// Caps on `describe` output, far above any real add-on.
pub const MAX_REGISTRATIONS: usize = 16;
/// Most probe fields a customized health mode may list.
pub const MAX_PROBE_FIELDS: usize = 64;
/// Most supported config types.
pub const MAX_CONFIG_TYPES: usize = 32;
/// Longest custom-signer user.
pub const MAX_NAME_LEN: usize = 253;
/// Longest signer name (a DNS subdomain, `/`, and a path as Kubernetes allows).
pub const MAX_SIGNER_NAME_LEN: usize = 571;

/// A WIT `subject`, borrowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubjectView<'a> {
    /// Certificate common name (the Kubernetes user).
    pub user: &'a str,
    /// Certificate organizations (the Kubernetes groups).
    pub groups: &'a [String],
    /// Certificate organizational units.
    pub organization_units: &'a [String],
}

/// A WIT `registration`, borrowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegistrationView<'a> {
    /// A hub kube-apiserver client certificate; `None` is the OCM default subject.
    KubeClient(Option<SubjectView<'a>>),
    /// A certificate from a custom signer.
    CustomSigner {
        /// `<domain>/<path>`.
        signer_name: &'a str,
        /// The subject; `None` is the OCM default subject.
        subject: Option<SubjectView<'a>>,
    },
}

/// A WIT `resource-identifier`, borrowed. Named and laid out as the record, so that its `Debug`
/// in a refusal reads as the record the plugin returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResourceIdentifier<'a> {
    /// API group; empty for the core group.
    pub group: &'a str,
    /// Plural resource.
    pub resource: &'a str,
    /// Object name.
    pub name: &'a str,
    /// Object namespace; empty for cluster-scoped objects.
    pub namespace: &'a str,
}

/// A WIT `json-path`, borrowed (`Debug` as the record's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsonPath<'a> {
    /// Name the value is reported under.
    pub name: &'a str,
    /// JSONPath into the object's `status`.
    pub path: &'a str,
}

/// A WIT `probe-field`, borrowed: the object and the JSONPaths of all its `json-paths` rules
/// (well-known-status rules carry nothing to check).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeFieldView<'a> {
    /// The probed object.
    pub resource: ResourceIdentifier<'a>,
    /// Every JSONPath rule's paths, in order.
    pub json_paths: Vec<JsonPath<'a>>,
}

/// A WIT `config-type`, borrowed (its default config is not checked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigTypeView<'a> {
    /// API group of the kind.
    pub group: &'a str,
    /// Plural resource of the kind.
    pub resource: &'a str,
}

/// A WIT `addon-options`, borrowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionsView<'a> {
    /// Credentials the agent requests on each cluster.
    pub registrations: Vec<RegistrationView<'a>>,
    /// The probe fields of a customized health mode; `None` for every other mode.
    pub probe_fields: Option<Vec<ProbeFieldView<'a>>>,
    /// Configuration kinds the add-on reads.
    pub supported_configs: Vec<ConfigTypeView<'a>>,
    /// Install namespace when nothing overrides it.
    pub default_install_namespace: Option<&'a str>,
}

/// Why a `describe` answer was refused, for people.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OptionsRefused(pub String);

/// The templated default user up to the agent name:
/// `system:open-cluster-management:cluster:{cluster-name}:addon:{addon-name}:agent:`.
pub fn default_user_prefix() -> String {
    format!(
        "{}:agent:",
        cluster_addon_group(CLUSTER_PLACEHOLDER, ADDON_PLACEHOLDER)
    )
}

/// The templated default groups: the per-cluster add-on group and the add-on group.
pub fn default_groups() -> Vec<String> {
    vec![
        cluster_addon_group(CLUSTER_PLACEHOLDER, ADDON_PLACEHOLDER),
        format!("system:open-cluster-management:addon:{ADDON_PLACEHOLDER}"),
    ]
}

/// Checks `describe` output. See the module docs for the registration rules.
pub fn check_options(options: &OptionsView<'_>) -> Result<(), OptionsRefused> {
    let refuse = |reason: String| Err(OptionsRefused(reason));

    if options.registrations.len() > MAX_REGISTRATIONS {
        return refuse(format!(
            "{} registrations, at most {MAX_REGISTRATIONS}",
            options.registrations.len()
        ));
    }
    let mut kube_clients = 0;
    let mut signers: Vec<&str> = Vec::new();
    for registration in &options.registrations {
        match registration {
            RegistrationView::KubeClient(subject) => {
                kube_clients += 1;
                if let Some(subject) = subject {
                    check_kube_client_subject(subject).or_else(refuse)?;
                }
            }
            RegistrationView::CustomSigner { signer_name, subject } => {
                check_signer_name(signer_name).or_else(refuse)?;
                if signers.contains(signer_name) {
                    return refuse(format!("custom signer {signer_name:?} registered twice"));
                }
                signers.push(signer_name);
                if let Some(subject) = subject {
                    check_custom_subject(subject).or_else(refuse)?;
                }
            }
        }
    }
    if kube_clients > 1 {
        return refuse(format!("{kube_clients} kube-client registrations, at most one"));
    }
    if let Some(fields) = &options.probe_fields {
        check_probe_fields(fields).or_else(refuse)?;
    }
    check_config_types(&options.supported_configs).or_else(refuse)?;
    if let Some(ns) = options.default_install_namespace
        && dns_label_problem(ns).is_some()
    {
        return refuse(format!(
            "default install namespace {ns:?} is not a DNS-1123 label"
        ));
    }
    Ok(())
}

/// A kube-client subject is the templated default user (any DNS-1123 agent name, or the add-on
/// name) with a subset of the templated default groups.
pub fn check_kube_client_subject(s: &SubjectView<'_>) -> Result<(), String> {
    check_placeholders(s)?;
    let prefix = default_user_prefix();
    let agent = s.user.strip_prefix(&prefix).ok_or_else(|| {
        format!(
            "kube-client user {:?} is not the add-on agent identity `{prefix}<agent>`",
            s.user
        )
    })?;
    let agent_ok = agent == ADDON_PLACEHOLDER
        || (!agent.is_empty()
            && agent
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.'));
    if !agent_ok {
        return Err(format!(
            "kube-client agent name {agent:?} must be a DNS-1123 name or {ADDON_PLACEHOLDER}"
        ));
    }
    let allowed = default_groups();
    if let Some(g) = s.groups.iter().find(|g| !allowed.contains(g)) {
        return Err(format!(
            "kube-client group {g:?} is not one of the add-on's default groups {allowed:?}"
        ));
    }
    Ok(())
}

/// A custom-signer subject may name anything outside `system:`; inside it, only the templated
/// default user prefix and groups.
pub fn check_custom_subject(s: &SubjectView<'_>) -> Result<(), String> {
    check_placeholders(s)?;
    if s.user.is_empty() || s.user.len() > MAX_NAME_LEN {
        return Err(format!(
            "custom-signer user {:?} must be 1..={MAX_NAME_LEN} bytes",
            s.user
        ));
    }
    let prefix = default_user_prefix();
    if s.user.starts_with("system:") && !s.user.starts_with(&prefix) {
        return Err(format!(
            "custom-signer user {:?} is a system identity other than `{prefix}<agent>`",
            s.user
        ));
    }
    let allowed = default_groups();
    if let Some(g) = s
        .groups
        .iter()
        .find(|g| g.starts_with("system:") && !allowed.contains(g))
    {
        return Err(format!(
            "custom-signer group {g:?} is a system group other than the add-on's {allowed:?}"
        ));
    }
    Ok(())
}

/// Every `{...}` in a subject must be a known placeholder, so that no literal cluster name hides
/// behind an unexpanded one.
pub fn check_placeholders(s: &SubjectView<'_>) -> Result<(), String> {
    for text in std::iter::once(s.user)
        .chain(s.groups.iter().map(String::as_str))
        .chain(s.organization_units.iter().map(String::as_str))
    {
        let stripped = text
            .replace(CLUSTER_PLACEHOLDER, "")
            .replace(ADDON_PLACEHOLDER, "");
        if stripped.contains('{') || stripped.contains('}') {
            return Err(format!(
                "subject {text:?} uses an unknown placeholder (known: {CLUSTER_PLACEHOLDER}, {ADDON_PLACEHOLDER})"
            ));
        }
        if text.chars().any(char::is_control) {
            return Err(format!("subject {text:?} contains control characters"));
        }
    }
    Ok(())
}

/// `<domain>/<path>`, and not a Kubernetes signer.
pub fn check_signer_name(name: &str) -> Result<(), String> {
    let Some((domain, path)) = name.split_once('/') else {
        return Err(format!("signer name {name:?} is not `<domain>/<path>`"));
    };
    if domain.is_empty() || path.is_empty() || name.len() > MAX_SIGNER_NAME_LEN {
        return Err(format!("signer name {name:?} is not `<domain>/<path>`"));
    }
    let reserved = ["kubernetes.io", "k8s.io"];
    if reserved
        .iter()
        .any(|r| domain == *r || domain.ends_with(&format!(".{r}")))
    {
        return Err(format!(
            "custom signer {name:?} is a Kubernetes signer; use a kube-client registration for \
             {KUBE_APISERVER_CLIENT_SIGNER} and a signer of the add-on's own for custom certificates"
        ));
    }
    Ok(())
}

/// At most [`MAX_PROBE_FIELDS`], each naming its object, each JSONPath named and rooted at `.`.
pub fn check_probe_fields(fields: &[ProbeFieldView<'_>]) -> Result<(), String> {
    if fields.len() > MAX_PROBE_FIELDS {
        return Err(format!(
            "{} probe fields, at most {MAX_PROBE_FIELDS}",
            fields.len()
        ));
    }
    for f in fields {
        if f.resource.resource.is_empty() || f.resource.name.is_empty() {
            return Err(format!(
                "probe field {:?} needs a resource and a name",
                f.resource
            ));
        }
        if let Some(p) = f
            .json_paths
            .iter()
            .find(|p| p.name.is_empty() || !p.path.starts_with('.'))
        {
            return Err(format!(
                "json path {p:?} needs a name and a path starting with `.`"
            ));
        }
    }
    Ok(())
}

/// At most [`MAX_CONFIG_TYPES`], each with a lower-case plural resource.
pub fn check_config_types(types: &[ConfigTypeView<'_>]) -> Result<(), String> {
    if types.len() > MAX_CONFIG_TYPES {
        return Err(format!(
            "{} supported config types, at most {MAX_CONFIG_TYPES}",
            types.len()
        ));
    }
    for t in types {
        if t.resource.is_empty() || dns_label_problem(t.resource).is_some() {
            return Err(format!(
                "config type {}/{} needs a lower-case plural resource",
                t.group, t.resource
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(registrations: Vec<RegistrationView<'_>>) -> OptionsView<'_> {
        OptionsView {
            registrations,
            probe_fields: None,
            supported_configs: Vec::new(),
            default_install_namespace: None,
        }
    }

    fn subject<'a>(user: &'a str, groups: &'a [String]) -> SubjectView<'a> {
        SubjectView {
            user,
            groups,
            organization_units: &[],
        }
    }

    fn custom<'a>(signer_name: &'a str, subject: Option<SubjectView<'a>>) -> RegistrationView<'a> {
        RegistrationView::CustomSigner { signer_name, subject }
    }

    #[test]
    fn default_and_templated_kube_client_subjects_are_accepted() {
        assert!(check_options(&options(vec![RegistrationView::KubeClient(None)])).is_ok());
        let user = format!("{}{ADDON_PLACEHOLDER}", default_user_prefix());
        let groups = default_groups();
        let templated = RegistrationView::KubeClient(Some(subject(&user, &groups)));
        assert!(check_options(&options(vec![templated])).is_ok());
    }

    #[test]
    fn kube_client_subject_for_another_cluster_is_refused() {
        let groups = default_groups();
        let other = "system:open-cluster-management:cluster:other:addon:{addon-name}:agent:x";
        let err = check_options(&options(vec![RegistrationView::KubeClient(Some(subject(
            other, &groups,
        )))]))
        .unwrap_err();
        assert!(err.0.contains("not the add-on agent identity"), "{err}");

        let user = format!("{}{ADDON_PLACEHOLDER}", default_user_prefix());
        let mut extra = default_groups();
        extra.push("system:open-cluster-management:other".into());
        let masters = vec!["system:masters".to_owned()];
        for groups in [&extra, &masters] {
            let kc = RegistrationView::KubeClient(Some(subject(&user, groups)));
            assert!(check_options(&options(vec![kc])).is_err(), "{groups:?}");
        }
    }

    #[test]
    fn kubernetes_signers_are_refused_as_custom_signers() {
        for signer in [
            KUBE_APISERVER_CLIENT_SIGNER,
            "kubernetes.io/kubelet-serving",
            "beta.kubernetes.io/x",
            "k8s.io/x",
        ] {
            let err = check_options(&options(vec![custom(signer, None)])).unwrap_err();
            assert!(err.0.contains("Kubernetes signer"), "{signer}: {err}");
        }
        assert!(check_options(&options(vec![custom("example.com/signer", None)])).is_ok());
        assert!(check_options(&options(vec![custom("no-slash", None)])).is_err());
    }

    #[test]
    fn custom_signer_subjects_may_not_claim_system_identities() {
        let none: Vec<String> = Vec::new();
        let masters = vec!["system:masters".to_owned()];
        let team = vec!["my-team".to_owned()];
        let check = |s| check_options(&options(vec![custom("example.com/s", Some(s))]));
        assert!(check(subject("system:admin", &none)).is_err());
        assert!(check(subject("my-agent", &masters)).is_err());
        assert!(check(subject("my-agent", &team)).is_ok());
    }

    #[test]
    fn unknown_placeholders_and_duplicate_registrations_are_refused() {
        let none: Vec<String> = Vec::new();
        let s = subject("agent-{cluster}", &none);
        assert!(check_options(&options(vec![custom("example.com/s", Some(s))])).is_err());
        let kc = RegistrationView::KubeClient(None);
        assert!(check_options(&options(vec![kc, kc])).is_err());
        assert!(check_options(&options(vec![custom("a.io/s", None), custom("a.io/s", None)])).is_err());
    }

    #[test]
    fn templated_defaults_are_the_expanded_defaults_with_placeholders() {
        use crate::addon::registration::default_subject;
        let d = default_subject(CLUSTER_PLACEHOLDER, ADDON_PLACEHOLDER);
        assert_eq!(d.user, format!("{}{ADDON_PLACEHOLDER}", default_user_prefix()));
        assert_eq!(d.groups, default_groups());
    }

    #[test]
    fn probe_fields_and_config_types_are_bounded_and_named() {
        let resource = ResourceIdentifier {
            group: "apps",
            resource: "deployments",
            name: "agent",
            namespace: "ns",
        };
        let field = |paths: Vec<JsonPath<'static>>| ProbeFieldView {
            resource,
            json_paths: paths,
        };
        let ok = JsonPath {
            name: "ready",
            path: ".readyReplicas",
        };
        assert!(check_probe_fields(&[field(vec![ok])]).is_ok());
        let err = check_probe_fields(&[field(vec![JsonPath { name: "x", path: "y" }])]).unwrap_err();
        assert_eq!(
            err,
            r#"json path JsonPath { name: "x", path: "y" } needs a name and a path starting with `.`"#
        );
        assert!(check_probe_fields(&vec![field(vec![]); MAX_PROBE_FIELDS + 1]).is_err());
        let config = |resource| ConfigTypeView { group: "g", resource };
        assert!(check_config_types(&[config("things")]).is_ok());
        assert!(check_config_types(&[config("Things")]).is_err());
        assert!(check_config_types(&[config("")]).is_err());
    }
}
