//! How the controllers write an add-on's status: one at a time, each from the last write, and
//! the changes that can wait written together.
//!
//! Four controllers write each add-on's status: registration (`registrations`, `namespace`,
//! `RegistrationApplied`), health (`healthCheck`, `Available`), rollout (`configReferences`,
//! `Configured`) and deploy (`ManifestApplied`, `Progressing`). A new add-on wakes all four,
//! and each wrote at once: four status writes per add-on were most of the apiserver's CPU when
//! a thousand add-ons were enabled together. Now:
//!
//! - each takes its turn on the add-on before it reads it ([`SharedWrites::turn`]), so none
//!   races another to a conflict, and reads it as last written here ([`LatestWrites`]);
//! - registration and health, whose reports nothing else waits for, leave their changes
//!   pending for up to [`LINGER`] ([`defer_addon_status`]); the rollout's and deploy's writes
//!   ([`write_addon_status`]) carry whatever is pending, and what is still pending then is
//!   written by [`run`];
//! - a change is kept as the fields and conditions it set ([`StatusChange`]), so it applies
//!   on top of whatever the add-on's status has become by the time it is written.
//!
//! ```text
//!  registration ─ turn ─▶ pending ─┐
//!  health ─────── turn ─▶ pending ─┼─▶ rollout's or deploy's write, or after LINGER: one PUT
//!  rollout / deploy ───── turn ────┘
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use flotilla_api::addon::v1alpha1::{ManagedClusterAddOn, ManagedClusterAddOnStatus};
use futures::StreamExt as _;
use kube::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::Value;

use crate::LatestWrites;

/// How long a deferred change waits for another write to carry it: long enough for the
/// controllers a new add-on wakes together to meet, short against the lease-scale times
/// health is reported at.
pub(crate) const LINGER: Duration = Duration::from_secs(1);

/// The longest wait between attempts to write a deferred change that failed.
const RETRY_AT_MOST: Duration = Duration::from_secs(60);

/// What the controllers that write add-ons share: whose turn it is on each add-on, each
/// add-on as last written, and the changes deferred.
pub(crate) struct SharedWrites {
    turns: Turns<ManagedClusterAddOn>,
    pub(crate) latest: LatestWrites<ManagedClusterAddOn>,
    deferred: std::sync::Mutex<HashMap<ObjectRef<ManagedClusterAddOn>, Deferred>>,
    /// The add-ons as the watch shows them: what a deferred change is written on.
    addons: Store<ManagedClusterAddOn>,
    /// When each add-on's deferred changes are due ([`run`] writes them).
    due: futures::channel::mpsc::UnboundedSender<(ObjectRef<ManagedClusterAddOn>, tokio::time::Instant)>,
}

/// The add-on writes every controller shares ([`SharedWrites`]).
pub(crate) type AddonWrites = Arc<SharedWrites>;

/// When deferred changes are due, for [`run`].
pub(crate) type DueWrites =
    futures::channel::mpsc::UnboundedReceiver<(ObjectRef<ManagedClusterAddOn>, tokio::time::Instant)>;

/// An add-on's status changes not written yet.
struct Deferred {
    change: StatusChange,
    api: Api<ManagedClusterAddOn>,
}

impl SharedWrites {
    /// The shared writes over the add-on cache `addons`, and the queue [`run`] drains.
    pub(crate) fn new(addons: Store<ManagedClusterAddOn>) -> (AddonWrites, DueWrites) {
        let (due, queue) = futures::channel::mpsc::unbounded();
        let writes = Self {
            turns: Turns::default(),
            latest: LatestWrites::default(),
            deferred: std::sync::Mutex::new(HashMap::new()),
            addons,
            due,
        };
        (Arc::new(writes), queue)
    }

    /// Waits for the turn on `addon` (held as long as the guard), then gives its latest state:
    /// as last written here when the cache is behind, with the deferred changes in it.
    pub(crate) async fn turn(
        &self,
        addon: Arc<ManagedClusterAddOn>,
    ) -> (tokio::sync::OwnedMutexGuard<()>, Arc<ManagedClusterAddOn>) {
        let turn = self.turns.take(&ObjectRef::from_obj(addon.as_ref())).await;
        (turn, self.with_deferred(self.latest.latest(addon)))
    }

