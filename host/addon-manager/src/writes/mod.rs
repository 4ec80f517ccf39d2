//! One writer of every add-on's status: the controllers submit changes, and a writer task
//! merges each add-on's changes and writes them together.
//!
//! Four controllers change each add-on: registration (`registrations`, `namespace`,
//! `RegistrationApplied`), health (`healthCheck`, `Available`), rollout (`configReferences`,
//! `Configured`, the released plugin revision) and deploy (`supportedConfigs`,
//! `ManifestApplied`, `Progressing`, the applied revision). A new add-on wakes all four, and
//! each writing on its own was several status writes per add-on, most of the apiserver's CPU
//! when a thousand add-ons were enabled together, and conflicts among them. Now:
//!
//! - a controller reads an add-on through [`StatusWriter::view`]: the cache, or this
//!   process's last write when the cache is behind it, with every change submitted and not
//!   written yet made, so it plans on what the add-on is about to be;
//! - it submits what it would write ([`StatusWriter::submit`]), kept as the fields,
//!   conditions and annotations it changes ([`AddonChange`]), and goes on: no controller waits
//!   for another's write;
//! - [`run`] writes an add-on [`COALESCE`] after its first unwritten change (a rollout step at
//!   once), every change submitted meanwhile in the one status PUT, then the annotations; one
//!   write per add-on in flight, and on a conflict the changes are made again on the add-on as
//!   it is now;
//! - a new add-on's first write waits until every controller has had its say
//!   ([`StatusWriter::heard`]), [`FIRST_WRITE_WAITS_AT_MOST`] at most: a thousand new add-ons
//!   cost a thousand status writes, not one per controller each.
//!
//! ```text
//!  registration ─┐                               ┌─▶ PUT status (resourceVersion read)
//!  health ───────┼─▶ submit ─▶ pending ─ COALESCE ┤
//!  rollout ──────┤     ▲                          └─▶ PATCH annotations
//!  deploy ───────┘     └─ view: cache ⊕ last write ⊕ pending
//! ```

mod latest;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flotilla_api::addon::v1alpha1::{ManagedClusterAddOn, ManagedClusterAddOnStatus};
use futures::StreamExt as _;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender};
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt as _};
use serde_json::Value;
use tokio::time::Instant;

use latest::LatestWrites;

/// How long an add-on's first unwritten change waits for more: long enough for the
/// controllers a new add-on wakes together to meet in one write, short against anything a
/// user waits for. A rollout step is written at once ([`Writer::Rollout`]).
pub(crate) const COALESCE: Duration = Duration::from_millis(300);

/// How long a new add-on's first write waits for every controller to have had its say
/// ([`StatusWriter::heard`]) at most: under a backlog of a thousand new add-ons the
/// controllers reach each one seconds apart, and waiting makes their changes one write.
pub(crate) const FIRST_WRITE_WAITS_AT_MOST: Duration = Duration::from_secs(20);

/// Most add-on writes in flight at once: the apiserver's CPU, not round trips, bounds a
/// thousand of them, and beyond this they only queue there.
const WRITES_IN_FLIGHT: usize = 32;

/// The longest wait between attempts to write a change that failed.
const RETRY_AT_MOST: Duration = Duration::from_secs(60);

/// The controllers that change add-ons: a submission says whose it is, so a controller can
/// follow another's ([`StatusWriter::submissions_of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Writer {
    Registration,
    Health,
    Rollout,
    Deploy,
}

/// Every controller that changes add-ons: a new add-on's first write waits for all.
const WRITERS: usize = 4;

/// The one writer of add-on status and of the add-on manager's annotations on add-ons.
pub(crate) struct StatusWriter {
    entries: Mutex<HashMap<ObjectRef<ManagedClusterAddOn>, Entry>>,
    /// The add-ons as this process last wrote them, until the cache shows it.
    latest: LatestWrites<ManagedClusterAddOn>,
    /// The add-ons as the watch shows them.
    addons: Store<ManagedClusterAddOn>,
    /// When each add-on's write is due ([`run`] makes it).
    due: UnboundedSender<(ObjectRef<ManagedClusterAddOn>, Instant)>,
    /// Who follows whose submissions.
    followers: Mutex<Vec<(Writer, UnboundedSender<ObjectRef<ManagedClusterAddOn>>)>>,
    /// Woken whenever a write ends, for [`StatusWriter::flushed`].
    written: tokio::sync::Notify,
}

