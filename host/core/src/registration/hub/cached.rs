//! What the hub's caches keep of a ManagedCluster.
//!
//! A cluster's agent writes its ManagedCluster's status (claims, capacity, allocatable,
//! version) and may write it large: tens of thousands of claims fit in one object. The hub's
//! cache keeps no more claims than an agent reports ([`for_hub`]).

use flotilla_api::cluster::{
    consts::{MAX_CUSTOM_CLUSTER_CLAIMS, RESERVED_CLUSTER_CLAIM_NAMES},
    v1::{ManagedCluster, ManagedClusterClaim},
};

/// What the hub's one ManagedCluster cache keeps, shared by registration, placement and the
/// add-on manager: the object but its managed fields, with no more claims than an agent
/// reports ([`bound_claims`]). Placement reads the rest (capacity, allocatable, version and
/// claims for its scores and CEL selectors); the others' subscriptions hash only the part they
/// read, so the agent's writes to the rest wake none of them.
pub fn for_hub(cluster: &mut ManagedCluster) {
    cluster.metadata.managed_fields = None;
    if let Some(status) = &mut cluster.status {
        bound_claims(&mut status.cluster_claims);
    }
}

/// Keeps the claims an agent reports (OCM's registration agent and Flotilla's alike): each
/// reserved claim once, and at most [`MAX_CUSTOM_CLUSTER_CLAIMS`] custom ones, in the order
/// written. A list an agent wrote within those bounds is kept as it is.
pub fn bound_claims(claims: &mut Vec<ManagedClusterClaim>) {
    let mut reserved_seen = [false; RESERVED_CLUSTER_CLAIM_NAMES.len()];
    let mut custom = 0;
    claims.retain(|claim| {
        match RESERVED_CLUSTER_CLAIM_NAMES
            .iter()
            .position(|name| *name == claim.name)
        {
            Some(i) => !std::mem::replace(&mut reserved_seen[i], true),
            None => {
                custom += 1;
                custom <= MAX_CUSTOM_CLUSTER_CLAIMS
            }
        }
    });
    claims.shrink_to_fit();
}

#[cfg(test)]
mod tests {
    use flotilla_api::cluster::v1::ManagedClusterStatus;

    use super::*;

    fn claim(name: &str, value: &str) -> ManagedClusterClaim {
        ManagedClusterClaim {
            name: name.into(),
            value: value.into(),
        }
    }

    #[test]
    fn an_agents_own_list_is_kept_and_a_flood_is_cut_to_what_an_agent_reports() {
        let mut honest: Vec<_> = [
            claim("id.k8s.io", "x"),
            claim("platform.open-cluster-management.io", "k"),
        ]
        .into_iter()
        .chain((0..MAX_CUSTOM_CLUSTER_CLAIMS).map(|i| claim(&format!("c{i:02}"), "v")))
        .collect();
        let before = honest.clone();
        bound_claims(&mut honest);
        assert_eq!(honest, before);

        let mut flood: Vec<_> = (0..50_000)
            .map(|i| claim(&format!("c{i}"), "v"))
            .chain((0..1000).map(|_| claim("id.k8s.io", "spoofed")))
            .collect();
        flood.insert(0, claim("id.k8s.io", "first"));
        bound_claims(&mut flood);
        assert_eq!(flood.len(), 1 + MAX_CUSTOM_CLUSTER_CLAIMS);
        assert_eq!(flood[0], claim("id.k8s.io", "first"));
        assert_eq!(flood[MAX_CUSTOM_CLUSTER_CLAIMS], claim("c19", "v"));
    }

    #[test]
    fn the_hub_cache_keeps_what_placement_reads_and_bounds_the_claims() {
        let mut cluster = ManagedCluster::new("c1", Default::default());
        cluster.metadata.annotations = Some([("a".to_owned(), "x".to_owned())].into());
        cluster.metadata.managed_fields = Some(vec![Default::default()]);
        cluster.status = Some(ManagedClusterStatus {
            cluster_claims: (0..10_000).map(|i| claim(&format!("c{i}"), "v")).collect(),
            capacity: [("cpu".to_owned(), Default::default())].into(),
            ..Default::default()
        });
        for_hub(&mut cluster);
        let status = cluster
            .status
            .as_ref()
            .map(|s| (s.cluster_claims.len(), s.capacity.len()));
        assert_eq!(status, Some((MAX_CUSTOM_CLUSTER_CLAIMS, 1)));
        assert!(cluster.metadata.annotations.is_some());
        assert_eq!(cluster.metadata.managed_fields, None);
    }
}
