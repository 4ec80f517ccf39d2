//! The long-running components as the process runs them: what `flotilla hub` and `flotilla
//! klusterlet` start, in which order, and what stops them. The command line is parsed in
//! [`crate::run`] into the plain settings here, so this wiring reads without the flags.
//!
//! ```text
//!  run (flags) ─▶ HubSettings ───────▶ hub::run ─────────▶ webhook, ops, leader lease ─▶ controllers
//!              ├▶ KlusterletSettings ─▶ klusterlet::run ─▶ ops ─▶ registration + work agents
//!              └▶ GatewaySettings ────▶ gateway::run ────▶ ops ─▶ cluster gateway, APIService
//! ```

pub mod gateway;
pub mod hub;
pub mod klusterlet;
mod ops;

use std::net::SocketAddr;

use anyhow::Context as _;
use flotilla_wasm::PluginRegistry;

/// Listens for the process being asked to stop — SIGTERM (what Kubernetes sends a pod) or
/// Ctrl-C — from now on; the returned future resolves when it is. Registered before anything
/// starts, so an early SIGTERM is not the default (fatal) action. Returning ends the
/// controllers' futures, so the process exits with success.
pub fn shutdown_signal() -> anyhow::Result<impl Future<Output = anyhow::Result<()>>> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listen for SIGTERM")?;
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("listen for Ctrl-C")?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => eprintln!("flotilla: SIGTERM received; stopping"),
            _ = interrupt.recv() => eprintln!("flotilla: interrupted; stopping"),
        }
        Ok(())
    })
}

/// Starts the metrics and health endpoint at `bind` with the process's series.
async fn serve_ops(
    bind: SocketAddr,
    client: &kube::Client,
    plugins: Option<&PluginRegistry>,
    component: &str,
) -> anyhow::Result<()> {
    let mut registry = prometheus_client::registry::Registry::default();
    flotilla_kube::metrics::global().register(&mut registry);
    if let Some(plugins) = plugins {
        plugins.runtime().metrics().register(&mut registry);
    }
    let addr = ops::serve(bind, registry, client.clone()).await?;
    eprintln!("flotilla {component}: metrics and health at http://{addr} (/metrics, /healthz, /readyz)");
    Ok(())
}
