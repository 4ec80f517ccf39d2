//! The `AddOnPlugin` status as a pure function of the newest attempt and the serving revision.
//!
//! `digest`, `witVersion` and `describe` always describe the revision that serves calls (which
//! may be an older, last good one); the conditions describe the newest spec:
//!
//! | outcome | Fetched | Validated | Ready | Degraded |
//! |---|---|---|---|---|
//! | newest revision serves | True `Fetched` | True `Validated` | True `Ready` | False `AsExpected` |
//! | fetch failed | False `<fetch reason>` | Unknown `FetchFailed` | True if a last good revision serves, else False `NotFetched` | True `RevisionRejected` |
//! | signature missing or invalid (`spec.verification`) | True `Fetched` | False `SignatureMissing` / `SignatureInvalid` | True if a last good revision serves, else False `NotValidated` | True `RevisionRejected` |
//! | refused at load | True `Fetched` | False `<validation reason>` | True if a last good revision serves, else False `NotValidated` | True `RevisionRejected` |
//! | add-on name taken | (unchanged) | (unchanged) | False `AddOnNameConflict` | True `RevisionRejected` |
//!
//! Runtime faults of the serving revision ([`apply_faults`]) go into `status.faults` and, unless
//! `Degraded` already reports a rejected revision, into `Degraded`: True with a reason naming the
//! last fault's hook and kind (`ManifestsTimeout`, `ProbeHealthStackOverflow`, ...), a message
//! with the last fault, the counts over the window and the quarantine in force (until when).
//! Once the window holds no fault and no quarantine is in force, `Degraded` returns to False.

use std::sync::Arc;

use flotilla_api::addon::v1alpha1::ConfigGroupResource;
use flotilla_api::addon::v1beta1::RegistrationType;
use flotilla_api::plugins::v1alpha1::{
    AddOnPlugin, AddOnPluginStatus, PluginDescription, PluginFaultCount, PluginFaults, PluginHealthMode,
    PluginLastFault, PluginRegistration,
};
use flotilla_core::conditions::{FALSE, NewCondition, TRUE, UNKNOWN, set};
use flotilla_core::plugin_faults::{FaultSummary, fault_reason};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::reasons::{condition, degraded, fetched, ready, validated};
use crate::types::{AddonOptions, HealthMode, Registration};
use crate::{Digest, Error, FetchError, Plugin};

/// How the newest attempt ended.
pub(crate) enum Outcome {
    /// The newest spec's revision serves (just swapped in, or already serving).
    Serving(Arc<Plugin>),
    /// The bytes could not be fetched (or did not match `spec.digest`).
    FetchFailed(FetchError),
    /// The bytes were fetched but the runtime refused them.
    Refused {
        /// Digest of the refused bytes.
        digest: Digest,
        /// Why.
        error: Error,
    },
    /// Another `AddOnPlugin` drives the add-on.
    Conflict {
        /// Its name.
        owner: String,
    },
}

impl Outcome {
    pub(crate) fn failed(&self) -> bool {
        !matches!(self, Outcome::Serving(_))
    }

    /// The reason naming the failure, for logs.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Outcome::Serving(_) => ready::READY,
            Outcome::FetchFailed(e) => e.reason(),
            Outcome::Refused { error, .. } => crate::reasons::validated::of(error),
            Outcome::Conflict { .. } => ready::ADDON_NAME_CONFLICT,
        }
    }
}

