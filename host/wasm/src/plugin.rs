//! One compiled plugin revision and the five hooks, each run in a fresh sandbox.
//!
//! Every call: wait for a pool slot → new `Store<CallState>` (limits, epoch deadline) →
//! instantiate from the pre-instantiated component → call the export → check output → forward
//! captured output → record metrics. A fresh store per call means a trap (which poisons the
//! instance, wasmtime #10995) or leaked state never reaches the next call or another cluster.
//!
//! Fail-safe results, per the contract table:
//!
//! | hook | on fault |
//! |---|---|
//! | `manifests`, `hub-permissions` | `Err`: the caller keeps the last good objects |
//! | `approve-csr` | [`Plugin::approve_csr`] denies, the reason names the fault |
//! | `probe-health` | [`Plugin::probe_health`] says `unknown`, never `available` |

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use flotilla_core::addon::permissions::Permission;
use flotilla_core::addon::works::AgentManifest;
use flotilla_core::plugin_faults::{Admission, CallOutcome, FaultBook, FaultSummary};

use wasmtime::{Store, UpdateDeadline};

use crate::bindings::{AddonPlugin, AddonPluginPre};
use crate::error::{STACK_OVERFLOW, TimeoutBy};
use crate::runtime::RuntimeInner;
use crate::state::{CAPTURE_BYTES, CallState, forward_output, truncate};
use crate::types::{
    Addon, AddonOptions, Cluster, Csr, CsrDecision, FeedbackField, HealthResult, HealthStatus, ResolvedConfig,
};
use crate::validate::{check_output_size, read_manifests, read_permissions};
use crate::{Digest, Error, Fault, Limits, Result};

/// The exports of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hook {
    /// `describe`.
    Describe,
    /// `manifests`.
    Manifests,
    /// `approve-csr`.
    ApproveCsr,
    /// `hub-permissions`.
    HubPermissions,
    /// `probe-health`.
    ProbeHealth,
}

impl Hook {
    /// The WIT name, also the `hook` metrics label.
    pub const fn as_str(self) -> &'static str {
        match self {
            Hook::Describe => "describe",
            Hook::Manifests => "manifests",
            Hook::ApproveCsr => "approve-csr",
            Hook::HubPermissions => "hub-permissions",
            Hook::ProbeHealth => "probe-health",
        }
    }
}

impl std::fmt::Display for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Longest trap message kept: it ends up in CSR denial reasons and condition messages.
const TRAP_MESSAGE_MAX: usize = 1 << 10;
/// How much of the guest's last stderr output a trap message quotes (a Rust guest prints its
/// panic message there before it aborts).
const STDERR_TAIL: usize = 512;

/// Runs hooks of one compiled revision.
pub(crate) struct Caller {
    pub(crate) runtime: Arc<RuntimeInner>,
    pub(crate) pre: AddonPluginPre<CallState>,
    pub(crate) addon: String,
    pub(crate) digest: Digest,
    pub(crate) limits: Limits,
    /// The WASI environment every call sees (empty but for the host's built-in plugins).
    pub(crate) env: Arc<[(String, String)]>,
    /// This revision's runtime faults and quarantine (a new revision starts clean).
    pub(crate) faults: Mutex<FaultBook>,
    /// This plugin's share of the call slots: its calls queue here, not in front of others'.
    pub(crate) calls: tokio::sync::Semaphore,
    /// This plugin's share of the memory budget, in KiB.
    pub(crate) memory: Arc<tokio::sync::Semaphore>,
    /// Keeps the compiled component shared with other revisions of the same digest.
    pub(crate) _compiled: Arc<crate::runtime::CompiledCell>,
}

/// How far a call got before it failed.
enum Failure {
    Instantiate(wasmtime::Error),
    Call(wasmtime::Error),
}

