//! Real parts for tests: local Kubernetes control planes and OCI registries on loopback (from
//! `flotilla-localenv`, the product crate behind `flotilla up`, re-exported here so tests name
//! one crate), plus test-only helpers: control planes and controllers shared by the tests of
//! one test binary, the Events about an object, test logging, a real forward proxy (tinyproxy,
//! stunnel) on loopback, a network namespace that reaches the host at one address only, a
//! black-holing TCP proxy for partitions, and snapshots of fleet state to compare runs.
//!
//! ```no_run
//! # async fn demo() -> flotilla_testing::Result<()> {
//! let hub = flotilla_testing::ControlPlane::start("hub").await?;
//! let admin = hub.admin_client().await?;
//! let intruder = hub.client_for("mallory", &["nobody"]).await?;
//! # let _ = (admin, intruder); Ok(()) }
//! ```

pub mod blackhole;
pub mod convergence;
pub mod events;
pub mod netns;
pub mod proxy;
pub mod shared;

pub use flotilla_localenv::{
    ControlPlane, ControlPlaneBuilder, ControlPlaneState, Error, Node, Result, binary, controlplane, error,
    image, kubeconfig, node, pki, plugins, ports, processes, registry, service_route, wait,
};

/// A Deployment of `replicas` pods running the sandbox image's `pause` (from
/// [`image::push_pause`]), ready only `ready_after` seconds after each container starts: a
/// workload whose availability a test can watch drop and recover on a real node.
pub fn pause_deployment(
    name: &str,
    namespace: &str,
    image: &str,
    replicas: i32,
    ready_after: i32,
) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name, "namespace": namespace },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{
                        "name": "pause",
                        "image": image,
                        "command": ["/pause"],
                        "readinessProbe": {
                            "exec": { "command": ["/pause", "ready"] },
                            "initialDelaySeconds": ready_after,
                            "periodSeconds": 1,
                        },
                    }],
                },
            },
        },
    })
}
pub use shared::{init_tracing, shared, spawn_controllers_once};
