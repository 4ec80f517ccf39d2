//! Await helpers: poll until a check passes or a deadline passes, with the last observation
//! in the error so a failing test says what it saw.

use std::{future::Future, time::Duration};

use crate::error::{Error, Result};

/// Calls `check` every 100 ms until it returns `Ok(Some(value))`, failing after `timeout`.
/// `Ok(None)` means "not yet"; an `Err` is remembered and reported if time runs out.
pub async fn until<T, E, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<Option<T>, E>>,
    E: std::fmt::Display,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::from("condition never held");
    loop {
        match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(e) => last = e.to_string(),
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::NotReady {
                what: what.to_owned(),
                message: format!("timed out after {timeout:?}: {last}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
