//! Fuzzes the check of kubeconfigs read from Secrets
//! (`flotilla_kube::kubeconfig::check_from_secret`) on whatever YAML kube's loader
//! (`Kubeconfig::from_yaml`) accepts: the bootstrap and hub kubeconfig secrets, hosted mode's
//! external kubeconfig and add-on credentials are written by others.
//!
//! Properties: no panic; the same verdict twice; the verdict checked against the same text read
//! as untyped YAML by the same YAML reader: a user entry with a non-null `exec`,
//! `auth-provider`, `tokenFile`, `client-certificate` or `client-key`, or a cluster entry with a
//! `certificate-authority`, in a document whose entries the loader keeps, is refused (an
//! untyped reading cannot be fooled by how the typed one names its fields). Allowing mounted
//! keys only ever allows more: what passes with none passes with any.

#![no_main]

use std::collections::BTreeSet;

use flotilla_kube::kubeconfig::check_from_secret;
use kube::config::Kubeconfig;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const USER_FIELDS: [&str; 5] = [
    "exec",
    "auth-provider",
    "tokenFile",
    "client-certificate",
    "client-key",
];
const CLUSTER_FIELDS: [&str; 1] = ["certificate-authority"];

/// Whether some entry of `list` (`users` or `clusters`), under `entry` (`user` or `cluster`),
/// sets one of `fields`; entries named as an earlier kept entry are skipped, as the loader's
/// merge drops them.
fn sets_any(documents: &[Value], list: &str, entry: &str, fields: &[&str]) -> bool {
    let mut seen = BTreeSet::new();
    for document in documents {
        for item in document.get(list).and_then(Value::as_array).into_iter().flatten() {
            let name = item.get("name").and_then(Value::as_str).unwrap_or_default();
            if !seen.insert(name.to_owned()) {
                continue;
            }
            let Some(body) = item.get(entry).and_then(Value::as_object) else {
                continue;
            };
            if fields.iter().any(|f| body.get(*f).is_some_and(|v| !v.is_null())) {
                return true;
            }
        }
    }
    false
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(kubeconfig) = Kubeconfig::from_yaml(text) else {
        return;
    };
    let verdict = check_from_secret(&kubeconfig, &[]);
    assert_eq!(
        verdict,
        check_from_secret(&kubeconfig, &[]),
        "two verdicts differ"
    );

    if verdict.is_ok() {
        let mounted = ["kubeconfig", "tls.crt", "tls.key", ""];
        assert_eq!(
            check_from_secret(&kubeconfig, &mounted),
            Ok(()),
            "mounting keys refused more"
        );
    }

    if let Ok(documents) = serde_saphyr::from_multiple::<Value>(text) {
        let unsafe_entry = sets_any(&documents, "users", "user", &USER_FIELDS)
            || sets_any(&documents, "clusters", "cluster", &CLUSTER_FIELDS);
        if unsafe_entry {
            assert!(
                verdict.is_err(),
                "{text:?} passed, yet an entry runs a command or reads a file"
            );
        }
    }
});
