//! Fuzzes what the work agent decides from a ManifestWork's spec before applying anything
//! (`flotilla_core::work::agent::{order, ignore}`): the apply order of its manifests by kind,
//! and the objects stripped of their `ignoreFields` with the hash that says whether to apply.
//! The input is the spec's JSON.
//!
//! Properties: no panic; the same answer twice; the apply waves hold every manifest once, in
//! strictly increasing kind rank, each wave in spec order; stripping marks the stripped object
//! with its hash (so it reads as unchanged), never adds a field other than that annotation, and
//! leaves `OnSpokeChange` fields alone.

#![no_main]

use flotilla_api::work::v1::{IgnoreField, IgnoreFieldsCondition, ManifestWorkSpec};
use flotilla_core::work::agent::{ignore, order};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// Whether every field of `smaller` is in `larger` (objects compared key by key; lists and
/// scalars must be equal or, for lists, have the same length and contain each other).
fn within(smaller: &Value, larger: &Value) -> bool {
    match (smaller, larger) {
        (Value::Object(small), Value::Object(large)) => small
            .iter()
            .all(|(k, v)| large.get(k).is_some_and(|l| within(v, l))),
        (Value::Array(small), Value::Array(large)) => {
            small.len() <= large.len() && small.iter().all(|s| large.iter().any(|l| within(s, l)))
        }
        _ => smaller == larger,
    }
}

/// `object` without the hash annotation, and without the annotations map when only the hash
/// was in it.
fn without_hash(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
        && let Some(annotations) = metadata.get_mut("annotations").and_then(Value::as_object_mut)
    {
        annotations.remove(ignore::SPEC_HASH_ANNOTATION);
        if annotations.is_empty() {
            metadata.remove("annotations");
        }
    }
    object
}

fn check_strip(manifest: &Value, fields: &[IgnoreField]) {
    let stripped = ignore::strip(manifest, fields);
    assert_eq!(stripped, ignore::strip(manifest, fields), "two answers differ");
    let Ok((object, hash)) = stripped else {
        return;
    };
    assert_eq!(hash.len(), 64, "{hash:?} is not a SHA-256 in hex");
    if object.get("metadata").is_some_and(Value::is_object)
        && object
            .pointer("/metadata/annotations")
            .is_none_or(Value::is_object)
    {
        assert!(
            ignore::unchanged(&object, &hash),
            "the stripped object does not carry its hash"
        );
    }
    assert!(
        within(&without_hash(&object), manifest),
        "stripping added a field: {manifest} became {object}"
    );

    // OnSpokeChange fields are never stripped.
    let present: Vec<IgnoreField> = fields
        .iter()
        .filter(|f| f.condition == IgnoreFieldsCondition::OnSpokePresent)
        .cloned()
        .collect();
    if fields.iter().all(|f| f.jq_path_expressions.is_empty()) {
        assert_eq!(ignore::strip(manifest, &present).ok(), Some((object, hash)));
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(spec) = serde_json::from_slice::<ManifestWorkSpec>(data) else {
        return;
    };
    let manifests = &spec.workload.manifests;
    let kinds: Vec<Option<&str>> = manifests
        .iter()
        .map(|m| m.0.get("kind").and_then(Value::as_str))
        .collect();

    let waves = order::apply_waves(&kinds);
    assert_eq!(waves, order::apply_waves(&kinds), "two answers differ");
    let mut seen: Vec<usize> = waves.iter().flatten().copied().collect();
    seen.sort_unstable();
    assert_eq!(
        seen,
        (0..kinds.len()).collect::<Vec<_>>(),
        "not every manifest once"
    );
    let mut previous_rank = None;
    for wave in &waves {
        assert!(!wave.is_empty(), "an empty wave");
        let rank = order::kind_rank(kinds[wave[0]]);
        assert!(
            wave.iter().all(|&i| order::kind_rank(kinds[i]) == rank),
            "a wave of mixed ranks"
        );
        assert!(wave.windows(2).all(|w| w[0] < w[1]), "a wave out of spec order");
        assert!(previous_rank.is_none_or(|p| p < rank), "ranks out of order");
        previous_rank = Some(rank);
    }
    let flat: Vec<usize> = waves.concat();
    assert_eq!(flat, order::apply_order(&kinds), "waves and order disagree");

    let configured = spec
        .manifest_configs
        .iter()
        .filter_map(|c| c.update_strategy.as_ref()?.server_side_apply.as_ref())
        .map(|ssa| ssa.ignore_fields.as_slice());
    for fields in std::iter::once(&[][..]).chain(configured) {
        for manifest in manifests {
            check_strip(&manifest.0, fields);
        }
    }
});