    /// The changes deferred for `key`.
    fn deferred_change(&self, key: &ObjectRef<ManagedClusterAddOn>) -> Option<StatusChange> {
        self.deferred.lock().ok()?.get(key).map(|d| d.change.clone())
    }

    /// `addon` with the changes deferred for it made.
    fn with_deferred(&self, addon: Arc<ManagedClusterAddOn>) -> Arc<ManagedClusterAddOn> {
        let Some(change) = self.deferred_change(&ObjectRef::from_obj(addon.as_ref())) else {
            return addon;
        };
        match change.apply(&addon.status.clone().unwrap_or_default()) {
            Ok(status) => {
                let mut addon = ManagedClusterAddOn::clone(&addon);
                addon.status = Some(status);
                Arc::new(addon)
            }
            Err(_) => addon,
        }
    }

    /// Writes `desired` as the status of `addon` if it changed (PUT), recording the write, or
    /// forgetting what was recorded when the add-on changed since it was read.
    async fn put(
        &self,
        api: &Api<ManagedClusterAddOn>,
        addon: &ManagedClusterAddOn,
        desired: ManagedClusterAddOnStatus,
    ) -> flotilla_kube::Result<Option<ManagedClusterAddOn>> {
        let result = flotilla_kube::status::replace_written_if_changed(
            api,
            addon,
            addon.status.as_ref(),
            desired,
            |addon, status| addon.status = Some(status),
        )
        .await;
        match &result {
            Ok(Some(written)) => self
                .latest
                .record(addon.metadata.resource_version.clone(), written.clone()),
            Err(e) if flotilla_kube::backoff::status_code(e) == Some(409) => {
                self.latest.forget(&ObjectRef::from_obj(addon));
            }
            _ => {}
        }
        result
    }

    /// Writes the changes deferred for `key` once, if they are still pending and the add-on
    /// still there; on failure they stay pending and the error is returned.
    async fn write_deferred(&self, key: &ObjectRef<ManagedClusterAddOn>) -> flotilla_kube::Result<()> {
        let _turn = self.turns.take(key).await;
        let Some(Deferred { change, api }) = self.deferred.lock().ok().and_then(|mut d| d.remove(key)) else {
            return Ok(());
        };
        let Some(cached) = self.addons.get(key) else {
            // Gone: nothing to report on.
            return Ok(());
        };
        let addon = self.latest.latest(cached);
        let current = addon.status.clone().unwrap_or_default();
        let desired = change
            .apply(&current)
            .map_err(|source| encode_error(&addon, source))?;
        let result = self.put(&api, &addon, desired).await;
        if result.is_err()
            && let Ok(mut deferred) = self.deferred.lock()
        {
            deferred.insert(key.clone(), Deferred { change, api });
        }
        result.map(|_| ())
    }
}

/// Writes `desired` as the status of `addon` (read during the caller's turn) if it changed,
/// with the changes deferred for it, whether or not `addon` was read with them: a whole-status
/// PUT, which costs the apiserver less than a merge patch, guarded by the resourceVersion read.
/// Returns the add-on as written (None: nothing changed).
pub(crate) async fn write_addon_status(
    writes: &AddonWrites,
    api: &Api<ManagedClusterAddOn>,
    addon: &ManagedClusterAddOn,
    desired: &ManagedClusterAddOnStatus,
) -> flotilla_kube::Result<Option<ManagedClusterAddOn>> {
    let key = ObjectRef::from_obj(addon);
    let Some(deferred) = writes.deferred_change(&key) else {
        return writes.put(api, addon, desired.clone()).await;
    };
    // Made again on the status as read: a no-op for changes it already has.
    let current = addon.status.clone().unwrap_or_default();
    let encode = |source| encode_error(addon, source);
    let change = StatusChange::between(&current, desired).map_err(encode)?;
    let with_deferred = deferred.apply(&current).map_err(encode)?;
    let written = writes
        .put(api, addon, change.apply(&with_deferred).map_err(encode)?)
        .await?;
    if written.is_some()
        && let Ok(mut pending) = writes.deferred.lock()
    {
        // The turn is held, so nothing was deferred since: what was is written.
        pending.remove(&key);
    }
    Ok(written)
}

