//! Errors of the plugin host, one variant per failed operation.
//!
//! Every variant says which add-on operation failed and keeps its source. [`Error::fault`] maps an
//! error to the [`Fault`] label used in metrics and in the reasons the hub writes into conditions,
//! so a person reading `Degraded` or a CSR denial sees the same word an alert would.

use std::time::Duration;

use crate::Hook;
use crate::types::PluginError;

/// `Result` with this crate's [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The trap code of a wasm stack overflow in [`Error::Trap`].
pub(crate) const STACK_OVERFLOW: &str = "stack overflow";

/// Why loading or calling a plugin failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Building the shared wasmtime engine failed (bad configuration; not caused by any plugin).
    #[error("cannot build the wasmtime engine: {source}")]
    Engine {
        /// What wasmtime reported.
        #[source]
        source: wasmtime::Error,
    },

    /// The requested limits exceed what the engine was built for.
    #[error("limits out of range: {reason}")]
    LimitsOutOfRange {
        /// Which limit and the allowed range.
        reason: String,
    },

    /// The bytes were refused before or after compilation: see [`ValidationError`].
    #[error("plugin refused: {0}")]
    Validate(#[from] ValidationError),

    /// Cranelift could not compile the component.
    #[error("cannot compile component {digest}: {source}")]
    Compile {
        /// Digest of the component.
        digest: crate::Digest,
        /// What wasmtime reported.
        #[source]
        source: wasmtime::Error,
    },

    /// A fresh instance could not be created (pool exhausted, start function failed, limits at
    /// instantiation).
    #[error("cannot instantiate plugin for {hook}: {source}")]
    Instantiate {
        /// The hook the instance was for.
        hook: Hook,
        /// What wasmtime reported.
        #[source]
        source: wasmtime::Error,
    },

    /// The hook did not finish within the plugin's time limit (epoch deadline or wall clock).
    #[error("{hook} timed out after {timeout:?} ({by})")]
    CallTimeout {
        /// The hook.
        hook: Hook,
        /// The limit that was reached.
        timeout: Duration,
        /// Which mechanism ended the call.
        by: TimeoutBy,
    },

    /// The revision is quarantined after repeated faults: the call was not made and the hook's
    /// fail-safe result applies.
    #[error(
        "{hook} not called: the plugin is quarantined{scope} until {until} after repeated faults (last: {last})"
    )]
    Quarantined {
        /// The hook.
        hook: Hook,
        /// ` for cluster <name>` when only that cluster's calls are quarantined, else empty.
        scope: String,
        /// End of the quarantine (RFC 3339).
        until: String,
        /// The last fault, for people.
        last: String,
    },

    /// The guest's memory stayed within its limit, but the memory budget its calls share was
    /// spent by other calls.
    #[error("{hook} could not grow its memory: {budget} the plugin memory budget is in use by other calls")]
    MemoryBudgetExhausted {
        /// The hook.
        hook: Hook,
        /// Whose budget: this plugin's share, or all plugins'.
        budget: &'static str,
    },

    /// The guest tried to grow its memory (or tables) past the plugin's limit.
    #[error("{hook} exceeded the memory limit of {limit_bytes} bytes")]
    MemoryExceeded {
        /// The hook.
        hook: Hook,
        /// The per-memory limit in bytes.
        limit_bytes: u64,
    },

    /// The hook returned more than the plugin's output limits allow.
    #[error("{hook} output too large: {what} is {actual}, limit {limit}")]
    OutputTooLarge {
        /// The hook.
        hook: Hook,
        /// What was measured: `bytes` or `manifests`.
        what: &'static str,
        /// The measured amount.
        actual: usize,
        /// The limit.
        limit: usize,
    },

    /// Lifting the hook's result (or the guest's call to the host) would have copied more than
    /// the call's budget out of guest memory; the host stopped before copying it.
    #[error("{hook} output too large: lifting it would copy more than {budget} bytes out of the guest")]
    OutputNotLifted {
        /// The hook.
        hook: Hook,
        /// [`crate::Limits::lift_budget_bytes`].
        budget: usize,
    },

    /// The guest trapped: panic, `unreachable`, out-of-bounds access, stack overflow, or a trap
    /// raised by a host function.
    #[error("{hook} trapped ({code}): {message}")]
    Trap {
        /// The hook.
        hook: Hook,
        /// The trap code as wasmtime words it (`wasm \`unreachable\` instruction executed`, ...),
        /// `stack overflow`, or `error` for a failure that is not a wasm trap.
        code: String,
        /// The root cause and the tail of the guest's stderr (a Rust guest's panic message),
        /// at most 1 KiB; the wasm backtrace is logged at debug level.
        message: String,
    },

    /// The hook returned a value the host cannot use (not JSON, wrong kind, wrong namespace).
    #[error("{hook} returned invalid output: {reason}")]
    InvalidOutput {
        /// The hook.
        hook: Hook,
        /// What was wrong.
        reason: String,
    },

    /// The plugin answered with its own typed error. Not a fault: the plugin ran and said why it
    /// could not render.
    #[error("{hook} failed in the plugin: {error:?}")]
    Plugin {
        /// The hook.
        hook: Hook,
        /// The plugin's error.
        error: PluginError,
    },

    /// No plugin is installed for the add-on.
    #[error("no plugin installed for add-on {addon}")]
    NotInstalled {
        /// The add-on name.
        addon: String,
    },

    /// A blocking compile task panicked or was cancelled (a bug in the host, not the plugin).
    #[error("compile task failed: {reason}")]
    Task {
        /// What the task reported.
        reason: String,
    },
}

