//! The one wasmtime engine of the process, and loading plugins into it.
//!
//! ```text
//!   Runtime ─ Engine (epoch interruption, bounded wasm stack, pooling or on-demand allocator)
//!           ├─ epoch ticker thread ── increment_epoch() every tick
//!           ├─ Linker<CallState> ──── flotilla:addon/host + WASI 0.2 (nothing granted)
//!           ├─ call permits ───────── one per pool slot: calls wait instead of failing
//!           ├─ ArtifactCache ──────── <digest>-<engine>.cwasm (+ .sha256)
//!           └─ Metrics / Registry
//!
//!   load(bytes) → size, digest pin, header → [blocking] cache or compile → version window,
//!                 imports → instantiate_pre → describe under limits → check_options → Plugin
//! ```
//!
//! The ticker is a plain OS thread, not a tokio task: a guest that never yields would otherwise
//! starve the very task meant to interrupt it (wasmCloud PR #5451, wado #1146).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::sync::{Semaphore, broadcast};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use flotilla_core::plugin_faults::FaultBook;

use crate::bindings::{AddonPlugin, AddonPluginPre};
use crate::cache::ArtifactCache;
use crate::metrics::Metrics;
use crate::plugin::Caller;
use crate::state::CallState;
use crate::validate::{check_component_type, check_header, check_options};
use crate::{ComponentBytes, Digest, Error, FaultPolicy, Hook, Limits, Plugin, Result, ValidationError};

/// Fault events buffered per subscriber; a subscriber that falls further behind is told it
/// lagged and rereads every plugin.
const FAULT_EVENTS: usize = 1024;

/// How the engine allocates instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllocatorChoice {
    /// Try the pooling allocator; fall back to on-demand if the address space cannot be reserved.
    #[default]
    Auto,
    /// Pooling only; building the runtime fails if the pool cannot be reserved.
    Pooling,
    /// On-demand only (mmap per instance).
    OnDemand,
}

/// The allocator the engine actually uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocatorKind {
    /// Pre-reserved slots: fast instantiation, no mmap per call.
    Pooling,
    /// Memory mapped per instance.
    OnDemand,
}

/// Engine-wide settings. Per-plugin limits are [`Limits`]; these are their ceilings.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Allocator strategy.
    pub allocator: AllocatorChoice,
    /// Calls (instances) alive at once, across all plugins; the pool is sized from it and further
    /// calls wait for a slot. One plugin may have [`FAIR_SHARES`]th of them.
    pub max_concurrent_calls: u32,
    /// Guest memory all calls may hold at once. One plugin's calls may hold [`FAIR_SHARES`]th
    /// of it together, which is also the largest `Limits::memory_bytes` a plugin may ask for
    /// and the pool's per-memory size ([`RuntimeConfig::plugin_memory_share`]).
    pub memory_budget_bytes: u64,
    /// Largest component accepted, in bytes (checked before compiling).
    pub max_component_bytes: usize,
    /// Epoch tick: how often a running guest checks its deadline and yields to tokio.
    pub epoch_tick: Duration,
    /// Compiled-artifact cache directory; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// How runtime faults are counted and when a revision is quarantined.
    pub faults: FaultPolicy,
    /// How running calls are stopped. Only tests change this.
    pub interruption: Interruption,
}

/// The mechanisms that stop a call, each of which is enough on its own (the host runs all of
/// them; tests switch them off one at a time to show that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interruption {
    /// Interrupt guest code once the call's timeout has passed, checked at every epoch tick.
    pub epoch_deadline: bool,
    /// Yield to tokio at every epoch tick, so a busy guest holds a worker thread for at most
    /// one tick. Without it a computing guest starves every other task on its worker, the
    /// wall-clock backstop's timer included.
    pub yield_every_tick: bool,
    /// How long after the call's timeout the wall-clock backstop ends it. `None`: a tenth of the
    /// timeout, at least 50 ms, so the epoch deadline fires first for a computing guest.
    pub wall_clock_grace: Option<Duration>,
}

