//! Writes that follow a scheduling pass but must not slow the next one: the Placement status
//! and the Events. A pass writes its PlacementDecisions itself (they are what consumers act on)
//! and hands the rest to a [`Coalescing`] queue; background writers take from it while no pass
//! is running ([`Busy`]), so that during a burst (a restart, a label change seen by thousands
//! of placements) the apiserver's capacity goes to decisions first. An entry never waits more
//! than [`MAX_DEFER`], so a steady stream of passes cannot starve it.
//!
//! ```text
//!  pass ── decisions ─────────────────────────────────────────────▶ apiserver
//!       └─ status, Events ─▶ Coalescing (key ─▶ latest) ─▶ writers, when Busy is idle
//! ```
//!
//! While an entry waits, a newer one for the same key replaces it in its place: a placement
//! scheduled ten times in a second has its status written once, with the latest value.

use std::{
    collections::{HashMap, VecDeque},
    hash::Hash,
    sync::{
        Mutex,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use tokio::{sync::Notify, time::Instant};

use super::lock;

/// Longest an entry waits for the passes to pause.
pub(crate) const MAX_DEFER: Duration = Duration::from_secs(10);

/// Entries waiting: keys in arrival order, the latest value per key and when the key arrived.
struct Pending<K, V> {
    order: VecDeque<K>,
    latest: HashMap<K, (V, Instant)>,
}

/// A FIFO of keys whose values coalesce while waiting, with an optional bound.
pub(crate) struct Coalescing<K, V> {
    pending: Mutex<Pending<K, V>>,
    ready: Notify,
    /// Most keys waiting; `None`: unbounded (keys are bounded by the objects they name).
    bound: Option<usize>,
    /// Entries refused because `bound` keys were waiting.
    pub(crate) dropped: AtomicU64,
}

impl<K: Clone + Eq + Hash, V> Coalescing<K, V> {
    /// An empty queue holding at most `bound` keys.
    pub(crate) fn new(bound: Option<usize>) -> Self {
        Self {
            pending: Mutex::new(Pending {
                order: VecDeque::new(),
                latest: HashMap::new(),
            }),
            ready: Notify::new(),
            bound,
            dropped: AtomicU64::new(0),
        }
    }

    /// Queues `value` for `key`, replacing a waiting value for the same key in its place.
    pub(crate) fn publish(&self, key: K, value: V) {
        let mut pending = lock(&self.pending);
        if let Some(waiting) = pending.latest.get_mut(&key) {
            waiting.0 = value;
            return;
        }
        if self.bound.is_some_and(|b| pending.order.len() >= b) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        pending.order.push_back(key.clone());
        pending.latest.insert(key, (value, Instant::now()));
        drop(pending);
        self.ready.notify_one();
    }

    /// Queues `value` for `key` again after a failed write, unless a newer value waits.
    pub(crate) fn retry(&self, key: K, value: V) {
        if lock(&self.pending).latest.contains_key(&key) {
            return;
        }
        self.publish(key, value);
    }

    /// The oldest entry, if any.
    pub(crate) fn pop(&self) -> Option<(K, V)> {
        let mut pending = lock(&self.pending);
        let key = pending.order.pop_front()?;
        let (value, _) = pending.latest.remove(&key)?;
        Some((key, value))
    }

    /// When the oldest waiting entry arrived.
    fn oldest(&self) -> Option<Instant> {
        let pending = lock(&self.pending);
        let key = pending.order.front()?;
        pending.latest.get(key).map(|(_, at)| *at)
    }

    /// Waits for an entry, then for `busy` to be idle (at most until the entry is `defer`
    /// old), and takes the oldest entry.
    pub(crate) async fn next(&self, busy: &Busy, defer: Duration) -> (K, V) {
        loop {
            let Some(arrived) = self.oldest() else {
                // A publish between the check and this wait left a permit: nothing is missed.
                self.ready.notified().await;
                continue;
            };
            busy.idle_or(arrived + defer).await;
            if let Some(entry) = self.pop() {
                return entry;
            }
        }
    }
}

/// How many scheduling passes are running; background writers wait while any is.
#[derive(Default)]
pub(crate) struct Busy {
    running: AtomicUsize,
    idle: Notify,
}

/// A running pass; dropping it ends the pass.
pub(crate) struct Pass<'a>(&'a Busy);

impl Busy {
    /// Marks a pass as running until the returned guard is dropped.
    pub(crate) fn enter(&self) -> Pass<'_> {
        self.running.fetch_add(1, Ordering::AcqRel);
        Pass(self)
    }

    /// Returns once no pass runs, or at `deadline`.
    pub(crate) async fn idle_or(&self, deadline: Instant) {
        loop {
            // Registered before the check, so the wake-up of a pass ending in between counts.
            let idle = self.idle.notified();
            if self.running.load(Ordering::Acquire) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, idle).await.is_err() {
                return;
            }
        }
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_value_replaces_the_waiting_one_in_its_place() {
        let queue = Coalescing::new(None);
        queue.publish("p", 1);
        queue.publish("q", 1);
        queue.publish("p", 2);
        assert_eq!(
            std::iter::from_fn(|| queue.pop()).collect::<Vec<_>>(),
            [("p", 2), ("q", 1)]
        );
    }

    #[test]
    fn a_retry_does_not_replace_a_newer_value() {
        let queue = Coalescing::new(None);
        queue.publish("p", 2);
        queue.retry("p", 1);
        queue.retry("q", 1);
        assert_eq!(
            std::iter::from_fn(|| queue.pop()).collect::<Vec<_>>(),
            [("p", 2), ("q", 1)]
        );
    }

    #[test]
    fn keys_beyond_the_bound_are_dropped_and_counted() {
        let queue = Coalescing::new(Some(2));
        for key in ["a", "b", "c"] {
            queue.publish(key, ());
        }
        queue.publish("a", ());
        assert_eq!(queue.dropped.load(Ordering::Relaxed), 1);
        assert_eq!(std::iter::from_fn(|| queue.pop()).count(), 2);
    }

    #[tokio::test]
    async fn an_entry_waits_for_the_running_pass_to_end() {
        let queue = std::sync::Arc::new(Coalescing::new(None));
        let busy = std::sync::Arc::new(Busy::default());
        let pass = busy.enter();
        queue.publish("p", ());
        let waiter = {
            let (queue, busy) = (queue.clone(), busy.clone());
            tokio::spawn(async move { queue.next(&busy, Duration::from_secs(3600)).await })
        };
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!waiter.is_finished());
        drop(pass);
        assert_eq!(waiter.await.unwrap(), ("p", ()));
    }

    #[tokio::test]
    async fn an_entry_is_taken_after_its_deferral_even_while_passes_keep_running() {
        let queue = Coalescing::new(None);
        let busy = Busy::default();
        let _pass = busy.enter();
        queue.publish("p", ());
        assert_eq!(queue.next(&busy, Duration::from_millis(10)).await, ("p", ()));
    }
}