impl Caller {
    /// Runs `f` against a fresh instance in a fresh store, then `check` on its answer.
    pub(crate) async fn call<R, T>(
        &self,
        hook: Hook,
        cluster: Option<&str>,
        f: impl AsyncFnOnce(&AddonPlugin, &mut Store<CallState>) -> wasmtime::Result<R>,
        check: impl FnOnce(R) -> Result<T>,
    ) -> Result<T> {
        let rt = &self.runtime;
        let started = Instant::now();
        let admission = self.book().admit_for(SystemTime::now(), cluster);
        if let Admission::Refuse {
            until,
            cluster: quarantined,
        } = admission
        {
            let last = self
                .book()
                .summary(&rt.config.faults, SystemTime::now())
                .last
                .map_or_else(String::new, |f| format!("{} {}: {}", f.hook, f.kind, f.message));
            let error = Error::Quarantined {
                hook,
                scope: quarantined.map_or_else(String::new, |c| format!(" for cluster {c}")),
                until: rfc3339(until),
                last,
            };
            rt.metrics.count_fault(&self.addon, hook, error.fault());
            return Err(error);
        }
        // First the plugin's own share of the slots, then one of the pool's: a plugin whose
        // calls pile up queues behind itself, and under load calls wait instead of failing.
        let _share = self.calls.acquire().await.map_err(|e| Error::Task {
            reason: e.to_string(),
        })?;
        let _permit = rt.permits.acquire().await.map_err(|e| Error::Task {
            reason: e.to_string(),
        })?;

        let mut store = Store::new(
            &rt.engine,
            CallState::new(
                &self.addon,
                hook,
                &self.limits,
                &self.env,
                crate::state::MemoryBudgets {
                    plugin: Arc::clone(&self.memory),
                    host: Arc::clone(&rt.memory),
                },
            ),
        );
        store.limiter(|state| &mut state.limiter);
        store.set_hostcall_fuel(self.limits.lift_budget_bytes());
        let deadline = Instant::now() + self.limits.timeout;
        let interruption = rt.config.interruption;
        // Every tick the guest checks in: past the deadline it is interrupted; before it, it yields
        // to tokio so a busy guest never holds a worker thread for more than one tick.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |mut cx| {
            if interruption.epoch_deadline && Instant::now() >= deadline {
                cx.data_mut().timed_out = true;
                Ok(UpdateDeadline::Interrupt)
            } else if interruption.yield_every_tick {
                Ok(UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now())))
            } else {
                Ok(UpdateDeadline::Continue(1))
            }
        });

        // Wall-clock backstop for time parked in host calls (epochs only tick inside wasm). The
        // grace lets the epoch deadline fire first when the guest is computing.
        let grace = interruption
            .wall_clock_grace
            .unwrap_or_else(|| (self.limits.timeout / 10).max(Duration::from_millis(50)));
        let outcome = tokio::time::timeout(self.limits.timeout + grace, async {
            let t = Instant::now();
            let instance = self
                .pre
                .instantiate_async(&mut store)
                .await
                .map_err(Failure::Instantiate)?;
            rt.metrics
                .observe_instantiation(&self.addon, t.elapsed().as_secs_f64());
            f(&instance, &mut store).await.map_err(Failure::Call)
        })
        .await;

        let state = store.data();
        forward_output(
            &self.addon,
            hook,
            &state.stdout.contents(),
            &state.stderr.contents(),
        );
        rt.metrics.count_log_dropped(&self.addon, state.log.dropped);
        let flood = log_flood(state);
        let result = match outcome {
            Err(_elapsed) => Err(Error::CallTimeout {
                hook,
                timeout: self.limits.timeout,
                by: TimeoutBy::WallClock,
            }),
            Ok(Err(failure)) => Err(self.classify(hook, failure, state)),
            Ok(Ok(answer)) => check(answer),
        };
        drop(store);
        self.record(hook, cluster, &result, flood);

        rt.metrics
            .observe_call(&self.addon, hook, started.elapsed().as_secs_f64());
        if let Err(e) = &result {
            rt.metrics.count_fault(&self.addon, hook, e.fault());
            tracing::warn!(addon = %self.addon, digest = %self.digest, %hook, kind = %e.fault(), error = %e, "plugin call failed");
        }
        result
    }

    fn book(&self) -> std::sync::MutexGuard<'_, FaultBook> {
        self.faults.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records how a call ended in this revision's fault book, and tells the controller when
    /// the summary changed. `describe` runs at load, before the revision serves: its faults
    /// refuse the revision instead.
    fn record<T>(&self, hook: Hook, cluster: Option<&str>, result: &Result<T>, flood: Option<String>) {
        if hook == Hook::Describe {
            return;
        }
        let outcome = match result {
            Err(e) => match e.fault() {
                // The plugin answered with its own error: it ran fine.
                Fault::PluginError => CallOutcome::Answered,
                // Not the plugin's doing (host trouble) or not a call at all.
                Fault::Host | Fault::Quarantined => return,
                kind => CallOutcome::Failed {
                    hook: hook.as_str(),
                    kind: kind.as_str(),
                    message: truncate(&e.to_string(), TRAP_MESSAGE_MAX).to_owned(),
                },
            },
            Ok(_) => match flood {
                Some(message) => {
                    self.runtime
                        .metrics
                        .count_fault(&self.addon, hook, Fault::LogFlood);
                    CallOutcome::AnsweredWithFault {
                        hook: hook.as_str(),
                        kind: Fault::LogFlood.as_str(),
                        message,
                    }
                }
                None => CallOutcome::Answered,
            },
        };
        let changed =
            self.book()
                .record_for(&self.runtime.config.faults, SystemTime::now(), cluster, outcome);
        if changed {
            // No subscriber (no controller) is fine.
            let _ = self.runtime.fault_events.send(self.addon.clone());
        }
    }

    /// Names the fault: the store's own records first (they are certain), then the trap code.
    fn classify(&self, hook: Hook, failure: Failure, state: &CallState) -> Error {
        if state.timed_out {
            return Error::CallTimeout {
                hook,
                timeout: self.limits.timeout,
                by: TimeoutBy::EpochDeadline,
            };
        }
        if let Some(scope) = state.limiter.budget_exhausted {
            return Error::MemoryBudgetExhausted {
                hook,
                budget: match scope {
                    crate::state::BudgetScope::Plugin => "this plugin's share of",
                    crate::state::BudgetScope::Host => "all plugins'",
                },
            };
        }
        if state.limiter.exceeded {
            return Error::MemoryExceeded {
                hook,
                limit_bytes: self.limits.memory_bytes,
            };
        }
        let (error, instantiating) = match failure {
            Failure::Instantiate(e) => (e, true),
            Failure::Call(e) => (e, false),
        };
        if lift_budget_exhausted(&error) {
            return Error::OutputNotLifted {
                hook,
                budget: self.limits.lift_budget_bytes(),
            };
        }
        let message = trap_message(&error, &state.stderr.contents());
        match error.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::Interrupt) => Error::CallTimeout {
                hook,
                timeout: self.limits.timeout,
                by: TimeoutBy::EpochDeadline,
            },
            Some(wasmtime::Trap::StackOverflow) => Error::Trap {
                hook,
                code: STACK_OVERFLOW.to_owned(),
                message,
            },
            Some(trap) => Error::Trap {
                hook,
                code: trap.to_string(),
                message,
            },
            None if instantiating => Error::Instantiate { hook, source: error },
            None => Error::Trap {
                hook,
                code: "error".to_owned(),
                message,
            },
        }
    }
}