/// Leaves `desired` as the status of `addon` (read during the caller's turn, with the
/// changes already deferred) to be written with the next write of it, within [`LINGER`].
/// Returns whether it changed anything.
pub(crate) fn defer_addon_status(
    writes: &AddonWrites,
    api: &Api<ManagedClusterAddOn>,
    addon: &ManagedClusterAddOn,
    desired: &ManagedClusterAddOnStatus,
) -> flotilla_kube::Result<bool> {
    let current = addon.status.clone().unwrap_or_default();
    let change = StatusChange::between(&current, desired).map_err(|source| encode_error(addon, source))?;
    if change.is_empty() {
        return Ok(false);
    }
    let key = ObjectRef::from_obj(addon);
    let Ok(mut deferred) = writes.deferred.lock() else {
        return Ok(false);
    };
    match deferred.entry(key.clone()) {
        std::collections::hash_map::Entry::Occupied(mut earlier) => earlier.get_mut().change.then(change),
        std::collections::hash_map::Entry::Vacant(slot) => {
            slot.insert(Deferred {
                change,
                api: api.clone(),
            });
            // The queue lives as long as the manager; once it is gone nothing is written.
            let _ = writes
                .due
                .unbounded_send((key, tokio::time::Instant::now() + LINGER));
        }
    }
    Ok(true)
}

/// Writes deferred changes when they are due, until dropped; a failed write is tried again,
/// first after [`crate::CACHE_WAIT`] (a conflict: the cache catches up), then less often.
pub(crate) async fn run(writes: AddonWrites, due: DueWrites) {
    due.for_each_concurrent(None, |(key, at)| {
        let writes = Arc::clone(&writes);
        async move {
            tokio::time::sleep_until(at).await;
            let mut wait = crate::CACHE_WAIT;
            while let Err(e) = writes.write_deferred(&key).await {
                tracing::debug!(addon = %key, error = %e, "deferred add-on status not written; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(RETRY_AT_MOST);
            }
        }
    })
    .await;
}

fn encode_error(addon: &ManagedClusterAddOn, source: serde_json::Error) -> flotilla_kube::Error {
    flotilla_kube::Error::Encode {
        what: format!("status of ManagedClusterAddOn {}", ObjectRef::from_obj(addon)),
        source,
    }
}

/// One controller's change to an add-on's status: the fields it set (null: removed) and the
/// conditions it set or removed, by type. Applied to a status that carries other
/// controllers' changes, it keeps them: each controller owns its own fields and conditions.
#[derive(Clone, Debug, Default, PartialEq)]
struct StatusChange {
    fields: serde_json::Map<String, Value>,
    conditions: BTreeMap<String, Option<Value>>,
}

/// The status field holding the conditions, merged by type rather than replaced.
const CONDITIONS: &str = "conditions";

impl StatusChange {
    /// What `desired` changes of `current`.
    fn between(
        current: &ManagedClusterAddOnStatus,
        desired: &ManagedClusterAddOnStatus,
    ) -> serde_json::Result<Self> {
        let (current, desired) = (fields(current)?, fields(desired)?);
        let mut change = Self::default();
        for key in current.keys().chain(desired.keys()) {
            if key == CONDITIONS || current.get(key) == desired.get(key) {
                continue;
            }
            let value = desired.get(key).cloned().unwrap_or(Value::Null);
            change.fields.insert(key.clone(), value);
        }
        let (before, after) = (by_type(&current), by_type(&desired));
        for kind in before.keys().chain(after.keys()) {
            if before.get(kind) != after.get(kind) {
                change
                    .conditions
                    .insert(kind.clone(), after.get(kind).map(|c| (*c).clone()));
            }
        }
        Ok(change)
    }

    /// This change, then `later`: where both set a field or condition, `later` wins.
    fn then(&mut self, later: Self) {
        self.fields.extend(later.fields);
        self.conditions.extend(later.conditions);
    }

    fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.conditions.is_empty()
    }

    /// `status` with this change made.
    fn apply(&self, status: &ManagedClusterAddOnStatus) -> serde_json::Result<ManagedClusterAddOnStatus> {
        let mut status = fields(status)?;
        for (key, value) in &self.fields {
            match value {
                Value::Null => status.remove(key),
                value => status.insert(key.clone(), value.clone()),
            };
        }
        if !self.conditions.is_empty() {
            let mut conditions = match status.remove(CONDITIONS) {
                Some(Value::Array(conditions)) => conditions,
                _ => Vec::new(),
            };
            for (kind, condition) in &self.conditions {
                let at = conditions.iter().position(|c| type_of(c) == Some(kind.as_str()));
                match (at, condition) {
                    (Some(at), Some(condition)) => conditions[at] = condition.clone(),
                    (Some(at), None) => {
                        conditions.remove(at);
                    }
                    (None, Some(condition)) => conditions.push(condition.clone()),
                    (None, None) => {}
                }
            }
            status.insert(CONDITIONS.to_owned(), Value::Array(conditions));
        }
        serde_json::from_value(Value::Object(status))
    }
}

