//! Caches keyed by add-ons (the deploy's last plugin outputs, the registration's applied
//! permissions, template instances) would outlive their add-ons: kube-runtime does not reconcile
//! an object already gone from its store, so an add-on deleted without a final reconcile would
//! keep its entries for the life of the process. Every [`INTERVAL`], each cache keeps only the
//! entries of add-ons the store still holds.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use kube::runtime::reflector::Store;

/// How often the caches are pruned: a deleted add-on's entries are gone within this.
pub(crate) const INTERVAL: Duration = Duration::from_secs(30);

/// Runs `prune` with the add-ons in `addons` every [`INTERVAL`], until dropped. Nothing is
/// pruned before the store has synced, when it would look empty.
pub(crate) async fn every_interval(
    addons: Store<ManagedClusterAddOn>,
    prune: impl Fn(&[Arc<ManagedClusterAddOn>]),
) {
    if addons.wait_until_ready().await.is_err() {
        return;
    }
    let mut ticker = tokio::time::interval(INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticker.tick().await;
        prune(&addons.state());
    }
}

/// Keeps the entries of `cache` whose key is in `live`; returns how many went.
pub(crate) fn retain_live<K: Eq + Hash + Ord, V>(cache: &Mutex<HashMap<K, V>>, live: &BTreeSet<K>) -> usize {
    let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    let before = cache.len();
    cache.retain(|key, _| live.contains(key));
    before - cache.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_live_keys_stay() {
        let cache = Mutex::new(HashMap::from([("c1/a".to_owned(), 1), ("c2/a".to_owned(), 2)]));
        let live = BTreeSet::from(["c2/a".to_owned(), "c3/a".to_owned()]);
        assert_eq!(retain_live(&cache, &live), 1);
        assert_eq!(cache.lock().unwrap().keys().collect::<Vec<_>>(), ["c2/a"]);
    }
}
