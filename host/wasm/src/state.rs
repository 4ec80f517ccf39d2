//! Per-call store state: the sandbox one hook call runs in.
//!
//! ```text
//!   Plugin (compiled revision, InstancePre) ──┐
//!                                             ▼ every call
//!   Store<CallState> ── WasiCtx (nothing granted; stdout/stderr → bounded pipes)
//!                    ├─ CallLimiter (StoreLimits + records which limit was hit)
//!                    ├─ LogSink (budgeted `log` import → tracing)
//!                    └─ timed_out (set by the epoch deadline callback)
//! ```
//!
//! A fresh `CallState` is built for every call and dropped after it, so nothing a guest does —
//! including a trap that poisons its instance — survives into the next call.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::types::LogLevel;
use crate::{Hook, Limits};

/// Bytes of stdout and of stderr captured per call; the rest is refused (a guest's `print!`
/// then fails, which is its own fault). Forwarded to `tracing` after the call.
pub(crate) const CAPTURE_BYTES: usize = 64 << 10;
/// Lines the `log` import forwards per call; further lines are counted and dropped.
pub(crate) const LOG_LINES_PER_CALL: u64 = 256;
/// Bytes the `log` import forwards per call.
pub(crate) const LOG_BYTES_PER_CALL: usize = 64 << 10;
/// Longest single forwarded log line; longer lines are cut.
pub(crate) const LOG_LINE_MAX: usize = 4 << 10;
/// Random bytes one `get-random-bytes` call may ask for (wasmtime's default is 64 MiB, a
/// host-side allocation the guest controls).
const MAX_RANDOM_BYTES: u64 = 64 << 10;
/// Tables, table elements, instances and memories one store may create. Rust components need
/// one memory and a few tables and core instances; a hostile one gets no more.
const MAX_TABLE_ELEMENTS: usize = 100_000;
const MAX_INSTANCES: usize = 32;
const MAX_TABLES: usize = 32;
const MAX_MEMORIES: usize = 4;

/// The data of one call's `Store`.
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: CallLimiter,
    pub(crate) log: LogSink,
    /// Set by the epoch deadline callback when the call's deadline passed.
    pub(crate) timed_out: bool,
    pub(crate) stdout: MemoryOutputPipe,
    pub(crate) stderr: MemoryOutputPipe,
}