/// The status as a JSON object (fields at their defaults may be left out).
fn fields(status: &ManagedClusterAddOnStatus) -> serde_json::Result<serde_json::Map<String, Value>> {
    match serde_json::to_value(status)? {
        Value::Object(fields) => Ok(fields),
        _ => Ok(serde_json::Map::new()),
    }
}

fn type_of(condition: &Value) -> Option<&str> {
    condition.get("type").and_then(Value::as_str)
}

/// The conditions of a status object, by type.
fn by_type(status: &serde_json::Map<String, Value>) -> BTreeMap<String, &Value> {
    status
        .get(CONDITIONS)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| Some((type_of(c)?.to_owned(), c)))
        .collect()
}

/// One turn at a time per object: the controllers that write an add-on's status take their
/// turn on it ([`Turns::take`]) before they read it, so each starts from the state the one
/// before it wrote ([`LatestWrites::latest`]) instead of racing it to a conflict.
struct Turns<K: kube::Resource<DynamicType = ()>>(
    std::sync::Mutex<HashMap<ObjectRef<K>, Arc<tokio::sync::Mutex<()>>>>,
);

impl<K: kube::Resource<DynamicType = ()>> Default for Turns<K> {
    fn default() -> Self {
        Self(std::sync::Mutex::new(HashMap::new()))
    }
}

