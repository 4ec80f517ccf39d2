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

/// Sends logs to the test output, filtered by `RUST_LOG` (default `warn`); later calls do
/// nothing.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

static CONTROLLERS: LazyLock<Mutex<std::collections::HashSet<String>>> =
    LazyLock::new(|| Mutex::new(std::collections::HashSet::new()));

/// Runs `controllers` against `cp` with its admin identity, once per `name` for the whole test
/// binary, on a thread of its own with a two-worker runtime: each test's runtime ends with the
/// test, while controllers shared by the binary's tests must outlive any one of them.
pub fn spawn_controllers_once<F, Fut>(name: &str, cp: &ControlPlane, controllers: F)
where
    F: FnOnce(kube::Client) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let first = CONTROLLERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .insert(name.to_owned());
    if !first {
        return;
    }
    let kubeconfig = std::fs::read_to_string(cp.admin_kubeconfig());
    let spawned = std::thread::Builder::new()
        .name(format!("controllers-{name}"))
        .spawn(move || {
            init_tracing();
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => return eprintln!("controllers: build a runtime: {error}"),
            };
            runtime.block_on(async move {
                let client = match kubeconfig {
                    Ok(yaml) => crate::kubeconfig::client_from_yaml(&yaml).await,
                    Err(error) => return eprintln!("controllers: read the admin kubeconfig: {error}"),
                };
                match client {
                    Ok(client) => controllers(client).await,
                    Err(error) => eprintln!("controllers: connect: {error}"),
                }
            });
        });
    if let Err(error) = spawned {
        eprintln!("controllers: start a thread: {error}");
    }
}
