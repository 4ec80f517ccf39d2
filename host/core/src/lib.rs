//! Pure logic shared by Flotilla's controllers. Nothing here performs I/O or talks to a
//! cluster, so every function is tested with plain unit tests.

#![deny(missing_docs)]

pub mod addon;
pub mod cel_budget;
pub mod conditions;
pub mod cosign;
pub mod leader;
pub mod names;
pub mod placement;
pub mod plugin_faults;
pub mod plugin_sources;
pub mod rate;
pub mod registration;
pub mod report;
pub mod resources;
pub mod rollout;
pub mod selector;
pub mod work;
pub mod x509;
