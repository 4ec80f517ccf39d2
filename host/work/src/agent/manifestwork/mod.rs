//! The ManifestWork controller of the work agent: watches the ManifestWorks of the agent's
//! cluster namespace on the hub (with the agent's hub credential) and reconciles each one
//! ([`reconcile`]): finalizer, apply in kind order, AppliedManifestWork record, clean-up of
//! dropped manifests, status. Requeued every status-sync interval while status needs
//! watching, else every resync interval ±50 % so drift is reverted.

mod reconcile;

pub(crate) use reconcile::reconcile;
