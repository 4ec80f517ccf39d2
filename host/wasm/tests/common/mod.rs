//! Shared fixtures for the host's integration tests: one runtime per test binary (its artifact
//! cache under `CARGO_TARGET_TMPDIR`, so repeated loads deserialize instead of recompiling),
//! inputs mirroring what the add-on manager passes, and an outer "did not hang" bound.

#![allow(
    dead_code,
    reason = "each test binary uses a different subset of the fixtures"
)]

use std::sync::OnceLock;
use std::time::Duration;

use flotilla_core::addon::permissions::Permission;
use flotilla_core::addon::works::AgentManifest;
use flotilla_wasm::types::{Addon, Cluster, Csr, KeyValue};
use flotilla_wasm::{Limits, Plugin, Runtime, RuntimeConfig};

/// A `manifests` answer's objects as JSON.
pub fn json_objects(manifests: Vec<AgentManifest>) -> Vec<serde_json::Value> {
    manifests.into_iter().map(|m| m.object).collect()
}

/// A `hub-permissions` answer's objects as JSON.
pub fn json_permissions(permissions: Vec<Permission>) -> Vec<serde_json::Value> {
    permissions.iter().map(Permission::to_value).collect()
}

/// The runtime shared by the tests of one binary.
pub fn runtime() -> Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            let _ = tracing_subscriber::fmt()
                .with_test_writer()
                .with_env_filter("flotilla_wasm=info")
                .try_init();
            let cache_dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-wasm-artifacts");
            Runtime::new(RuntimeConfig {
                cache_dir: Some(cache_dir),
                // Tests here call one hostile revision many times in a row and check each fault;
                // quarantine is shown by the controller tests.
                faults: flotilla_wasm::FaultPolicy {
                    threshold: 1000,
                    ..flotilla_wasm::FaultPolicy::default()
                },
                ..RuntimeConfig::default()
            })
            .expect("runtime builds")
        })
        .clone()
}

/// Limits for hostile plugins: short enough to keep the suite quick, the rest default.
pub fn hostile_limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(1),
        ..Limits::default()
    }
}

/// How long any single call may take before a test calls it hung: 10× the limit, plus slack
/// for compiling on a loaded two-core machine. Never a timing assertion, only "it ended".
pub fn hang_bound(limits: &Limits) -> Duration {
    limits.timeout * 10 + Duration::from_secs(20)
}

/// Loads a built plugin (see `flotilla-test-plugins`).
pub async fn load(addon: &str, path: &str, limits: Limits) -> flotilla_wasm::Result<Plugin> {
    let bytes = std::fs::read(path).expect("plugin component was built");
    runtime().load(addon, bytes, limits).await
}

/// Awaits `f`, failing the test if it does not end within `bound`.
pub async fn ends_within<F: std::future::Future>(bound: Duration, f: F) -> F::Output {
    tokio::time::timeout(bound, f)
        .await
        .expect("the call ended instead of hanging")
}

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: value.to_owned(),
    }
}

/// A managed cluster as the add-on manager would pass it.
pub fn cluster(name: &str) -> Cluster {
    Cluster {
        name: name.to_owned(),
        labels: vec![kv("cluster.open-cluster-management.io/clusterset", "default")],
        annotations: Vec::new(),
        claims: vec![kv("platform.open-cluster-management.io", "Other")],
        kubernetes_version: "v1.33.0".to_owned(),
    }
}

/// An add-on in the default install namespace.
pub fn addon(name: &str) -> Addon {
    Addon {
        name: name.to_owned(),
        install_namespace: "open-cluster-management-agent-addon".to_owned(),
        annotations: Vec::new(),
    }
}

/// The CSR cluster `cluster`'s registration agent files for `addon` with the default subject.
pub fn agent_csr(cluster: &str, addon: &str) -> Csr {
    let subject = flotilla_wasm::validate::default_subject(cluster, addon);
    Csr {
        name: format!("addon-{cluster}-{addon}-x7k2p"),
        signer_name: flotilla_wasm::validate::KUBE_CLIENT_SIGNER.to_owned(),
        username: format!("system:open-cluster-management:{cluster}:agent1"),
        groups: vec![
            format!("system:open-cluster-management:{cluster}"),
            "system:open-cluster-management:managed-clusters".to_owned(),
            "system:authenticated".to_owned(),
        ],
        common_name: subject.user,
        organizations: subject.groups,
        organizational_units: Vec::new(),
        dns_names: vec![format!("{addon}.addon.open-cluster-management.io")],
        usages: vec![
            "digital signature".into(),
            "key encipherment".into(),
            "client auth".into(),
        ],
        request_pem: String::new(),
    }
}

/// The released 0.1.0 contract as one WIT document (world first, for the package header).
pub fn contract_wit() -> String {
    let world = include_str!("../../../../wit/flotilla-addon@0.1.0/world.wit");
    let types = include_str!("../../../../wit/flotilla-addon@0.1.0/types.wit");
    format!("{world}\n{types}")
}

/// A component for `world` in `wit` (after `deps`), with a dummy core module whose functions
/// trap: enough to be inspected and linked, not to run.
pub fn component_from_wit(deps: &[&str], wit: &str, world: &str) -> Vec<u8> {
    let mut resolve = wit_parser::Resolve::default();
    for (i, dep) in deps.iter().enumerate() {
        resolve
            .push_str(format!("dep{i}.wit"), dep)
            .expect("dependency WIT parses");
    }
    let package = resolve.push_str("main.wit", wit).expect("WIT parses");
    let world = resolve
        .select_world(&[package], Some(world))
        .expect("world exists");
    let mut module = wit_component::dummy_module(&resolve, world, wit_parser::ManglingAndAbi::Standard32);
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .expect("metadata embeds");
    wit_component::ComponentEncoder::default()
        .module(&module)
        .expect("module is accepted")
        .validate(true)
        .encode()
        .expect("component encodes")
}