/// The status to write for `plugin` after `outcome`, with `serving` the revision now serving.
pub(crate) fn desired_status(
    plugin: &AddOnPlugin,
    outcome: &Outcome,
    serving: Option<&Plugin>,
    now: Timestamp,
) -> AddOnPluginStatus {
    let generation = plugin.metadata.generation;
    let mut status = plugin.status.clone().unwrap_or_default();
    status.observed_generation = generation;
    status.digest = serving.map(|p| p.digest().to_string());
    status.wit_version = serving.map(|p| format!("{}@{}", crate::validate::WIT_PACKAGE, p.wit_version()));
    status.describe = serving.map(|p| describe_summary(p.options()));

    let mut put = |type_: &'static str, s: &'static str, reason: &'static str, message: String| {
        set(
            &mut status.conditions,
            NewCondition {
                type_,
                status: s,
                reason,
                message,
                observed_generation: generation,
            },
            now,
        );
    };
    let last_good = |what: &str| match serving {
        Some(p) => format!("{what}; the last good revision {} keeps serving", p.digest()),
        None => format!("{what}; no revision is serving"),
    };
    match outcome {
        Outcome::Serving(p) => {
            put(
                condition::FETCHED,
                TRUE,
                fetched::FETCHED,
                format!("fetched {}", p.digest()),
            );
            put(
                condition::VALIDATED,
                TRUE,
                validated::VALIDATED,
                format!(
                    "component targets {}@{}; describe() accepted",
                    crate::validate::WIT_PACKAGE,
                    p.wit_version()
                ),
            );
            put(
                condition::READY,
                TRUE,
                ready::READY,
                format!("revision {} serves add-on {}", p.digest(), p.addon()),
            );
            put(
                condition::DEGRADED,
                FALSE,
                degraded::AS_EXPECTED,
                "the newest revision is serving".to_owned(),
            );
        }
        Outcome::FetchFailed(e) if e.is_verification() => {
            // The manifest was read; its signature is what failed: a validation verdict.
            let reason = e.reason();
            put(
                condition::FETCHED,
                TRUE,
                fetched::FETCHED,
                "the manifest was fetched; the component was not read before its signature verified"
                    .to_owned(),
            );
            put(condition::VALIDATED, FALSE, reason, e.to_string());
            ready_from_serving(&mut put, serving, ready::NOT_VALIDATED, e.to_string());
            put(
                condition::DEGRADED,
                TRUE,
                degraded::REVISION_REJECTED,
                last_good(&format!("{reason}: {e}")),
            );
        }
        Outcome::FetchFailed(e) => {
            let reason = e.reason();
            put(condition::FETCHED, FALSE, reason, e.to_string());
            put(
                condition::VALIDATED,
                UNKNOWN,
                validated::FETCH_FAILED,
                "the newest revision was not fetched".to_owned(),
            );
            ready_from_serving(&mut put, serving, ready::NOT_FETCHED, e.to_string());
            put(
                condition::DEGRADED,
                TRUE,
                degraded::REVISION_REJECTED,
                last_good(&format!("{reason}: {e}")),
            );
        }
        Outcome::Refused { digest, error } => {
            let reason = crate::reasons::validated::of(error);
            put(
                condition::FETCHED,
                TRUE,
                fetched::FETCHED,
                format!("fetched {digest}"),
            );
            put(condition::VALIDATED, FALSE, reason, format!("{digest}: {error}"));
            ready_from_serving(&mut put, serving, ready::NOT_VALIDATED, error.to_string());
            put(
                condition::DEGRADED,
                TRUE,
                degraded::REVISION_REJECTED,
                last_good(&format!("{reason}: {digest} refused: {error}")),
            );
        }
        Outcome::Conflict { owner } => {
            let message = format!(
                "AddOnPlugin {owner} already drives add-on {}; delete one of them or set spec.addOnName",
                plugin.addon_name()
            );
            put(
                condition::READY,
                FALSE,
                ready::ADDON_NAME_CONFLICT,
                message.clone(),
            );
            put(condition::DEGRADED, TRUE, degraded::REVISION_REJECTED, message);
        }
    }
    status
}

/// Puts the serving revision's fault summary into `status`: the `faults` field always, and the
/// `Degraded` condition unless it already reports a rejected newer revision (which is the more
/// urgent news). `window_seconds` is the policy's window.
pub(crate) fn apply_faults(
    status: &mut AddOnPluginStatus,
    summary: Option<&FaultSummary>,
    window_seconds: u64,
    generation: Option<i64>,
    now: Timestamp,
) {
    let summary = summary.filter(|s| s.is_faulting());
    status.faults = summary.map(|s| faults_field(s, window_seconds));
    let rejected = status.conditions.iter().any(|c| {
        c.type_ == condition::DEGRADED && c.reason == degraded::REVISION_REJECTED && c.status == TRUE
    });
    if rejected {
        return;
    }
    let (reason, message) = match summary {
        Some(s) => {
            let reason = s.last.as_ref().map_or_else(
                || degraded::PLUGIN_FAULTING.to_owned(),
                |f| fault_reason(f.hook, f.kind),
            );
            (reason, fault_message(s, window_seconds))
        }
        None => {
            // Only a fault-driven `Degraded` True is ours to clear.
            let fault_degraded = status
                .conditions
                .iter()
                .any(|c| c.type_ == condition::DEGRADED && c.status == TRUE);
            if !fault_degraded {
                return;
            }
            (
                degraded::AS_EXPECTED.to_owned(),
                format!("the newest revision is serving; no faults in the last {window_seconds}s"),
            )
        }
    };
    let faulting = summary.is_some();
    set(
        &mut status.conditions,
        NewCondition {
            type_: condition::DEGRADED,
            status: if faulting { TRUE } else { FALSE },
            reason: &reason,
            message,
            observed_generation: generation,
        },
        now,
    );
}