impl Default for Interruption {
    fn default() -> Self {
        Self {
            epoch_deadline: true,
            yield_every_tick: true,
            wall_clock_grace: None,
        }
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            allocator: AllocatorChoice::Auto,
            max_concurrent_calls: 64,
            memory_budget_bytes: DEFAULT_MEMORY_BUDGET_BYTES,
            max_component_bytes: 32 << 20,
            epoch_tick: Duration::from_millis(10),
            cache_dir: None,
            faults: FaultPolicy::default(),
            interruption: Interruption::default(),
        }
    }
}

/// Default [`RuntimeConfig::memory_budget_bytes`]: half of deploy/hub's 1 GiB memory limit,
/// leaving the rest to the hub's caches and controllers.
pub const DEFAULT_MEMORY_BUDGET_BYTES: u64 = 512 << 20;
/// Into how many shares the call slots and the memory budget are cut: what one plugin may hold
/// at once, so a busy or hostile plugin leaves the others three quarters of each.
pub const FAIR_SHARES: u64 = 4;

impl RuntimeConfig {
    /// Guest memory one plugin's calls may hold together.
    pub fn plugin_memory_share(&self) -> u64 {
        self.memory_budget_bytes / FAIR_SHARES
    }

    /// Calls one plugin may have alive at once.
    pub fn plugin_call_share(&self) -> u32 {
        u32::try_from(u64::from(self.max_concurrent_calls) / FAIR_SHARES)
            .unwrap_or(u32::MAX)
            .max(1)
    }
}

/// Native stack the guest may use; overflow traps cleanly with `stack overflow`.
const MAX_WASM_STACK: usize = 512 << 10;
/// Bytes of each pooled memory and table reset with `memset` rather than returned to the
/// kernel: what a small plugin uses (helloworld 1.3 MiB), so its slots never go back to the
/// kernel; beyond it a slot is reset with `madvise` as before. At most this much per warm slot
/// stays resident.
const KEEP_RESIDENT_BYTES: usize = 2 << 20;
/// Per-component caps the pool is sized with (a Rust component needs ~3 core instances, one
/// memory, a couple of tables).
const CORE_INSTANCES_PER_COMPONENT: u32 = 16;
const MEMORIES_PER_COMPONENT: u32 = 2;
const TABLES_PER_COMPONENT: u32 = 16;

/// A component compiled once per digest: concurrent loads of the same bytes wait for one
/// compilation, and revisions sharing a digest share the compiled code.
pub(crate) type CompiledCell = tokio::sync::OnceCell<Component>;

/// The plugin host: one engine and everything shared by all plugins. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<RuntimeInner>,
}

