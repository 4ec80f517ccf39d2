//! Released WIT versions are frozen: every file of every released `wit/flotilla-addon@<v>/`
//! directory must hash to the value recorded in `wit/released.sha256` when it was released, and
//! no file may be added to a released directory. A contract change is a new version directory
//! (see `wit/README.md`), never an edit here.

use std::collections::BTreeSet;
use std::path::Path;

use sha2::{Digest as _, Sha256};

#[test]
fn wit_released_versions_are_frozen() {
    let wit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit");
    let manifest = std::fs::read_to_string(wit.join("released.sha256")).expect("wit/released.sha256 exists");

    let mut listed = BTreeSet::new();
    for line in manifest.lines().filter(|l| !l.trim().is_empty()) {
        let (expected, file) = line.split_once("  ").expect("sha256sum format: `<hex>  <path>`");
        let actual = hex::encode(Sha256::digest(
            std::fs::read(wit.join(file)).expect("released file exists"),
        ));
        assert_eq!(
            actual, expected,
            "released WIT file {file} changed; add a new version instead"
        );
        listed.insert(file.to_owned());
    }
    assert!(
        listed.iter().any(|f| f.starts_with("flotilla-addon@0.1.0/")),
        "0.1.0 is released"
    );

    let released_dirs: BTreeSet<&str> = listed
        .iter()
        .filter_map(|f| f.split_once('/').map(|(d, _)| d))
        .collect();
    for dir in released_dirs {
        for entry in std::fs::read_dir(wit.join(dir)).unwrap() {
            let name = format!("{dir}/{}", entry.unwrap().file_name().to_string_lossy());
            assert!(
                listed.contains(&name),
                "{name} was added to released version {dir}"
            );
        }
    }
}
