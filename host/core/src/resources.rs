//! The plural resource of a kind, for the few places that must name a resource without asking
//! the apiserver that serves it: orphaning rules written on the hub for objects that live on a
//! managed cluster, and config files handed to `flotilla plugin run`. Where the serving
//! apiserver can be asked (configs on the hub), its discovery answer is used instead.
//!
//! Built-in kinds are named here as the apiserver's discovery names them; other kinds follow
//! the English rules custom resource definitions use by convention (kubebuilder's): a vowel
//! before a final `y` keeps it (`Gateway` → `gateways`). Apimachinery's own guess
//! (`UnsafeGuessKindToResource`) turns every final `y` into `ies` (`gatewaies`), a resource no
//! apiserver serves, so a rule written with it never matches.

/// Kinds whose resource is not the rule's answer: (lower-case kind, resource).
const IRREGULAR: &[(&str, &str)] = &[("endpoints", "endpoints")];

/// The plural resource of `kind`: lower case, then `s`, `x`, `z`, `ch`, `sh` → `+es`;
/// consonant + `y` → `ies`; otherwise `+s`.
pub fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if let Some((_, resource)) = IRREGULAR.iter().find(|(k, _)| *k == lower) {
        return (*resource).to_owned();
    }
    if lower.is_empty() {
        return lower;
    }
    if ["s", "x", "z", "ch", "sh"].iter().any(|end| lower.ends_with(end)) {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::plain("Deployment", "deployments")]
    #[case::ending_in_s("Ingress", "ingresses")]
    #[case::consonant_then_y("NetworkPolicy", "networkpolicies")]
    #[case::consonant_then_y_short("Policy", "policies")]
    #[case::vowel_then_y("Gateway", "gateways")]
    #[case::irregular("Endpoints", "endpoints")]
    #[case::ending_in_x("Mailbox", "mailboxes")]
    #[case::ending_in_ch("Patch", "patches")]
    #[case::config_map("ConfigMap", "configmaps")]
    #[case::deployment_config("AddOnDeploymentConfig", "addondeploymentconfigs")]
    #[case::empty("", "")]
    fn plurals_are_the_served_resources(#[case] kind: &str, #[case] resource: &str) {
        assert_eq!(plural(kind), resource);
    }
}