pub(crate) struct RuntimeInner {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<CallState>,
    pub(crate) allocator: AllocatorKind,
    pub(crate) metrics: Metrics,
    pub(crate) permits: Semaphore,
    /// The memory budget, in KiB.
    pub(crate) memory: Arc<Semaphore>,
    pub(crate) config: RuntimeConfig,
    /// Add-on names whose serving revision's fault summary changed (see
    /// [`Runtime::subscribe_faults`]).
    pub(crate) fault_events: broadcast::Sender<String>,
    registry: Registry,
    cache: Option<ArtifactCache>,
    /// Compiled components by digest, alive while some loaded plugin holds them.
    compiled: Mutex<HashMap<Digest, Weak<CompiledCell>>>,
    _ticker: EpochTicker,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("allocator", &self.inner.allocator)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Builds the engine, the linker and the epoch ticker, and opens the cache.
    pub fn new(config: RuntimeConfig) -> Result<Self> {
        let (engine, allocator) = build_engine(&config)?;

        let mut linker = Linker::<CallState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|source| Error::Engine { source })?;
        AddonPlugin::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |s| s)
            .map_err(|source| Error::Engine { source })?;

        let cache = match &config.cache_dir {
            Some(dir) => match ArtifactCache::open(dir, &engine) {
                Ok(cache) => Some(cache),
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "compiled-artifact cache disabled");
                    None
                }
            },
            None => None,
        };

        let ticker = EpochTicker::start(engine.clone(), config.epoch_tick).map_err(|e| Error::Engine {
            source: wasmtime::Error::msg(format!("epoch ticker thread: {e}")),
        })?;
        let metrics = Metrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        tracing::info!(?allocator, "plugin runtime ready");
        Ok(Self {
            inner: Arc::new(RuntimeInner {
                engine,
                linker,
                allocator,
                metrics,
                permits: Semaphore::new(config.max_concurrent_calls as usize),
                memory: Arc::new(Semaphore::new(kib(config.memory_budget_bytes))),
                config,
                fault_events: broadcast::channel(FAULT_EVENTS).0,
                registry,
                cache,
                compiled: Mutex::new(HashMap::new()),
                _ticker: ticker,
            }),
        })
    }

    /// Which allocator the engine uses.
    pub fn allocator(&self) -> AllocatorKind {
        self.inner.allocator
    }

    /// The metric families (to register into another registry, or read in tests).
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// Add-on names, sent whenever the fault summary of a revision changes (a runtime fault, a
    /// quarantine, the first answered call after faults). The `AddOnPlugin` controller writes
    /// status from these.
    pub fn subscribe_faults(&self) -> broadcast::Receiver<String> {
        self.inner.fault_events.subscribe()
    }

    /// The fault policy revisions are judged by.
    pub fn fault_policy(&self) -> &FaultPolicy {
        &self.inner.config.faults
    }

    /// The metrics in Prometheus/OpenMetrics text exposition format.
    pub fn render_metrics(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.inner.registry) {
            tracing::warn!(error = %e, "cannot encode plugin metrics");
        }
        out
    }

    /// Where the cached artifact for `digest` lives, if the cache is enabled.
    pub fn cache_entry_path(&self, digest: &Digest) -> Option<PathBuf> {
        self.inner.cache.as_ref().map(|c| c.artifact_path(digest))
    }

    /// Validates, compiles (or loads from cache) and pre-instantiates a plugin for `addon`, then
    /// runs `describe` under `limits` and checks its answer. A digest the bytes must have is the
    /// loader's to check, before they get here.
    ///
    /// Compilation runs on tokio's blocking pool; the caller's task only awaits it.
    pub async fn load(
        &self,
        addon: &str,
        component: impl Into<ComponentBytes>,
        limits: Limits,
    ) -> Result<Plugin> {
        self.load_granting(addon, component, limits, Vec::new()).await
    }

    /// Like [`Runtime::load`], and every call of the plugin sees `env` as its WASI environment:
    /// the one capability the host grants, and only to the components it ships itself (the
    /// built-in AddOnTemplate plugin gets its template this way, since `describe` and
    /// `hub-permissions` take no configs). Everything else stays as for any plugin: same
    /// sandbox, same limits.
    pub async fn load_granting(
        &self,
        addon: &str,
        component: impl Into<ComponentBytes>,
        limits: Limits,
        env: Vec<(String, String)>,
    ) -> Result<Plugin> {
        let result = self.load_inner(addon, component.into(), limits, env).await;
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e) => e.fault().as_str(),
        };
        self.inner.metrics.count_load(addon, outcome);
        if let Err(e) = &result {
            tracing::warn!(addon, error = %e, "plugin refused");
        }
        result
    }

    async fn load_inner(
        &self,
        addon: &str,
        component: ComponentBytes,
        limits: Limits,
        env: Vec<(String, String)>,
    ) -> Result<Plugin> {
        self.check_limits(&limits)?;
        let max = self.inner.config.max_component_bytes;
        if component.len() > max {
            return Err(ValidationError::TooLarge {
                actual: component.len(),
                limit: max,
            }
            .into());
        }
        let digest = component.digest();
        let bytes = component.into_bytes();
        check_header(&bytes)?;

        let compiled = self.inner.compiled_cell(&digest);
        let component = compiled
            .get_or_try_init(|| {
                let inner = Arc::clone(&self.inner);
                let addon = addon.to_owned();
                async move {
                    tokio::task::spawn_blocking(move || inner.compile_or_load(&addon, &digest, &bytes))
                        .await
                        .map_err(|e| Error::Task {
                            reason: e.to_string(),
                        })?
                }
            })
            .await?
            .clone();

        let wit_version = check_component_type(&self.inner.engine, &component)?;
        let instance_pre = self
            .inner
            .linker
            .instantiate_pre(&component)
            .map_err(|source| ValidationError::Link { source })?;
        let pre = AddonPluginPre::new(instance_pre).map_err(|source| ValidationError::Link { source })?;

        let caller = Caller {
            runtime: Arc::clone(&self.inner),
            pre,
            addon: addon.to_owned(),
            digest,
            limits,
            env: env.into(),
            faults: Mutex::new(FaultBook::default()),
            calls: tokio::sync::Semaphore::new(self.inner.config.plugin_call_share() as usize),
            memory: Arc::new(tokio::sync::Semaphore::new(kib(self
                .inner
                .config
                .plugin_memory_share()))),
            _compiled: compiled,
        };
        let options = caller
            .call(
                Hook::Describe,
                None,
                async |plugin: &AddonPlugin, store| plugin.flotilla_addon_hooks().call_describe(store).await,
                |options| {
                    let size = serde_json::to_vec(&options).map_or(usize::MAX, |v| v.len());
                    if size > limits.max_output_bytes {
                        return Err(Error::OutputTooLarge {
                            hook: Hook::Describe,
                            what: "bytes",
                            actual: size,
                            limit: limits.max_output_bytes,
                        });
                    }
                    Ok(options)
                },
            )
            .await
            .map_err(|e| ValidationError::DescribeFailed { source: Box::new(e) })?;
        check_options(&options)?;
        tracing::info!(addon, %digest, %wit_version, "plugin loaded");
        Ok(Plugin {
            caller,
            options,
            wit_version,
        })
    }

    fn check_limits(&self, limits: &Limits) -> Result<()> {
        let ceiling = self.inner.config.plugin_memory_share();
        if limits.memory_bytes == 0 || limits.memory_bytes > ceiling {
            return Err(Error::LimitsOutOfRange {
                reason: format!(
                    "memory {} bytes, allowed 1..={ceiling} (a {FAIR_SHARES}th of the hub's plugin memory budget)",
                    limits.memory_bytes
                ),
            });
        }
        if limits.timeout.is_zero() || limits.timeout > Duration::from_secs(300) {
            return Err(Error::LimitsOutOfRange {
                reason: format!("timeout {:?}, allowed (0, 300s]", limits.timeout),
            });
        }
        Ok(())
    }
}