/// The writer every controller shares.
pub(crate) type AddonWriter = Arc<StatusWriter>;

/// The writes due, for [`run`].
pub(crate) type DueWrites = UnboundedReceiver<(ObjectRef<ManagedClusterAddOn>, Instant)>;

/// One add-on's changes on their way.
struct Entry {
    api: Api<ManagedClusterAddOn>,
    /// Submitted and not being written yet.
    pending: Changes,
    /// Being written now.
    writing: Changes,
    /// Whether a write is due in the queue.
    queued: bool,
    /// Failed attempts in a row, for the backoff.
    failures: u32,
    /// For an add-on never written (no status): the controllers heard from so far, and when
    /// its first change came. Its first write waits for all of them.
    first: Option<(Vec<Writer>, Instant)>,
}

impl Entry {
    /// Records that `by` had its say; returns whether that is news, and whether it completes
    /// a first write's wait.
    fn hear(&mut self, by: Writer) -> (bool, bool) {
        match &mut self.first {
            Some((heard, _)) if !heard.contains(&by) => {
                heard.push(by);
                (true, heard.len() == WRITERS)
            }
            _ => (false, false),
        }
    }

    /// How much longer a first write waits (None: it may go now).
    fn first_write_waits(&self) -> Option<Duration> {
        let (heard, since) = self.first.as_ref()?;
        let left = FIRST_WRITE_WAITS_AT_MOST.saturating_sub(since.elapsed());
        (heard.len() < WRITERS && !left.is_zero()).then_some(left)
    }
}

/// Marks, when dropped, that a controller finished its reconcile of an add-on
/// ([`StatusWriter::heard`]), whichever way it returned.
pub(crate) struct Heard<'a> {
    writer: &'a StatusWriter,
    by: Writer,
    key: Option<ObjectRef<ManagedClusterAddOn>>,
}

impl Heard<'_> {
    /// This reconcile waits for another controller's step before it has its say.
    pub(crate) fn not_yet(mut self) {
        self.key = None;
    }
}

impl Drop for Heard<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.writer.heard(self.by, &key);
        }
    }
}

/// How one attempt to write an add-on ended.
enum Attempt {
    Written,
    /// The add-on is gone: nothing to report on.
    Gone,
    /// Someone else wrote it since it was read; the add-on as it is now is recorded.
    Conflict,
    /// Anything else, said for the log.
    Failed(String),
}

impl StatusWriter {
    /// The writer over the add-on cache `addons`, and the queue [`run`] drains.
    pub(crate) fn new(addons: Store<ManagedClusterAddOn>) -> (AddonWriter, DueWrites) {
        let (due, queue) = futures::channel::mpsc::unbounded();
        let writer = Self {
            entries: Mutex::new(HashMap::new()),
            latest: LatestWrites::default(),
            addons,
            due,
            followers: Mutex::new(Vec::new()),
            written: tokio::sync::Notify::new(),
        };
        (Arc::new(writer), queue)
    }

    /// `cached` as it is about to be: this process's last write of it if the cache is behind,
    /// with every change submitted and not written yet made.
    pub(crate) fn view(&self, cached: Arc<ManagedClusterAddOn>) -> Arc<ManagedClusterAddOn> {
        self.view_with(cached, None)
    }

    /// `cached` as written, with only the changes `by` submitted and not written yet made: a
    /// planner that counts other controllers' steps only once the world can see them.
    pub(crate) fn view_of(&self, by: Writer, cached: Arc<ManagedClusterAddOn>) -> Arc<ManagedClusterAddOn> {
        self.view_with(cached, Some(by))
    }

    fn view_with(&self, cached: Arc<ManagedClusterAddOn>, by: Option<Writer>) -> Arc<ManagedClusterAddOn> {
        let addon = self.latest.latest(cached);
        let change = {
            let Ok(entries) = self.entries.lock() else {
                return addon;
            };
            let Some(entry) = entries.get(&ObjectRef::from_obj(addon.as_ref())) else {
                return addon;
            };
            let mut change = entry.writing.merged(by);
            change.then(entry.pending.merged(by));
            change
        };
        match change.apply(&addon) {
            Ok(Some(changed)) => Arc::new(changed),
            _ => addon,
        }
    }

