//! Fuzzes the hub's readers of what a sandboxed plugin returns
//! (`flotilla_core::addon::plugin_output`, `plugin_options`, and the health condition made from
//! a `probe-health` verdict). The first input byte picks the hook, the second the caps:
//!
//! ```text
//!  0 mod 4   manifests: the rest is one JSON string per line, read under the caps
//!  1 mod 4   hub-permissions: the first line is the cluster, then one JSON string per line
//!  2 mod 4   describe: registrations, probe fields and config types, one per line (below)
//!  3 mod 4   probe-health: the second byte the status, the rest the message
//! ```
//!
//! Properties: no panic; the same verdict twice. Objects: the caps hold exactly (more strings
//! than the count cap, else more bytes than the byte cap, is refused as such). Manifests are
//! accepted only when each line, read as untyped JSON, is an object with string `apiVersion`,
//! `kind` and non-empty `metadata.name`, without `generateName`, no object twice; and such lines
//! well within the caps are accepted, in order. Hub permissions pass exactly when each line is
//! such an object, an `rbac.authorization.k8s.io/v1` Role or RoleBinding whose namespace is
//! unset, null or the cluster, that reads as that type. Describe, as the rules define it: in an accepted answer a
//! kube-client subject is the templated default user (agent `{addon-name}` or `[A-Za-z0-9.-]+`)
//! with default groups only; a custom-signer subject names `system:` users and groups only
//! through the templated defaults; so once expanded for cluster `c1` and add-on `hello`, every
//! `system:` identity is that add-on's on that cluster, and no `{` or `}` is left. Accepted
//! custom signers are not under `kubernetes.io` or `k8s.io`; one kube-client at most, no signer
//! twice, at most 16 registrations. Health: only an `available` verdict gives `Available=True`,
//! the plugin's message is carried verbatim, and setting the condition again changes nothing.
//!
//! Describe lines (`,` separates list items, `|` the subject's user, groups and units):
//!
//! ```text
//!  <namespace or ->                       first line: default install namespace
//!  k [<user>|<groups>|<units>]           kube-client (default subject when none)
//!  c <signer> [<user>|<groups>|<units>]  custom signer
//!  p <resource>/<name> [<name>=<path>,..] probe field (health becomes customized)
//!  t <group>/<resource>                  supported config type
//! ```

#![no_main]

use flotilla_api::addon::consts::managed_cluster_addon as mca;
use flotilla_core::addon::health::{Verdict, probe_condition};
use flotilla_core::addon::permissions::{Permission, RBAC_V1};
use flotilla_core::addon::plugin_options::{
    self as options, ConfigTypeView, JsonPath, OptionsView, ProbeFieldView, RegistrationView,
    ResourceIdentifier, SubjectView,
};
use flotilla_core::addon::plugin_output::{self as output, OutputCaps, ReadOutputError};
use flotilla_core::addon::registration::{ADDON_PLACEHOLDER, CLUSTER_PLACEHOLDER};
use flotilla_core::conditions;
use k8s_openapi::jiff::Timestamp;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let [mode, knob, rest @ ..] = data else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match mode % 4 {
        0 => {
            let lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
            check_manifests(caps(*knob), &lines);
        }
        1 => {
            let mut lines = text.split('\n').map(str::to_owned);
            let cluster = lines.next().unwrap_or_default();
            let lines: Vec<String> = lines.collect();
            if read_objects(caps(*knob), &lines).is_ok() {
                check_hub_permissions(caps(*knob), &cluster, &lines);
            }
        }
        2 => check_describe(&text),
        _ => check_health(*knob, &text),
    }
});

/// Small caps, so that inputs fall on both sides: 0..=15 objects, 0..=480 bytes.
fn caps(knob: u8) -> OutputCaps {
    OutputCaps {
        max_objects: usize::from(knob & 0x0f),
        max_bytes: usize::from(knob >> 4) * 32,
    }
}

/// Whether untyped JSON holds a Kubernetes object as the hooks must return it.
fn is_object(text: &str) -> bool {
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    let text_at = |pointer: &str| value.pointer(pointer).and_then(Value::as_str);
    value.is_object()
        && text_at("/apiVersion").is_some_and(|s| !s.is_empty())
        && text_at("/kind").is_some_and(|s| !s.is_empty())
        && text_at("/metadata/name").is_some_and(|s| !s.is_empty())
}

