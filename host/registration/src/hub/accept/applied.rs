//! What the accept controller last applied for each cluster, so that the burst of reconciles
//! a new cluster gets (its default set label, its finalizer, its HubAccepted condition: each
//! a change it reads) applies the namespace, RBAC and lease once, not once per change.
//!
//! An entry is trusted for half the resync period and only for the cluster object (uid) it
//! was made for; a drift event on the cluster's RBAC forgets it at once. So a resync still
//! applies everything again, and drift is still repaired when it is seen.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Per cluster name: the uid of the cluster applied for, and when.
#[derive(Default)]
pub(super) struct Applied {
    entries: Mutex<HashMap<String, (String, Instant)>>,
}

impl Applied {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Instant)>> {
        // Every critical section leaves the map consistent.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether everything was applied for cluster `name` (object `uid`) less than `trust` ago.
    pub(super) fn fresh(&self, name: &str, uid: &str, trust: Duration) -> bool {
        self.entries()
            .get(name)
            .is_some_and(|(applied_uid, at)| applied_uid == uid && at.elapsed() < trust)
    }

    /// Records that everything was applied for cluster `name` (object `uid`) now.
    pub(super) fn remember(&self, name: &str, uid: &str) {
        self.entries()
            .insert(name.to_owned(), (uid.to_owned(), Instant::now()));
    }

    /// Forgets cluster `name`: its next reconcile applies everything.
    pub(super) fn forget(&self, name: &str) {
        self.entries().remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_holds_for_its_cluster_object_until_it_ages_or_is_forgotten() {
        let applied = Applied::default();
        let trust = Duration::from_secs(10);
        assert!(!applied.fresh("c", "u1", trust));
        applied.remember("c", "u1");
        assert!(applied.fresh("c", "u1", trust));
        // A cluster deleted and made again under the same name is another object.
        assert!(!applied.fresh("c", "u2", trust));
        assert!(!applied.fresh("c", "u1", Duration::ZERO));
        applied.remember("c", "u1");
        applied.forget("c");
        assert!(!applied.fresh("c", "u1", trust));
    }
}