/// Whether `error` is wasmtime running out of hostcall fuel. Its error type is private, so its
/// message is what identifies it (a test with an aliasing guest keeps this honest).
fn lift_budget_exhausted(error: &wasmtime::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .to_string()
            .contains("fuel allocated for hostcalls has been exhausted")
    })
}

/// A description of the output the call could not deliver, if it flooded its log budget or
/// filled a captured stream.
fn log_flood(state: &CallState) -> Option<String> {
    let mut parts = Vec::new();
    if state.log.dropped > 0 {
        parts.push(format!(
            "{} log lines dropped over the per-call budget",
            state.log.dropped
        ));
    }
    for (name, pipe) in [("stdout", &state.stdout), ("stderr", &state.stderr)] {
        if pipe.contents().len() >= CAPTURE_BYTES {
            parts.push(format!("{name} filled its {CAPTURE_BYTES}-byte capture"));
        }
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// `t` as RFC 3339 (UTC), for messages.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    k8s_openapi::jiff::Timestamp::try_from(t).map_or_else(|_| format!("{t:?}"), |ts| ts.to_string())
}

/// A one-paragraph description of a trap for people: the root cause, then the tail of what the
/// guest wrote to stderr (its panic message, if it panicked). The wasm backtrace is logged at
/// debug level instead.
fn trap_message(error: &wasmtime::Error, stderr: &[u8]) -> String {
    tracing::debug!(target: "flotilla_wasm::guest", "trap: {error:?}");
    let mut message = error.root_cause().to_string();
    let stderr = String::from_utf8_lossy(stderr);
    let tail: Vec<&str> = stderr
        .lines()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .take(3)
        .collect();
    if !tail.is_empty() {
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        let tail = tail.join(" / ");
        let start = tail.len().saturating_sub(STDERR_TAIL);
        let start = (start..=tail.len())
            .find(|i| tail.is_char_boundary(*i))
            .unwrap_or(tail.len());
        message.push_str("; guest stderr: ");
        message.push_str(&tail[start..]);
    }
    truncate(&message, TRAP_MESSAGE_MAX).to_owned()
}

/// A loaded, validated plugin revision. Share it as `Arc<Plugin>`: a call in flight keeps its
/// revision alive after a newer one is swapped in.
pub struct Plugin {
    pub(crate) caller: Caller,
    pub(crate) options: AddonOptions,
    pub(crate) wit_version: semver::Version,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("addon", &self.caller.addon)
            .field("digest", &self.caller.digest)
            .field("wit_version", &self.wit_version)
            .field("limits", &self.caller.limits)
            .finish_non_exhaustive()
    }
}

