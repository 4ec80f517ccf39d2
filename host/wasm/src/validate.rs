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
//! After each call: the answer read once into the hub's types under the output caps
//! (`read_manifests`, `read_permissions`); callers check nothing again.
//!
//! Registration rules and output reading are pure and live in flotilla-core
//! ([`flotilla_core::addon::plugin_options`], [`flotilla_core::addon::plugin_output`]), where they
//! are fuzzed without wasmtime; here the generated types become their views and their errors
//! become this crate's, naming the hook.

use flotilla_core::addon::permissions::Permission;
use flotilla_core::addon::plugin_options::{
    self as options, ConfigTypeView, JsonPath, OptionsView, ProbeFieldView, RegistrationView,
    ResourceIdentifier, SubjectView,
};
use flotilla_core::addon::plugin_output::{self as output, OutputCaps, ReadOutputError};
use flotilla_core::addon::works::AgentManifest;
use semver::{Version, VersionReq};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::types::{AddonOptions, FeedbackRule, HealthMode, Registration, Subject};
use crate::{Error, Hook, Limits, Result, ValidationError};

pub use flotilla_api::addon::consts::KUBE_APISERVER_CLIENT_SIGNER as KUBE_CLIENT_SIGNER;
pub use flotilla_core::addon::registration::{ADDON_PLACEHOLDER, CLUSTER_PLACEHOLDER};

/// The contract versions this host runs.
pub const SUPPORTED_WIT: &str = ">=0.1.0, <0.2.0";
/// The WIT package every plugin implements.
pub const WIT_PACKAGE: &str = "flotilla:addon";
/// The install namespace when neither the plugin nor a config sets one.
pub const DEFAULT_INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";

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
        user: format!("{}{ADDON_PLACEHOLDER}", options::default_user_prefix()),
        groups: options::default_groups(),
        organization_units: Vec::new(),
    }
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

/// Checks `describe` output against [`options::check_options`].
pub fn check_options(answer: &AddonOptions) -> Result<(), ValidationError> {
    let probe_fields = match &answer.health {
        HealthMode::Customized(fields) => Some(fields.iter().map(probe_field_view).collect()),
        _ => None,
    };
    let view = OptionsView {
        registrations: answer.registrations.iter().map(registration_view).collect(),
        probe_fields,
        supported_configs: answer
            .supported_configs
            .iter()
            .map(|t| ConfigTypeView {
                group: &t.group,
                resource: &t.resource,
            })
            .collect(),
        default_install_namespace: answer.default_install_namespace.as_deref(),
    };
    options::check_options(&view).map_err(|refused| ValidationError::InvalidDescribe { reason: refused.0 })
}

fn subject_view(s: &Subject) -> SubjectView<'_> {
    SubjectView {
        user: &s.user,
        groups: &s.groups,
        organization_units: &s.organization_units,
    }
}

fn registration_view(r: &Registration) -> RegistrationView<'_> {
    match r {
        Registration::KubeClient(kc) => RegistrationView::KubeClient(kc.subject.as_ref().map(subject_view)),
        Registration::CustomSigner(cs) => RegistrationView::CustomSigner {
            signer_name: &cs.signer_name,
            subject: cs.subject.as_ref().map(subject_view),
        },
    }
}

fn probe_field_view(f: &crate::types::ProbeField) -> ProbeFieldView<'_> {
    let r = &f.resource;
    ProbeFieldView {
        resource: ResourceIdentifier {
            group: &r.group,
            resource: &r.resource,
            name: &r.name,
            namespace: &r.namespace,
        },
        json_paths: f
            .rules
            .iter()
            .flat_map(|rule| match rule {
                FeedbackRule::JsonPaths(paths) => paths.as_slice(),
                FeedbackRule::WellKnownStatus => &[],
            })
            .map(|p| JsonPath {
                name: &p.name,
                path: &p.path,
            })
            .collect(),
    }
}

/// The output caps of `limits`.
fn caps(limits: &Limits) -> OutputCaps {
    OutputCaps {
        max_bytes: limits.max_output_bytes,
        max_objects: limits.max_manifests,
    }
}

/// `hook`'s output refusal as this crate's error.
fn output_error(hook: Hook, e: ReadOutputError) -> Error {
    match e {
        ReadOutputError::TooLarge { what, actual, limit } => Error::OutputTooLarge {
            hook,
            what,
            actual,
            limit,
        },
        ReadOutputError::Invalid { reason } => Error::InvalidOutput { hook, reason },
    }
}

