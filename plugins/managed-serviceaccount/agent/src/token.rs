//! What the agent decides, with no I/O: whether the token in a hub Secret must be replaced, and
//! the status a ManagedServiceAccount gets afterwards. [`crate::reconcile`] does the reading and
//! writing around it.
//!
//! ```text
//!   Secret <n> on the hub ─┐
//!   status of MSA <n> ─────┼─▶ judge ─▶ Refresh(reason) ──────────────▶ TokenRequest, write Secret
//!   spec.rotation.validity ┘        └─▶ Review(token) ─▶ TokenReview ─▶ judge_review ─▶ Refresh / keep
//!                                                      (managed cluster)
//!   then: reported(status, issued or kept) / failed(status, error) ─▶ status, written if changed
//! ```
//!
//! As OCM's agent (`pkg/addon/agent/controller/token.go`), a token is replaced when there is no
//! Secret or no status for it, when it names another ServiceAccount (the JWT's `sub`), when less
//! than a fifth of its lifetime is left (counted from `lastRefreshTimestamp` to
//! `expirationTimestamp`, the managed cluster's own figure, which a distribution may make shorter
//! than the validity asked for), or when the managed cluster no longer authenticates it (the
//! ServiceAccount was deleted and recreated, or the signing key changed). Two departures: a token
//! that cannot be read as a JWT is replaced (OCM reports an error and keeps it forever), and a
//! token asked for with another validity than `spec.rotation.validity` says now is replaced (OCM
//! waits for its next rotation); the validity asked for is kept in annotation
//! [`VALIDITY_ANNOTATION`] of the Secret.

use std::{fmt, time::Duration};

use base64::Engine as _;
use k8s_openapi::{
    api::{authentication::v1::TokenReviewStatus, core::v1::Secret},
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::{SignedDuration, Timestamp},
};

use crate::msa::{SecretRef, Status, TOKEN_KEY, condition};

/// Annotation of the hub Secret: the `spec.rotation.validity` its token was asked for with.
pub const VALIDITY_ANNOTATION: &str = "flotilla.dev/token-validity";

/// A token is replaced once less than `1 / REFRESH_DENOMINATOR` of its lifetime is left.
pub const REFRESH_DENOMINATOR: i64 = 5;

/// Why a new token is requested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refresh {
    /// There is no Secret on the hub.
    NoSecret,
    /// The status names no Secret or no expiry: the token was never reported.
    NotReported,
    /// The Secret holds no token, or one that is not a JWT with a `sub` claim.
    Unreadable(String),
    /// The token is another ServiceAccount's (its JWT or its review names this subject).
    OtherSubject(String),
    /// The token was asked for with another validity (or the annotation is missing).
    ValidityChanged,
    /// Less than a fifth of its lifetime is left.
    Expiring,
    /// The managed cluster does not authenticate it.
    Rejected,
}

impl fmt::Display for Refresh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSecret => f.write_str("there is no token Secret"),
            Self::NotReported => f.write_str("no token is reported in the status"),
            Self::Unreadable(why) => write!(f, "the token cannot be read: {why}"),
            Self::OtherSubject(subject) => write!(f, "the token is {subject}'s"),
            Self::ValidityChanged => f.write_str("the token was asked for with another validity"),
            Self::Expiring => f.write_str("less than a fifth of the token's lifetime is left"),
            Self::Rejected => f.write_str("the managed cluster no longer authenticates the token"),
        }
    }
}

/// What [`judge`] found without asking the managed cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Request a new token.
    Refresh(Refresh),
    /// The token looks right; a TokenReview on the managed cluster decides ([`judge_review`]).
    Review(String),
}

/// What the agent knows of one ManagedServiceAccount's token before asking the managed cluster.
#[derive(Debug, Clone, Copy)]
pub struct Current<'a> {
    /// The ServiceAccount's user name on the managed cluster ([`subject`]).
    pub subject: &'a str,
    /// `spec.rotation.validity`, parsed.
    pub validity: Duration,
    /// The ManagedServiceAccount's status, if any.
    pub status: Option<&'a Status>,
    /// Secret `<name>` in the cluster namespace on the hub, if it exists.
    pub secret: Option<&'a Secret>,
    /// Now, on the agent's clock.
    pub now: Timestamp,
}

/// `system:serviceaccount:<namespace>:<name>`, the user a ServiceAccount's tokens authenticate as.
pub fn subject(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// Whether the token must be replaced, in OCM's order of checks (Secret, status, subject, then
/// lifetime), the validity check coming before the lifetime one.
pub fn judge(current: &Current<'_>) -> Verdict {
    let Some(secret) = current.secret else {
        return Verdict::Refresh(Refresh::NoSecret);
    };
    let Some(status) = current.status else {
        return Verdict::Refresh(Refresh::NotReported);
    };
    let (Some(secret_ref), Some(expiration)) = (&status.token_secret_ref, &status.expiration_timestamp)
    else {
        return Verdict::Refresh(Refresh::NotReported);
    };
    let token = match token_of(secret) {
        Ok(token) => token,
        Err(why) => return Verdict::Refresh(Refresh::Unreadable(why)),
    };
    match token_subject(&token) {
        Ok(sub) if sub == current.subject => {}
        Ok(sub) => return Verdict::Refresh(Refresh::OtherSubject(sub)),
        Err(why) => return Verdict::Refresh(Refresh::Unreadable(why)),
    }
    let asked = secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(VALIDITY_ANNOTATION))
        .and_then(|v| go_duration(v).ok());
    if asked != Some(current.validity) {
        return Verdict::Refresh(Refresh::ValidityChanged);
    }
    if current.now > refresh_at(secret_ref.last_refresh_timestamp.0, expiration.0) {
        return Verdict::Refresh(Refresh::Expiring);
    }
    Verdict::Review(token)
}