impl Plugin {
    /// The add-on this plugin drives.
    pub fn addon(&self) -> &str {
        &self.caller.addon
    }

    /// Digest of the component bytes.
    pub fn digest(&self) -> Digest {
        self.caller.digest
    }

    /// The contract version the component was built against.
    pub fn wit_version(&self) -> &semver::Version {
        &self.wit_version
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> &Limits {
        &self.caller.limits
    }

    /// This revision's runtime faults now: counts over the policy's window, the last fault, and
    /// the quarantine in force.
    pub fn faults(&self) -> FaultSummary {
        self.caller
            .book()
            .summary(&self.caller.runtime.config.faults, SystemTime::now())
    }

    /// The validated `describe` answer, taken at load.
    pub fn options(&self) -> &AddonOptions {
        &self.options
    }

    /// The objects to apply on `cluster`, read and checked once (see
    /// [`flotilla_core::addon::works::validate_manifests`]). A fault, a plugin error or an answer
    /// refused is an `Err`; the caller keeps its last good ManifestWork.
    pub async fn manifests(
        &self,
        cluster: &Cluster,
        addon: &Addon,
        configs: &[ResolvedConfig],
    ) -> Result<Vec<AgentManifest>> {
        let (hook, limits) = (Hook::Manifests, self.caller.limits);
        self.caller
            .call(
                hook,
                Some(&cluster.name),
                async |p: &AddonPlugin, store| {
                    p.flotilla_addon_hooks()
                        .call_manifests(store, cluster, addon, configs)
                        .await
                },
                |answer| match answer {
                    Ok(raw) => read_manifests(&limits, &raw),
                    Err(error) => plugin_error(hook, &limits, error),
                },
            )
            .await
    }

    /// Roles and RoleBindings for the cluster namespace on the hub, typed and checked to stay
    /// there ([`flotilla_core::addon::permissions::typed_permissions`]); what they grant is the
    /// caller's to check.
    pub async fn hub_permissions(&self, cluster: &Cluster, addon: &Addon) -> Result<Vec<Permission>> {
        let (hook, limits) = (Hook::HubPermissions, self.caller.limits);
        self.caller
            .call(
                hook,
                Some(&cluster.name),
                async |p: &AddonPlugin, store| {
                    p.flotilla_addon_hooks()
                        .call_hub_permissions(store, cluster, addon)
                        .await
                },
                |answer| match answer {
                    Ok(raw) => read_permissions(&limits, &cluster.name, &raw),
                    Err(error) => plugin_error(hook, &limits, error),
                },
            )
            .await
    }

    /// The plugin's verdict on a CSR, or the fault. Most callers want [`Plugin::approve_csr`].
    pub async fn try_approve_csr(&self, cluster: &Cluster, addon: &Addon, csr: &Csr) -> Result<CsrDecision> {
        let (hook, limits) = (Hook::ApproveCsr, self.caller.limits);
        self.caller
            .call(
                hook,
                Some(&cluster.name),
                async |p: &AddonPlugin, store| {
                    p.flotilla_addon_hooks()
                        .call_approve_csr(store, cluster, addon, csr)
                        .await
                },
                |decision| {
                    if let CsrDecision::Deny(reason) = &decision {
                        check_output_size(hook, &limits, [reason.as_str()])?;
                    }
                    Ok(decision)
                },
            )
            .await
    }

    /// Fail-closed CSR approval: any fault denies, with the fault kind and error as the reason.
    pub async fn approve_csr(&self, cluster: &Cluster, addon: &Addon, csr: &Csr) -> CsrDecision {
        match self.try_approve_csr(cluster, addon, csr).await {
            Ok(decision) => decision,
            Err(e) => CsrDecision::Deny(format!("plugin fault ({}): {e}", e.fault())),
        }
    }

    /// The plugin's health verdict, or the fault. Most callers want [`Plugin::probe_health`].
    pub async fn try_probe_health(
        &self,
        cluster: &Cluster,
        addon: &Addon,
        fields: &[FeedbackField],
    ) -> Result<HealthResult> {
        let (hook, limits) = (Hook::ProbeHealth, self.caller.limits);
        self.caller
            .call(
                hook,
                Some(&cluster.name),
                async |p: &AddonPlugin, store| {
                    p.flotilla_addon_hooks()
                        .call_probe_health(store, cluster, addon, fields)
                        .await
                },
                |result| {
                    check_output_size(hook, &limits, [result.message.as_str()])?;
                    Ok(result)
                },
            )
            .await
    }

    /// Fail-safe health: any fault is `unknown` (never `available`), with the fault as message.
    pub async fn probe_health(
        &self,
        cluster: &Cluster,
        addon: &Addon,
        fields: &[FeedbackField],
    ) -> HealthResult {
        match self.try_probe_health(cluster, addon, fields).await {
            Ok(result) => result,
            Err(e) => HealthResult {
                status: HealthStatus::Unknown,
                message: format!("plugin fault ({}): {e}", e.fault()),
            },
        }
    }
}

/// A plugin's own error, size-checked like any other output.
fn plugin_error<T>(hook: Hook, limits: &Limits, error: crate::types::PluginError) -> Result<T> {
    use crate::types::PluginError as E;
    let (E::InvalidConfig(m) | E::MissingConfig(m) | E::UnsupportedCluster(m) | E::Internal(m)) = &error;
    check_output_size(hook, limits, [m.as_str()])?;
    Err(Error::Plugin { hook, error })
}
