//! The requeue policy for failed reconciles: a conflict (someone else wrote first) retries at
//! once from fresh data; anything else backs off so a broken object or an unreachable server
//! does not spin.

use std::time::Duration;

use kube::runtime::controller::Action;

/// Requeue after an error: 100 ms for conflicts (409), 10 s otherwise. A conflict means a
/// newer version exists, which the watch brings within milliseconds; waiting a whole second
/// for it made contended objects (an add-on's status, written by several controllers) slow.
pub fn requeue_after(error: &(dyn std::error::Error + 'static)) -> Action {
    if status_code(error) == Some(409) {
        Action::requeue(Duration::from_millis(100))
    } else {
        Action::requeue(Duration::from_secs(10))
    }
}

/// The HTTP status of the first API error in `error`'s source chain, if any.
pub fn status_code(error: &(dyn std::error::Error + 'static)) -> Option<u16> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(kube::Error::Api(status)) = e.downcast_ref::<kube::Error>() {
            return Some(status.code);
        }
        source = e.source();
    }
    None
}
