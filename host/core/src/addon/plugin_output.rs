//! Reading what a plugin's hooks return: the caps on its strings, the Kubernetes objects its
//! `manifests` and `hub-permissions` give as JSON text, and the rule that keeps hub permissions
//! inside the cluster namespace.
//!
//! ```text
//!  hook result (strings) ──count cap, byte cap──▶ JSON object each, with apiVersion, kind,
//!      metadata.name ──▶ manifests
//!                    └──▶ rbac v1 Role/RoleBinding in the cluster namespace ──▶ hub permissions
//! ```
//!
//! Every string comes from a sandboxed plugin, so nothing here trusts its shape. The plugin host
//! (flotilla-wasm) names the hook when it reports a [`ReadOutputError`].

use serde_json::Value;

/// The output caps of one call: a plugin's `spec.limits` as the host applies them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputCaps {
    /// Most bytes all returned strings may hold together.
    pub max_bytes: usize,
    /// Most objects (manifests or hub-permission objects) one call may return.
    pub max_objects: usize,
}

/// Why a hook's output was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadOutputError {
    /// Over a cap: more strings or more bytes than allowed.
    #[error("output too large: {what} is {actual}, limit {limit}")]
    TooLarge {
        /// What was measured: `bytes` or `manifests`.
        what: &'static str,
        /// The measured amount.
        actual: usize,
        /// The cap.
        limit: usize,
    },
    /// A returned value the host cannot use (not JSON, wrong kind, wrong namespace).
    #[error("invalid output: {reason}")]
    Invalid {
        /// What was wrong, naming the object by its index.
        reason: String,
    },
}

/// The API version hub permissions must have.
pub const RBAC_V1: &str = "rbac.authorization.k8s.io/v1";

/// Refuses strings whose bytes together exceed `max_bytes` (the sum saturates, so no count of
/// strings wraps it below the cap).
pub fn check_size<'a>(
    max_bytes: usize,
    strings: impl IntoIterator<Item = &'a str>,
) -> Result<(), ReadOutputError> {
    let total: usize = strings.into_iter().map(str::len).fold(0, usize::saturating_add);
    if total > max_bytes {
        return Err(ReadOutputError::TooLarge {
            what: "bytes",
            actual: total,
            limit: max_bytes,
        });
    }
    Ok(())
}

/// Applies the count and byte caps, then parses each string as a Kubernetes object: a JSON object
/// with string `apiVersion`, `kind` and non-empty `metadata.name`.
pub fn parse_objects(caps: OutputCaps, raw: &[String]) -> Result<Vec<Value>, ReadOutputError> {
    if raw.len() > caps.max_objects {
        return Err(ReadOutputError::TooLarge {
            what: "manifests",
            actual: raw.len(),
            limit: caps.max_objects,
        });
    }
    check_size(caps.max_bytes, raw.iter().map(String::as_str))?;
    raw.iter()
        .enumerate()
        .map(|(i, text)| {
            let invalid = |reason: String| ReadOutputError::Invalid {
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
pub fn check_hub_permissions(cluster: &str, objects: &[Value]) -> Result<(), ReadOutputError> {
    for (i, o) in objects.iter().enumerate() {
        let invalid = |reason: String| ReadOutputError::Invalid {
            reason: format!("object {i}: {reason}"),
        };
        let api_version = o.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = o.get("kind").and_then(Value::as_str).unwrap_or_default();
        if api_version != RBAC_V1 || !matches!(kind, "Role" | "RoleBinding") {
            return Err(invalid(format!(
                "{api_version} {kind} is not an {RBAC_V1} Role or RoleBinding"
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

    const CAPS: OutputCaps = OutputCaps {
        max_bytes: 1 << 20,
        max_objects: 1000,
    };

    #[test]
    fn hub_permissions_must_stay_in_the_cluster_namespace() {
        let role = |ns: &str, kind: &str| {
            serde_json::json!({"apiVersion": RBAC_V1, "kind": kind,
                "metadata": {"name": "r", "namespace": ns}})
        };
        assert!(check_hub_permissions("c1", &[role("c1", "Role")]).is_ok());
        assert!(check_hub_permissions("c1", &[role("c2", "RoleBinding")]).is_err());
        assert!(check_hub_permissions("c1", &[role("c1", "ClusterRole")]).is_err());
        let unset = serde_json::json!({"apiVersion": RBAC_V1, "kind": "Role", "metadata": {"name": "r"}});
        assert!(check_hub_permissions("c1", &[unset]).is_ok());
    }

    #[test]
    fn objects_need_api_version_kind_and_name() {
        let ok = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}"#.to_owned();
        assert_eq!(parse_objects(CAPS, &[ok]).map(|v| v.len()).ok(), Some(1));
        for bad in [
            "[]",
            "{}",
            r#"{"apiVersion":"v1","kind":"ConfigMap"}"#,
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":""}}"#,
            r#"{"apiVersion":1,"kind":"ConfigMap","metadata":{"name":"x"}}"#,
            "not json",
        ] {
            assert!(
                matches!(
                    parse_objects(CAPS, &[bad.into()]),
                    Err(ReadOutputError::Invalid { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn caps_refuse_one_past_the_limit() {
        let caps = OutputCaps {
            max_bytes: 10,
            max_objects: 2,
        };
        assert!(check_size(caps.max_bytes, ["12345", "67890"]).is_ok());
        assert_eq!(
            check_size(caps.max_bytes, ["12345", "678901"]),
            Err(ReadOutputError::TooLarge {
                what: "bytes",
                actual: 11,
                limit: 10
            })
        );
        let three = vec![String::new(); 3];
        assert_eq!(
            parse_objects(caps, &three),
            Err(ReadOutputError::TooLarge {
                what: "manifests",
                actual: 3,
                limit: 2
            })
        );
    }
}
