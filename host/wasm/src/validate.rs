//! What the host checks before and after a plugin runs.
//!
//! At load (in this order, cheapest first):
//! 1. the bytes are WebAssembly and a *component*, not a core module (`check_header`);
//! 2. the component exports `flotilla:addon/hooks@<v>` with `<v>` inside [`SUPPORTED_WIT`], and
//!    imports nothing beyond the add-on world and WASI 0.2 (`check_component_type`);
//! 3. the linker type-checks every import and export (`instantiate_pre`, in `runtime.rs`);
//! 4. `describe` runs under the plugin's limits and its answer obeys the registration rules
//!    ([`check_options`]).
//!
//! After each call: output caps and the shape of returned objects (`parse_objects`,
//! `check_hub_permissions`).
//!
//! Registration rules. A plugin's `describe` is the same for every cluster, so subjects are
//! templates with the placeholders `{cluster-name}` and `{addon-name}` that the host expands per
//! cluster ([`expand_subject`]). Any subject string in the `system:` namespace must be one of the
//! OCM default identities *written with the placeholders*; a literal cluster name there would let
//! one cluster's agent act as another, and any other `system:` name (`system:masters`) would be an
//! escalation. Kube-client subjects may only use the default identities. Custom signers may not be
//! `kubernetes.io/` (or `k8s.io/`) signers: those are signed by Kubernetes itself, bypassing the
//! add-on's own CA.

use semver::{Version, VersionReq};
use serde_json::Value;
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::types::{AddonOptions, ConfigType, HealthMode, ProbeField, Registration, Subject};
use crate::{Error, Hook, Limits, Result, ValidationError};

/// The contract versions this host runs.
pub const SUPPORTED_WIT: &str = ">=0.1.0, <0.2.0";
/// The WIT package every plugin implements.
pub const WIT_PACKAGE: &str = "flotilla:addon";
/// The signer of hub kube-apiserver client certificates.
pub const KUBE_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// The install namespace when neither the plugin nor a config sets one.
pub const DEFAULT_INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
/// Placeholder for the managed cluster's name in subject templates.
pub const CLUSTER_PLACEHOLDER: &str = "{cluster-name}";
/// Placeholder for the add-on's name in subject templates.
pub const ADDON_PLACEHOLDER: &str = "{addon-name}";

/// Interfaces of the contract a plugin may import (`hooks` is exported, never imported).
const HOST_INTERFACES: &[&str] = &["host", "types"];
/// WASI 0.2 packages the host links (with nothing granted). Anything else is refused.
const WASI_PACKAGES: &[&str] = &[
    "wasi:cli",
    "wasi:clocks",
    "wasi:filesystem",
    "wasi:io",
    "wasi:random",
    "wasi:sockets",
];
/// Caps on `describe` output, far above any real add-on.
const MAX_REGISTRATIONS: usize = 16;
const MAX_PROBE_FIELDS: usize = 64;
const MAX_CONFIG_TYPES: usize = 32;
const MAX_NAME_LEN: usize = 253;

/// The window as a requirement. Fails closed: if the constant ever stopped parsing, every plugin
/// would be refused rather than every version accepted (the unit test `supported_window_parses`
/// guards the constant).
fn supported() -> Result<VersionReq, ValidationError> {
    VersionReq::parse(SUPPORTED_WIT).map_err(|_| ValidationError::UnsupportedWitVersion {
        found: "(host window unparsable)".to_owned(),
        supported: SUPPORTED_WIT.to_owned(),
    })
}

/// Refuses bytes that are not a WebAssembly component. The preamble is `\0asm`, a 16-bit version
/// and a 16-bit layer: layer 0 is a core module, layer 1 a component.
pub(crate) fn check_header(bytes: &[u8]) -> Result<(), ValidationError> {
    match bytes {
        [0x00, 0x61, 0x73, 0x6d, _, _, 0x01, 0x00, ..] => Ok(()),
        [0x00, 0x61, 0x73, 0x6d, _, _, 0x00, 0x00, ..] => Err(ValidationError::NotAComponent),
        _ => Err(ValidationError::NotWasm),
    }
}

