//! Control planes shared by all tests of one test binary, so a file of tests pays the start-up
//! once. Statics are never dropped, but nothing leaks: each component exits when this process
//! exits, because its standard input (whose write end only this process holds) reaches EOF.

use std::{
    collections::HashMap,
    sync::{LazyLock, Mutex},
};

use tokio::sync::OnceCell;

use crate::{ControlPlane, Result};

type Cell = &'static OnceCell<ControlPlane>;

static SHARED: LazyLock<Mutex<HashMap<String, Cell>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// The control plane called `name` for this test binary, started on first use.
///
/// Use it for tests that only add objects of their own (own namespaces, own names); start a
/// private [`ControlPlane`] for tests that stop, restart or break the control plane.
pub async fn shared(name: &str) -> Result<&'static ControlPlane> {
    let cell: Cell = {
        let mut map = SHARED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        map.entry(name.to_owned())
            .or_insert_with(|| Box::leak(Box::new(OnceCell::new())))
    };
    cell.get_or_try_init(|| ControlPlane::start(name.to_owned()))
        .await
}
