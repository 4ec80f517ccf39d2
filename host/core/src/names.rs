//! Kubernetes name rules shared by every component that names something after user input
//! (cluster names become namespaces; control-plane names become directories and contexts).

/// Longest DNS-1123 label.
pub const MAX_DNS_LABEL_LENGTH: usize = 63;

/// Why `name` is not a DNS-1123 label — what Kubernetes requires of namespace names: 1–63
/// characters of `a-z`, `0-9` and `-`, starting and ending with a letter or digit — or `None`
/// if it is one. The reasons use the apiserver's wording.
pub fn dns_label_problem(name: &str) -> Option<&'static str> {
    let alphanumeric = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = name.as_bytes();
    if bytes.is_empty() {
        Some("must not be empty")
    } else if bytes.len() > MAX_DNS_LABEL_LENGTH {
        Some("must be no more than 63 characters")
    } else if !bytes.iter().all(|b| alphanumeric(*b) || *b == b'-') {
        Some("must consist of lower case alphanumeric characters or '-'")
    } else if !alphanumeric(bytes[0]) || !alphanumeric(bytes[bytes.len() - 1]) {
        Some("must start and end with an alphanumeric character")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::simple("cluster1")]
    #[case::dashes("a-b-c")]
    #[case::single("a")]
    #[case::longest("x".repeat(63))]
    fn labels_pass(#[case] name: String) {
        assert_eq!(dns_label_problem(&name), None);
    }

    #[rstest]
    #[case::empty("", "must not be empty")]
    #[case::too_long("x".repeat(64), "must be no more than 63 characters")]
    #[case::upper("Cluster1", "must consist of lower case alphanumeric characters or '-'")]
    #[case::dot("a.b", "must consist of lower case alphanumeric characters or '-'")]
    #[case::leading_dash("-a", "must start and end with an alphanumeric character")]
    #[case::trailing_dash("a-", "must start and end with an alphanumeric character")]
    fn non_labels_say_why(#[case] name: String, #[case] reason: &str) {
        assert_eq!(dns_label_problem(&name), Some(reason));
    }
}
