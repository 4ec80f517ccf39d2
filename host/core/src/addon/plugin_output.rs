//! Reading what a plugin's hooks return, once, into the types the hub works with: the caps on
//! its strings, the agent manifests `manifests` gives and the Roles and RoleBindings
//! `hub-permissions` gives, as JSON text.
//!
//! ```text
//!  manifests (strings) ───────read_manifests──▶ Vec<AgentManifest>   (works::validate_manifests)
//!  hub-permissions (strings) ─read_permissions─▶ Vec<Permission>     (parse_objects, then
//!                                                                     permissions::typed_permissions)
//! ```
//!
//! Every string comes from a sandboxed plugin, so nothing here trusts its shape. The plugin host
//! (flotilla-wasm) calls these on each answer and names the hook when it reports a
//! [`ReadOutputError`]; its callers get typed, checked output and check nothing again.

use serde_json::Value;

use super::permissions::{Permission, typed_permissions};
use super::works::{AgentManifest, ManifestError, validate_manifests};

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

/// A `manifests` answer as agent manifests ([`validate_manifests`]): over a cap is
/// [`ReadOutputError::TooLarge`], anything else refused is [`ReadOutputError::Invalid`].
pub fn read_manifests(caps: OutputCaps, raw: &[String]) -> Result<Vec<AgentManifest>, ReadOutputError> {
    validate_manifests(raw, caps).map_err(|e| match e {
        ManifestError::TooMany { count, limit } => ReadOutputError::TooLarge {
            what: "manifests",
            actual: count,
            limit,
        },
        ManifestError::OutputTooLarge { size, limit } => ReadOutputError::TooLarge {
            what: "bytes",
            actual: size,
            limit,
        },
        other => ReadOutputError::Invalid {
            reason: other.to_string(),
        },
    })
}

/// A `hub-permissions` answer for `cluster` as typed Roles and RoleBindings confined to the
/// cluster namespace ([`parse_objects`], then [`typed_permissions`]): the hub applies them with
/// its own identity, so anything else would let a plugin act outside its cluster.
pub fn read_permissions(
    caps: OutputCaps,
    cluster: &str,
    raw: &[String],
) -> Result<Vec<Permission>, ReadOutputError> {
    let objects = parse_objects(caps, raw)?;
    typed_permissions(&objects, cluster).map_err(|reason| ReadOutputError::Invalid { reason })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addon::permissions::RBAC_V1;

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
        let read = |object: serde_json::Value| read_permissions(CAPS, "c1", &[object.to_string()]);
        assert!(matches!(
            read(role("c1", "Role")).as_deref(),
            Ok([Permission::Role(_)])
        ));
        assert!(read(role("c2", "RoleBinding")).is_err());
        assert!(read(role("c1", "ClusterRole")).is_err());
        let unset = serde_json::json!({"apiVersion": RBAC_V1, "kind": "Role", "metadata": {"name": "r"}});
        assert!(read(unset).is_ok());
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
