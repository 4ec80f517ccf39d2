//! The add-on writer's memory of its own writes, so a write never starts from a cache that is
//! behind the last one.

use std::sync::Arc;

use crate::UNSEEN_FOR_AT_MOST;

/// Objects as this process last wrote them, until the watches show it: a write started from
/// a cache still behind this process's last write is refused (409), so the add-on writer
/// ([`super::StatusWriter`]) starts each write from [`LatestWrites::latest`]. A conflict with someone
/// else's write (the klusterlet's) records the object as read after it.
pub(crate) struct LatestWrites<K: kube::Resource<DynamicType = ()>>(std::sync::Mutex<Latest<K>>);

/// The last writes by object, and the size at which expired ones are swept next.
struct Latest<K: kube::Resource<DynamicType = ()>> {
    writes: std::collections::HashMap<kube::runtime::reflector::ObjectRef<K>, Written<K>>,
    sweep_at: usize,
}

/// One object as last written: the resourceVersions it replaced, and when.
struct Written<K> {
    outdated: Vec<String>,
    object: Arc<K>,
    at: std::time::Instant,
}

impl<K: kube::Resource<DynamicType = ()>> Default for LatestWrites<K> {
    fn default() -> Self {
        Self(std::sync::Mutex::new(Latest {
            writes: std::collections::HashMap::new(),
            sweep_at: 64,
        }))
    }
}

impl<K> LatestWrites<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    /// Records `written`, the object as returned by a write made from resourceVersion `base`.
    pub(crate) fn record(&self, base: Option<String>, written: K) {
        let key = kube::runtime::reflector::ObjectRef::from_obj(&written);
        let Ok(mut latest) = self.0.lock() else {
            return;
        };
        let mut outdated: Vec<String> = match latest.writes.remove(&key) {
            Some(before) if before.at.elapsed() < UNSEEN_FOR_AT_MOST => {
                let mut outdated = before.outdated;
                outdated.extend(before.object.meta().resource_version.clone());
                outdated
            }
            _ => Vec::new(),
        };
        outdated.extend(base);
        latest.writes.insert(
            key,
            Written {
                outdated,
                object: Arc::new(written),
                at: std::time::Instant::now(),
            },
        );
        if latest.writes.len() >= latest.sweep_at {
            latest.writes.retain(|_, w| w.at.elapsed() < UNSEEN_FOR_AT_MOST);
            latest.sweep_at = (2 * latest.writes.len()).max(64);
        }
    }

    /// `cached`, or the state this process wrote since if the cache is behind it.
    pub(crate) fn latest(&self, cached: Arc<K>) -> Arc<K> {
        let key = kube::runtime::reflector::ObjectRef::from_obj(cached.as_ref());
        let Ok(mut latest) = self.0.lock() else {
            return cached;
        };
        let Some(written) = latest.writes.get(&key) else {
            return cached;
        };
        let version = cached.meta().resource_version.as_ref();
        if written.at.elapsed() < UNSEEN_FOR_AT_MOST && version.is_some_and(|v| written.outdated.contains(v))
        {
            return Arc::clone(&written.object);
        }
        if written.at.elapsed() >= UNSEEN_FOR_AT_MOST
            || version == written.object.meta().resource_version.as_ref()
        {
            // The cache caught up (or the write is too old to matter).
            latest.writes.remove(&key);
        }
        cached
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use flotilla_api::addon::v1alpha1::{ManagedClusterAddOn, ManagedClusterAddOnSpec};
    use kube::ResourceExt as _;

    use super::LatestWrites;

    fn addon(version: &str) -> Arc<ManagedClusterAddOn> {
        let mut addon = ManagedClusterAddOn::new("hello", ManagedClusterAddOnSpec::default());
        addon.metadata.namespace = Some("cluster1".into());
        addon.metadata.resource_version = Some(version.into());
        Arc::new(addon)
    }

    fn version(addon: &ManagedClusterAddOn) -> String {
        addon.resource_version().unwrap_or_default()
    }

    #[test]
    fn a_cache_behind_the_writes_gives_the_last_one() {
        let writes = LatestWrites::default();
        writes.record(Some("1".into()), ManagedClusterAddOn::clone(&addon("2")));
        writes.record(Some("2".into()), ManagedClusterAddOn::clone(&addon("3")));
        assert_eq!(version(&writes.latest(addon("1"))), "3");
        assert_eq!(version(&writes.latest(addon("2"))), "3");
    }

    #[test]
    fn a_cache_that_caught_up_or_moved_on_is_its_own_answer() {
        let writes = LatestWrites::default();
        writes.record(Some("1".into()), ManagedClusterAddOn::clone(&addon("2")));
        // Someone else wrote after us: the cache knows better.
        assert_eq!(version(&writes.latest(addon("7"))), "7");
        // Caught up: the record is dropped, so an old version no longer maps to it.
        assert_eq!(version(&writes.latest(addon("2"))), "2");
        assert_eq!(version(&writes.latest(addon("1"))), "1");
    }

    #[test]
    fn writes_of_other_objects_do_not_mix() {
        let writes = LatestWrites::default();
        writes.record(Some("1".into()), ManagedClusterAddOn::clone(&addon("2")));
        let mut other = ManagedClusterAddOn::clone(&addon("1"));
        other.metadata.namespace = Some("cluster2".into());
        assert_eq!(version(&writes.latest(Arc::new(other))), "1");
    }
}
