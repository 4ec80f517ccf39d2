//! Controller plumbing shared by Flotilla's controllers.
//!
//! Every reconciler has one shape (style rule 2): read the object from the store, return early
//! (gone, deleting → finalizer), compute the desired state with a pure function, apply it
//! server-side with a named field manager, patch status once if it changed, requeue. This crate
//! holds the I/O halves of that shape so each controller only writes the pure part:
//!
//! - [`status::patch_if_changed`]: one merge patch of `/status`, skipped when nothing changed,
//!   guarded by the object's `resourceVersion` like OCM's own writers;
//! - [`finalizer`]: add or remove one finalizer with a JSON patch that fails on a stale list;
//! - [`apply`]: server-side apply under Flotilla's field manager;
//! - [`backoff`]: the requeue policy for failed reconciles;
//! - [`controller::run`]: the run loop with that policy, shared logging and metrics;
//! - [`feed`]: one watch and one cache per kind, shared by the controllers that read it;
//! - [`leader`]: lease-based leader election; [`metrics`]: the process's operational series;
//! - [`kubeconfig`]: what a kubeconfig read from a Secret may ask of the agent's host;
//! - [`server`]: the limits of the HTTP servers the network reaches (webhook, metrics).

#![deny(missing_docs)]

pub mod apply;
pub mod backoff;
pub mod controller;
pub mod crds;
pub mod error;
pub mod events;
pub mod feed;
pub mod finalizer;
pub mod kubeconfig;
pub mod leader;
pub mod metrics;
pub mod server;
pub mod status;

pub use error::{Error, Result};

/// The field manager of every write Flotilla's hub and agents make.
pub const FIELD_MANAGER: &str = "flotilla";
