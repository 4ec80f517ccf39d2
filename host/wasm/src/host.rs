//! Host side of `flotilla:addon/host@0.1.0`: the only capability a plugin is offered.
//!
//! Holds only the `Host` impls (style rule 6); the budget and forwarding live in
//! [`crate::state::LogSink`].

use crate::bindings::flotilla::addon::{host, types};
use crate::state::CallState;

impl host::Host for CallState {
    fn log(&mut self, level: host::LogLevel, message: String) {
        self.log.record(level, &message);
    }
}

/// `flotilla:addon/types` declares only types; there is nothing to implement.
impl types::Host for CallState {}