fn read_objects(caps: OutputCaps, lines: &[String]) -> Result<Vec<Value>, ReadOutputError> {
    let first = output::parse_objects(caps, lines);
    let again = output::parse_objects(caps, lines);
    assert_eq!(first, again, "two readings differ");
    let bytes: usize = lines.iter().map(String::len).sum();
    if lines.len() > caps.max_objects {
        assert_eq!(
            first,
            Err(ReadOutputError::TooLarge {
                what: "manifests",
                actual: lines.len(),
                limit: caps.max_objects
            })
        );
    } else if bytes > caps.max_bytes {
        assert_eq!(
            first,
            Err(ReadOutputError::TooLarge {
                what: "bytes",
                actual: bytes,
                limit: caps.max_bytes
            })
        );
    } else {
        assert!(
            !matches!(first, Err(ReadOutputError::TooLarge { .. })),
            "refused within the caps: {first:?}"
        );
        let all = lines.iter().all(|l| is_object(l));
        assert_eq!(first.is_ok(), all, "{first:?}");
        if let Ok(objects) = &first {
            assert_eq!(objects.len(), lines.len());
        }
    }
    first
}

/// The caps as `read_objects` checks them: `Some(refusal)` when over one.
fn over_caps(caps: OutputCaps, lines: &[String]) -> Option<ReadOutputError> {
    let bytes: usize = lines.iter().map(String::len).sum();
    if lines.len() > caps.max_objects {
        return Some(ReadOutputError::TooLarge {
            what: "manifests",
            actual: lines.len(),
            limit: caps.max_objects,
        });
    }
    (bytes > caps.max_bytes).then_some(ReadOutputError::TooLarge {
        what: "bytes",
        actual: bytes,
        limit: caps.max_bytes,
    })
}

fn check_manifests(caps: OutputCaps, lines: &[String]) {
    let first = output::read_manifests(caps, lines);
    assert_eq!(first, output::read_manifests(caps, lines), "two readings differ");
    if let Some(refusal) = over_caps(caps, lines) {
        assert_eq!(first, Err(refusal));
        return;
    }
    let values: Vec<Option<Value>> = lines
        .iter()
        .map(|l| is_object(l).then(|| serde_json::from_str(l).unwrap()))
        .collect();
    let text = |v: &Value, p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut keys = std::collections::BTreeSet::new();
    let well_formed = values.iter().all(|v| {
        v.as_ref().is_some_and(|v| {
            let key = (
                text(v, "/apiVersion"),
                text(v, "/kind"),
                text(v, "/metadata/namespace"),
                text(v, "/metadata/name"),
            );
            text(v, "/metadata/generateName").is_empty() && keys.insert(key)
        })
    });
    match &first {
        Ok(manifests) => {
            assert!(well_formed, "accepted: {lines:?}");
            assert_eq!(manifests.len(), lines.len());
            for (manifest, value) in manifests.iter().zip(&values) {
                assert_eq!(Some(&manifest.object), value.as_ref());
            }
        }
        // Re-encoding as Go does may grow an object up to six times (`<` is `\u003c`).
        Err(e) => {
            let bytes: usize = lines.iter().map(String::len).sum();
            assert!(!(well_formed && bytes * 8 <= caps.max_bytes), "refused: {e:?}");
        }
    }
}

