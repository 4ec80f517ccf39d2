//! `cluster.core.oam.dev`: ClusterGateway, the cluster-gateway add-on's view of a managed
//! cluster with the credentials to reach its kube-apiserver.
//!
//! ```text
//! client ── /apis/cluster.core.oam.dev/v1alpha1/clustergateways/<cluster>/proxy/<path> ──▶
//!   aggregated apiserver ── spec.access.endpoint + credential ──▶ <cluster>'s kube-apiserver/<path>
//! ```
//!
//! ClusterGateway is served by an aggregated apiserver (an APIService, not a CRD), so there is no
//! CRD to generate; these are the wire types and names a client needs.

pub mod consts;
pub mod v1alpha1;

/// The API group.
pub const GROUP: &str = "cluster.core.oam.dev";
