//! Server-side apply's `ignoreFields`, as OCM's agent applies them:
//!
//! ```text
//!  required ──strip OnSpokePresent fields──▶ stripped ──hash──▶ open-cluster-management.io/config-spec-hash
//!  live absent                 ▶ apply required (ignored fields included: they are created)
//!  live hash == stripped hash  ▶ no apply: the hub's intent is unchanged, so whatever changed on the
//!                                managed cluster (OnSpokeChange fields and all) stays
//!  otherwise                   ▶ apply stripped: OnSpokePresent fields are never written again
//! ```
//!
//! `jsonPaths` name a map entry (`.spec.replicas`; OCM's subset: a path to a list is not
//! removed), `jsonPointers` follow RFC 6901 (a missing target is fine). `jqPathExpressions`
//! are refused with the reason: no jq engine is embedded.

use flotilla_api::work::v1::{IgnoreField, IgnoreFieldsCondition};
use jsonpath_rust::{JsonPath as _, query::queryable::Queryable as _};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::feedback::to_query;

/// Annotation carrying the hash of the stripped object (OCM's key).
pub const SPEC_HASH_ANNOTATION: &str = "open-cluster-management.io/config-spec-hash";

/// `required` without its OnSpokePresent fields, annotated with the hash of what remains, and
/// that hash; or why a field could not be read.
pub fn strip(required: &Value, fields: &[IgnoreField]) -> Result<(Value, String), String> {
    let mut stripped = required.clone();
    for field in fields {
        if !field.jq_path_expressions.is_empty() {
            return Err("jqPathExpressions are not supported; use jsonPaths or jsonPointers".into());
        }
        if field.condition == IgnoreFieldsCondition::OnSpokeChange {
            continue;
        }
        for path in &field.json_paths {
            let query = to_query(path);
            // A path that matches nothing leaves the object as it is.
            if stripped.query(&query).is_ok_and(|found| !found.is_empty()) {
                stripped
                    .delete_by_path(&query)
                    .map_err(|e| format!("jsonPath {path:?}: {e}"))?;
            }
        }
        for pointer in &field.json_pointers {
            if !pointer.is_empty() && !pointer.starts_with('/') {
                return Err(format!("jsonPointer {pointer:?} must start with /"));
            }
            let patch: json_patch::Patch =
                serde_json::from_value(serde_json::json!([{ "op": "remove", "path": pointer }]))
                    .map_err(|e| format!("jsonPointer {pointer:?}: {e}"))?;
            if stripped.pointer(pointer).is_some() {
                json_patch::patch(&mut stripped, &patch)
                    .map_err(|e| format!("jsonPointer {pointer:?}: {e}"))?;
            }
        }
    }
    let hash = hex(&Sha256::digest(stripped.to_string().as_bytes()));
    set_hash(&mut stripped, &hash);
    Ok((stripped, hash))
}

/// Writes `hash` into `object`'s annotations.
pub fn set_hash(object: &mut Value, hash: &str) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(map) = annotations.as_object_mut() {
            map.insert(SPEC_HASH_ANNOTATION.into(), Value::String(hash.into()));
        }
    }
}

/// Whether the live object was last applied from a stripped object of this `hash`.
pub fn unchanged(live: &Value, hash: &str) -> bool {
    live.pointer("/metadata/annotations")
        .and_then(|a| a.get(SPEC_HASH_ANNOTATION))
        .and_then(Value::as_str)
        == Some(hash)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::*;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "d", "namespace": "n", "labels": { "a/b": "c" } },
            "spec": { "replicas": 3, "template": { "spec": { "containers": [{ "name": "c", "image": "i" }] } } },
        })
    }

    fn field(condition: IgnoreFieldsCondition, paths: &[&str], pointers: &[&str]) -> IgnoreField {
        IgnoreField {
            condition,
            json_paths: paths.iter().map(|p| (*p).to_owned()).collect(),
            json_pointers: pointers.iter().map(|p| (*p).to_owned()).collect(),
            jq_path_expressions: vec![],
        }
    }

    #[rstest]
    #[case::path_on_spoke_present(IgnoreFieldsCondition::OnSpokePresent, &[".spec.replicas"], &[], "/spec/replicas", false)]
    #[case::braced_path(IgnoreFieldsCondition::OnSpokePresent, &["{.spec.replicas}"], &[], "/spec/replicas", false)]
    #[case::pointer_with_escape(IgnoreFieldsCondition::OnSpokePresent, &[], &["/metadata/labels/a~1b"], "/metadata/labels/a~1b", false)]
    #[case::missing_pointer_is_fine(IgnoreFieldsCondition::OnSpokePresent, &[], &["/spec/nothing"], "/spec/replicas", true)]
    #[case::missing_path_is_fine(IgnoreFieldsCondition::OnSpokePresent, &[".spec.nothing"], &[], "/spec/replicas", true)]
    #[case::on_spoke_change_stays(IgnoreFieldsCondition::OnSpokeChange, &[".spec.replicas"], &[], "/spec/replicas", true)]
    fn on_spoke_present_fields_are_stripped_and_on_spoke_change_fields_kept(
        #[case] condition: IgnoreFieldsCondition,
        #[case] paths: &[&str],
        #[case] pointers: &[&str],
        #[case] probe: &str,
        #[case] kept: bool,
    ) {
        let (stripped, _) = strip(&deployment(), &[field(condition, paths, pointers)]).unwrap();
        assert_eq!(stripped.pointer(probe).is_some(), kept, "{stripped}");
        assert_eq!(
            stripped.pointer("/spec/template/spec/containers/0/image"),
            Some(&json!("i"))
        );
    }

    #[test]
    fn the_hash_follows_the_hubs_intent_not_the_ignored_fields() {
        let ignore = [field(
            IgnoreFieldsCondition::OnSpokePresent,
            &[".spec.replicas"],
            &[],
        )];
        let (live, _) = strip(&deployment(), &ignore).unwrap();
        let mut scaled = deployment();
        scaled["spec"]["replicas"] = json!(7);
        assert!(
            unchanged(&live, &strip(&scaled, &ignore).unwrap().1),
            "replicas are ignored"
        );
        let mut new_image = deployment();
        new_image["spec"]["template"]["spec"]["containers"][0]["image"] = json!("j");
        assert!(!unchanged(&live, &strip(&new_image, &ignore).unwrap().1));
        let (_, hash) = strip(&deployment(), &ignore).unwrap();
        assert!(
            !unchanged(&deployment(), &hash),
            "a live object without the annotation"
        );
    }

    #[test]
    fn bad_ignore_fields_are_refused_with_the_reason() {
        let pointer = strip(
            &deployment(),
            &[field(
                IgnoreFieldsCondition::OnSpokePresent,
                &[],
                &["spec/replicas"],
            )],
        );
        assert!(pointer.unwrap_err().contains("must start with /"));
        let mut jq = field(IgnoreFieldsCondition::OnSpokePresent, &[], &[]);
        jq.jq_path_expressions = vec![".spec.replicas".into()];
        assert!(
            strip(&deployment(), &[jq])
                .unwrap_err()
                .contains("jqPathExpressions")
        );
    }
}