fn check_hub_permissions(caps: OutputCaps, cluster: &str, lines: &[String]) {
    let first = output::read_permissions(caps, cluster, lines);
    assert_eq!(first, output::read_permissions(caps, cluster, lines));
    let confined = lines.iter().all(|line| {
        let Ok(o) = serde_json::from_str::<Value>(line) else {
            return false;
        };
        let namespace_ok = match o.pointer("/metadata/namespace") {
            None | Some(Value::Null) => true,
            Some(ns) => ns.as_str() == Some(cluster),
        };
        let typed = match o["kind"].as_str() {
            Some("Role") => serde_json::from_value::<k8s_openapi::api::rbac::v1::Role>(o.clone()).is_ok(),
            Some("RoleBinding") => {
                serde_json::from_value::<k8s_openapi::api::rbac::v1::RoleBinding>(o.clone()).is_ok()
            }
            _ => false,
        };
        o["apiVersion"].as_str() == Some(RBAC_V1) && namespace_ok && typed
    });
    assert_eq!(first.is_ok(), confined, "{first:?}");
    if let Ok(permissions) = &first {
        let kinds: Vec<&str> = permissions.iter().map(Permission::kind).collect();
        let written: Vec<String> = lines
            .iter()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["kind"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(kinds, written, "each object keeps its kind, in order");
    }
}

// === describe ===

struct Subject {
    user: String,
    groups: Vec<String>,
    units: Vec<String>,
}

enum Registration {
    KubeClient(Option<Subject>),
    CustomSigner(String, Option<Subject>),
}

fn list(text: &str) -> Vec<String> {
    if text.is_empty() {
        Vec::new()
    } else {
        text.split(',').map(str::to_owned).collect()
    }
}

fn subject(text: Option<&str>) -> Option<Subject> {
    let mut parts = text?.splitn(3, '|');
    Some(Subject {
        user: parts.next().unwrap_or_default().to_owned(),
        groups: list(parts.next().unwrap_or_default()),
        units: list(parts.next().unwrap_or_default()),
    })
}

fn view(s: &Subject) -> SubjectView<'_> {
    SubjectView {
        user: &s.user,
        groups: &s.groups,
        organization_units: &s.units,
    }
}

fn expand(s: &str) -> String {
    s.replace(CLUSTER_PLACEHOLDER, "c1")
        .replace(ADDON_PLACEHOLDER, "hello")
}