/// Enforces the output caps on returned strings ([`output::check_size`]).
pub(crate) fn check_output_size<'a>(
    hook: Hook,
    limits: &Limits,
    strings: impl IntoIterator<Item = &'a str>,
) -> Result<()> {
    output::check_size(limits.max_output_bytes, strings).map_err(|e| output_error(hook, e))
}

/// A `manifests` answer as agent manifests ([`output::read_manifests`]).
pub(crate) fn read_manifests(limits: &Limits, raw: &[String]) -> Result<Vec<AgentManifest>> {
    output::read_manifests(caps(limits), raw).map_err(|e| output_error(Hook::Manifests, e))
}

/// A `hub-permissions` answer as Roles and RoleBindings in `cluster`'s namespace
/// ([`output::read_permissions`]).
pub(crate) fn read_permissions(limits: &Limits, cluster: &str, raw: &[String]) -> Result<Vec<Permission>> {
    output::read_permissions(caps(limits), cluster, raw).map_err(|e| output_error(Hook::HubPermissions, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{
        CustomSignerRegistration, FeedbackRule, KubeClientRegistration, ProbeField,
        ResourceIdentifier as Resource,
    };

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

    // The rules themselves are tested in flotilla-core; these check the views at the boundary.

    #[test]
    fn describe_answers_reach_the_registration_rules_whole() {
        assert!(check_options(&options(vec![kube_client(None)])).is_ok());
        assert!(check_options(&options(vec![kube_client(Some(default_subject_template()))])).is_ok());

        let mut s = default_subject_template();
        s.user = "system:open-cluster-management:cluster:other:addon:{addon-name}:agent:x".into();
        let err = check_options(&options(vec![kube_client(Some(s))])).unwrap_err();
        assert!(matches!(err, ValidationError::InvalidDescribe { .. }), "{err}");
        assert!(err.to_string().contains("not the add-on agent identity"), "{err}");

        let mut s = default_subject_template();
        s.organization_units = vec!["{cluster}".into()];
        assert!(check_options(&options(vec![custom("example.com/s", Some(s))])).is_err());
        let err = check_options(&options(vec![custom(KUBE_CLIENT_SIGNER, None)])).unwrap_err();
        assert!(err.to_string().contains("Kubernetes signer"), "{err}");

        let mut o = options(vec![]);
        o.default_install_namespace = Some("Not_A_Label".into());
        assert!(check_options(&o).is_err());
    }

    #[test]
    fn probe_field_refusals_show_the_records_the_plugin_returned() {
        let resource = Resource {
            group: "apps".into(),
            resource: "deployments".into(),
            name: String::new(),
            namespace: "ns".into(),
        };
        let path = crate::types::JsonPath {
            name: "ready".into(),
            path: "readyReplicas".into(),
        };
        let probe = |resource: Resource, rules| {
            let mut o = options(vec![]);
            o.health = HealthMode::Customized(vec![ProbeField { resource, rules }]);
            check_options(&o).unwrap_err().to_string()
        };
        let err = probe(resource.clone(), vec![]);
        assert!(err.contains(&format!("probe field {resource:?} needs")), "{err}");
        let named = Resource {
            name: "agent".into(),
            ..resource
        };
        let rules = vec![
            FeedbackRule::WellKnownStatus,
            FeedbackRule::JsonPaths(vec![path.clone()]),
        ];
        let err = probe(named, rules);
        assert!(err.contains(&format!("json path {path:?} needs")), "{err}");
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
    fn output_refusals_name_the_hook() {
        let limits = Limits {
            max_manifests: 1,
            max_output_bytes: 64,
            ..Limits::default()
        };
        let ok = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}"#.to_owned();
        assert_eq!(
            read_manifests(&limits, std::slice::from_ref(&ok))
                .map(|v| v.len())
                .ok(),
            Some(1)
        );
        assert!(matches!(
            read_manifests(&limits, &[ok.clone(), ok.clone()]),
            Err(Error::OutputTooLarge {
                hook: Hook::Manifests,
                what: "manifests",
                actual: 2,
                limit: 1
            })
        ));
        let err = read_permissions(&limits, "c1", &["[]".into()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "hub-permissions returned invalid output: object 0: not a JSON object"
        );
        assert!(matches!(
            check_output_size(Hook::ApproveCsr, &limits, [&*"x".repeat(65)]),
            Err(Error::OutputTooLarge {
                hook: Hook::ApproveCsr,
                what: "bytes",
                actual: 65,
                limit: 64
            })
        ));
        let err = read_permissions(&limits, "c1", &[ok]).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidOutput { hook: Hook::HubPermissions, reason } if reason.contains("v1 ConfigMap is not")),
            "{err}"
        );
    }
}
