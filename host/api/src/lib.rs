//! OCM and Flotilla API types, and the CRDs generated from them.
//!
//! Every Open Cluster Management kind Flotilla serves is a Rust type here, with kube's
//! `#[derive(CustomResource)]`, laid out by group and version:
//!
//! ```text
//! cluster.open-cluster-management.io   cluster::{v1, v1alpha1, v1beta1, v1beta2}, cluster::consts
//! work.open-cluster-management.io      work::{v1, v1alpha1}, work::consts
//! addon.open-cluster-management.io     addon::{v1alpha1, v1beta1}, addon::consts
//! authentication.open-cluster-management.io
//!                                      authentication::{v1alpha1, v1beta1}, authentication::consts
//! plugins.flotilla.dev                 plugins::v1alpha1, plugins::consts
//! cluster.core.oam.dev                 gateway::v1alpha1, gateway::consts (aggregated API, no CRD)
//! ```
//!
//! [`crds::crds`] returns every CRD exactly as Flotilla installs it; `deploy/crds/` holds the same
//! CRDs as YAML, written by `cargo run -p flotilla-api --bin flotilla-crdgen`. Use [`crds::crds`]
//! rather than `Kind::crd()`: the derive's raw schema still needs the OCM fixes that
//! [`crds`] applies (defaults, nullability, upstream list and map markers).
//!
//! # Wire format: Go's `encoding/json`, field by field
//!
//! OCM clients are written in Go, so an object must serialize the way Go's `encoding/json` would
//! serialize the OCM Go type. The fields follow these rules:
//!
//! | Go field | Rust field |
//! |---|---|
//! | scalar with `omitempty` | plain type, `#[serde(default, skip_serializing_if = "<is zero>")]` |
//! | enum-validated string with `omitempty` | `Option<Enum>`, skipped when `None` |
//! | scalar without `omitempty` | plain type, `#[serde(default)]`, always written (`reason: ""`, `force: false`) |
//! | slice or map with `omitempty` | `Vec`/`BTreeMap`, skipped when empty |
//! | slice, map or pointer without `omitempty` | `Option<T>`, always written, `None` is `null` |
//! | pointer with `omitempty` | `Option<T>`, skipped when `None` (`Some(0)` is written) |
//! | struct (with or without `omitempty`) | plain struct, `#[serde(default)]`, always written |
//!
//! A field the OCM CRD marks required has no serde default, so it must be present. Strings the
//! CRD limits to an enum are Rust enums; other strings stay `String` (constants list the known
//! values). The root object's `status` is written only when `Some` (kube's derive).
//! Values are kept as written: durations and quantities are strings and are not put into Go's
//! canonical form.
//!
//! Where OCM's CRD allows a whole `spec` to be missing, the spec type also accepts an absent or
//! `null` spec (see `default_if_absent!`), as Go does.

#![deny(missing_docs)]

#[macro_use]
mod macros;

pub mod addon;
pub mod authentication;
pub mod cluster;
pub mod crds;
pub mod error;
pub mod fixtures;
pub mod gateway;
pub mod plugins;
pub mod schema;
pub mod work;

#[cfg(test)]
mod tests;

/// Upstream Kubernetes types used in OCM fields, re-exported so users need not name k8s-openapi.
pub mod upstream {
    pub use k8s_openapi::ByteString;
    pub use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
    pub use k8s_openapi::api::rbac::v1::RoleRef;
    pub use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        Condition, LabelSelector, LabelSelectorRequirement, Time,
    };
    pub use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
}

/// `skip_serializing_if` predicates that mirror Go's `omitempty` zero values.
pub(crate) mod omit {
    /// Go omits a `false` bool.
    pub(crate) fn is_false(v: &bool) -> bool {
        !*v
    }

    /// Go omits a zero integer.
    pub(crate) fn is_zero_i32(v: &i32) -> bool {
        *v == 0
    }

    /// Go omits a zero integer.
    pub(crate) fn is_zero_i64(v: &i64) -> bool {
        *v == 0
    }
}
