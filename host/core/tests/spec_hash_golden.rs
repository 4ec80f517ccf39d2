//! Config spec hashes against OCM's own: `golden/spec-hash.json` holds config objects that
//! addon-framework's `GetSpecHash` hashed (written by `tests/ocm-golden`, see its README), with the
//! exact text OCM hashed. Every case must give the same text and the same hash here.

use flotilla_core::addon::spec_hash::{hashed_json, spec_hash};
use serde::Deserialize;
use serde_json::Value;

/// The fixture file.
#[derive(Deserialize)]
struct Fixture {
    cases: Vec<Case>,
}

/// One object OCM hashed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Case {
    name: String,
    object: Value,
    spec_hash: String,
    #[serde(rename = "hashedJSON")]
    hashed_json: String,
}

fn cases() -> Vec<Case> {
    let text = include_str!("golden/spec-hash.json");
    let fixture: Fixture = serde_json::from_str(text).expect("the fixture parses");
    fixture.cases
}

#[test]
fn every_fixture_hashes_the_same_text_as_ocm() {
    let cases = cases();
    assert_eq!(cases.len(), 39, "the fixture holds OCM's 39 cases");
    let mismatches: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let ours = hashed_json(&case.object).expect("the object hashes");
            (ours != case.hashed_json)
                .then(|| format!("{}:\n  ocm:  {}\n  ours: {ours}", case.name, case.hashed_json))
        })
        .collect();
    assert!(
        mismatches.is_empty(),
        "hashed text differs:\n{}",
        mismatches.join("\n")
    );
}

#[test]
fn every_fixture_has_the_same_spec_hash_as_ocm() {
    let mismatches: Vec<String> = cases()
        .iter()
        .filter_map(|case| {
            let ours = spec_hash(&case.object).expect("the object hashes");
            (ours != case.spec_hash).then(|| format!("{}: ocm {} ours {ours}", case.name, case.spec_hash))
        })
        .collect();
    assert!(
        mismatches.is_empty(),
        "spec hashes differ:\n{}",
        mismatches.join("\n")
    );
}
