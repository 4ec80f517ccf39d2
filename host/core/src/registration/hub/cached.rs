//! What the hub's caches keep of a ManagedCluster.
//!
//! A cluster's agent writes its ManagedCluster's status (claims, capacity, allocatable,
//! version) and may write it large: tens of thousands of claims fit in one object. Caches that
//! never read those fields drop them ([`for_registration`]); the placement cache, which does,
//! keeps no more claims than an agent reports ([`bound_claims`]).

use flotilla_api::cluster::{
    consts::{MAX_CUSTOM_CLUSTER_CLAIMS, RESERVED_CLUSTER_CLAIM_NAMES},
    v1::{ManagedCluster, ManagedClusterClaim, ManagedClusterVersion},
};

use super::cleanup::FORCE_CLEANUP_ANNOTATION;

/// What the registration controllers read of a cluster: its spec, labels, finalizers, deletion,
/// conditions and whether the admin forces its clean-up ([`FORCE_CLEANUP_ANNOTATION`], kept
/// as `"true"` only). The agent-written rest of the status, other annotations and managed
/// fields go.
/// The controllers write clusters by patches of the fields they own, never by replacing a
/// cached object, so nothing dropped here is ever written back.
pub fn for_registration(cluster: &mut ManagedCluster) {
    cluster.metadata.managed_fields = None;
    let forced = cluster.metadata.annotations.take().is_some_and(|a| {
        a.get(FORCE_CLEANUP_ANNOTATION)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    });
    cluster.metadata.annotations =
        forced.then(|| [(FORCE_CLEANUP_ANNOTATION.to_owned(), "true".to_owned())].into());
    if let Some(status) = &mut cluster.status {
        status.capacity.clear();
        status.allocatable.clear();
        status.version = ManagedClusterVersion::default();
        status.cluster_claims = Vec::new();
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
    fn registration_caches_keep_nothing_the_agent_writes_but_conditions() {
        let mut cluster = ManagedCluster::new("c1", Default::default());
        cluster.metadata.annotations = Some([("a".to_owned(), "x".repeat(100_000))].into());
        cluster.metadata.labels = Some([("l".to_owned(), "v".to_owned())].into());
        cluster.status = Some(ManagedClusterStatus {
            cluster_claims: (0..10_000).map(|i| claim(&format!("c{i}"), "v")).collect(),
            capacity: [("cpu".to_owned(), Default::default())].into(),
            ..Default::default()
        });
        for_registration(&mut cluster);
        let status = cluster
            .status
            .as_ref()
            .map(|s| (s.cluster_claims.len(), s.capacity.len()));
        assert_eq!(status, Some((0, 0)));
        assert_eq!(cluster.metadata.annotations, None);
        assert!(
            cluster.metadata.labels.is_some(),
            "labels are read (cluster sets, add-on features)"
        );
    }

    #[test]
    fn only_the_force_cleanup_annotation_is_kept() {
        let mut cluster = ManagedCluster::new("c", Default::default());
        cluster.metadata.annotations = Some(
            [
                ("a".to_owned(), "x".repeat(1000)),
                (FORCE_CLEANUP_ANNOTATION.to_owned(), " True".to_owned()),
            ]
            .into(),
        );
        for_registration(&mut cluster);
        assert_eq!(
            cluster.metadata.annotations,
            Some([(FORCE_CLEANUP_ANNOTATION.to_owned(), "true".to_owned())].into())
        );
    }
}
