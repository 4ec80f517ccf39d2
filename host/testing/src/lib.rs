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
    image, kubeconfig, node, pki, plugins, ports, processes, registry, service_route, tunnel, wait,
};

/// Runs kubectl (the server's version) as `cp`'s admin with `args` and returns its standard
/// output; panics with everything it said when it fails.
pub fn kubectl(cp: &ControlPlane, args: &[&str]) -> String {
    let output = cp
        .kubectl()
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run kubectl: {e}"));
    assert!(
        output.status.success(),
        "kubectl {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Waits until Deployment `name` reports `replicas` ready replicas.
pub async fn until_ready_replicas(
    deployments: &kube::Api<k8s_openapi::api::apps::v1::Deployment>,
    name: &str,
    replicas: i32,
    timeout: std::time::Duration,
) -> Result<()> {
    wait::until(
        &format!("{replicas} ready replicas of {name}"),
        timeout,
        || async {
            let ready = deployments
                .get(name)
                .await
                .map_err(|e| e.to_string())?
                .status
                .and_then(|s| s.ready_replicas);
            Ok::<_, String>((ready == Some(replicas)).then_some(()))
        },
    )
    .await
}

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