/// Reads the contract version from the hooks export and refuses foreign imports. Returns the
/// version the component was built against.
pub(crate) fn check_component_type(
    engine: &Engine,
    component: &Component,
) -> Result<Version, ValidationError> {
    let ty = component.component_type();
    let exports: Vec<String> = ty.exports(engine).map(|(name, _)| name.to_owned()).collect();
    let imports: Vec<String> = ty.imports(engine).map(|(name, _)| name.to_owned()).collect();
    check_names(&exports, &imports)
}

/// The name-level checks of [`check_component_type`], on the top-level export and import names
/// of a component (as read by wasmtime after compiling, or by [`crate::inspect`] without).
pub fn check_names(exports: &[String], imports: &[String]) -> Result<Version, ValidationError> {
    let window = supported()?;
    let hooks_prefix = format!("{WIT_PACKAGE}/hooks@");

    let found = exports
        .iter()
        .find_map(|name| name.strip_prefix(&hooks_prefix))
        .ok_or_else(|| ValidationError::MissingHooks {
            exports: exports.to_vec(),
        })?;
    let version = Version::parse(found).map_err(|_| ValidationError::UnsupportedWitVersion {
        found: found.to_owned(),
        supported: SUPPORTED_WIT.to_owned(),
    })?;
    if !window.matches(&version) {
        return Err(ValidationError::UnsupportedWitVersion {
            found: version.to_string(),
            supported: SUPPORTED_WIT.to_owned(),
        });
    }

    let mut forbidden = Vec::new();
    for name in imports {
        let (package, import_version) = split_import(name);
        if let Some(interface) = package.strip_prefix(&format!("{WIT_PACKAGE}/")) {
            match import_version.and_then(|v| Version::parse(v).ok()) {
                Some(v) if window.matches(&v) => {}
                _ => {
                    return Err(ValidationError::UnsupportedWitVersion {
                        found: name.to_owned(),
                        supported: SUPPORTED_WIT.to_owned(),
                    });
                }
            }
            if !HOST_INTERFACES.contains(&interface) {
                forbidden.push(name.to_owned());
            }
        } else if !is_wasi_p2(package, import_version) {
            forbidden.push(name.to_owned());
        }
    }
    if forbidden.is_empty() {
        Ok(version)
    } else {
        Err(ValidationError::ForbiddenImports { imports: forbidden })
    }
}

/// `wasi:cli/stdout@0.2.6` → (`wasi:cli/stdout`, Some(`0.2.6`)).
fn split_import(name: &str) -> (&str, Option<&str>) {
    match name.split_once('@') {
        Some((pkg, v)) => (pkg, Some(v)),
        None => (name, None),
    }
}

fn is_wasi_p2(interface: &str, version: Option<&str>) -> bool {
    let Some((package, _iface)) = interface.split_once('/') else {
        return false;
    };
    let p2 = version
        .and_then(|v| Version::parse(v).ok())
        .is_some_and(|v| v.major == 0 && v.minor == 2);
    p2 && WASI_PACKAGES.contains(&package)
}

/// The OCM default subject for `addon`'s agent on `cluster` (agent name = add-on name, the
/// spoke's fallback), already expanded.
pub fn default_subject(cluster: &str, addon: &str) -> Subject {
    expand_subject(&default_subject_template(), cluster, addon)
}

/// The OCM default subject with placeholders: user
/// `system:open-cluster-management:cluster:{cluster-name}:addon:{addon-name}:agent:{addon-name}`,
/// groups the per-cluster add-on group and the add-on group.
pub fn default_subject_template() -> Subject {
    Subject {
        user: format!("{}{ADDON_PLACEHOLDER}", default_user_prefix()),
        groups: default_groups(),
        organization_units: Vec::new(),
    }
}

fn default_user_prefix() -> String {
    format!("system:open-cluster-management:cluster:{CLUSTER_PLACEHOLDER}:addon:{ADDON_PLACEHOLDER}:agent:")
}

fn default_groups() -> Vec<String> {
    vec![
        format!("system:open-cluster-management:cluster:{CLUSTER_PLACEHOLDER}:addon:{ADDON_PLACEHOLDER}"),
        format!("system:open-cluster-management:addon:{ADDON_PLACEHOLDER}"),
    ]
}