    /// Submits what `by` would make of `seen` (read through [`Self::view`]): `desired` as its
    /// status and the `annotations`. Only what differs from `seen` is kept, so it lands on
    /// whatever the add-on has become by its write. Returns whether it changed anything.
    pub(crate) fn submit(
        &self,
        by: Writer,
        api: &Api<ManagedClusterAddOn>,
        seen: &ManagedClusterAddOn,
        desired: &ManagedClusterAddOnStatus,
        annotations: &[(&str, &str)],
    ) -> flotilla_kube::Result<bool> {
        let current = seen.status.clone().unwrap_or_default();
        let status = StatusChange::between(&current, desired).map_err(|source| encode_error(seen, source))?;
        let change = AddonChange {
            status,
            annotations: annotations
                .iter()
                .filter(|(key, value)| seen.annotations().get(*key).map(String::as_str) != Some(*value))
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect(),
        };
        let key = ObjectRef::from_obj(seen);
        if change.is_empty() {
            self.heard(by, &key);
            return Ok(false);
        }
        if let Ok(mut entries) = self.entries.lock() {
            let entry = entries.entry(key.clone()).or_insert_with(|| Entry {
                api: api.clone(),
                pending: Changes::default(),
                writing: Changes::default(),
                queued: false,
                failures: 0,
                // With no entry, `seen` is as written: no status, no write yet.
                first: seen.status.is_none().then(|| (Vec::new(), Instant::now())),
            });
            entry.pending.0.push((by, change));
            // A rollout step goes out at once, so the progression is seen as it is made; a
            // new add-on's first write waits for every controller.
            let (_, all_heard) = entry.hear(by);
            let delay = match entry.first_write_waits() {
                Some(left) => left,
                None if all_heard || by == Writer::Rollout => Duration::ZERO,
                None => COALESCE,
            };
            if all_heard || delay.is_zero() || !entry.queued {
                entry.queued = true;
                self.queue(key.clone(), delay);
            }
        }
        self.tell_followers(by, &key);
        Ok(true)
    }

    fn tell_followers(&self, by: Writer, key: &ObjectRef<ManagedClusterAddOn>) {
        if let Ok(mut followers) = self.followers.lock() {
            followers.retain(|(of, follower)| *of != by || follower.unbounded_send(key.clone()).is_ok());
        }
    }

    /// Records that `by` finished a reconcile of `key` with nothing (more) to change: a new
    /// add-on's first write goes once every controller has been heard.
    /// News to a waiting first write reaches `by`'s followers too, as a submission does.
    pub(crate) fn heard(&self, by: Writer, key: &ObjectRef<ManagedClusterAddOn>) {
        let news = {
            let Ok(mut entries) = self.entries.lock() else {
                return;
            };
            let Some(entry) = entries.get_mut(key) else {
                return;
            };
            let (news, all_heard) = entry.hear(by);
            if all_heard {
                entry.queued = true;
                self.queue(key.clone(), Duration::ZERO);
            }
            news
        };
        if news {
            self.tell_followers(by, key);
        }
    }

    /// Whether a new add-on's first write heard from `by` (true when none waits).
    pub(crate) fn has_heard(&self, by: Writer, key: &ObjectRef<ManagedClusterAddOn>) -> bool {
        let Ok(entries) = self.entries.lock() else {
            return true;
        };
        match entries.get(key).and_then(|e| e.first.as_ref()) {
            Some((heard, _)) => heard.contains(&by),
            None => true,
        }
    }

