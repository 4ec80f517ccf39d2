//! The requeue policy for failed reconciles: a conflict (someone else wrote first) retries at
//! once from fresh data; anything else backs off so a broken object or an unreachable server
//! does not spin.

use std::time::Duration;

use kube::runtime::controller::Action;

/// Requeue after an error: 1 s for conflicts (409), 10 s otherwise.
pub fn requeue_after(error: &(dyn std::error::Error + 'static)) -> Action {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(kube::Error::Api(status)) = e.downcast_ref::<kube::Error>()
            && status.code == 409
        {
            return Action::requeue(Duration::from_secs(1));
        }
        source = e.source();
    }
    Action::requeue(Duration::from_secs(10))
}
