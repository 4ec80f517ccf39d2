//! Errors that stop one reconcile of the add-on manager; each names the failed operation so a
//! log line says what to fix. Plugin faults and bad input are not errors: they are reported in
//! the add-on's conditions.

/// Result of a reconcile step.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a reconcile stopped; retried with backoff by the shared run loop.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading an object or a list from the API server failed.
    #[error("read {what}: {source}")]
    Read {
        /// What was read.
        what: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Writing (creating, applying, deleting) an object failed.
    #[error("write {what}: {source}")]
    Write {
        /// What was written.
        what: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A shared write helper (status patch) failed.
    #[error(transparent)]
    Kube(#[from] flotilla_kube::Error),
}

/// A read error naming `what`.
pub(crate) fn read(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Read { what, source }
}

/// A write error naming `what`.
pub(crate) fn write(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Write { what, source }
}
