//! Which ClusterClaims of the managed cluster go into the ManagedCluster's
//! `status.clusterClaims`: claims labelled `open-cluster-management.io/spoke-only` stay home;
//! reserved claims (`id.k8s.io`, `kubeversion.open-cluster-management.io`, …) come first,
//! sorted by name; then custom claims sorted by name, at most `max_custom` of them (OCM's
//! default is 20), so a cluster cannot bloat its hub record.

/// A claim as reported to the hub.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The ClusterClaim's name.
    pub name: String,
    /// Its `spec.value`.
    pub value: String,
}

/// A ClusterClaim as found on the managed cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FoundClaim<'a> {
    /// The ClusterClaim's name.
    pub name: &'a str,
    /// Its `spec.value`.
    pub value: &'a str,
    /// Whether it carries the spoke-only label.
    pub spoke_only: bool,
}

/// The claims to report, and how many custom claims were left out by the cap.
pub fn reported<'a>(
    found: impl IntoIterator<Item = FoundClaim<'a>>,
    reserved_names: &[&str],
    max_custom: usize,
) -> (Vec<Claim>, usize) {
    let mut reserved = Vec::new();
    let mut custom = Vec::new();
    for claim in found.into_iter().filter(|c| !c.spoke_only) {
        let entry = Claim {
            name: claim.name.to_owned(),
            value: claim.value.to_owned(),
        };
        if reserved_names.contains(&claim.name) {
            reserved.push(entry);
        } else {
            custom.push(entry);
        }
    }
    reserved.sort_by(|a, b| a.name.cmp(&b.name));
    custom.sort_by(|a, b| a.name.cmp(&b.name));
    let dropped = custom.len().saturating_sub(max_custom);
    custom.truncate(max_custom);
    reserved.extend(custom);
    (reserved, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESERVED: [&str; 4] = [
        "id.k8s.io",
        "kubeversion.open-cluster-management.io",
        "platform.open-cluster-management.io",
        "product.open-cluster-management.io",
    ];

    fn found(name: &str) -> FoundClaim<'_> {
        FoundClaim {
            name,
            value: "v",
            spoke_only: false,
        }
    }

    #[test]
    fn reserved_claims_come_first_then_custom_claims_by_name() {
        let claims = [
            found("zeta.example.com"),
            found("product.open-cluster-management.io"),
            found("alpha.example.com"),
            found("id.k8s.io"),
        ];
        let (reported, dropped) = reported(claims, &RESERVED, 20);
        let names: Vec<&str> = reported.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "id.k8s.io",
                "product.open-cluster-management.io",
                "alpha.example.com",
                "zeta.example.com"
            ]
        );
        assert_eq!(dropped, 0);
    }

    #[test]
    fn spoke_only_claims_are_hidden() {
        let claims = [
            FoundClaim {
                name: "secret.example.com",
                value: "x",
                spoke_only: true,
            },
            FoundClaim {
                name: "id.k8s.io",
                value: "x",
                spoke_only: true,
            },
            found("public.example.com"),
        ];
        let (reported, _) = reported(claims, &RESERVED, 20);
        assert_eq!(reported.len(), 1);
        assert_eq!(reported[0].name, "public.example.com");
    }

    #[test]
    fn custom_claims_are_capped_but_reserved_ones_are_not() {
        let names: Vec<String> = (0..25).map(|i| format!("custom-{i:02}.example.com")).collect();
        let mut claims: Vec<FoundClaim<'_>> = names.iter().map(|n| found(n)).collect();
        claims.extend(RESERVED.iter().map(|n| found(n)));
        let (reported, dropped) = reported(claims, &RESERVED, 20);
        assert_eq!(reported.len(), 24);
        assert_eq!(dropped, 5);
        assert_eq!(reported[0].name, "id.k8s.io");
        assert_eq!(reported[4].name, "custom-00.example.com");
        assert_eq!(reported[23].name, "custom-19.example.com");
    }
}
