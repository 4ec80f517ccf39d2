//! Pure rules of ManifestWork: what the klusterlet's work agent decides ([`agent`]) and what
//! the hub decides ([`replicaset`]), kept apart from the controllers that read and write the
//! objects.

pub mod agent;
pub mod replicaset;