impl CallState {
    /// A sandbox with nothing granted: no preopened directories, no environment, no arguments,
    /// no network, stdin empty, stdout/stderr into bounded in-memory pipes. `env` is empty for
    /// every plugin but the host's own built-ins (see `Runtime::load_granting`).
    pub(crate) fn new(
        addon: &str,
        hook: Hook,
        limits: &Limits,
        env: &[(String, String)],
        budgets: MemoryBudgets,
    ) -> Self {
        let stdout = MemoryOutputPipe::new(CAPTURE_BYTES);
        let stderr = MemoryOutputPipe::new(CAPTURE_BYTES);
        let wasi = WasiCtxBuilder::new()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .envs(env)
            .max_random_size(MAX_RANDOM_BYTES)
            // The defaults already deny these; stated here so the sandbox reads from the code.
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            .build();
        Self {
            wasi,
            table: ResourceTable::new(),
            limiter: CallLimiter::new(limits.memory_bytes, budgets),
            log: LogSink::new(addon, hook),
            timed_out: false,
            stdout,
            stderr,
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The shared memory budgets a call's memory is charged to, in KiB: its plugin's share and the
/// whole host's.
pub(crate) struct MemoryBudgets {
    pub(crate) plugin: Arc<Semaphore>,
    pub(crate) host: Arc<Semaphore>,
}

/// Which budget refused a call's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BudgetScope {
    /// The plugin's share: its own other calls hold it.
    Plugin,
    /// The host's: all plugins' calls together hold it.
    Host,
}

/// [`StoreLimits`] plus a record of whether the guest hit the memory limit, so a trap caused by a
/// refused `memory.grow` is reported as [`crate::Error::MemoryExceeded`] and not as a generic trap.
/// Memory the guest grows is also charged to the shared budgets, and given back when the call's
/// store drops.
pub(crate) struct CallLimiter {
    inner: StoreLimits,
    /// True once a memory or table growth was refused.
    pub(crate) exceeded: bool,
    budgets: MemoryBudgets,
    held: Vec<OwnedSemaphorePermit>,
    /// Set when a growth within the call's own limit was refused by a shared budget.
    pub(crate) budget_exhausted: Option<BudgetScope>,
}

impl CallLimiter {
    /// Charges `kib` to both budgets, or to neither.
    fn charge(&mut self, kib: usize) -> Result<(), BudgetScope> {
        let kib = u32::try_from(kib).map_err(|_| BudgetScope::Plugin)?;
        let plugin = Arc::clone(&self.budgets.plugin)
            .try_acquire_many_owned(kib)
            .map_err(|_| BudgetScope::Plugin)?;
        let host = Arc::clone(&self.budgets.host)
            .try_acquire_many_owned(kib)
            .map_err(|_| BudgetScope::Host)?;
        self.held.extend([plugin, host]);
        Ok(())
    }

    fn new(memory_bytes: u64, budgets: MemoryBudgets) -> Self {
        let inner = StoreLimitsBuilder::new()
            .memory_size(usize::try_from(memory_bytes).unwrap_or(usize::MAX))
            .table_elements(MAX_TABLE_ELEMENTS)
            .instances(MAX_INSTANCES)
            .tables(MAX_TABLES)
            .memories(MAX_MEMORIES)
            // Trap at the failed grow instead of returning -1: the error then points at the limit,
            // not at whatever the guest's allocator does with a failed allocation.
            .trap_on_grow_failure(true)
            .build();
        Self {
            inner,
            exceeded: false,
            budgets,
            held: Vec::new(),
            budget_exhausted: None,
        }
    }
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let verdict = self.inner.memory_growing(current, desired, maximum);
        if !matches!(verdict, Ok(true)) {
            self.exceeded = true;
            return verdict;
        }
        let grown = crate::runtime::kib(desired as u64).saturating_sub(crate::runtime::kib(current as u64));
        if let Err(scope) = self.charge(grown) {
            self.budget_exhausted = Some(scope);
            return Err(wasmtime::Error::msg("the plugin memory budget is exhausted"));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let verdict = self.inner.table_growing(current, desired, maximum);
        if !matches!(verdict, Ok(true)) {
            self.exceeded = true;
        }
        verdict
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}

/// Forwards the guest's `log` lines to `tracing` within a per-call budget.
pub(crate) struct LogSink {
    addon: String,
    hook: Hook,
    lines: u64,
    bytes: usize,
    /// Lines dropped over the budget; counted in metrics after the call.
    pub(crate) dropped: u64,
}

impl LogSink {
    fn new(addon: &str, hook: Hook) -> Self {
        Self {
            addon: addon.to_owned(),
            hook,
            lines: 0,
            bytes: 0,
            dropped: 0,
        }
    }

    /// Forwards one line if the budget allows, cut to [`LOG_LINE_MAX`] bytes.
    pub(crate) fn record(&mut self, level: LogLevel, message: &str) {
        let line = truncate(message, LOG_LINE_MAX);
        if self.lines >= LOG_LINES_PER_CALL || self.bytes.saturating_add(line.len()) > LOG_BYTES_PER_CALL {
            self.dropped += 1;
            return;
        }
        self.lines += 1;
        self.bytes += line.len();
        let (addon, hook) = (self.addon.as_str(), self.hook.as_str());
        match level {
            LogLevel::Trace => tracing::trace!(target: "flotilla_wasm::guest", addon, hook, "{line}"),
            LogLevel::Debug => tracing::debug!(target: "flotilla_wasm::guest", addon, hook, "{line}"),
            LogLevel::Info => tracing::info!(target: "flotilla_wasm::guest", addon, hook, "{line}"),
            LogLevel::Warn => tracing::warn!(target: "flotilla_wasm::guest", addon, hook, "{line}"),
            LogLevel::Error => tracing::error!(target: "flotilla_wasm::guest", addon, hook, "{line}"),
        }
    }
}

/// Forwards what the guest wrote to stdout (debug) and stderr (warn), line by line.
pub(crate) fn forward_output(addon: &str, hook: Hook, stdout: &[u8], stderr: &[u8]) {
    for line in String::from_utf8_lossy(stdout).lines().filter(|l| !l.is_empty()) {
        tracing::debug!(target: "flotilla_wasm::guest", addon, hook = hook.as_str(), stream = "stdout", "{line}");
    }
    for line in String::from_utf8_lossy(stderr).lines().filter(|l| !l.is_empty()) {
        tracing::warn!(target: "flotilla_wasm::guest", addon, hook = hook.as_str(), stream = "stderr", "{line}");
    }
}

/// `s` cut to at most `max` bytes on a character boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(plugin: &Arc<Semaphore>, host: &Arc<Semaphore>) -> CallLimiter {
        CallLimiter::new(
            64 << 20,
            MemoryBudgets {
                plugin: Arc::clone(plugin),
                host: Arc::clone(host),
            },
        )
    }

    #[test]
    fn memory_is_charged_to_both_budgets_and_given_back_when_the_call_ends() {
        let (plugin, host) = (Arc::new(Semaphore::new(4096)), Arc::new(Semaphore::new(6144)));
        let mut first = limiter(&plugin, &host);
        assert!(first.memory_growing(0, 3 << 20, None).unwrap());
        assert_eq!(
            (plugin.available_permits(), host.available_permits()),
            (1024, 3072)
        );
        // Within its own 64 MiB limit, but over what the plugin's share has left.
        let mut second = limiter(&plugin, &host);
        assert!(second.memory_growing(0, 2 << 20, None).is_err());
        assert_eq!(second.budget_exhausted, Some(BudgetScope::Plugin));
        assert!(!second.exceeded, "not the call's own limit");
        drop(first);
        assert_eq!(
            (plugin.available_permits(), host.available_permits()),
            (4096, 6144)
        );
        // Another plugin's share is free, but the host's budget is what others left.
        let other = Arc::new(Semaphore::new(8192));
        let mut big = limiter(&other, &host);
        assert!(big.memory_growing(0, 5 << 20, None).unwrap());
        let mut third = limiter(&plugin, &host);
        assert!(third.memory_growing(0, 2 << 20, None).is_err());
        assert_eq!(third.budget_exhausted, Some(BudgetScope::Host));
    }
}
