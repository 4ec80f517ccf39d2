//! The two names an agent registers under. The cluster name becomes a namespace on the hub,
//! so it must be a DNS-1123 label; the agent name is the last part of the certificate's
//! common name `system:open-cluster-management:<cluster>:<agent>`, which the hub splits on
//! `:`, so it must not hold one.
//!
//! When neither the options nor the stored hub kubeconfig secret give a name, OCM makes a
//! random UUID (cluster) and five random characters (agent); the random bytes come from the
//! caller.

/// Longest namespace name.
pub const MAX_CLUSTER_NAME_LENGTH: usize = crate::names::MAX_DNS_LABEL_LENGTH;
/// Length of a generated agent name.
pub const GENERATED_AGENT_NAME_LENGTH: usize = 5;
/// Longest agent name accepted (a DNS subdomain's limit; OCM sets none).
pub const MAX_AGENT_NAME_LENGTH: usize = 253;

/// Why a name cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The cluster name is not a valid namespace name.
    #[error("cluster name {name:?} is not a valid namespace name (DNS-1123 label): {reason}")]
    InvalidClusterName {
        /// The rejected name.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The agent name cannot be part of the certificate's common name.
    #[error("agent name {name:?} is invalid: {reason}")]
    InvalidAgentName {
        /// The rejected name.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Checks that `name` is a DNS-1123 label: 1–63 characters of `a-z`, `0-9` and `-`,
/// starting and ending with an alphanumeric character.
pub fn validate_cluster_name(name: &str) -> Result<(), NameError> {
    match crate::names::dns_label_problem(name) {
        Some(reason) => Err(NameError::InvalidClusterName {
            name: name.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Checks that `name` can be the last part of the agent's user name: not empty, at most
/// 253 characters, no `:` (the hub splits the common name on it), no whitespace or control
/// characters.
pub fn validate_agent_name(name: &str) -> Result<(), NameError> {
    let invalid = |reason| {
        Err(NameError::InvalidAgentName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("must not be empty");
    }
    if name.len() > MAX_AGENT_NAME_LENGTH {
        return invalid("must be no more than 253 characters");
    }
    if name.contains(':') {
        return invalid("must not contain ':'");
    }
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return invalid("must not contain whitespace or control characters");
    }
    Ok(())
}

/// An agent name of five lower-case letters made from five random bytes.
pub fn agent_name_from(random: [u8; GENERATED_AGENT_NAME_LENGTH]) -> String {
    random.iter().map(|b| char::from(b'a' + b % 26)).collect()
}

/// A version-4 UUID (`xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx`, lower-case) made from 16
/// random bytes: the cluster name OCM picks when none is given. It is always a valid
/// namespace name.
pub fn uuid_from(mut random: [u8; 16]) -> String {
    random[6] = (random[6] & 0x0f) | 0x40;
    random[8] = (random[8] & 0x3f) | 0x80;
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::simple("cluster1")]
    #[case::dashes("my-cluster-2")]
    #[case::digit_first("1cluster")]
    #[case::one_char("a")]
    #[case::longest("a23456789012345678901234567890123456789012345678901234567890123")]
    fn namespace_names_are_valid_cluster_names(#[case] name: &str) {
        assert_eq!(validate_cluster_name(name), Ok(()));
    }

    #[rstest]
    #[case::empty("", "must not be empty")]
    #[case::upper("Cluster1", "must consist of lower case alphanumeric characters or '-'")]
    #[case::underscore("my_cluster", "must consist of lower case alphanumeric characters or '-'")]
    #[case::dot("my.cluster", "must consist of lower case alphanumeric characters or '-'")]
    #[case::leading_dash("-cluster", "must start and end with an alphanumeric character")]
    #[case::trailing_dash("cluster-", "must start and end with an alphanumeric character")]
    #[case::too_long(
        "a234567890123456789012345678901234567890123456789012345678901234",
        "must be no more than 63 characters"
    )]
    fn other_names_are_rejected_with_the_reason(#[case] name: &str, #[case] reason: &str) {
        match validate_cluster_name(name) {
            Err(NameError::InvalidClusterName { reason: got, .. }) => assert_eq!(got, reason),
            other => panic!("expected an invalid name, got {other:?}"),
        }
    }

    #[rstest]
    #[case::colon("a:b", false)]
    #[case::space("a b", false)]
    #[case::empty("", false)]
    #[case::generated("abcde", true)]
    #[case::uuid("0f8fad5b-d9cb-469f-a165-70867728950e", true)]
    fn agent_names_must_fit_in_the_common_name(#[case] name: &str, #[case] ok: bool) {
        assert_eq!(validate_agent_name(name).is_ok(), ok);
    }

    #[test]
    fn generated_agent_names_are_five_lower_case_letters() {
        let name = agent_name_from([0, 25, 26, 200, 255]);
        assert_eq!(name, "azasv");
        assert!(validate_agent_name(&name).is_ok());
    }

    #[test]
    fn generated_cluster_names_are_version_4_uuids_and_valid_namespaces() {
        let name = uuid_from([0xff; 16]);
        assert_eq!(name, "ffffffff-ffff-4fff-bfff-ffffffffffff");
        assert_eq!(uuid_from([0; 16]), "00000000-0000-4000-8000-000000000000");
        assert_eq!(validate_cluster_name(&name), Ok(()));
    }
}
