//! Whether `flotilla join` may (re)use an agent namespace: one agent namespace serves one hub.
//!
//! A managed cluster joined to several hubs runs one klusterlet per hub, each in its own agent
//! namespace with its own bootstrap and hub kubeconfig secrets. Writing a second hub's
//! bootstrap kubeconfig into a namespace that already serves another hub would silently move
//! that klusterlet to the new hub (its identity, lease and ManifestWorks with it), so join
//! refuses and names a namespace that would work. Joining the same hub again (a new token,
//! a restarted klusterlet) is allowed.

use sha2::{Digest, Sha256};

use crate::names::MAX_DNS_LABEL_LENGTH;

/// Hex characters of the hub's hash in a suggested namespace name.
const SUGGESTION_HASH_LENGTH: usize = 8;

/// What join may do with an agent namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamespaceUse {
    /// No hub is configured there yet.
    Fresh,
    /// It already serves the requested hub: joining again is fine.
    SameHub,
    /// It serves another hub: join must refuse.
    OtherHub {
        /// The server of the hub the namespace serves.
        joined: String,
        /// An agent namespace derived from the requested hub, free of this conflict.
        suggestion: String,
    },
}

/// Decides from the hub servers the namespace's kubeconfig secrets (bootstrap and hub
/// kubeconfig) point at whether `requested` may join through `namespace`.
pub fn namespace_use<'a>(
    namespace: &str,
    requested: &str,
    joined: impl IntoIterator<Item = &'a str>,
) -> NamespaceUse {
    let mut fresh = true;
    for server in joined {
        if !same_server(server, requested) {
            return NamespaceUse::OtherHub {
                joined: server.to_owned(),
                suggestion: suggested_namespace(namespace, requested),
            };
        }
        fresh = false;
    }
    if fresh {
        NamespaceUse::Fresh
    } else {
        NamespaceUse::SameHub
    }
}

/// Whether two apiserver URLs name the same hub: equal but for a trailing `/` and the case
/// of the scheme and host (which URLs ignore).
pub fn same_server(a: &str, b: &str) -> bool {
    a.trim_end_matches('/')
        .eq_ignore_ascii_case(b.trim_end_matches('/'))
}

/// `<namespace>-<first 8 hex of SHA-256 of the hub URL>`, shortened to a valid namespace name:
/// stable for one hub, so running the suggested command twice lands in the same namespace.
pub fn suggested_namespace(namespace: &str, hub_server: &str) -> String {
    let digest = hex::encode(Sha256::digest(hub_server.trim_end_matches('/').as_bytes()));
    let suffix = &digest[..SUGGESTION_HASH_LENGTH];
    let room = MAX_DNS_LABEL_LENGTH - SUGGESTION_HASH_LENGTH - 1;
    let base: String = namespace.chars().take(room).collect();
    format!("{}-{suffix}", base.trim_end_matches('-'))
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    const A: &str = "https://127.0.0.1:6443";
    const B: &str = "https://127.0.0.1:7443";

    #[rstest]
    #[case::nothing_there(&[], NamespaceUse::Fresh)]
    #[case::bootstrap_of_the_same_hub(&[A], NamespaceUse::SameHub)]
    #[case::same_hub_with_a_trailing_slash_and_upper_case(&["HTTPS://127.0.0.1:6443/"], NamespaceUse::SameHub)]
    #[case::bootstrap_and_hub_kubeconfig_of_the_same_hub(&[A, A], NamespaceUse::SameHub)]
    fn a_namespace_of_no_hub_or_of_the_same_hub_may_be_joined(
        #[case] joined: &[&str],
        #[case] expected: NamespaceUse,
    ) {
        assert_eq!(namespace_use("agent", A, joined.iter().copied()), expected);
    }

    #[rstest]
    #[case::bootstrap_of_another_hub(&[B])]
    #[case::hub_kubeconfig_of_another_hub_after_a_bootstrap_of_this_one(&[A, B])]
    fn a_namespace_of_another_hub_is_refused_with_a_namespace_for_this_hub(#[case] joined: &[&str]) {
        assert_eq!(
            namespace_use("agent", A, joined.iter().copied()),
            NamespaceUse::OtherHub {
                joined: B.to_owned(),
                suggestion: suggested_namespace("agent", A),
            }
        );
    }

    #[test]
    fn the_suggested_namespace_is_stable_per_hub_and_differs_between_hubs() {
        let a = suggested_namespace("open-cluster-management-agent", A);
        assert_eq!(
            a,
            suggested_namespace("open-cluster-management-agent", &format!("{A}/"))
        );
        assert_ne!(a, suggested_namespace("open-cluster-management-agent", B));
        assert!(a.starts_with("open-cluster-management-agent-"), "{a}");
        assert_eq!(
            a.len(),
            "open-cluster-management-agent".len() + 1 + SUGGESTION_HASH_LENGTH
        );
    }

    #[rstest]
    #[case::long(&"x".repeat(63))]
    #[case::long_ending_in_a_dash_where_cut(&format!("{}-{}", "x".repeat(53), "y".repeat(9)))]
    fn the_suggested_namespace_is_a_valid_namespace_name_however_long_the_original(#[case] namespace: &str) {
        let suggestion = suggested_namespace(namespace, A);
        assert_eq!(crate::names::dns_label_problem(&suggestion), None, "{suggestion}");
    }
}