fn time(t: std::time::SystemTime) -> Option<Time> {
    Timestamp::try_from(t).ok().map(Time)
}

fn faults_field(s: &FaultSummary, window_seconds: u64) -> PluginFaults {
    PluginFaults {
        window_seconds: i64::try_from(window_seconds).unwrap_or(i64::MAX),
        counts: s
            .counts
            .iter()
            .map(|c| PluginFaultCount {
                hook: c.hook.to_owned(),
                kind: c.kind.to_owned(),
                count: i64::try_from(c.count).unwrap_or(i64::MAX),
            })
            .collect(),
        last: s.last.as_ref().map(|f| PluginLastFault {
            hook: f.hook.to_owned(),
            kind: f.kind.to_owned(),
            message: f.message.clone(),
            time: time(f.at),
        }),
        consecutive: i64::from(s.consecutive),
        quarantined_until: s.quarantined_until.and_then(time),
    }
}

/// `quarantined until T (…); last fault: hook kind: message; in the last Ns: hook/kind×n, …`
pub(crate) fn fault_message(s: &FaultSummary, window_seconds: u64) -> String {
    let mut parts = Vec::new();
    if let Some(until) = s.quarantined_until {
        parts.push(format!(
            "quarantined until {} (quarantine {} of this revision, after {} consecutive faults): \
             calls answer their fail-safe result at once; a new revision or the end of the \
             backoff lifts it",
            time(until).map_or_else(|| format!("{until:?}"), |t| t.0.to_string()),
            s.quarantines,
            s.consecutive
        ));
    }
    if let Some(f) = &s.last {
        parts.push(format!("last fault: {} {}: {}", f.hook, f.kind, f.message));
    }
    let counts: Vec<String> = s
        .counts
        .iter()
        .map(|c| format!("{} {}×{}", c.hook, c.kind, c.count))
        .collect();
    parts.push(format!(
        "faults in the last {window_seconds}s: {}",
        counts.join(", ")
    ));
    parts.join("; ")
}

fn ready_from_serving(
    put: &mut impl FnMut(&'static str, &'static str, &'static str, String),
    serving: Option<&Plugin>,
    reason_if_none: &'static str,
    why: String,
) {
    match serving {
        Some(p) => put(
            condition::READY,
            TRUE,
            ready::READY,
            format!(
                "the last good revision {} serves add-on {} (the newest was rejected)",
                p.digest(),
                p.addon()
            ),
        ),
        None => put(condition::READY, FALSE, reason_if_none, why),
    }
}

/// The `describe()` answer as the status summary.
pub(crate) fn describe_summary(options: &AddonOptions) -> PluginDescription {
    PluginDescription {
        registrations: options
            .registrations
            .iter()
            .map(|r| match r {
                Registration::KubeClient(_) => PluginRegistration {
                    type_: RegistrationType::KubeClient,
                    signer_name: String::new(),
                },
                Registration::CustomSigner(c) => PluginRegistration {
                    type_: RegistrationType::CustomSigner,
                    signer_name: c.signer_name.clone(),
                },
            })
            .collect(),
        health_mode: Some(match options.health {
            HealthMode::Lease => PluginHealthMode::Lease,
            HealthMode::Work => PluginHealthMode::Work,
            HealthMode::DeploymentAvailability => PluginHealthMode::DeploymentAvailability,
            HealthMode::WorkloadAvailability => PluginHealthMode::WorkloadAvailability,
            HealthMode::Customized(_) => PluginHealthMode::Customized,
            HealthMode::None => PluginHealthMode::NoCheck,
        }),
        supported_config_types: options
            .supported_configs
            .iter()
            .map(ConfigGroupResource::from)
            .collect(),
        default_install_namespace: options.default_install_namespace.clone().unwrap_or_default(),
    }
}
