//! Building blocks of add-on agents: the native programs an add-on's plugin deploys on every
//! managed cluster (helloworld's, resource-usage's and managed-serviceaccount's among them).
//!
//! ```text
//!  managed cluster, install namespace                      hub, cluster namespace
//!  ┌──────────────────────────────────────────────┐
//!  │ Secret <addon>-hub-kubeconfig (klusterlet)   │
//!  │   mounted at <dir> ─▶ credential::HubCredential ──client──▶ the add-on's own resources
//!  │                        (reread every CHECK; reconnects when rotated)
//!  │ Lease <addon> ◀── lease::LeaseRenewer (every period)     │
//!  └──────────────────────────────────────────────┘
//!          ▲ the klusterlet judges the add-on Available while the Lease is fresh
//! ```
//!
//! * [`lease`]: keeps Lease `<addon>` fresh, as addon-framework's lease updater does for OCM's
//!   agents (health mode `Lease`).
//! * [`credential`]: reads the hub credential the klusterlet obtains and rotates, builds clients
//!   from kubeconfig files, and runs an agent's hub work on a client that is rebuilt whenever
//!   the credential changes.
//!
//! Failures are [`Error`]s named by the operation that failed; the loops that run for the life
//! of an agent log them to stderr, prefixed with the agent's name, and retry.
#![deny(missing_docs)]

pub mod credential;
mod error;
pub mod lease;

pub use error::{Error, Result};

/// `error` and its sources, outermost first, joined by `": "` (as anyhow's `{:#}` shows them).
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_names_every_cause_outermost_first() {
        let error = Error::ListCredential {
            dir: "/var/run/hub".into(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
        };
        assert_eq!(
            chain(&error),
            "list the hub credential in /var/run/hub: no such directory"
        );
    }
}