/// Replaces `{cluster-name}` and `{addon-name}` in every string of `template`.
pub fn expand_subject(template: &Subject, cluster: &str, addon: &str) -> Subject {
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

/// Checks `describe` output. See the module docs for the registration rules.
pub fn check_options(options: &AddonOptions) -> Result<(), ValidationError> {
    let refuse = |reason: String| Err(ValidationError::InvalidDescribe { reason });

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
            Registration::KubeClient(kc) => {
                kube_clients += 1;
                if let Some(subject) = &kc.subject {
                    check_kube_client_subject(subject).or_else(refuse)?;
                }
            }
            Registration::CustomSigner(cs) => {
                check_signer_name(&cs.signer_name).or_else(refuse)?;
                if signers.contains(&cs.signer_name.as_str()) {
                    return refuse(format!("custom signer {:?} registered twice", cs.signer_name));
                }
                signers.push(&cs.signer_name);
                if let Some(subject) = &cs.subject {
                    check_custom_subject(subject).or_else(refuse)?;
                }
            }
        }
    }
    if kube_clients > 1 {
        return refuse(format!("{kube_clients} kube-client registrations, at most one"));
    }
    if let HealthMode::Customized(fields) = &options.health {
        check_probe_fields(fields).or_else(refuse)?;
    }
    check_config_types(&options.supported_configs).or_else(refuse)?;
    if let Some(ns) = &options.default_install_namespace
        && !is_dns_label(ns)
    {
        return refuse(format!(
            "default install namespace {ns:?} is not a DNS-1123 label"
        ));
    }
    Ok(())
}