    /// A guard that calls [`Self::heard`] for `addon` when the reconcile holding it returns.
    pub(crate) fn heard_on_return(&self, by: Writer, addon: &ManagedClusterAddOn) -> Heard<'_> {
        Heard {
            writer: self,
            by,
            key: Some(ObjectRef::from_obj(addon)),
        }
    }

    /// The add-ons `by` submits changes of, as it submits them: how a controller that reads
    /// what another writes hears of it before the write.
    pub(crate) fn submissions_of(&self, by: Writer) -> UnboundedReceiver<ObjectRef<ManagedClusterAddOn>> {
        let (follower, submissions) = futures::channel::mpsc::unbounded();
        if let Ok(mut followers) = self.followers.lock() {
            followers.push((by, follower));
        }
        submissions
    }

    /// Waits until none of `keys` has a change not written yet (or `wait` passed: false).
    pub(crate) async fn flushed(&self, keys: &[ObjectRef<ManagedClusterAddOn>], wait: Duration) -> bool {
        let done = || {
            self.entries
                .lock()
                .map(|entries| keys.iter().all(|key| !entries.contains_key(key)))
                .unwrap_or(true)
        };
        tokio::time::timeout(wait, async {
            loop {
                let written = self.written.notified();
                tokio::pin!(written);
                written.as_mut().enable();
                if done() {
                    return;
                }
                written.await;
            }
        })
        .await
        .is_ok()
    }

    fn queue(&self, key: ObjectRef<ManagedClusterAddOn>, after: Duration) {
        // The queue lives as long as the manager; once it is gone nothing is written.
        let _ = self.due.unbounded_send((key, Instant::now() + after));
    }

    /// Writes what is pending for `key`, then settles what comes next: nothing, the changes
    /// submitted meanwhile, or the same again after a failure.
    async fn write(&self, key: &ObjectRef<ManagedClusterAddOn>) {
        let taken = self.entries.lock().ok().and_then(|mut entries| {
            let entry = entries.get_mut(key)?;
            if !entry.writing.is_empty() {
                // One write in flight per add-on: its end queues what came since.
                entry.queued = false;
                return None;
            }
            if let Some(left) = entry.first_write_waits() {
                // Waiting for the other controllers, or for the time to run out.
                entry.queued = true;
                self.queue(key.clone(), left);
                return None;
            }
            entry.queued = false;
            if let Some((heard, _)) = entry.first.take()
                && heard.len() < WRITERS
            {
                tracing::debug!(addon = %key, ?heard, "first write without hearing from every controller");
            }
            if entry.pending.is_empty() {
                entries.remove(key);
                return None;
            }
            entry.writing = std::mem::take(&mut entry.pending);
            Some((entry.writing.merged(None), entry.api.clone()))
        });
        let Some((change, api)) = taken else {
            self.written.notify_waiters();
            return;
        };
        let attempt = match self.addons.get(key) {
            Some(cached) => self.put(&api, self.latest.latest(cached), &change).await,
            None => Attempt::Gone,
        };
        if let Ok(mut entries) = self.entries.lock()
            && let Some(entry) = entries.get_mut(key)
        {
            let written = std::mem::take(&mut entry.writing);
            let backoff = |failures: u32| {
                crate::CACHE_WAIT
                    .saturating_mul(2u32.saturating_pow(failures.clamp(1, 16) - 1))
                    .min(RETRY_AT_MOST)
            };
            let retry = match attempt {
                Attempt::Written => {
                    entry.failures = 0;
                    None
                }
                Attempt::Gone => {
                    entries.remove(key);
                    self.written.notify_waiters();
                    return;
                }
                Attempt::Conflict => {
                    // The add-on as it is now is recorded: at once the first time.
                    entry.failures += 1;
                    Some(if entry.failures == 1 {
                        Duration::ZERO
                    } else {
                        backoff(entry.failures)
                    })
                }
                Attempt::Failed(message) => {
                    entry.failures += 1;
                    let wait = backoff(entry.failures);
                    tracing::debug!(addon = %key, %message, ?wait, "add-on status not written; retrying");
                    Some(wait)
                }
            };
            if retry.is_some() {
                // Not written: it goes again, with whatever came since on top.
                let mut again = written;
                again.0.append(&mut entry.pending.0);
                entry.pending = again;
            }
            let urgent = entry.pending.0.iter().any(|(by, _)| *by == Writer::Rollout);
            let after = retry.unwrap_or(if urgent { Duration::ZERO } else { COALESCE });
            if entry.pending.is_empty() {
                entries.remove(key);
            } else if !entry.queued {
                entry.queued = true;
                self.queue(key.clone(), after);
            }
        }
        self.written.notify_waiters();
    }

    /// Makes `change` on `addon`: its status (a whole-status PUT guarded by the
    /// resourceVersion read, which costs the apiserver less than a merge patch), then its
    /// annotations, so an annotation never precedes the status it goes with.
    async fn put(
        &self,
        api: &Api<ManagedClusterAddOn>,
        addon: Arc<ManagedClusterAddOn>,
        change: &AddonChange,
    ) -> Attempt {
        let mut addon = addon;
        let current = addon.status.clone().unwrap_or_default();
        let desired = match change.status.apply(&current) {
            Ok(desired) => desired,
            Err(source) => return Attempt::Failed(encode_error(&addon, source).to_string()),
        };
        let base = addon.resource_version();
        let written = flotilla_kube::status::replace_written_if_changed(
            api,
            addon.as_ref(),
            Some(&current),
            desired,
            |addon, status| addon.status = Some(status),
        )
        .await;
        match written {
            Ok(Some(written)) => {
                self.latest.record(base, written.clone());
                addon = Arc::new(written);
            }
            Ok(None) => {}
            Err(flotilla_kube::Error::PatchStatus { source, .. }) => {
                return self.failed(api, &addon, &source).await;
            }
            Err(other) => return Attempt::Failed(other.to_string()),
        }
        let annotations: serde_json::Map<String, Value> = change
            .annotations
            .iter()
            .filter(|(key, value)| addon.annotations().get(*key) != Some(value))
            .map(|(key, value)| (key.clone(), Value::String(value.clone())))
            .collect();
        if annotations.is_empty() {
            return Attempt::Written;
        }
        let patch = serde_json::json!({"metadata": {"annotations": annotations}});
        match api
            .patch(&addon.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => {
                self.latest.record(addon.resource_version(), written);
                Attempt::Written
            }
            Err(error) => self.failed(api, &addon, &error).await,
        }
    }

    /// What a failed write of `addon` means: gone, a conflict (the add-on as it is now is
    /// recorded, so the next attempt starts from it without waiting for the cache), or a
    /// failure to retry.
    async fn failed(
        &self,
        api: &Api<ManagedClusterAddOn>,
        addon: &ManagedClusterAddOn,
        error: &kube::Error,
    ) -> Attempt {
        let code = flotilla_kube::backoff::status_code(error);
        let failed = Attempt::Failed(format!(
            "write ManagedClusterAddOn {}: {error}",
            ObjectRef::from_obj(addon)
        ));
        match code {
            Some(404) => Attempt::Gone,
            Some(409) => match api.get_opt(&addon.name_any()).await {
                Ok(Some(now)) => {
                    self.latest.record(addon.resource_version(), now);
                    Attempt::Conflict
                }
                Ok(None) => Attempt::Gone,
                Err(_) => failed,
            },
            _ => failed,
        }
    }
}

