//! Unit tests of the accept controller's builders and event mapping; acceptance itself is
//! tested against a real apiserver in `tests/hub_accept.rs`.

use flotilla_api::cluster::consts::CLUSTER_NAME_LABEL;
use k8s_openapi::{api::rbac::v1::ClusterRole, jiff::Timestamp};

use super::{cluster_of, reconcile};

#[test]
fn the_namespace_is_named_and_labelled_after_the_cluster() {
    let namespace = reconcile::namespace("cluster1");
    assert_eq!(namespace.metadata.name.as_deref(), Some("cluster1"));
    assert_eq!(
        namespace
            .metadata
            .labels
            .unwrap()
            .get(CLUSTER_NAME_LABEL)
            .map(String::as_str),
        Some("cluster1")
    );
}

#[test]
fn the_lease_is_held_by_its_own_name_and_defaults_to_sixty_seconds() {
    let now = Timestamp::from_second(1000).unwrap();
    let lease = reconcile::cluster_lease("cluster1", 0, now);
    assert_eq!(lease.metadata.name.as_deref(), Some("managed-cluster-lease"));
    assert_eq!(lease.metadata.namespace.as_deref(), Some("cluster1"));
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("managed-cluster-lease"));
    assert_eq!(spec.lease_duration_seconds, Some(60));
    assert_eq!(spec.renew_time.map(|t| t.0), Some(now));
    let short = reconcile::cluster_lease("cluster1", 2, now);
    assert_eq!(short.spec.unwrap().lease_duration_seconds, Some(2));
}

#[test]
fn rbac_events_map_to_the_labelled_cluster_only() {
    let mut role = ClusterRole::default();
    assert_eq!(cluster_of(role.clone()), None);
    role.metadata.labels = Some([(CLUSTER_NAME_LABEL.to_owned(), String::new())].into());
    assert_eq!(
        cluster_of(role.clone()),
        None,
        "hub-wide roles carry an empty label"
    );
    role.metadata.labels = Some([(CLUSTER_NAME_LABEL.to_owned(), "c1".to_owned())].into());
    assert_eq!(cluster_of(role).map(|r| r.name), Some("c1".to_owned()));
}
