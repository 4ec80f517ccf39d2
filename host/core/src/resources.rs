//! What identifies a manifest ([`ResourceKey`]), and the plural resource of a kind, for the few places that must name a resource without asking
//! the apiserver that serves it: orphaning rules written on the hub for objects that live on a
//! managed cluster, and config files handed to `flotilla plugin run`. Where the serving
//! apiserver can be asked (configs on the hub), its discovery answer is used instead.
//!
//! Built-in kinds are named here as the apiserver's discovery names them; other kinds follow
//! the English rules custom resource definitions use by convention (kubebuilder's): a vowel
//! before a final `y` keeps it (`Gateway` → `gateways`). Apimachinery's own guess
//! (`UnsafeGuessKindToResource`) turns every final `y` into `ies` (`gatewaies`), a resource no
//! apiserver serves, so a rule written with it never matches.

use serde_json::Value;

/// The identity of a manifest in a ManifestWork or a plugin's output: two manifests with the
/// same key are the same object to the cluster they are applied to. Ordered, so it keys maps.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceKey {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.namespace`, empty for a cluster-scoped object (or one that sets none).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
}

impl ResourceKey {
    /// The key of a JSON object; `None` unless `apiVersion`, `kind` and `metadata.name` are
    /// non-empty strings.
    pub fn of(object: &Value) -> Option<Self> {
        let text = |pointer: &str| {
            object
                .pointer(pointer)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        Some(Self {
            api_version: text("/apiVersion")?.to_owned(),
            kind: text("/kind")?.to_owned(),
            namespace: text("/metadata/namespace").unwrap_or_default().to_owned(),
            name: text("/metadata/name")?.to_owned(),
        })
    }

    /// The API group (empty for the core group) and version of `apiVersion`.
    pub fn group_version(&self) -> (&str, &str) {
        self.api_version
            .split_once('/')
            .unwrap_or(("", &self.api_version))
    }
}

/// Kinds whose resource is not the rule's answer: (lower-case kind, resource).
const IRREGULAR: &[(&str, &str)] = &[("endpoints", "endpoints")];

/// The plural resource of `kind`: lower case, then `s`, `x`, `z`, `ch`, `sh` → `+es`;
/// consonant + `y` → `ies`; otherwise `+s`.
pub fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if let Some((_, resource)) = IRREGULAR.iter().find(|(k, _)| *k == lower) {
        return (*resource).to_owned();
    }
    if lower.is_empty() {
        return lower;
    }
    if ["s", "x", "z", "ch", "sh"].iter().any(|end| lower.ends_with(end)) {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_key_needs_api_version_kind_and_name() {
        let key = |v: serde_json::Value| super::ResourceKey::of(&v);
        let full = key(serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "n"}}))
        .unwrap();
        assert_eq!(full.group_version(), ("apps", "v1"));
        assert_eq!((full.namespace.as_str(), full.name.as_str()), ("n", "d"));
        let core =
            key(serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}));
        assert_eq!(core.unwrap().group_version(), ("", "v1"));
        for partial in [
            serde_json::json!({"kind": "Pod", "metadata": {"name": "p"}}),
            serde_json::json!({"apiVersion": "v1", "kind": "", "metadata": {"name": "p"}}),
            serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": 1}}),
        ] {
            assert_eq!(key(partial), None);
        }
    }

    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::plain("Deployment", "deployments")]
    #[case::ending_in_s("Ingress", "ingresses")]
    #[case::consonant_then_y("NetworkPolicy", "networkpolicies")]
    #[case::consonant_then_y_short("Policy", "policies")]
    #[case::vowel_then_y("Gateway", "gateways")]
    #[case::irregular("Endpoints", "endpoints")]
    #[case::ending_in_x("Mailbox", "mailboxes")]
    #[case::ending_in_ch("Patch", "patches")]
    #[case::config_map("ConfigMap", "configmaps")]
    #[case::deployment_config("AddOnDeploymentConfig", "addondeploymentconfigs")]
    #[case::empty("", "")]
    fn plurals_are_the_served_resources(#[case] kind: &str, #[case] resource: &str) {
        assert_eq!(plural(kind), resource);
    }
}