fn check_kube_client_subject(s: &Subject) -> Result<(), String> {
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

fn check_custom_subject(s: &Subject) -> Result<(), String> {
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
fn check_placeholders(s: &Subject) -> Result<(), String> {
    for text in std::iter::once(&s.user)
        .chain(&s.groups)
        .chain(&s.organization_units)
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

fn check_signer_name(name: &str) -> Result<(), String> {
    let Some((domain, path)) = name.split_once('/') else {
        return Err(format!("signer name {name:?} is not `<domain>/<path>`"));
    };
    if domain.is_empty() || path.is_empty() || name.len() > 571 {
        return Err(format!("signer name {name:?} is not `<domain>/<path>`"));
    }
    let reserved = ["kubernetes.io", "k8s.io"];
    if reserved
        .iter()
        .any(|r| domain == *r || domain.ends_with(&format!(".{r}")))
    {
        return Err(format!(
            "custom signer {name:?} is a Kubernetes signer; use a kube-client registration for \
             {KUBE_CLIENT_SIGNER} and a signer of the add-on's own for custom certificates"
        ));
    }
    Ok(())
}

fn check_probe_fields(fields: &[ProbeField]) -> Result<(), String> {
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
        for rule in &f.rules {
            if let crate::types::FeedbackRule::JsonPaths(paths) = rule
                && let Some(p) = paths
                    .iter()
                    .find(|p| p.name.is_empty() || !p.path.starts_with('.'))
            {
                return Err(format!(
                    "json path {p:?} needs a name and a path starting with `.`"
                ));
            }
        }
    }
    Ok(())
}

fn check_config_types(types: &[ConfigType]) -> Result<(), String> {
    if types.len() > MAX_CONFIG_TYPES {
        return Err(format!(
            "{} supported config types, at most {MAX_CONFIG_TYPES}",
            types.len()
        ));
    }
    for t in types {
        if t.resource.is_empty() || !is_dns_label(&t.resource) {
            return Err(format!(
                "config type {}/{} needs a lower-case plural resource",
                t.group, t.resource
            ));
        }
    }
    Ok(())
}

fn is_dns_label(s: &str) -> bool {
    flotilla_core::names::dns_label_problem(s).is_none()
}

/// Enforces the output caps on returned strings.
pub(crate) fn check_output_size<'a>(
    hook: Hook,
    limits: &Limits,
    strings: impl IntoIterator<Item = &'a str>,
) -> Result<()> {
    let total: usize = strings.into_iter().map(str::len).fold(0, usize::saturating_add);
    if total > limits.max_output_bytes {
        return Err(Error::OutputTooLarge {
            hook,
            what: "bytes",
            actual: total,
            limit: limits.max_output_bytes,
        });
    }
    Ok(())
}

/// Applies the count and byte caps, then parses each string as a Kubernetes object: a JSON object
/// with string `apiVersion`, `kind` and non-empty `metadata.name`.
pub(crate) fn parse_objects(hook: Hook, limits: &Limits, raw: Vec<String>) -> Result<Vec<Value>> {
    if raw.len() > limits.max_manifests {
        return Err(Error::OutputTooLarge {
            hook,
            what: "manifests",
            actual: raw.len(),
            limit: limits.max_manifests,
        });
    }
    check_output_size(hook, limits, raw.iter().map(String::as_str))?;
    raw.iter()
        .enumerate()
        .map(|(i, text)| {
            let invalid = |reason: String| Error::InvalidOutput {
                hook,
                reason: format!("object {i}: {reason}"),
            };
            let value: Value = serde_json::from_str(text).map_err(|e| invalid(format!("not JSON: {e}")))?;
            let field = |path: &[&str]| {
                path.iter()
                    .try_fold(&value, |v, k| v.get(k))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            };
            if !value.is_object() {
                return Err(invalid("not a JSON object".into()));
            }
            if field(&["apiVersion"]).is_empty() || field(&["kind"]).is_empty() {
                return Err(invalid("missing apiVersion or kind".into()));
            }
            if field(&["metadata", "name"]).is_empty() {
                return Err(invalid("missing metadata.name".into()));
            }
            Ok(value)
        })
        .collect()
}

/// Hub permissions may only be `rbac.authorization.k8s.io/v1` Roles and RoleBindings in the
/// cluster namespace (`metadata.namespace` unset or equal to the cluster name). The hub applies
/// them with its own identity, so anything else would let a plugin act outside its cluster.
pub(crate) fn check_hub_permissions(hook: Hook, cluster: &str, objects: &[Value]) -> Result<()> {
    for (i, o) in objects.iter().enumerate() {
        let invalid = |reason: String| Error::InvalidOutput {
            hook,
            reason: format!("object {i}: {reason}"),
        };
        let api_version = o.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = o.get("kind").and_then(Value::as_str).unwrap_or_default();
        if api_version != "rbac.authorization.k8s.io/v1" || !matches!(kind, "Role" | "RoleBinding") {
            return Err(invalid(format!(
                "{api_version} {kind} is not an rbac.authorization.k8s.io/v1 Role or RoleBinding"
            )));
        }
        match o.pointer("/metadata/namespace") {
            None | Some(Value::Null) => {}
            Some(Value::String(ns)) if ns == cluster => {}
            Some(other) => {
                return Err(invalid(format!(
                    "namespace {other} is not the cluster namespace {cluster:?}"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{CustomSignerRegistration, KubeClientRegistration};

    fn options(registrations: Vec<Registration>) -> AddonOptions {
        AddonOptions {
            registrations,
            health: HealthMode::Lease,
            supported_configs: Vec::new(),
            default_install_namespace: None,
        }
    }

    fn kube_client(subject: Option<Subject>) -> Registration {
        Registration::KubeClient(KubeClientRegistration { subject })
    }

    fn custom(signer: &str, subject: Option<Subject>) -> Registration {
        Registration::CustomSigner(CustomSignerRegistration {
            signer_name: signer.into(),
            subject,
        })
    }

    #[test]
    fn supported_window_parses() {
        assert!(VersionReq::parse(SUPPORTED_WIT).is_ok());
        let window = supported().unwrap();
        assert!(window.matches(&Version::new(0, 1, 7)));
        assert!(!window.matches(&Version::new(0, 2, 0)));
        assert!(!window.matches(&Version::new(0, 9, 0)));
    }

    #[test]
    fn default_and_templated_kube_client_subjects_are_accepted() {
        assert!(check_options(&options(vec![kube_client(None)])).is_ok());
        assert!(check_options(&options(vec![kube_client(Some(default_subject_template()))])).is_ok());
    }

    #[test]
    fn kube_client_subject_for_another_cluster_is_refused() {
        let mut s = default_subject_template();
        s.user = "system:open-cluster-management:cluster:other:addon:{addon-name}:agent:x".into();
        let err = check_options(&options(vec![kube_client(Some(s))])).unwrap_err();
        assert!(err.to_string().contains("not the add-on agent identity"), "{err}");

        let mut s = default_subject_template();
        s.groups.push("system:open-cluster-management:other".into());
        assert!(check_options(&options(vec![kube_client(Some(s))])).is_err());

        let mut s = default_subject_template();
        s.groups = vec!["system:masters".into()];
        assert!(check_options(&options(vec![kube_client(Some(s))])).is_err());
    }

    #[test]
    fn kubernetes_signers_are_refused_as_custom_signers() {
        for signer in [
            KUBE_CLIENT_SIGNER,
            "kubernetes.io/kubelet-serving",
            "beta.kubernetes.io/x",
            "k8s.io/x",
        ] {
            let err = check_options(&options(vec![custom(signer, None)])).unwrap_err();
            assert!(err.to_string().contains("Kubernetes signer"), "{signer}: {err}");
        }
        assert!(check_options(&options(vec![custom("example.com/signer", None)])).is_ok());
        assert!(check_options(&options(vec![custom("no-slash", None)])).is_err());
    }

    #[test]
    fn custom_signer_subjects_may_not_claim_system_identities() {
        let s = Subject {
            user: "system:admin".into(),
            groups: vec![],
            organization_units: vec![],
        };
        assert!(check_options(&options(vec![custom("example.com/s", Some(s))])).is_err());
        let s = Subject {
            user: "my-agent".into(),
            groups: vec!["system:masters".into()],
            organization_units: vec![],
        };
        assert!(check_options(&options(vec![custom("example.com/s", Some(s))])).is_err());
        let s = Subject {
            user: "my-agent".into(),
            groups: vec!["my-team".into()],
            organization_units: vec![],
        };
        assert!(check_options(&options(vec![custom("example.com/s", Some(s))])).is_ok());
    }

    #[test]
    fn unknown_placeholders_and_duplicate_registrations_are_refused() {
        let s = Subject {
            user: "agent-{cluster}".into(),
            groups: vec![],
            organization_units: vec![],
        };
        assert!(check_options(&options(vec![custom("example.com/s", Some(s))])).is_err());
        assert!(check_options(&options(vec![kube_client(None), kube_client(None)])).is_err());
        assert!(check_options(&options(vec![custom("a.io/s", None), custom("a.io/s", None)])).is_err());
    }

    #[test]
    fn subjects_expand_per_cluster() {
        let s = default_subject("c1", "hello");
        assert_eq!(
            s.user,
            "system:open-cluster-management:cluster:c1:addon:hello:agent:hello"
        );
        assert_eq!(
            s.groups,
            [
                "system:open-cluster-management:cluster:c1:addon:hello",
                "system:open-cluster-management:addon:hello"
            ]
        );
    }

    #[test]
    fn headers_distinguish_modules_from_components() {
        assert!(matches!(
            check_header(b"\0asm\x01\0\0\0"),
            Err(ValidationError::NotAComponent)
        ));
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
        assert!(matches!(check_header(b"hello"), Err(ValidationError::NotWasm)));
    }

    #[test]
    fn hub_permissions_must_stay_in_the_cluster_namespace() {
        let role = |ns: &str, kind: &str| {
            serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
                "metadata": {"name": "r", "namespace": ns}})
        };
        assert!(check_hub_permissions(Hook::HubPermissions, "c1", &[role("c1", "Role")]).is_ok());
        assert!(check_hub_permissions(Hook::HubPermissions, "c1", &[role("c2", "RoleBinding")]).is_err());
        assert!(check_hub_permissions(Hook::HubPermissions, "c1", &[role("c1", "ClusterRole")]).is_err());
    }

    #[test]
    fn objects_need_api_version_kind_and_name() {
        let limits = Limits::default();
        let ok = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}"#.to_owned();
        assert_eq!(
            parse_objects(Hook::Manifests, &limits, vec![ok])
                .map(|v| v.len())
                .ok(),
            Some(1)
        );
        for bad in [
            "[]",
            "{}",
            r#"{"apiVersion":"v1","kind":"ConfigMap"}"#,
            "not json",
        ] {
            assert!(matches!(
                parse_objects(Hook::Manifests, &limits, vec![bad.into()]),
                Err(Error::InvalidOutput { .. })
            ));
        }
    }
}
