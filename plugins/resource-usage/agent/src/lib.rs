//! The pure part of the resource-usage-collect add-on's agent: reading Kubernetes quantities
//! and turning the managed cluster's Nodes and Pods into scores. No client, no clock; the
//! binary (`main.rs`) watches the cluster and publishes what [`score::compute`] returns.
//!
//! A library so that the quantity reader, which reads what the managed cluster's API returns,
//! can be fuzzed with the sums the scores make of it (`tests/fuzz`, target
//! `resource_usage_quantity`).

pub mod quantity;
pub mod score;