impl RuntimeInner {
    /// The compile-once cell for `digest`, shared with any load of the same bytes in progress or
    /// still alive. Forgets cells no plugin holds any more.
    fn compiled_cell(&self, digest: &Digest) -> Arc<CompiledCell> {
        let mut compiled = self.compiled.lock().unwrap_or_else(PoisonError::into_inner);
        compiled.retain(|_, cell| cell.strong_count() > 0);
        if let Some(cell) = compiled.get(digest).and_then(Weak::upgrade) {
            return cell;
        }
        let cell = Arc::new(CompiledCell::new());
        compiled.insert(*digest, Arc::downgrade(&cell));
        cell
    }

    /// Blocking: deserializes a verified cached artifact or compiles (and caches) the component.
    fn compile_or_load(&self, addon: &str, digest: &Digest, bytes: &[u8]) -> Result<Component> {
        if let Some(cache) = &self.cache {
            let (component, result) = cache.load(&self.engine, digest);
            self.metrics.count_cache(addon, result);
            if let Some(component) = component {
                return Ok(component);
            }
        }
        let component = Component::from_binary(&self.engine, bytes).map_err(|source| Error::Compile {
            digest: *digest,
            source,
        })?;
        if let Some(cache) = &self.cache {
            cache.store(digest, &component);
        }
        Ok(component)
    }
}