impl<K> Turns<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    /// Waits for the turn on `object`; it lasts as long as the returned guard.
    async fn take(&self, object: &ObjectRef<K>) -> tokio::sync::OwnedMutexGuard<()> {
        let turn = {
            let Ok(mut turns) = self.0.lock() else {
                return Arc::new(tokio::sync::Mutex::new(())).lock_owned().await;
            };
            // Turns nobody holds or waits for are dropped, so the map stays as small as the
            // work in flight.
            turns.retain(|_, turn| Arc::strong_count(turn) > 1);
            Arc::clone(turns.entry(object.clone()).or_default())
        };
        turn.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use flotilla_api::addon::v1alpha1::HealthCheckMode;
    use flotilla_api::addon::v1alpha1::{ManagedClusterAddOnStatus, RegistrationConfig};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::Timestamp;

    use super::StatusChange;

    fn condition(kind: &str, status: &str) -> Condition {
        Condition {
            type_: kind.to_owned(),
            status: status.to_owned(),
            reason: "Because".to_owned(),
            message: String::new(),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
            observed_generation: None,
        }
    }

    fn with(conditions: &[Condition]) -> ManagedClusterAddOnStatus {
        ManagedClusterAddOnStatus {
            conditions: conditions.to_vec(),
            ..ManagedClusterAddOnStatus::default()
        }
    }

    #[test]
    fn changes_of_different_controllers_add_up() {
        let start = with(&[condition("Available", "Unknown")]);
        // Registration: its fields and its condition.
        let mut registered = start.clone();
        registered.namespace = "open-cluster-management-agent-addon".to_owned();
        registered.registrations = vec![RegistrationConfig {
            signer_name: "kubernetes.io/kube-apiserver-client".to_owned(),
            ..RegistrationConfig::default()
        }];
        registered
            .conditions
            .push(condition("RegistrationApplied", "True"));
        // Health, from the same start: another condition changed.
        let mut checked = start.clone();
        checked.health_check.mode = Some(HealthCheckMode::Customized);
        checked.conditions[0] = condition("Available", "True");

        let first = StatusChange::between(&start, &registered).unwrap();
        let second = StatusChange::between(&start, &checked).unwrap();
        let both = second.apply(&first.apply(&start).unwrap()).unwrap();

        assert_eq!(both.namespace, registered.namespace);
        assert_eq!(both.registrations, registered.registrations);
        assert_eq!(both.health_check.mode, Some(HealthCheckMode::Customized));
        assert_eq!(
            both.conditions,
            vec![
                condition("Available", "True"),
                condition("RegistrationApplied", "True")
            ]
        );
    }

    #[test]
    fn a_removal_is_a_change_too() {
        let mut start = with(&[condition("Configured", "True"), condition("Progressing", "True")]);
        start.namespace = "addons".to_owned();
        let mut desired = start.clone();
        desired.conditions.remove(1);
        desired.namespace = String::new();
        let change = StatusChange::between(&start, &desired).unwrap();
        assert!(!change.is_empty());
        // Applied to a status where another controller added a condition meanwhile.
        let mut elsewhere = start.clone();
        elsewhere.conditions.push(condition("Available", "True"));
        let result = change.apply(&elsewhere).unwrap();
        assert_eq!(result.namespace, "");
        assert_eq!(
            result.conditions,
            vec![condition("Configured", "True"), condition("Available", "True")]
        );
    }

    #[test]
    fn no_change_is_empty() {
        let start = with(&[condition("Available", "True")]);
        assert!(StatusChange::between(&start, &start.clone()).unwrap().is_empty());
    }
}

/// The writes against a real apiserver, with a cache fed by hand so a test decides what it
/// shows.
#[cfg(test)]
mod live {
    #![allow(clippy::expect_used, reason = "tests fail loudly")]

    use std::sync::Arc;
    use std::time::Duration;

    use flotilla_api::addon::v1alpha1::{
        ManagedClusterAddOn, ManagedClusterAddOnSpec, ManagedClusterAddOnStatus,
    };
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::Timestamp;
    use kube::api::PostParams;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    use kube::{Api, ResourceExt};

    use super::{LINGER, SharedWrites, defer_addon_status, run, write_addon_status};

    /// A new add-on `hello` in a namespace of its own.
    async fn addon(namespace: &str) -> (Api<ManagedClusterAddOn>, ManagedClusterAddOn) {
        let cp = flotilla_testing::shared("addon-writes")
            .await
            .expect("control plane starts");
        let client = cp.admin_client().await.expect("admin client");
        let mut ns = Namespace::default();
        ns.metadata.name = Some(namespace.to_owned());
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace created");
        let api = Api::<ManagedClusterAddOn>::namespaced(client, namespace);
        let addon = api
            .create(
                &PostParams::default(),
                &ManagedClusterAddOn::new("hello", ManagedClusterAddOnSpec::default()),
            )
            .await
            .expect("add-on created");
        (api, addon)
    }

    fn condition(kind: &str) -> Condition {
        Condition {
            type_: kind.to_owned(),
            status: "True".to_owned(),
            reason: "Test".to_owned(),
            message: String::new(),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
            observed_generation: None,
        }
    }