/// Writes add-ons when their writes are due, [`WRITES_IN_FLIGHT`] at a time, until dropped.
pub(crate) async fn run(writer: AddonWriter, due: DueWrites) {
    let slots = tokio::sync::Semaphore::new(WRITES_IN_FLIGHT);
    due.for_each_concurrent(None, |(key, at)| {
        let (writer, slots) = (Arc::clone(&writer), &slots);
        async move {
            tokio::time::sleep_until(at).await;
            let Ok(_slot) = slots.acquire().await else {
                return;
            };
            writer.write(&key).await;
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

/// Changes in the order they were submitted, each with whose it is.
#[derive(Clone, Debug, Default)]
struct Changes(Vec<(Writer, AddonChange)>);

impl Changes {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The changes of `by` (None: of everyone) as one, later ones winning.
    fn merged(&self, by: Option<Writer>) -> AddonChange {
        let mut merged = AddonChange::default();
        for (_, change) in self.0.iter().filter(|(of, _)| by.is_none_or(|by| *of == by)) {
            merged.then(change.clone());
        }
        merged
    }
}

/// One controller's change to an add-on: of its status ([`StatusChange`]) and the
/// annotations it sets.
#[derive(Clone, Debug, Default, PartialEq)]
struct AddonChange {
    status: StatusChange,
    annotations: BTreeMap<String, String>,
}

impl AddonChange {
    /// This change, then `later`: where both set something, `later` wins.
    fn then(&mut self, later: Self) {
        self.status.then(later.status);
        self.annotations.extend(later.annotations);
    }

    fn is_empty(&self) -> bool {
        self.status.is_empty() && self.annotations.is_empty()
    }

    /// `addon` with this change made (None: it changes nothing).
    fn apply(&self, addon: &ManagedClusterAddOn) -> serde_json::Result<Option<ManagedClusterAddOn>> {
        if self.is_empty() {
            return Ok(None);
        }
        let mut changed = addon.clone();
        if !self.status.is_empty() {
            changed.status = Some(self.status.apply(&addon.status.clone().unwrap_or_default())?);
        }
        if !self.annotations.is_empty() {
            changed
                .metadata
                .annotations
                .get_or_insert_default()
                .extend(self.annotations.clone());
        }
        Ok(Some(changed))
    }
}

/// One controller's change to an add-on's status: the fields it set (null: removed), the
/// conditions it set or removed, by type, and the config references' sub-fields it set, by
/// reference. Applied to a status that carries other controllers' changes, it keeps them:
/// each controller owns its own fields, conditions and reference sub-fields.
#[derive(Clone, Debug, Default, PartialEq)]
struct StatusChange {
    fields: serde_json::Map<String, Value>,
    conditions: BTreeMap<String, Option<Value>>,
    /// Per config reference (by [`reference_key`]): the sub-fields set (None: removed). The
    /// rollout sets a reference's desired config and observed generation, the deploy its
    /// applied config: replaced whole, one's change undid the other's unwritten one.
    references: BTreeMap<String, Option<serde_json::Map<String, Value>>>,
}

/// The status field holding the conditions, merged by type rather than replaced.
const CONDITIONS: &str = "conditions";

/// The status field holding the config references, merged by reference and sub-field.
const CONFIG_REFERENCES: &str = "configReferences";

impl StatusChange {
    /// What `desired` changes of `current`.
    fn between(
        current: &ManagedClusterAddOnStatus,
        desired: &ManagedClusterAddOnStatus,
    ) -> serde_json::Result<Self> {
        let (current, desired) = (fields(current)?, fields(desired)?);
        let mut change = Self::default();
        for key in current.keys().chain(desired.keys()) {
            if key == CONDITIONS || key == CONFIG_REFERENCES || current.get(key) == desired.get(key) {
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
        let (before, after) = (by_reference(&current), by_reference(&desired));
        for key in before.keys().chain(after.keys()) {
            let changed = match (before.get(key), after.get(key)) {
                (Some(_), None) => None,
                (before, Some(after)) => {
                    let set: serde_json::Map<String, Value> = after
                        .iter()
                        .filter(|(field, value)| before.and_then(|b| b.get(*field)) != Some(*value))
                        .map(|(field, value)| (field.clone(), value.clone()))
                        .collect();
                    if set.is_empty() {
                        continue;
                    }
                    Some(set)
                }
                (None, None) => continue,
            };
            change.references.insert(key.clone(), changed);
        }
        Ok(change)
    }

    /// This change, then `later`: where both set a field, condition or reference sub-field,
    /// `later` wins.
    fn then(&mut self, later: Self) {
        self.fields.extend(later.fields);
        self.conditions.extend(later.conditions);
        for (key, set) in later.references {
            match (self.references.get_mut(&key), set) {
                (Some(Some(earlier)), Some(set)) => earlier.extend(set),
                (_, set) => {
                    self.references.insert(key, set);
                }
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.conditions.is_empty() && self.references.is_empty()
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
        if !self.references.is_empty() {
            let mut references = match status.remove(CONFIG_REFERENCES) {
                Some(Value::Array(references)) => references,
                _ => Vec::new(),
            };
            for (key, set) in &self.references {
                let at = references
                    .iter()
                    .position(|r| reference_key(r).as_ref() == Some(key));
                match (at, set) {
                    (Some(at), Some(set)) => {
                        if let Value::Object(reference) = &mut references[at] {
                            reference.extend(set.clone());
                        }
                    }
                    (Some(at), None) => {
                        references.remove(at);
                    }
                    (None, Some(set)) => references.push(Value::Object(set.clone())),
                    (None, None) => {}
                }
            }
            status.insert(CONFIG_REFERENCES.to_owned(), Value::Array(references));
        }
        serde_json::from_value(Value::Object(status))
    }
}

/// What names a config reference: its group, resource, namespace and name.
fn reference_key(reference: &Value) -> Option<String> {
    let part = |field: &str| reference.get(field).and_then(Value::as_str).unwrap_or_default();
    reference
        .is_object()
        .then(|| [part("group"), part("resource"), part("namespace"), part("name")].join("/"))
}

/// The config references of a status object, by [`reference_key`].
fn by_reference(
    status: &serde_json::Map<String, Value>,
) -> BTreeMap<String, &serde_json::Map<String, Value>> {
    status
        .get(CONFIG_REFERENCES)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| Some((reference_key(r)?, r.as_object()?)))
        .collect()
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
    fn a_later_change_of_one_sub_field_of_a_config_reference_keeps_an_earlier_change_of_another() {
        use flotilla_api::addon::v1alpha1::{ConfigReference, ConfigSpecHash};
        let hash = |h: &str| {
            Some(ConfigSpecHash {
                spec_hash: h.into(),
                ..Default::default()
            })
        };
        let mut start = with(&[]);
        start.config_references = vec![ConfigReference {
            last_observed_generation: 1,
            desired_config: hash("h2"),
            last_applied_config: hash("h1"),
            ..Default::default()
        }];
        // The deploy applied h2; the rollout, from the same status, saw the config's
        // generation move.
        let mut deployed = start.clone();
        deployed.config_references[0].last_applied_config = hash("h2");
        let mut observed = start.clone();
        observed.config_references[0].last_observed_generation = 2;
        let deploy = StatusChange::between(&start, &deployed).unwrap();
        let rollout = StatusChange::between(&start, &observed).unwrap();

        let applied_in_turn = rollout.apply(&deploy.apply(&start).unwrap()).unwrap();
        let mut merged = deploy.clone();
        merged.then(rollout);
        let applied_merged = merged.apply(&start).unwrap();
        for both in [applied_in_turn, applied_merged] {
            assert_eq!(both.config_references.len(), 1);
            assert_eq!(both.config_references[0].last_applied_config, hash("h2"));
            assert_eq!(both.config_references[0].last_observed_generation, 2);
        }
    }

    #[test]
    fn config_references_are_added_and_removed_by_name() {
        use flotilla_api::addon::v1alpha1::{ConfigReference, ConfigReferent};
        let reference = |name: &str| ConfigReference {
            referent: ConfigReferent {
                namespace: "ns".into(),
                name: name.into(),
            },
            last_observed_generation: 1,
            ..Default::default()
        };
        let mut start = with(&[]);
        start.config_references = vec![reference("a"), reference("b")];
        let mut desired = start.clone();
        desired.config_references = vec![reference("b"), reference("c")];
        let change = StatusChange::between(&start, &desired).unwrap();
        let result = change.apply(&start).unwrap();
        let names: Vec<&str> = result
            .config_references
            .iter()
            .map(|r| r.referent.name.as_str())
            .collect();
        assert_eq!(names, ["b", "c"]);
        assert_eq!(result.config_references[1], reference("c"));
    }

    #[test]
    fn no_change_is_empty() {
        let start = with(&[condition("Available", "True")]);
        assert!(StatusChange::between(&start, &start.clone()).unwrap().is_empty());
    }
}

/// The writer against a real apiserver, with a cache fed by hand so a test decides what it
/// shows.
#[cfg(test)]
mod live {
    #![allow(clippy::expect_used, reason = "tests fail loudly")]

    use std::sync::Arc;
    use std::time::Duration;

    use flotilla_api::addon::v1alpha1::{
        ManagedClusterAddOn, ManagedClusterAddOnSpec, ManagedClusterAddOnStatus,
    };
    use futures::StreamExt as _;
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::Timestamp;
    use kube::api::{PostParams, WatchEvent, WatchParams};
    use kube::runtime::reflector::ObjectRef;
    use kube::runtime::reflector::store::Writer as CacheWriter;
    use kube::runtime::watcher::Event;
    use kube::{Api, ResourceExt};

    use super::{StatusWriter, Writer, run};

    const RELEASED: &str = "flotilla.dev/released-plugin-revision";

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

    fn show(cache: &mut CacheWriter<ManagedClusterAddOn>, addon: &ManagedClusterAddOn) {
        cache.apply_watcher_event(&Event::Apply(addon.clone()));
    }

    /// The writes of `addon` since resourceVersion `since`, as its watch shows them.
    async fn writes_since(api: &Api<ManagedClusterAddOn>, since: &str) -> usize {
        let params = WatchParams::default().fields("metadata.name=hello").timeout(2);
        let events = api.watch(&params, since).await.expect("watch starts");
        events
            .filter(|e| std::future::ready(matches!(e, Ok(WatchEvent::Modified(_)))))
            .count()
            .await
    }

    #[tokio::test]
    async fn changes_submitted_together_go_out_as_one_status_write() {
        let (api, addon) = addon("writes-together").await;
        let (store, mut cache) = kube::runtime::reflector::store();
        show(&mut cache, &addon);
        let (writer, due) = StatusWriter::new(store);
        let mut from_rollout = writer.submissions_of(Writer::Rollout);
        let runner = tokio::spawn(run(Arc::clone(&writer), due));
        let cached = Arc::new(addon.clone());

        // Registration submits its change; every reader sees it before it is written.
        let seen = writer.view(Arc::clone(&cached));
        let mut status = with_condition(&seen, "RegistrationApplied");
        status.namespace = "agents".to_owned();
        assert!(
            writer
                .submit(Writer::Registration, &api, &seen, &status, &[])
                .expect("submitted")
        );
        let seen = writer.view(Arc::clone(&cached));
        assert_eq!(kinds(&seen), ["RegistrationApplied"]);
        // The same again changes nothing.
        assert!(
            !writer
                .submit(Writer::Registration, &api, &seen, &status, &[])
                .expect("submitted")
        );
        // The rollout, from the add-on as it is about to be: its condition and annotation.
        let released = [(RELEASED, "rev-1")];
        let status = with_condition(&seen, "Configured");
        assert!(
            writer
                .submit(Writer::Rollout, &api, &seen, &status, &released)
                .expect("submitted")
        );
        // Only the rollout's submission is heard by its follower.
        let key = ObjectRef::from_obj(&addon);
        let heard = tokio::time::timeout(Duration::from_secs(1), from_rollout.next()).await;
        assert_eq!(heard.ok().flatten(), Some(key.clone()));
        assert!(from_rollout.try_recv().is_err(), "nothing else was heard");

        // A new add-on's first write waits for the two controllers not heard yet.
        tokio::time::sleep(super::COALESCE * 2).await;
        let unwritten = api.get("hello").await.expect("add-on read");
        assert_eq!(unwritten.resource_version(), addon.resource_version());
        writer.heard(Writer::Health, &key);
        writer.heard(Writer::Deploy, &key);

        assert!(
            writer
                .flushed(&[ObjectRef::from_obj(&addon)], Duration::from_secs(20))
                .await
        );
        let now = api.get("hello").await.expect("add-on read");
        assert_eq!(kinds(&now), ["Configured", "RegistrationApplied"]);
        assert_eq!(now.status.as_ref().map(|s| s.namespace.as_str()), Some("agents"));
        assert_eq!(now.annotations().get(RELEASED).map(String::as_str), Some("rev-1"));
        // One status write, then the annotation.
        let since = addon.resource_version().expect("a resourceVersion");
        assert_eq!(writes_since(&api, &since).await, 2);
        runner.abort();
    }

    #[tokio::test]
    async fn a_change_lands_beside_a_write_the_cache_does_not_show() {
        let (api, addon) = addon("writes-conflict").await;
        let (store, mut cache) = kube::runtime::reflector::store();
        show(&mut cache, &addon);
        let (writer, due) = StatusWriter::new(store);
        let runner = tokio::spawn(run(Arc::clone(&writer), due));

        // The agent writes the status; the cache never shows it.
        let mut by_agent = addon.clone();
        by_agent.status = Some(with_condition(&addon, "Available"));
        api.replace_status("hello", &PostParams::default(), &by_agent)
            .await
            .expect("agent's write");
        let seen = writer.view(Arc::new(addon.clone()));
        let status = with_condition(&seen, "RegistrationApplied");
        assert!(
            writer
                .submit(Writer::Registration, &api, &seen, &status, &[])
                .expect("submitted")
        );
        let key = ObjectRef::from_obj(&addon);
        for other in [Writer::Health, Writer::Rollout, Writer::Deploy] {
            writer.heard(other, &key);
        }
        // The first attempt, from the stale cache, is refused; the next starts from the add-on
        // as it is and lands beside the agent's write.
        assert!(
            writer
                .flushed(&[ObjectRef::from_obj(&addon)], Duration::from_secs(20))
                .await
        );
        let now = api.get("hello").await.expect("add-on read");
        assert_eq!(kinds(&now), ["Available", "RegistrationApplied"]);
        // The view is that write while the cache is behind.
        assert_eq!(
            writer.view(Arc::new(addon.clone())).resource_version(),
            now.resource_version()
        );
        runner.abort();
    }
}
