//! Pure rules of cluster registration: what the hub decides (approval, availability, taints,
//! RBAC) and what the agent decides (claims, rotation), kept apart from the controllers that
//! read and write the objects.

pub mod agent;
pub mod hub;