/// Whether a token the managed cluster reviewed must be replaced: it must be authenticated, as
/// `subject`.
pub fn judge_review(review: Option<&TokenReviewStatus>, subject: &str) -> Option<Refresh> {
    let review = review?;
    if review.authenticated != Some(true) {
        return Some(Refresh::Rejected);
    }
    let user = review
        .user
        .as_ref()
        .and_then(|u| u.username.as_deref())
        .unwrap_or_default();
    (user != subject).then(|| Refresh::OtherSubject(user.to_owned()))
}

/// The instant after which a token refreshed at `refreshed` and expiring at `expires` is
/// replaced: four fifths of the way, in whole seconds (the precision of the status).
pub fn refresh_at(refreshed: Timestamp, expires: Timestamp) -> Timestamp {
    let lifetime = expires.as_second().saturating_sub(refreshed.as_second());
    let at = refreshed
        .as_second()
        .saturating_add(lifetime / REFRESH_DENOMINATOR * (REFRESH_DENOMINATOR - 1));
    Timestamp::from_second(at).unwrap_or(if lifetime < 0 {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

/// The token in `secret`, as text.
fn token_of(secret: &Secret) -> Result<String, String> {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(TOKEN_KEY))
        .map(|b| b.0.as_slice())
        .unwrap_or_default();
    if bytes.is_empty() {
        return Err(format!("no {TOKEN_KEY:?} in the Secret"));
    }
    String::from_utf8(bytes.to_vec()).map_err(|_| "not UTF-8".to_owned())
}

/// The `sub` claim of a JWT, read without checking the signature (the managed cluster checks
/// that, in [`judge_review`]).
pub fn token_subject(token: &str) -> Result<String, String> {
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not a JWT (three dot-separated parts)".to_owned());
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|e| format!("the payload is not base64url: {e}"))?;
    let claims: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("the payload is not JSON: {e}"))?;
    claims["sub"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| "no \"sub\" claim".to_owned())
}

/// A Go `time.ParseDuration` string (`metav1.Duration`'s JSON), at least one second and not
/// negative; TokenRequest takes whole seconds, so a fraction is dropped as Go's `Seconds()`
/// conversion to an integer does.
pub fn go_duration(text: &str) -> Result<Duration, String> {
    let parsed = if matches!(text, "0" | "+0" | "-0") {
        SignedDuration::ZERO
    } else {
        text.parse::<SignedDuration>()
            .map_err(|e| format!("{text:?} is not a duration: {e}"))?
    };
    let seconds = u64::try_from(parsed.as_secs()).map_err(|_| format!("{text:?} is negative"))?;
    if seconds == 0 {
        return Err(format!("{text:?} is shorter than a second"));
    }
    Ok(Duration::from_secs(seconds))
}

/// A token just issued by the managed cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Issued {
    /// When it was requested (the new `lastRefreshTimestamp`).
    pub at: Timestamp,
    /// When it expires, as the managed cluster said.
    pub expires: Timestamp,
}

/// The status after a successful pass: the Secret holds a good token, the one just `issued` or,
/// if none, the one the old status describes. Both conditions True, each keeping its
/// `lastTransitionTime` unless its status changes (`meta.SetStatusCondition`).
pub fn reported(old: Option<&Status>, name: &str, issued: Option<Issued>, now: Timestamp) -> Status {
    let mut status = old.cloned().unwrap_or_default();
    let now = whole_second(now);
    set_condition(
        &mut status.conditions,
        condition::SECRET_CREATED,
        "True",
        condition::REASON_SECRET_CREATED,
        "",
        now,
    );
    set_condition(
        &mut status.conditions,
        condition::TOKEN_REPORTED,
        "True",
        condition::REASON_TOKEN_REPORTED,
        "",
        now,
    );
    if let Some(issued) = issued {
        status.expiration_timestamp = Some(Time(whole_second(issued.expires)));
        status.token_secret_ref = Some(SecretRef {
            name: name.to_owned(),
            last_refresh_timestamp: Time(whole_second(issued.at)),
        });
    }
    status
}

/// The status after a failed pass: `TokenReported` False with the error; the rest as it was.
pub fn failed(old: Option<&Status>, message: &str, now: Timestamp) -> Status {
    let mut status = old.cloned().unwrap_or_default();
    set_condition(
        &mut status.conditions,
        condition::TOKEN_REPORTED,
        "False",
        condition::REASON_TOKEN_REPORT_FAILED,
        message,
        whole_second(now),
    );
    status
}

/// Sets condition `type_` as `meta.SetStatusCondition` does: `lastTransitionTime` moves only
/// when the status changes; reason and message are always replaced.
fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            if existing.status != status {
                existing.status = status.to_owned();
                existing.last_transition_time = Time(now);
            }
            reason.clone_into(&mut existing.reason);
            message.clone_into(&mut existing.message);
        }
        None => conditions.push(Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: message.to_owned(),
            last_transition_time: Time(now),
            observed_generation: None,
        }),
    }
}

/// `at` without its fraction of a second: what a status time holds once written and read back,
/// so that an unchanged status compares equal.
fn whole_second(at: Timestamp) -> Timestamp {
    Timestamp::from_second(at.as_second()).unwrap_or(at)
}

#[cfg(test)]
mod tests;