/// Builds the engine: pooling first when allowed, on-demand otherwise.
fn build_engine(config: &RuntimeConfig) -> Result<(Engine, AllocatorKind)> {
    let try_pooling = matches!(config.allocator, AllocatorChoice::Auto | AllocatorChoice::Pooling);
    if try_pooling {
        match Engine::new(&engine_config(config, true)) {
            Ok(engine) => return Ok((engine, AllocatorKind::Pooling)),
            Err(source) if config.allocator == AllocatorChoice::Pooling => {
                return Err(Error::Engine { source });
            }
            Err(e) => {
                tracing::warn!(error = %e, "pooling allocator unavailable (address space?); using on-demand");
            }
        }
    }
    let engine = Engine::new(&engine_config(config, false)).map_err(|source| Error::Engine { source })?;
    Ok((engine, AllocatorKind::OnDemand))
}

fn engine_config(config: &RuntimeConfig, pooling: bool) -> Config {
    let mut c = Config::new();
    // Deadlines: checked on loop back-edges and function entries, driven by the ticker thread.
    c.epoch_interruption(true);
    c.max_wasm_stack(MAX_WASM_STACK);
    c.wasm_component_model(true);
    // Plugins are compiled once per digest and then served for a long time: optimise.
    c.cranelift_opt_level(wasmtime::OptLevel::Speed);
    if pooling {
        let calls = config.max_concurrent_calls.max(1);
        let mut p = PoolingAllocationConfig::new();
        p.total_component_instances(calls)
            .total_stacks(calls)
            .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT)
            .total_core_instances(calls.saturating_mul(CORE_INSTANCES_PER_COMPONENT))
            .max_memories_per_component(MEMORIES_PER_COMPONENT)
            .total_memories(calls.saturating_mul(MEMORIES_PER_COMPONENT))
            .max_tables_per_component(TABLES_PER_COMPONENT)
            .total_tables(calls.saturating_mul(TABLES_PER_COMPONENT))
            .max_memory_size(usize::try_from(config.plugin_memory_share()).unwrap_or(usize::MAX))
            .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
            .table_keep_resident(KEEP_RESIDENT_BYTES)
            // Idle slots are reused before unused ones, so only as many slots stay resident
            // as calls ever ran at once (the default fills all of them over time).
            .max_unused_warm_slots(0)
            // Reset only the pages a call wrote (found with Linux's PAGEMAP_SCAN, 6.7 and
            // later; elsewhere the first KEEP_RESIDENT_BYTES are reset): helloworld dirties a
            // few dozen KiB of its 1.3 MiB, and clearing all of it after every call was a
            // fifth of a call's time (bench-plugin-hooks: p50 80 → 66 µs, 1 268 → 228 KiB per
            // warm slot). Calls still never see each other's memory (hostile.rs, snoop).
            .pagemap_scan(wasmtime::Enabled::Auto);
        // Calls must scale with cores. Resetting a slot with `madvise` and filling it through
        // copy-on-write page faults flush the TLB of every core running the process (IPIs)
        // and take the process's mmap lock: two calls at once ran no faster than one. Slots
        // whose memory and tables stay resident are reset with `memset`, and data segments
        // are copied in at instantiation, so a steady state makes no virtual-memory calls.
        c.memory_init_cow(false);
        c.allocation_strategy(InstanceAllocationStrategy::Pooling(p));
    }
    c
}

/// Drives the engine's epoch from a dedicated OS thread; stops when dropped.
struct EpochTicker {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    fn start(engine: Engine, tick: Duration) -> std::io::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("flotilla-wasm-epoch".to_owned())
            .spawn(move || {
                // Ends when the sender is dropped (Disconnected).
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(tick) {
                    engine.increment_epoch();
                }
            })?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `bytes` in whole KiB, the unit of the memory semaphores.
pub(crate) fn kib(bytes: u64) -> usize {
    usize::try_from(bytes.div_ceil(1024)).unwrap_or(usize::MAX)
}
