//! Names the work agent and OCM's agents agree on: the hub hash and the AppliedManifestWork
//! name `<hubHash>-<work>`, so a managed cluster moved between agents keeps its records.

use sha2::{Digest, Sha256};

/// Lower-hex SHA-256 of the hub's apiserver URL (64 characters), exactly as given in the hub
/// kubeconfig (no normalisation, as OCM hashes the string it was configured with).
pub fn hub_hash(hub_server: &str) -> String {
    hex::encode(Sha256::digest(hub_server.as_bytes()))
}

/// Name of the AppliedManifestWork recording work `work` from the hub with hash `hub_hash`.
pub fn applied_manifest_work_name(hub_hash: &str, work: &str) -> String {
    format!("{hub_hash}-{work}")
}

/// The work name an AppliedManifestWork records, if its name carries `hub_hash`; `None` for
/// records of another hub, which this agent leaves alone.
pub fn work_name_of<'a>(hub_hash: &str, applied_name: &'a str) -> Option<&'a str> {
    applied_name
        .strip_prefix(hub_hash)
        .and_then(|rest| rest.strip_prefix('-'))
        .filter(|work| !work.is_empty())
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[test]
    fn the_hub_hash_is_the_lower_hex_sha256_of_the_url() {
        // sha256("https://127.0.0.1:6443"), computed with coreutils' sha256sum.
        assert_eq!(
            hub_hash("https://127.0.0.1:6443"),
            "6c5003f4dd1691967bd3047645092380ef15affc718a40bf6cc43496f96e552a"
        );
        let hash = hub_hash("https://hub.example:6443");
        assert_eq!(hash.len(), 64);
        assert!(
            hash.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(hash, hub_hash("https://hub.example:6443/"));
    }

    #[rstest]
    #[case::own_record("abc", "abc-web", Some("web"))]
    #[case::dashes_in_the_work_name("abc", "abc-web-1", Some("web-1"))]
    #[case::another_hub("abc", "abd-web", None)]
    #[case::no_work_name("abc", "abc-", None)]
    #[case::no_separator("abc", "abcweb", None)]
    fn applied_names_are_read_back_only_for_this_hub(
        #[case] hub: &str,
        #[case] name: &str,
        #[case] expected: Option<&str>,
    ) {
        assert_eq!(work_name_of(hub, name), expected);
        if let Some(work) = expected {
            assert_eq!(applied_manifest_work_name(hub, work), name);
        }
    }
}
