//! Plugin revisions by add-on name, swapped atomically.
//!
//! ```text
//!   PluginRegistry ── "helloworld" → PluginSlot { current: Arc<Plugin rev B>, previous: rev A }
//!                  └─ "other"      → PluginSlot { current: ..., previous: None }
//!
//!   install(new bytes) ─ load + validate + describe beside the running revision
//!        ├─ ok  → current := new (one atomic store), previous := old
//!        └─ err → current unchanged (the last good revision keeps serving), error returned
//! ```
//!
//! A caller takes `slot.current()` (an `Arc`) once per call, so a call in flight finishes on the
//! revision it started with, and every answer comes wholly from one revision.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use arc_swap::ArcSwapOption;

use crate::{ComponentBytes, Error, Limits, Plugin, Result, Runtime};

/// The revisions of one add-on's plugin.
#[derive(Debug)]
pub struct PluginSlot {
    addon: String,
    /// The revision serving calls; `None` until the first good load.
    current: ArcSwapOption<Plugin>,
    /// The revision `current` replaced, kept for [`PluginSlot::rollback`].
    previous: ArcSwapOption<Plugin>,
    /// Serialises installs so two loads for one add-on never race to swap.
    installing: tokio::sync::Mutex<()>,
}

impl PluginSlot {
    /// An empty slot for `addon`.
    pub fn new(addon: &str) -> Self {
        Self {
            addon: addon.to_owned(),
            current: ArcSwapOption::empty(),
            previous: ArcSwapOption::empty(),
            installing: tokio::sync::Mutex::new(()),
        }
    }

    /// The add-on name.
    pub fn addon(&self) -> &str {
        &self.addon
    }

    /// The revision serving calls now.
    pub fn current(&self) -> Option<Arc<Plugin>> {
        self.current.load_full()
    }

    /// The revision replaced by the last swap.
    pub fn previous(&self) -> Option<Arc<Plugin>> {
        self.previous.load_full()
    }

    /// Loads `bytes` beside the running revision and swaps it in if it is valid. On any error
    /// the running revision is untouched. Re-installing the running digest with the same limits
    /// is a no-op.
    pub async fn install(
        &self,
        runtime: &Runtime,
        component: impl Into<ComponentBytes>,
        limits: Limits,
    ) -> Result<Arc<Plugin>> {
        let component = component.into();
        let _installing = self.installing.lock().await;
        if let Some(current) = self.current()
            && current.digest() == component.digest()
            && *current.limits() == limits
        {
            return Ok(current);
        }
        match runtime.load(&self.addon, component, limits).await {
            Ok(plugin) => {
                let plugin = Arc::new(plugin);
                let old = self.current.swap(Some(Arc::clone(&plugin)));
                tracing::info!(
                    addon = %self.addon,
                    digest = %plugin.digest(),
                    previous = ?old.as_ref().map(|p| p.digest()),
                    "plugin revision swapped in"
                );
                self.previous.store(old);
                Ok(plugin)
            }
            Err(e) => {
                if let Some(current) = self.current() {
                    tracing::warn!(addon = %self.addon, serving = %current.digest(), error = %e,
                        "new plugin revision refused; the last good revision keeps serving");
                }
                Err(e)
            }
        }
    }

    /// Swaps the previous revision back in; returns the revision now serving.
    pub fn rollback(&self) -> Option<Arc<Plugin>> {
        let previous = self.previous.swap(None)?;
        let replaced = self.current.swap(Some(Arc::clone(&previous)));
        self.previous.store(replaced);
        Some(previous)
    }
}

/// All plugin slots of a hub, by add-on name.
#[derive(Debug)]
pub struct PluginRegistry {
    runtime: Runtime,
    slots: RwLock<BTreeMap<String, Arc<PluginSlot>>>,
    /// Add-on name → the `AddOnPlugin` that won the claim on it. Only that one supplies
    /// anything for the add-on (its revision in the slot, its signers' CAs); another naming the
    /// same add-on supplies nothing.
    owners: RwLock<BTreeMap<String, String>>,
}

impl PluginRegistry {
    /// An empty registry on `runtime`.
    pub fn new(runtime: Runtime) -> Self {
        Self {
            runtime,
            slots: RwLock::new(BTreeMap::new()),
            owners: RwLock::new(BTreeMap::new()),
        }
    }

    /// The runtime plugins are loaded into.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The slot of `addon`, created empty if missing.
    pub fn slot(&self, addon: &str) -> Arc<PluginSlot> {
        if let Some(slot) = self
            .slots
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(addon)
        {
            return Arc::clone(slot);
        }
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(
            slots
                .entry(addon.to_owned())
                .or_insert_with(|| Arc::new(PluginSlot::new(addon))),
        )
    }

    /// The revision serving `addon`, if one is installed.
    pub fn get(&self, addon: &str) -> Option<Arc<Plugin>> {
        self.slots
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(addon)
            .and_then(|s| s.current())
    }

    /// Like [`PluginRegistry::get`] but an error naming the add-on when nothing is installed.
    pub fn require(&self, addon: &str) -> Result<Arc<Plugin>> {
        self.get(addon).ok_or_else(|| Error::NotInstalled {
            addon: addon.to_owned(),
        })
    }

    /// Installs a revision for `addon`; see [`PluginSlot::install`].
    pub async fn install(
        &self,
        addon: &str,
        component: impl Into<ComponentBytes>,
        limits: Limits,
    ) -> Result<Arc<Plugin>> {
        self.slot(addon).install(&self.runtime, component, limits).await
    }

    /// Records that `AddOnPlugin` `plugin` drives `addon` (the controller's claim).
    pub fn claim(&self, addon: &str, plugin: &str) {
        self.owners
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(addon.to_owned(), plugin.to_owned());
    }

    /// The `AddOnPlugin` that drives `addon`, if one claimed it.
    pub fn owner(&self, addon: &str) -> Option<String> {
        self.owners
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(addon)
            .cloned()
    }

    /// Removes `addon`'s slot and claim; calls in flight finish on the revision they hold.
    pub fn remove(&self, addon: &str) -> Option<Arc<Plugin>> {
        self.owners
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(addon);
        self.slots
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(addon)
            .and_then(|s| s.current())
    }

    /// Names of the add-ons with a slot.
    pub fn addons(&self) -> Vec<String> {
        self.slots
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }
}
