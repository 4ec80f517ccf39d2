//! Pure rules of ManifestWork: what the klusterlet's work agent decides and what the hub
//! decides ([`replicaset`]), kept apart from the controllers that read and write the objects.

pub mod replicaset;
