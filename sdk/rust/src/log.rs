//! Logging through the host's `log` import.
//!
//! On `wasm32` each line goes to the host, which attributes it to the add-on and hook and keeps a
//! bounded number per call. On other targets (native tests) lines are kept in a thread-local
//! buffer that [`take_captured`] returns, so a test can assert on what an add-on logged.

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Very verbose diagnostics.
    Trace,
    /// Diagnostics.
    Debug,
    /// Normal operation.
    Info,
    /// Something odd that was handled.
    Warn,
    /// Something failed.
    Error,
}

/// Writes one line to the host log.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    crate::bindings::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    CAPTURED.with(|c| c.borrow_mut().push((level, message.to_owned())));
}

/// Logs at [`Level::Debug`].
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Logs at [`Level::Info`].
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Logs at [`Level::Warn`].
pub fn warn(message: &str) {
    log(Level::Warn, message);
}

/// Logs at [`Level::Error`].
pub fn error(message: &str) {
    log(Level::Error, message);
}

#[cfg(not(target_arch = "wasm32"))]
thread_local! {
    static CAPTURED: std::cell::RefCell<Vec<(Level, String)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The lines logged on this thread since the last call (native targets only).
#[cfg(not(target_arch = "wasm32"))]
pub fn take_captured() -> Vec<(Level, String)> {
    CAPTURED.with(|c| std::mem::take(&mut *c.borrow_mut()))
}