/// Which mechanism ended a call that ran out of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeoutBy {
    /// The epoch deadline interrupted guest code (CPU work in wasm).
    EpochDeadline,
    /// The wall-clock backstop ended the call (time parked in host calls, or epochs off).
    WallClock,
}

impl std::fmt::Display for TimeoutBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeoutBy::EpochDeadline => "epoch deadline",
            TimeoutBy::WallClock => "wall-clock backstop",
        })
    }
}

/// Why a component was refused before it ever served a call.
///
/// Exhaustive on purpose: the loader gives every refusal its own `Validated` reason, and a new
/// one must not fall silently into a catch-all.
#[derive(Debug, thiserror::Error)]
pub enum ValidationError {
    /// Larger than the runtime's size cap.
    #[error("component is {actual} bytes, limit {limit}")]
    TooLarge {
        /// Size of the bytes received.
        actual: usize,
        /// The runtime's cap.
        limit: usize,
    },

    /// Not WebAssembly at all.
    #[error("not a WebAssembly binary")]
    NotWasm,

    /// A core WebAssembly module rather than a component; plugins must be components
    /// (`cargo build --target wasm32-wasip2` produces one).
    #[error("a core WebAssembly module, not a component (build for wasm32-wasip2)")]
    NotAComponent,

    /// The component does not export `flotilla:addon/hooks@<version>`.
    #[error("no `flotilla:addon/hooks` export; exports are: {exports:?}")]
    MissingHooks {
        /// What it exports instead.
        exports: Vec<String>,
    },

    /// The component targets a contract version outside the supported window.
    #[error("contract version {found} is outside the supported window {supported}")]
    UnsupportedWitVersion {
        /// The version in the component's export name.
        found: String,
        /// The window this host supports.
        supported: String,
    },

    /// The component imports interfaces the host does not offer (anything beyond the add-on
    /// world's `host` interface and WASI 0.2).
    #[error("imports not offered by the host: {imports:?}")]
    ForbiddenImports {
        /// The refused import names.
        imports: Vec<String>,
    },

    /// The imports or exports have the right names but the wrong types.
    #[error("component does not match the addon-plugin world: {source}")]
    Link {
        /// What wasmtime reported.
        #[source]
        source: wasmtime::Error,
    },

    /// `describe` faulted at load, so the plugin never became ready.
    #[error("describe failed: {source}")]
    DescribeFailed {
        /// The fault.
        #[source]
        source: Box<Error>,
    },

    /// `describe` answered, but with options the host refuses (for example a registration that
    /// would let the agent act as another cluster, or a `kubernetes.io/` custom signer).
    #[error("describe refused: {reason}")]
    InvalidDescribe {
        /// The rule that was broken.
        reason: String,
    },
}

/// The kind of a failure, as a short stable label for metrics and conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fault {
    /// Time limit reached.
    Timeout,
    /// Memory limit reached.
    Memory,
    /// The guest trapped.
    Trap,
    /// The guest overflowed its wasm stack (a trap of its own kind: unbounded recursion).
    StackOverflow,
    /// The guest wrote more log lines or output than a call may (the call still answered).
    LogFlood,
    /// The call was not made: the revision is quarantined after repeated faults.
    Quarantined,
    /// Output caps exceeded.
    OutputTooLarge,
    /// Output malformed.
    InvalidOutput,
    /// Refused at load.
    Validation,
    /// Compilation failed.
    Compile,
    /// Instantiation failed.
    Instantiate,
    /// The plugin returned its own error (not a fault of the sandbox).
    PluginError,
    /// Anything else (configuration, host bugs).
    Host,
}

impl Fault {
    /// The label used in metrics (`kind="timeout"`) and in condition messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            Fault::Timeout => "timeout",
            Fault::Memory => "memory",
            Fault::Trap => "trap",
            Fault::StackOverflow => "stack_overflow",
            Fault::LogFlood => "log_flood",
            Fault::Quarantined => "quarantined",
            Fault::OutputTooLarge => "output_too_large",
            Fault::InvalidOutput => "invalid_output",
            Fault::Validation => "validation",
            Fault::Compile => "compile",
            Fault::Instantiate => "instantiate",
            Fault::PluginError => "plugin_error",
            Fault::Host => "host",
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    /// The kind of failure, for metrics labels and condition reasons.
    pub fn fault(&self) -> Fault {
        match self {
            Error::CallTimeout { .. } => Fault::Timeout,
            Error::MemoryExceeded { .. } | Error::MemoryBudgetExhausted { .. } => Fault::Memory,
            Error::Trap { code, .. } if code == STACK_OVERFLOW => Fault::StackOverflow,
            Error::Trap { .. } => Fault::Trap,
            Error::Quarantined { .. } => Fault::Quarantined,
            Error::OutputTooLarge { .. } | Error::OutputNotLifted { .. } => Fault::OutputTooLarge,
            Error::InvalidOutput { .. } => Fault::InvalidOutput,
            Error::Validate(_) => Fault::Validation,
            Error::Compile { .. } => Fault::Compile,
            Error::Instantiate { .. } => Fault::Instantiate,
            Error::Plugin { .. } => Fault::PluginError,
            Error::Engine { .. }
            | Error::LimitsOutOfRange { .. }
            | Error::NotInstalled { .. }
            | Error::Task { .. } => Fault::Host,
        }
    }
}
