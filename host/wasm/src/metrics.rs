//! Plugin host metrics, per add-on and hook.
//!
//! Built on `prometheus-client`, the Prometheus project's own Rust client: typed label sets,
//! OpenMetrics text encoding, and registries that are plain values (no global recorder, so a test
//! or a second runtime in one process never shares counters by accident — unlike the `metrics`
//! facade, which installs one process-wide recorder).
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `flotilla_plugin_call_duration_seconds` | addon, hook | hook latency, instantiation included |
//! | `flotilla_plugin_faults_total` | addon, hook, kind | faults by kind (timeout, memory, trap, output_too_large, ...) |
//! | `flotilla_plugin_instantiation_duration_seconds` | addon | fresh-instance cost per call |
//! | `flotilla_plugin_cache_lookups_total` | addon, result | compiled-artifact cache: hit, miss, invalid |
//! | `flotilla_plugin_log_lines_dropped_total` | addon | guest log lines over the per-call budget |
//! | `flotilla_plugin_loads_total` | addon, outcome | revision loads: ok or the refusal kind |

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::{Fault, Hook};

/// Labels of per-hook series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabels {
    addon: String,
    hook: String,
}

/// Labels of fault counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FaultLabels {
    addon: String,
    hook: String,
    kind: String,
}

/// Labels of per-add-on series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AddonLabels {
    addon: String,
}

/// Labels of cache lookups.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    addon: String,
    result: String,
}

/// Labels of load outcomes.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LoadLabels {
    addon: String,
    outcome: String,
}

/// Result of one compiled-artifact cache lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheResult {
    /// A verified artifact was deserialized.
    Hit,
    /// No artifact for this digest and engine.
    Miss,
    /// An artifact was there but corrupt or foreign; it was removed and the component recompiled.
    Invalid,
}

impl CacheResult {
    fn as_str(self) -> &'static str {
        match self {
            CacheResult::Hit => "hit",
            CacheResult::Miss => "miss",
            CacheResult::Invalid => "invalid",
        }
    }
}

/// 0.5 ms .. ~16 s in powers of two: covers a no-op hook through a timed-out one.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// The host's metric families. Cloning shares the underlying series.
#[derive(Clone, Debug)]
pub struct Metrics {
    call_duration: Family<HookLabels, Histogram, fn() -> Histogram>,
    faults: Family<FaultLabels, Counter>,
    instantiation: Family<AddonLabels, Histogram, fn() -> Histogram>,
    cache: Family<CacheLabels, Counter>,
    log_dropped: Family<AddonLabels, Counter>,
    loads: Family<LoadLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Empty metric families, not yet registered anywhere.
    pub fn new() -> Self {
        Self {
            call_duration: Family::new_with_constructor(latency_histogram),
            faults: Family::default(),
            instantiation: Family::new_with_constructor(latency_histogram),
            cache: Family::default(),
            log_dropped: Family::default(),
            loads: Family::default(),
        }
    }

    /// Registers the families (sharing their series) in `registry`, e.g. the hub's own registry.
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("flotilla_plugin");
        r.register(
            "call_duration_seconds",
            "Latency of plugin hook calls, instantiation included",
            self.call_duration.clone(),
        );
        r.register("faults", "Plugin faults by kind", self.faults.clone());
        r.register(
            "instantiation_duration_seconds",
            "Time to create a fresh plugin instance",
            self.instantiation.clone(),
        );
        r.register(
            "cache_lookups",
            "Compiled-artifact cache lookups by result",
            self.cache.clone(),
        );
        r.register(
            "log_lines_dropped",
            "Guest log lines dropped over the per-call budget",
            self.log_dropped.clone(),
        );
        r.register("loads", "Plugin revision loads by outcome", self.loads.clone());
    }

    pub(crate) fn observe_call(&self, addon: &str, hook: Hook, seconds: f64) {
        self.call_duration
            .get_or_create(&HookLabels {
                addon: addon.to_owned(),
                hook: hook.as_str().to_owned(),
            })
            .observe(seconds);
    }

    pub(crate) fn count_fault(&self, addon: &str, hook: Hook, fault: Fault) {
        self.faults
            .get_or_create(&FaultLabels {
                addon: addon.to_owned(),
                hook: hook.as_str().to_owned(),
                kind: fault.as_str().to_owned(),
            })
            .inc();
    }

    pub(crate) fn observe_instantiation(&self, addon: &str, seconds: f64) {
        self.instantiation
            .get_or_create(&AddonLabels {
                addon: addon.to_owned(),
            })
            .observe(seconds);
    }

    pub(crate) fn count_cache(&self, addon: &str, result: CacheResult) {
        self.cache
            .get_or_create(&CacheLabels {
                addon: addon.to_owned(),
                result: result.as_str().to_owned(),
            })
            .inc();
    }

    pub(crate) fn count_log_dropped(&self, addon: &str, lines: u64) {
        if lines > 0 {
            self.log_dropped
                .get_or_create(&AddonLabels {
                    addon: addon.to_owned(),
                })
                .inc_by(lines);
        }
    }

    pub(crate) fn count_load(&self, addon: &str, outcome: &str) {
        self.loads
            .get_or_create(&LoadLabels {
                addon: addon.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Number of faults of `fault` kind counted for `addon`'s `hook` (for tests and status).
    pub fn fault_count(&self, addon: &str, hook: Hook, fault: Fault) -> u64 {
        self.faults
            .get(&FaultLabels {
                addon: addon.to_owned(),
                hook: hook.as_str().to_owned(),
                kind: fault.as_str().to_owned(),
            })
            .map_or(0, |c| c.get())
    }

    /// Number of cache lookups for `addon` with `result` (for tests and status).
    pub fn cache_count(&self, addon: &str, result: CacheResult) -> u64 {
        self.cache
            .get(&CacheLabels {
                addon: addon.to_owned(),
                result: result.as_str().to_owned(),
            })
            .map_or(0, |c| c.get())
    }
}
