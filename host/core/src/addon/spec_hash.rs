//! The spec hash of an add-on config object, byte-identical to OCM's: the lower-hex SHA-256 of
//! Go's `json.Marshal` of the object without `apiVersion`, `kind`, `metadata` and `status`.
//!
//! The hash lands in `configReferences[].desiredConfig.specHash` of ManagedClusterAddOns and
//! ClusterManagementAddOns and in the deploy works' `open-cluster-management.io/config-spec-hash`
//! annotation. Go add-on agents and tools compare these values with the ones they compute, so
//! the hash must match OCM's to the byte; `tests/spec_hash_golden.rs` checks it against hashes
//! OCM computed.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::go_json::{self, GoJsonError};

/// Top-level fields that do not take part in the hash.
pub const UNHASHED_FIELDS: [&str; 4] = ["apiVersion", "kind", "metadata", "status"];

/// Why a config object cannot be hashed.
#[derive(Debug, thiserror::Error)]
pub enum SpecHashError {
    /// The config is not a JSON object.
    #[error("hashing a config: the object is not a JSON object")]
    NotAnObject,
    /// The object cannot be printed as Go prints it.
    #[error("hashing a config: {0}")]
    Encode(#[from] GoJsonError),
}

/// The exact text OCM hashes for `object`: Go's JSON of its fields other than
/// [`UNHASHED_FIELDS`].
pub fn hashed_json(object: &Value) -> Result<String, SpecHashError> {
    let Value::Object(map) = object else {
        return Err(SpecHashError::NotAnObject);
    };
    let rest: serde_json::Map<String, Value> = map
        .iter()
        .filter(|(key, _)| !UNHASHED_FIELDS.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    Ok(go_json::to_string(&Value::Object(rest))?)
}

/// The spec hash of `object` (a whole config object as the API server returns it).
pub fn spec_hash(object: &Value) -> Result<String, SpecHashError> {
    let text = hashed_json(object)?;
    Ok(hex::encode(Sha256::digest(text.as_bytes())))
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::*;

    #[rstest]
    #[case::metadata_and_status_are_ignored(
        json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "a"}, "status": {"x": 1}, "spec": {"a": 1}}),
        r#"{"spec":{"a":1}}"#
    )]
    #[case::every_other_top_level_field_counts(
        json!({"kind": "ConfigMap", "data": {"k": "<v>"}, "binaryData": {}}),
        r#"{"binaryData":{},"data":{"k":"\u003cv\u003e"}}"#
    )]
    #[case::an_object_without_spec_hashes_as_empty(json!({"kind": "K"}), "{}")]
    fn the_hashed_text_is_go_json_without_the_envelope(#[case] object: Value, #[case] expected: &str) {
        assert_eq!(hashed_json(&object).unwrap(), expected);
    }

    #[test]
    fn the_hash_is_lower_hex_sha256_of_the_hashed_text() {
        // SHA-256 of "{}".
        assert_eq!(
            spec_hash(&json!({"metadata": {"name": "x"}})).unwrap(),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }

    #[test]
    fn a_config_that_is_not_an_object_is_refused() {
        assert!(matches!(spec_hash(&json!([1])), Err(SpecHashError::NotAnObject)));
    }
}