    fn with_condition(addon: &ManagedClusterAddOn, kind: &str) -> ManagedClusterAddOnStatus {
        let mut status = addon.status.clone().unwrap_or_default();
        status.conditions.push(condition(kind));
        status
    }

    fn kinds(addon: &ManagedClusterAddOn) -> Vec<String> {
        let conditions = addon.status.iter().flat_map(|s| &s.conditions);
        let mut kinds: Vec<String> = conditions.map(|c| c.type_.clone()).collect();
        kinds.sort();
        kinds
    }

    fn show(cache: &mut Writer<ManagedClusterAddOn>, addon: &ManagedClusterAddOn) {
        cache.apply_watcher_event(&Event::Apply(addon.clone()));
    }

    #[tokio::test]
    async fn a_deferred_change_goes_out_with_the_next_write() {
        let (api, addon) = addon("writes-together").await;
        let (store, mut cache) = kube::runtime::reflector::store();
        show(&mut cache, &addon);
        let (writes, due) = SharedWrites::new(store);
        let runner = tokio::spawn(run(Arc::clone(&writes), due));

        // Registration defers its change, reading the add-on in its turn.
        {
            let (_turn, seen) = writes.turn(Arc::new(addon.clone())).await;
            let mut status = with_condition(&seen, "RegistrationApplied");
            status.namespace = "agents".to_owned();
            assert!(defer_addon_status(&writes, &api, &seen, &status).expect("deferred"));
            // The same change again, on the add-on as read now, changes nothing.
            let again = writes.with_deferred(Arc::new(addon.clone()));
            assert!(!defer_addon_status(&writes, &api, &again, &status).expect("deferred"));
        }
        // The rollout writes from the add-on as it planned it, before that change.
        let written = {
            let (_turn, _seen) = writes.turn(Arc::new(addon.clone())).await;
            write_addon_status(&writes, &api, &addon, &with_condition(&addon, "Configured"))
                .await
                .expect("written")
                .expect("a change")
        };
        assert_eq!(kinds(&written), ["Configured", "RegistrationApplied"]);
        assert_eq!(
            written.status.as_ref().map(|s| s.namespace.as_str()),
            Some("agents")
        );

        // Nothing is left to write: past the linger, the add-on is as that one write left it.
        tokio::time::sleep(LINGER + Duration::from_millis(500)).await;
        let now = api.get("hello").await.expect("add-on read");
        assert_eq!(now.resource_version(), written.resource_version());
        runner.abort();
    }

    #[tokio::test]
    async fn a_deferred_change_alone_is_written_after_a_conflict_too() {
        let (api, addon) = addon("writes-alone").await;
        let (store, mut cache) = kube::runtime::reflector::store();
        show(&mut cache, &addon);
        let (writes, due) = SharedWrites::new(store);
        let runner = tokio::spawn(run(Arc::clone(&writes), due));

        // The agent writes the status; the cache does not show it yet.
        let mut by_agent = addon.clone();
        by_agent.status = Some(with_condition(&addon, "Available"));
        let by_agent = api
            .replace_status("hello", &PostParams::default(), &by_agent)
            .await
            .expect("agent's write");
        {
            let (_turn, seen) = writes.turn(Arc::new(addon.clone())).await;
            let status = with_condition(&seen, "RegistrationApplied");
            assert!(defer_addon_status(&writes, &api, &seen, &status).expect("deferred"));
        }
        // The first attempt, from the stale cache, is refused; once the cache shows the
        // agent's write, the change lands beside it.
        tokio::time::sleep(LINGER + Duration::from_millis(300)).await;
        show(&mut cache, &by_agent);
        let landed =
            flotilla_testing::wait::until("the deferred change written", Duration::from_secs(20), || {
                let api = api.clone();
                async move {
                    let now = api.get("hello").await?;
                    Ok::<_, kube::Error>((kinds(&now).len() == 2).then_some(now))
                }
            })
            .await
            .expect("deferred change written");
        assert_eq!(kinds(&landed), ["Available", "RegistrationApplied"]);
        runner.abort();
    }
}