fn check_describe(text: &str) {
    let mut lines = text.split('\n');
    let namespace = lines.next().filter(|n| *n != "-");
    let mut registrations = Vec::new();
    let mut probes: Option<Vec<(&str, &str, Vec<(&str, &str)>)>> = None;
    let mut configs = Vec::new();
    for line in lines {
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        let rest = Some(rest).filter(|r| !r.is_empty());
        match kind {
            "k" => registrations.push(Registration::KubeClient(subject(rest))),
            "c" => {
                let (signer, s) = match rest.and_then(|r| r.split_once(' ')) {
                    Some((signer, s)) => (signer, Some(s)),
                    None => (rest.unwrap_or_default(), None),
                };
                registrations.push(Registration::CustomSigner(signer.to_owned(), subject(s)));
            }
            "p" => {
                let rest = rest.unwrap_or_default();
                let (object, paths) = rest.split_once(' ').unwrap_or((rest, ""));
                let (resource, name) = object.split_once('/').unwrap_or((object, ""));
                let paths = paths
                    .split(',')
                    .filter(|p| !p.is_empty())
                    .map(|p| p.split_once('=').unwrap_or((p, "")))
                    .collect();
                probes.get_or_insert_default().push((resource, name, paths));
            }
            "t" => {
                let rest = rest.unwrap_or_default();
                configs.push(rest.split_once('/').unwrap_or(("", rest)));
            }
            _ => {}
        }
    }
    let answer = OptionsView {
        registrations: registrations
            .iter()
            .map(|r| match r {
                Registration::KubeClient(s) => RegistrationView::KubeClient(s.as_ref().map(view)),
                Registration::CustomSigner(signer_name, s) => RegistrationView::CustomSigner {
                    signer_name,
                    subject: s.as_ref().map(view),
                },
            })
            .collect(),
        probe_fields: probes.as_ref().map(|fields| {
            fields
                .iter()
                .map(|(resource, name, paths)| ProbeFieldView {
                    resource: ResourceIdentifier {
                        group: "apps",
                        resource,
                        name,
                        namespace: "",
                    },
                    json_paths: paths.iter().map(|(name, path)| JsonPath { name, path }).collect(),
                })
                .collect()
        }),
        supported_configs: configs
            .iter()
            .map(|(group, resource)| ConfigTypeView { group, resource })
            .collect(),
        default_install_namespace: namespace,
    };
    let first = options::check_options(&answer);
    assert_eq!(first, options::check_options(&answer), "two verdicts differ");
    if first.is_err() {
        return;
    }

    assert!(registrations.len() <= options::MAX_REGISTRATIONS);
    let kube_clients = registrations
        .iter()
        .filter(|r| matches!(r, Registration::KubeClient(_)))
        .count();
    assert!(kube_clients <= 1, "{kube_clients} kube-clients accepted");
    let prefix = options::default_user_prefix();
    let defaults = options::default_groups();
    let mut signers = Vec::new();
    for r in &registrations {
        let s = match r {
            Registration::KubeClient(s) => {
                if let Some(s) = s {
                    let agent = s
                        .user
                        .strip_prefix(&prefix)
                        .expect("a kube-client user is the templated default user");
                    assert!(
                        agent == ADDON_PLACEHOLDER
                            || (!agent.is_empty()
                                && agent
                                    .bytes()
                                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')),
                        "kube-client agent {agent:?}"
                    );
                    assert!(
                        s.groups.iter().all(|g| defaults.contains(g)),
                        "kube-client groups {:?}",
                        s.groups
                    );
                }
                s
            }
            Registration::CustomSigner(signer, s) => {
                let (domain, path) = signer.split_once('/').expect("a signer is <domain>/<path>");
                assert!(!domain.is_empty() && !path.is_empty());
                for reserved in ["kubernetes.io", "k8s.io"] {
                    assert!(
                        domain != reserved && !domain.ends_with(&format!(".{reserved}")),
                        "custom signer {signer:?} accepted"
                    );
                }
                assert!(!signers.contains(signer), "signer {signer:?} twice");
                signers.push(signer.clone());
                s
            }
        };
        let Some(s) = s else {
            continue;
        };
        // Expanded for one cluster and add-on, every `system:` identity is theirs.
        let own_user = expand(&prefix);
        let own_groups: Vec<String> = defaults.iter().map(|g| expand(g)).collect();
        let user = expand(&s.user);
        assert!(
            !user.starts_with("system:") || user.starts_with(&own_user),
            "user {:?} names another identity",
            s.user
        );
        for g in s.groups.iter().map(|g| expand(g)) {
            assert!(
                !g.starts_with("system:") || own_groups.contains(&g),
                "group {g:?} names another identity"
            );
        }
        for text in std::iter::once(&user)
            .chain(&s.groups)
            .chain(&s.units)
            .map(|t| expand(t))
        {
            assert!(
                !text.contains(['{', '}']) && !text.chars().any(char::is_control),
                "{text:?} left unexpanded or with control characters"
            );
        }
    }
}

// === probe-health ===

fn check_health(knob: u8, message: &str) {
    // The caps as the host checks a health message, small enough to be crossed.
    let max_bytes = usize::from(knob >> 2) * 8;
    let sized = output::check_size(max_bytes, [message]);
    assert_eq!(sized.is_err(), message.len() > max_bytes, "{sized:?}");
    if sized.is_err() {
        return;
    }
    // The plugin's status as the add-on manager turns it into a verdict.
    let verdict = match knob % 3 {
        0 => Verdict::Available,
        1 => Verdict::Unavailable(message.to_owned()),
        _ => Verdict::Unknown(format!("probe-health gave no verdict: {message}")),
    };
    let condition = probe_condition("hello", verdict.clone());
    assert_eq!(condition.type_, mca::CONDITION_AVAILABLE);
    match verdict {
        Verdict::Available => assert_eq!(
            (condition.status, condition.reason),
            (conditions::TRUE, mca::REASON_PROBE_AVAILABLE)
        ),
        Verdict::Unavailable(_) => {
            assert_eq!(condition.status, conditions::FALSE);
            assert!(condition.message.ends_with(message));
        }
        Verdict::Unknown(why) => {
            assert_eq!(condition.status, conditions::UNKNOWN);
            assert_eq!(condition.message, why);
        }
    }
    let now = Timestamp::UNIX_EPOCH;
    let mut list = Vec::new();
    assert!(conditions::set(&mut list, condition.clone(), now));
    assert!(
        !conditions::set(&mut list, condition, now),
        "setting the same condition again changed it"
    );
    assert_eq!(list.len(), 1);
}
