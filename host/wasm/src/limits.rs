//! Per-plugin resource limits.
//!
//! The `AddOnPlugin` CR's `spec.limits {timeoutMillis, memoryMiB, maxOutputBytes}` maps onto
//! [`Limits`]; anything unset keeps the safe default. The runtime checks a plugin's limits against
//! the ceilings the engine was built with ([`crate::RuntimeConfig`]) when the plugin is loaded.

use std::time::Duration;

/// What [`Limits::lift_budget_bytes`] allows beyond the output caps.
pub const LIFT_SLACK: usize = 256 << 10;

/// What one call of one hook may use. Every call gets a fresh store with these limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time for one call, instantiation included. Enforced by an epoch deadline (CPU
    /// work in the guest) and a `tokio` timeout (time parked in host calls). Default 5 s.
    pub timeout: Duration,
    /// Maximum size of each linear memory of the guest, in bytes. Default 64 MiB.
    pub memory_bytes: u64,
    /// Maximum total bytes of the strings a hook returns (all manifests together, a deny reason,
    /// a health message). Default 1 MiB.
    pub max_output_bytes: usize,
    /// Maximum number of manifests (or hub-permission objects) one call may return. Default 1000.
    pub max_manifests: usize,
}

impl Limits {
    /// Default call timeout.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
    /// Default memory limit.
    pub const DEFAULT_MEMORY_BYTES: u64 = 64 << 20;
    /// Default output byte cap.
    pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 1 << 20;
    /// Default manifest count cap.
    pub const DEFAULT_MAX_MANIFESTS: usize = 1000;

    /// Bytes one call may make the host copy out of the guest: the hook's result, and each
    /// call the guest makes to the host (wasmtime's "hostcall fuel"). wasmtime charges every
    /// string and list it lifts against this before copying it, so a result whose strings all
    /// point at one buffer of guest memory fails at the budget instead of having the host
    /// allocate every copy (the output caps run only on what was lifted). The budget is the
    /// output cap twice over (JSON escaping aside, strings plus the list and record headers
    /// around them), a pointer pair per manifest, and [`LIFT_SLACK`] for `describe`'s options
    /// and the guest's log lines.
    pub fn lift_budget_bytes(&self) -> usize {
        self.max_output_bytes
            .saturating_mul(2)
            .saturating_add(self.max_manifests.saturating_mul(8))
            .saturating_add(LIFT_SLACK)
    }

    /// Maps the `AddOnPlugin` `spec.limits` fields, keeping defaults for what is unset.
    pub fn from_spec(
        timeout_millis: Option<u64>,
        memory_mib: Option<u64>,
        max_output_bytes: Option<u64>,
    ) -> Self {
        let d = Self::default();
        Self {
            timeout: timeout_millis.map_or(d.timeout, Duration::from_millis),
            memory_bytes: memory_mib.map_or(d.memory_bytes, |m| m.saturating_mul(1 << 20)),
            max_output_bytes: max_output_bytes
                .map_or(d.max_output_bytes, |b| usize::try_from(b).unwrap_or(usize::MAX)),
            max_manifests: d.max_manifests,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: Self::DEFAULT_TIMEOUT,
            memory_bytes: Self::DEFAULT_MEMORY_BYTES,
            max_output_bytes: Self::DEFAULT_MAX_OUTPUT_BYTES,
            max_manifests: Self::DEFAULT_MAX_MANIFESTS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_spec_fields_keep_the_safe_defaults() {
        assert_eq!(Limits::from_spec(None, None, None), Limits::default());
        let l = Limits::from_spec(Some(250), Some(16), Some(4096));
        assert_eq!(l.timeout, Duration::from_millis(250));
        assert_eq!(l.memory_bytes, 16 << 20);
        assert_eq!(l.max_output_bytes, 4096);
    }
}
