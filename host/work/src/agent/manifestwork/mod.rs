//! The ManifestWork controller of the work agent: watches the ManifestWorks of the agent's
//! cluster namespace on the hub (with the agent's hub credential) and reconciles each one
//! ([`reconcile()`]): finalizer, apply in kind order, AppliedManifestWork record, clean-up of
//! dropped manifests, status. Requeued every status-sync interval while status needs
//! watching, else every resync interval ±50 % so drift is reverted.
//!
//! `reconcile.rs` reads the work and runs the steps in order; each step is a file of its own:
//! [`finalize`], [`record`], [`apply`], [`prune`], [`status`] ([`manifest`] holds what the
//! apply and the status must agree on).

mod apply;
mod finalize;
mod manifest;
mod prune;
mod reconcile;
mod record;
mod status;

pub(crate) use reconcile::reconcile;
