//! The `AddOnPlugin` controller against a real API server and a real OCI registry: plugins from
//! ConfigMaps (plain and gzip) and registries (anonymous and with a pull secret), every refusal
//! named in a condition, a revision swap under load that never drops or mixes answers, and a bad
//! new revision that leaves the last good one serving with `Degraded` True.
//!
//! One controller runs for the whole test binary, on its own thread and runtime (tests each get
//! a runtime of their own); each test uses its own names.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::common;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use common::{addon, agent_csr, cluster, component_from_wit, contract_wit, ends_within, runtime};
use flotilla_api::plugins::v1alpha1::{
    AddOnPlugin, AddOnPluginSpec, AddOnPluginStatus, ConfigMapSource, OciSource, PluginSource,
    SecretReference,
};
use flotilla_core::addon::works::AgentManifest;
use flotilla_plugin_loader::controller::{self, ControllerConfig};
use flotilla_plugin_loader::fetch::oci::{self, RegistryAuth};
use flotilla_test_plugins as plugins;
use flotilla_testing::registry::Registry;
use flotilla_testing::{ControlPlane, wait};
use flotilla_wasm::types::{CsrDecision, HealthStatus};
use flotilla_wasm::{Digest, Error, Fault, FaultPolicy, Hook, PluginRegistry, Runtime, RuntimeConfig};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const NS: &str = "plugin-sources";
/// The cap the test controller accepts: small enough to refuse a 9 MiB layer quickly.
const MAX_FETCH: usize = 8 << 20;

/// The test controller's fetch deadline: well below the OCI client's 30 s read timeout, so a
/// registry that holds the connection is given up on by the deadline, not by a read timeout.
const FETCH_DEADLINE: Duration = Duration::from_secs(4);

struct Env {
    cp: &'static ControlPlane,
    registry: Arc<PluginRegistry>,
}

/// The control plane, the plugin sources namespace and the controller, started once.
async fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    static START: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    START
        .get_or_init(|| async {
            let cp = flotilla_testing::shared("plugins")
                .await
                .expect("control plane starts");
            let client = cp.admin_client().await.expect("test environment");
            let namespaces: Api<Namespace> = Api::all(client);
            let ns: Namespace =
                serde_json::from_value(json!({"metadata": {"name": NS}})).expect("test environment");
            let _ = namespaces.create(&PostParams::default(), &ns).await;

            let registry = Arc::new(PluginRegistry::new(controller_runtime()));
            let for_controller = Arc::clone(&registry);
            let kubeconfig = std::fs::read_to_string(cp.admin_kubeconfig()).expect("test environment");
            std::thread::Builder::new()
                .name("addonplugin-controller".into())
                .spawn(move || {
                    let rt = tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(2)
                        .enable_all()
                        .build()
                        .expect("test environment");
                    rt.block_on(async move {
                        let client = flotilla_testing::kubeconfig::client_from_yaml(&kubeconfig)
                            .await
                            .expect("test environment");
                        let config = ControllerConfig {
                            max_fetch_bytes: MAX_FETCH,
                            // Long enough that only the ConfigMap watch can explain a
                            // prompt reload.
                            resync: Duration::from_secs(600),
                            backoff_min: Duration::from_millis(200),
                            backoff_max: Duration::from_secs(2),
                            fault_debounce: Duration::from_millis(200),
                            secrets_namespace: NS.to_owned(),
                            fetch_deadline: FETCH_DEADLINE,
                        };
                        controller::run(client, for_controller, config).await;
                    });
                })
                .expect("test environment");
            let _ = ENV.set(Env { cp, registry });
        })
        .await;
    ENV.get().expect("environment started")
}

/// The fault policy of the controller's runtime: quarantine after three faults in a row, for
/// a few seconds, so both the quarantine and its end show within a test.
fn fault_policy() -> FaultPolicy {
    FaultPolicy {
        threshold: 3,
        quarantine: Duration::from_secs(5),
        quarantine_max: Duration::from_secs(10),
        window: Duration::from_secs(600),
        ..FaultPolicy::default()
    }
}

/// A runtime of its own for the controller (the shared one keeps the default fault policy).
fn controller_runtime() -> Runtime {
    let cache_dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-wasm-artifacts");
    Runtime::new(RuntimeConfig {
        cache_dir: Some(cache_dir),
        faults: fault_policy(),
        ..RuntimeConfig::default()
    })
    .expect("runtime builds")
}

async fn client() -> Client {
    env().await.cp.admin_client().await.expect("test environment")
}

fn bytes(path: &str) -> Vec<u8> {
    std::fs::read(path).expect("plugin component was built")
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).expect("test environment");
    e.finish().expect("test environment")
}

async fn put_config_map(name: &str, data: Vec<u8>) {
    let api: Api<ConfigMap> = Api::namespaced(client().await, NS);
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        binary_data: Some(BTreeMap::from([("plugin.wasm".to_owned(), ByteString(data))])),
        ..Default::default()
    };
    api.patch(name, &PatchParams::apply("test").force(), &Patch::Apply(&cm))
        .await
        .expect("test environment");
}

fn cm_source(name: &str) -> PluginSource {
    PluginSource {
        config_map: Some(ConfigMapSource {
            namespace: NS.into(),
            name: name.into(),
            key: "plugin.wasm".into(),
        }),
        oci: None,
    }
}

fn oci_source(reference: &str, pull_secret: Option<&str>) -> PluginSource {
    PluginSource {
        config_map: None,
        oci: Some(OciSource {
            reference: reference.into(),
            pull_secret_ref: pull_secret.map(|name| SecretReference {
                namespace: NS.into(),
                name: name.into(),
            }),
            insecure: true,
        }),
    }
}

async fn apply_plugin(name: &str, source: PluginSource, digest: Option<Digest>) {
    apply_spec(
        name,
        AddOnPluginSpec {
            source,
            digest: digest.map(|d| d.to_string()),
            ..AddOnPluginSpec::default()
        },
    )
    .await;
}

async fn apply_spec(name: &str, spec: AddOnPluginSpec) {
    let api: Api<AddOnPlugin> = Api::all(client().await);
    let plugin = AddOnPlugin::new(name, spec);
    api.patch(name, &PatchParams::apply("test").force(), &Patch::Apply(&plugin))
        .await
        .expect("test environment");
}

/// Waits until condition `type_` of `name` has `status` and `reason` for the current
/// generation; returns the whole status.
async fn await_condition(name: &str, type_: &str, status: &str, reason: &str) -> AddOnPluginStatus {
    let api: Api<AddOnPlugin> = Api::all(client().await);
    wait::until(
        &format!("AddOnPlugin {name} {type_}={status} {reason}"),
        Duration::from_secs(120),
        || {
            let api = api.clone();
            async move {
                let p = api.get(name).await?;
                let st = p.status.clone().unwrap_or_default();
                let hit = st.observed_generation == p.metadata.generation
                    && st
                        .conditions
                        .iter()
                        .any(|c| c.type_ == type_ && c.status == status && c.reason == reason);
                if hit {
                    Ok::<_, anyhow_like::Error>(Some(st))
                } else {
                    Err(anyhow_like::Error(format!("{:?}", st.conditions)))
                }
            }
        },
    )
    .await
    .expect("test environment")
}

/// A tiny error type for `wait::until` (which wants `Display`).
mod anyhow_like {
    #[derive(Debug)]
    pub struct Error(pub String);
    impl std::fmt::Display for Error {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }
    impl From<kube::Error> for Error {
        fn from(e: kube::Error) -> Self {
            Error(e.to_string())
        }
    }
}

fn condition<'a>(
    status: &'a AddOnPluginStatus,
    type_: &str,
) -> &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .expect("condition present")
}

#[tokio::test]
async fn a_plugin_from_a_config_map_plain_or_gzip_becomes_ready_and_serves() {
    let env = env().await;
    let wasm = bytes(plugins::HELLOWORLD);
    put_config_map("hello-plain", wasm.clone()).await;
    put_config_map("hello-gzip", gzip(&wasm)).await;
    for name in ["hello-plain", "hello-gzip"] {
        apply_plugin(name, cm_source(name), Some(Digest::of(&wasm))).await;
        let status = await_condition(name, "Ready", "True", "Ready").await;
        assert_eq!(status.digest, Some(Digest::of(&wasm).to_string()));
        assert_eq!(status.wit_version.as_deref(), Some("flotilla:addon@0.1.0"));
        let describe = status.describe.clone().unwrap();
        assert_eq!(describe.registrations.len(), 1);
        assert_eq!(condition(&status, "Fetched").reason, "Fetched");
        assert_eq!(condition(&status, "Validated").reason, "Validated");
        assert_eq!(condition(&status, "Degraded").status, "False");

        // The add-on manager's lookup: by add-on name (metadata.name here).
        let plugin = env.registry.require(name).unwrap();
        let objects = plugin
            .manifests(&cluster("cluster1"), &addon(name), &[])
            .await
            .unwrap();
        assert_eq!(objects.len(), 4);
    }
}

#[tokio::test]
async fn config_map_faults_are_named() {
    env().await;
    apply_plugin("cm-missing", cm_source("does-not-exist"), None).await;
    let status = await_condition("cm-missing", "Fetched", "False", "ConfigMapNotFound").await;
    assert_eq!(condition(&status, "Ready").reason, "NotFetched");
    assert_eq!(condition(&status, "Degraded").status, "True");

    put_config_map("cm-wrong-digest", bytes(plugins::REVISION_B)).await;
    apply_plugin(
        "cm-wrong-digest",
        cm_source("cm-wrong-digest"),
        Some(Digest::of(b"something else")),
    )
    .await;
    let status = await_condition("cm-wrong-digest", "Fetched", "False", "DigestMismatch").await;
    assert!(
        condition(&status, "Fetched").message.contains("spec.digest"),
        "{status:?}"
    );
    assert!(env().await.registry.get("cm-wrong-digest").is_none());
}

#[tokio::test]
async fn a_new_component_in_a_config_map_serves_without_waiting_for_the_resync() {
    let env = env().await;
    let (first, second) = (bytes(plugins::HELLOWORLD), bytes(plugins::REVISION_B));
    put_config_map("cm-update", first.clone()).await;
    apply_plugin("cm-update", cm_source("cm-update"), None).await;
    let status = await_condition("cm-update", "Ready", "True", "Ready").await;
    assert_eq!(status.digest, Some(Digest::of(&first).to_string()));

    put_config_map("cm-update", second.clone()).await;
    let api: Api<AddOnPlugin> = Api::all(client().await);
    let wanted = Digest::of(&second).to_string();
    wait::until("the new component serves", Duration::from_secs(60), || {
        let (api, wanted) = (api.clone(), wanted.clone());
        async move {
            let digest = api.get("cm-update").await?.status.and_then(|s| s.digest);
            Ok::<_, kube::Error>((digest.as_deref() == Some(wanted.as_str())).then_some(()))
        }
    })
    .await
    .expect("reloaded after the ConfigMap changed");
    let serving = env.registry.require("cm-update").unwrap();
    assert_eq!(serving.digest().to_string(), wanted);
}

/// Hostile components get a `Validated` reason naming the fault.
#[tokio::test]
async fn hostile_plugins_are_refused_with_the_fault_in_validated() {
    env().await;
    let acme = "package acme:net@1.0.0;\n/// Exfiltration.\ninterface exfil {\n  /// Sends.\n  send: func(data: string);\n}\n";
    let forbidden = component_from_wit(
        &[acme],
        &contract_wit().replace("  import host;", "  import host;\n  import acme:net/exfil@1.0.0;"),
        "addon-plugin",
    );
    let future_version = component_from_wit(
        &[],
        &contract_wit().replace("flotilla:addon@0.1.0", "flotilla:addon@0.9.0"),
        "addon-plugin",
    );
    let core_module = wat::parse_str("(module)").unwrap();
    let cases: [(&str, Vec<u8>, &str, &str); 5] = [
        ("hostile-import", forbidden, "ForbiddenImport", "acme:net/exfil"),
        (
            "hostile-version",
            future_version,
            "UnsupportedWitVersion",
            "0.9.0",
        ),
        ("hostile-module", core_module, "NotAComponent", "not a component"),
        (
            "hostile-liar",
            bytes(plugins::HOSTILE_LIAR),
            "InvalidOptions",
            "kubernetes.io",
        ),
        (
            "hostile-describe-trap",
            bytes(plugins::HOSTILE_DESCRIBE_TRAP),
            "DescribeFailed",
            "describe",
        ),
    ];
    for (name, wasm, _, _) in &cases {
        put_config_map(name, wasm.clone()).await;
        apply_plugin(name, cm_source(name), None).await;
    }
    for (name, _, reason, words) in &cases {
        let status = await_condition(name, "Validated", "False", reason).await;
        let message = &condition(&status, "Validated").message;
        assert!(message.contains(words), "{name}: {message}");
        assert_eq!(condition(&status, "Ready").reason, "NotValidated", "{name}");
        assert_eq!(condition(&status, "Degraded").status, "True", "{name}");
        assert!(status.digest.is_none(), "{name}");
    }
}

#[tokio::test]
async fn oci_plugins_load_and_registry_faults_are_named() {
    let env = env().await;
    let registry = Registry::start().await.unwrap();
    let anonymous = RegistryAuth::Anonymous;
    let wasm = bytes(plugins::HELLOWORLD);

    let good = registry.reference("plugins/hello", "v1");
    let pushed = oci::push(&wasm, &good, &anonymous, true).await.unwrap();
    apply_plugin("oci-hello", oci_source(&good, None), Some(pushed.digest)).await;
    await_condition("oci-hello", "Ready", "True", "Ready").await;
    assert_eq!(env.registry.require("oci-hello").unwrap().digest(), pushed.digest);

    // A wrong pinned digest.
    apply_plugin(
        "oci-wrong-digest",
        oci_source(&good, None),
        Some(Digest::of(b"x")),
    )
    .await;
    await_condition("oci-wrong-digest", "Fetched", "False", "DigestMismatch").await;

    // A tampered blob.
    let tampered = registry.reference("plugins/tampered", "v1");
    let p = oci::push(&bytes(plugins::REVISION_B), &tampered, &anonymous, true)
        .await
        .unwrap();
    let blob = registry.blob_path(&p.digest.to_string());
    let mut data = std::fs::read(&blob).unwrap();
    data[100] ^= 0x55;
    std::fs::write(&blob, data).unwrap();
    apply_plugin("oci-tampered", oci_source(&tampered, None), None).await;
    await_condition("oci-tampered", "Fetched", "False", "LayerDigestMismatch").await;

    // A missing layer.
    let missing = registry.reference("plugins/missing", "v1");
    let p = oci::push(&bytes(plugins::HOSTILE_TRAP), &missing, &anonymous, true)
        .await
        .unwrap();
    std::fs::remove_dir_all(registry.blob_path(&p.digest.to_string()).parent().unwrap()).unwrap();
    apply_plugin("oci-missing", oci_source(&missing, None), None).await;
    await_condition("oci-missing", "Fetched", "False", "LayerMissing").await;

    // An oversized layer (9 MiB against the controller's 8 MiB cap), refused by the manifest's
    // stated size before its bytes are read.
    let big = registry.reference("plugins/big", "v1");
    let mut huge = b"\0asm\x0d\0\x01\0".to_vec();
    huge.resize(9 << 20, 0);
    let client = oci_client::Client::new(oci_client::client::ClientConfig {
        protocol: oci_client::client::ClientProtocol::Http,
        ..Default::default()
    });
    let config =
        oci_client::client::Config::new(b"{}".to_vec(), oci::WASM_CONFIG_MEDIA_TYPE.to_owned(), None);
    let layer = oci_client::client::ImageLayer::new(huge, oci::WASM_LAYER_MEDIA_TYPE.to_owned(), None);
    client
        .push(&big.parse().unwrap(), &[layer], config, &anonymous, None)
        .await
        .unwrap();
    apply_plugin("oci-big", oci_source(&big, None), None).await;
    let status = await_condition("oci-big", "Fetched", "False", "LayerTooLarge").await;
    assert!(
        condition(&status, "Fetched").message.contains("manifest"),
        "{status:?}"
    );

    // The registry down: a new digest cannot be fetched, the last good revision keeps serving.
    let mut registry = registry;
    let next = registry.reference("plugins/hello", "v2");
    let next_digest = oci::push(&bytes(plugins::REVISION_B), &next, &anonymous, true)
        .await
        .unwrap()
        .digest;
    registry.stop();
    apply_plugin("oci-hello", oci_source(&next, None), Some(next_digest)).await;
    let status = await_condition("oci-hello", "Fetched", "False", "RegistryUnreachable").await;
    assert_eq!(condition(&status, "Degraded").status, "True");
    assert_eq!(condition(&status, "Ready").status, "True");
    assert_eq!(status.digest, Some(pushed.digest.to_string()));
    assert_eq!(env.registry.require("oci-hello").unwrap().digest(), pushed.digest);
}

/// A registry that accepts connections and answers a byte a second, forever: every read gets
/// a byte within the client's read timeout, so only an overall deadline ends a pull from it.
/// (flotilla-testing has no black-hole proxy yet; this listener stands in for one.)
async fn dripping_registry() -> String {
    use tokio::io::AsyncWriteExt as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let head = b"HTTP/1.1 200 OK\r\nX-Drip: ";
                for byte in head.iter().chain(std::iter::repeat(&b'a')) {
                    if socket.write_all(&[*byte]).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            });
        }
    });
    address
}

#[tokio::test]
async fn a_registry_that_never_answers_times_out_at_the_fetch_deadline_and_the_last_good_revision_serves() {
    let env = env().await;
    let name = "drip-hello";
    let wasm = bytes(plugins::HELLOWORLD);
    put_config_map(name, wasm.clone()).await;
    apply_plugin(name, cm_source(name), None).await;
    await_condition(name, "Ready", "True", "Ready").await;
    let good = env.registry.require(name).unwrap();
    assert_eq!(good.digest(), Digest::of(&wasm));

    // The new revision comes from a registry that holds every connection.
    let registry = dripping_registry().await;
    let reference = format!("{registry}/plugins/hello:v2");
    let started = std::time::Instant::now();
    apply_plugin(name, oci_source(&reference, None), None).await;
    let status = await_condition(name, "Fetched", "False", "FetchTimedOut").await;
    let took = started.elapsed();
    println!("fetch from the dripping registry given up after {took:?}");
    // Without the deadline the pull never ends (each read gets a byte within the read
    // timeout). The upper bound leaves room for the controller's queue, which the other tests
    // of this binary fill with plugin compiles (15.6 s seen in CI), and stays below the 30 s
    // read timeout; the message below names the deadline.
    assert!(
        took >= FETCH_DEADLINE && took < FETCH_DEADLINE + Duration::from_secs(25),
        "bounded by the fetch deadline ({FETCH_DEADLINE:?}), not a read timeout: {took:?}"
    );
    let fetched = condition(&status, "Fetched");
    assert!(
        fetched.message.contains(&format!("registry {registry}"))
            && fetched.message.contains("did not finish within 4s"),
        "{}",
        fetched.message
    );
    assert_eq!(condition(&status, "Ready").status, "True");
    assert_eq!(condition(&status, "Degraded").status, "True");
    assert_eq!(status.digest, Some(Digest::of(&wasm).to_string()));

    // The last good revision still serves and answers.
    let serving = env.registry.require(name).unwrap();
    assert_eq!(serving.digest(), Digest::of(&wasm));
    let objects = serving
        .manifests(&cluster("cluster1"), &addon(name), &[])
        .await
        .unwrap();
    assert_eq!(objects.len(), 4);
}

#[tokio::test]
async fn a_pull_secret_authenticates_and_a_wrong_one_is_refused() {
    env().await;
    let registry = Registry::builder()
        .htpasswd("alice", "s3cret")
        .start()
        .await
        .unwrap();
    let reference = registry.reference("plugins/private", "v1");
    let alice = RegistryAuth::Basic("alice".into(), "s3cret".into());
    oci::push(&bytes(plugins::HELLOWORLD), &reference, &alice, true)
        .await
        .unwrap();

    let secrets: Api<Secret> = Api::namespaced(client().await, NS);
    for (name, password) in [("pull-right", "s3cret"), ("pull-wrong", "guess")] {
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": name},
            "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": registry.docker_config_json("alice", password)},
        }))
        .unwrap();
        secrets
            .patch(name, &PatchParams::apply("test").force(), &Patch::Apply(&secret))
            .await
            .unwrap();
    }

    // The test registry serves plain HTTP, over which the controller sends no credentials
    // (see `pull_credentials_are_never_sent_over_plain_http`): the secrets are read and used
    // here through the same functions the controller calls, as an HTTPS registry would be.
    let pull = async |secret: &str| {
        let secret_ref = SecretReference {
            namespace: NS.into(),
            name: secret.into(),
        };
        let auth = oci::auth_from_secret(&client().await, &secret_ref, &registry.host()).await?;
        oci::pull(&reference, &auth, true, MAX_FETCH, None).await
    };
    let pulled = pull("pull-right").await.unwrap();
    assert_eq!(pulled.component.digest(), Digest::of(&bytes(plugins::HELLOWORLD)));
    assert_eq!(
        pull("pull-wrong").await.unwrap_err().reason(),
        "RegistryUnauthorized"
    );
    assert_eq!(pull("absent").await.unwrap_err().reason(), "PullSecretNotFound");

    apply_plugin("private-none", oci_source(&reference, None), None).await;
    await_condition("private-none", "Fetched", "False", "RegistryUnauthorized").await;
}

/// A loopback listener standing in for a registry the plugin's author controls: it answers
/// every request with a Basic challenge and keeps what it was sent.
struct Recorder {
    addr: std::net::SocketAddr,
    received: Arc<std::sync::Mutex<Vec<u8>>>,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    async fn start() -> Self {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(std::sync::Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (keep, count) = (Arc::clone(&received), Arc::clone(&connections));
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let keep = Arc::clone(&keep);
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 16 << 10];
                    while let Ok(n) = stream.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        keep.lock().unwrap().extend_from_slice(&buf[..n]);
                        if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                            let challenge = "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"r\"\r\n\
                                             Docker-Distribution-API-Version: registry/2.0\r\nContent-Length: 0\r\n\r\n";
                            let _ = stream.write_all(challenge.as_bytes()).await;
                        }
                    }
                });
            }
        });
        Self {
            addr,
            received,
            connections,
            task,
        }
    }

    fn received(&self) -> String {
        String::from_utf8_lossy(&self.received.lock().unwrap()).to_lowercase()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A `kubernetes.io/dockerconfigjson` Secret with credentials for `host`.
async fn pull_secret(namespace: &str, name: &str, host: &str) {
    let auth = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "alice:s3cret");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": json!({"auths": {host: {"auth": auth}}}).to_string()},
    }))
    .unwrap();
    Api::<Secret>::namespaced(client().await, namespace)
        .patch(name, &PatchParams::apply("test").force(), &Patch::Apply(&secret))
        .await
        .unwrap();
}

/// The hub reads Secrets cluster-wide, but an AddOnPlugin may make it read only those of the
/// plugins' namespace: a pull secret in kube-system is neither read nor sent to the registry
/// the plugin names, and the refusal names the field and the namespace allowed.
#[tokio::test]
async fn a_pull_secret_outside_the_plugin_namespace_is_refused_and_never_used() {
    env().await;
    let recorder = Recorder::start().await;
    pull_secret("kube-system", "registry-credentials", &recorder.addr.to_string()).await;
    let mut source = oci_source(&format!("{}/plugins/stolen:v1", recorder.addr), None);
    let oci = source.oci.as_mut().unwrap();
    oci.insecure = false;
    oci.pull_secret_ref = Some(SecretReference {
        namespace: "kube-system".into(),
        name: "registry-credentials".into(),
    });
    apply_plugin("secret-elsewhere", source, None).await;
    let status = await_condition("secret-elsewhere", "Fetched", "False", "SecretOutsideNamespace").await;
    let message = &condition(&status, "Fetched").message;
    assert!(
        message.contains("spec.source.oci.pullSecretRef")
            && message.contains("\"kube-system\"")
            && message.contains(&format!("{NS:?}")),
        "{message}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        recorder.connections.load(Ordering::SeqCst),
        0,
        "{}",
        recorder.received()
    );
}

/// `insecure` is plain HTTP: a pull secret with it is refused before any request, so no
/// Authorization header ever reaches the registry (nor anyone on the way).
#[tokio::test]
async fn pull_credentials_are_never_sent_over_plain_http() {
    env().await;
    let recorder = Recorder::start().await;
    pull_secret(NS, "plain-http-credentials", &recorder.addr.to_string()).await;
    apply_plugin(
        "plain-http-credentials",
        oci_source(
            &format!("{}/plugins/private:v1", recorder.addr),
            Some("plain-http-credentials"),
        ),
        None,
    )
    .await;
    let status = await_condition(
        "plain-http-credentials",
        "Fetched",
        "False",
        "CredentialsOverPlainHttp",
    )
    .await;
    assert!(
        condition(&status, "Fetched").message.contains("plain HTTP"),
        "{status:?}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let received = recorder.received();
    assert!(!received.contains("authorization:"), "{received}");
    assert_eq!(recorder.connections.load(Ordering::SeqCst), 0, "{received}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_swap_under_load_never_drops_or_mixes_and_a_bad_revision_keeps_the_last_good() {
    let env = env().await;
    let (old, new) = (bytes(plugins::HELLOWORLD), bytes(plugins::REVISION_B));
    let (old_digest, new_digest) = (Digest::of(&old), Digest::of(&new));
    put_config_map("swap-a", old.clone()).await;
    put_config_map("swap-b", new.clone()).await;
    put_config_map("swap-bad", bytes(plugins::HOSTILE_DESCRIBE_TRAP)).await;
    apply_plugin("swap", cm_source("swap-a"), Some(old_digest)).await;
    await_condition("swap", "Ready", "True", "Ready").await;

    let (c, a) = (cluster("cluster1"), addon("swap"));
    let expected_old = env
        .registry
        .require("swap")
        .unwrap()
        .manifests(&c, &a, &[])
        .await
        .unwrap();
    let probe = runtime()
        .load("swap-probe", new.clone(), flotilla_wasm::Limits::default())
        .await
        .unwrap();
    let expected_new = probe.manifests(&c, &a, &[]).await.unwrap();
    assert_ne!(expected_old, expected_new);

    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..6)
        .map(|_| {
            let (registry, stop, done, c, a) = (
                Arc::clone(&env.registry),
                stop.clone(),
                done.clone(),
                c.clone(),
                a.clone(),
            );
            tokio::spawn(async move {
                let mut seen: Vec<(Digest, Result<Vec<AgentManifest>, String>)> = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let plugin = registry.require("swap").expect("a revision always serves");
                    let result = plugin.manifests(&c, &a, &[]).await.map_err(|e| e.to_string());
                    seen.push((plugin.digest(), result));
                    done.fetch_add(1, Ordering::Relaxed);
                }
                seen
            })
        })
        .collect();

    while done.load(Ordering::Relaxed) < 30 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    apply_plugin("swap", cm_source("swap-b"), Some(new_digest)).await;
    let status = await_condition("swap", "Ready", "True", "Ready").await;
    assert_eq!(status.digest, Some(new_digest.to_string()));
    let after = done.load(Ordering::Relaxed);
    while done.load(Ordering::Relaxed) < after + 30 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // A bad revision while the load goes on: refused, the good one keeps serving.
    apply_plugin("swap", cm_source("swap-bad"), None).await;
    let status = await_condition("swap", "Validated", "False", "DescribeFailed").await;
    assert_eq!(condition(&status, "Degraded").status, "True");
    assert_eq!(condition(&status, "Ready").status, "True");
    assert!(
        condition(&status, "Degraded")
            .message
            .contains(&new_digest.to_string()),
        "{status:?}"
    );
    assert_eq!(status.digest, Some(new_digest.to_string()));
    let after = done.load(Ordering::Relaxed);
    while done.load(Ordering::Relaxed) < after + 10 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::Relaxed);

    let (mut from_old, mut from_new) = (0, 0);
    for worker in workers {
        for (digest, result) in ends_within(Duration::from_secs(60), worker).await.unwrap() {
            let objects = result.expect("no call fails during a swap");
            if digest == old_digest {
                assert_eq!(objects, expected_old, "an old-revision answer differs");
                from_old += 1;
            } else {
                assert_eq!(digest, new_digest, "only the two good revisions ever served");
                assert_eq!(objects, expected_new, "a new-revision answer differs");
                from_new += 1;
            }
        }
    }
    assert!(from_old >= 30 && from_new >= 40, "old {from_old}, new {from_new}");
    assert_eq!(env.registry.require("swap").unwrap().digest(), new_digest);
}

#[tokio::test]
async fn deleting_an_add_on_plugin_unloads_it_and_a_second_plugin_for_the_same_add_on_conflicts() {
    let env = env().await;
    let wasm = bytes(plugins::REVISION_B);
    put_config_map("owner", wasm.clone()).await;
    apply_plugin("owner", cm_source("owner"), None).await;
    await_condition("owner", "Ready", "True", "Ready").await;

    let api: Api<AddOnPlugin> = Api::all(client().await);
    let second = AddOnPlugin::new(
        "second",
        AddOnPluginSpec {
            add_on_name: "owner".into(),
            source: cm_source("owner"),
            ..AddOnPluginSpec::default()
        },
    );
    api.patch(
        "second",
        &PatchParams::apply("test").force(),
        &Patch::Apply(&second),
    )
    .await
    .unwrap();
    let status = await_condition("second", "Ready", "False", "AddOnNameConflict").await;
    assert!(condition(&status, "Ready").message.contains("owner"));
    // The registry says which AddOnPlugin won the claim: the only one whose spec counts.
    assert_eq!(env.registry.owner("owner").as_deref(), Some("owner"));

    api.delete("owner", &DeleteParams::default()).await.unwrap();
    wait::until("AddOnPlugin owner deleted", Duration::from_secs(60), || {
        let api = api.clone();
        async move { Ok::<_, kube::Error>(api.get_opt("owner").await?.is_none().then_some(())) }
    })
    .await
    .unwrap();
    // The second plugin takes the add-on over once the first is gone.
    await_condition("second", "Ready", "True", "Ready").await;
    assert_eq!(env.registry.require("owner").unwrap().digest(), Digest::of(&wasm));
    assert_eq!(env.registry.owner("owner").as_deref(), Some("second"));
}

/// Waits until `name`'s status satisfies `check` for the current generation.
async fn await_status(
    name: &str,
    what: &str,
    check: impl Fn(&AddOnPluginStatus) -> bool,
) -> AddOnPluginStatus {
    let api: Api<AddOnPlugin> = Api::all(client().await);
    let check = &check;
    wait::until(
        &format!("AddOnPlugin {name}: {what}"),
        Duration::from_secs(120),
        || {
            let api = api.clone();
            async move {
                let p = api.get(name).await?;
                let st = p.status.clone().unwrap_or_default();
                if st.observed_generation == p.metadata.generation && check(&st) {
                    Ok::<_, anyhow_like::Error>(Some(st))
                } else {
                    Err(anyhow_like::Error(format!("{st:?}")))
                }
            }
        },
    )
    .await
    .expect("test environment")
}

fn degraded_by(status: &AddOnPluginStatus, reason: &str) -> bool {
    status
        .conditions
        .iter()
        .any(|c| c.type_ == "Degraded" && c.status == "True" && c.reason == reason)
}

/// Calls `manifests` for as many clusters as the threshold, which quarantines the revision
/// (one cluster's faults would quarantine that cluster's calls only); returns the faults seen.
async fn call_until_quarantined(registry: &PluginRegistry, name: &str) -> Vec<Fault> {
    let a = addon(name);
    let plugin = registry.require(name).unwrap();
    let mut seen = Vec::new();
    for i in 0..fault_policy().threshold {
        let c = cluster(&format!("faulting-{i}"));
        let err = ends_within(Duration::from_secs(60), plugin.manifests(&c, &a, &[]))
            .await
            .unwrap_err();
        seen.push(err.fault());
    }
    seen
}

/// Every hostile plugin through the controller: faults reach `Degraded` with a reason naming
/// hook and kind, counts and the last message reach `status.faults`; faults on three clusters
/// in a row quarantine the revision (every hook answers its fail-safe result at once, the condition says
/// until when); the end of the backoff lets calls through again; a new revision lifts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_faults_of_every_hostile_plugin_reach_status_and_quarantine_the_revision() {
    let env = env().await;
    let limits = flotilla_api::plugins::v1alpha1::PluginLimits {
        timeout_millis: 300,
        memory_mib: 32,
        ..Default::default()
    };
    let cases: [(&str, &str, Fault, &str); 5] = [
        (
            "faults-loop",
            plugins::HOSTILE_LOOP,
            Fault::Timeout,
            "ManifestsTimeout",
        ),
        (
            "faults-memory",
            plugins::HOSTILE_MEMORY,
            Fault::Memory,
            "ManifestsMemory",
        ),
        ("faults-trap", plugins::HOSTILE_TRAP, Fault::Trap, "ManifestsTrap"),
        (
            "faults-stack",
            plugins::HOSTILE_STACK,
            Fault::StackOverflow,
            "ManifestsStackOverflow",
        ),
        (
            "faults-output",
            plugins::HOSTILE_OUTPUT,
            Fault::OutputTooLarge,
            "ManifestsOutputTooLarge",
        ),
    ];
    for (name, path, _, _) in cases.iter().copied().chain([(
        "faults-log-flood",
        plugins::HOSTILE_LOG_FLOOD,
        Fault::LogFlood,
        "",
    )]) {
        put_config_map(name, bytes(path)).await;
        apply_spec(
            name,
            AddOnPluginSpec {
                source: cm_source(name),
                limits: limits.clone(),
                ..AddOnPluginSpec::default()
            },
        )
        .await;
    }
    let (c, csr) = (cluster("cluster1"), agent_csr("cluster1", "faults"));
    for (name, _, fault, reason) in cases {
        await_condition(name, "Ready", "True", "Ready").await;
        assert_eq!(
            call_until_quarantined(&env.registry, name).await,
            vec![fault; 3],
            "{name}"
        );
        let status = await_status(name, &format!("Degraded {reason} and quarantined"), |s| {
            degraded_by(s, reason) && s.faults.as_ref().is_some_and(|f| f.quarantined_until.is_some())
        })
        .await;
        let degraded = condition(&status, "Degraded");
        assert!(
            degraded.message.contains("quarantined until"),
            "{name}: {}",
            degraded.message
        );
        assert!(
            degraded.message.contains("last fault: manifests"),
            "{name}: {}",
            degraded.message
        );
        let faults = status.faults.clone().unwrap();
        assert_eq!(faults.counts.len(), 1, "{name}: {faults:?}");
        assert_eq!(faults.counts[0].hook, "manifests");
        assert_eq!(faults.counts[0].kind, fault.as_str());
        assert_eq!(faults.counts[0].count, 3);
        assert_eq!(faults.last.as_ref().unwrap().kind, fault.as_str());
        assert_eq!(condition(&status, "Ready").status, "True", "{name}: still loaded");

        // Quarantined: every hook answers its fail-safe result without running the guest.
        let plugin = env.registry.require(name).unwrap();
        let a = addon(name);
        let err = plugin.manifests(&c, &a, &[]).await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Quarantined {
                    hook: Hook::Manifests,
                    ..
                }
            ),
            "{name}: {err}"
        );
        let CsrDecision::Deny(why) = plugin.approve_csr(&c, &a, &csr).await else {
            panic!("{name}: a quarantined plugin approved a CSR");
        };
        assert!(why.contains("quarantined"), "{name}: {why}");
        let health = plugin.probe_health(&c, &a, &[]).await;
        assert_eq!(health.status, HealthStatus::Unknown, "{name}");
        let err = plugin.hub_permissions(&c, &a).await.unwrap_err();
        assert_eq!(err.fault(), Fault::Quarantined, "{name}: {err}");
    }

    // The log flood answers every time: counted and reported, never quarantined.
    await_condition("faults-log-flood", "Ready", "True", "Ready").await;
    let flood = env.registry.require("faults-log-flood").unwrap();
    for _ in 0..4 {
        flood
            .manifests(&c, &addon("faults-log-flood"), &[])
            .await
            .unwrap();
    }
    let status = await_status("faults-log-flood", "Degraded ManifestsLogFlood", |s| {
        degraded_by(s, "ManifestsLogFlood") && s.faults.as_ref().is_some_and(|f| f.counts[0].count == 4)
    })
    .await;
    assert!(status.faults.as_ref().unwrap().quarantined_until.is_none());
    assert!(
        condition(&status, "Degraded")
            .message
            .contains("log lines dropped")
    );

    // The end of the backoff: the status drops the quarantine and calls run again.
    let status = await_status("faults-trap", "quarantine over", |s| {
        s.faults.as_ref().is_some_and(|f| f.quarantined_until.is_none())
    })
    .await;
    assert!(
        degraded_by(&status, "ManifestsTrap"),
        "faults stay counted in the window"
    );
    let trap = env.registry.require("faults-trap").unwrap();
    let answered = trap
        .manifests(&cluster("answers"), &addon("faults-trap"), &[])
        .await
        .unwrap();
    assert_eq!(answered[0].name, "answered");

    // A new revision lifts a quarantine at once and starts with a clean record. (The first
    // quarantine may be over by now; a call on probation that faults starts the next.)
    let looping = env.registry.require("faults-loop").unwrap();
    let err = looping
        .manifests(&c, &addon("faults-loop"), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(err.fault(), Fault::Timeout | Fault::Quarantined),
        "{err}"
    );
    let status = await_status("faults-loop", "quarantined", |s| {
        s.faults.as_ref().is_some_and(|f| f.quarantined_until.is_some())
    })
    .await;
    assert!(status.faults.is_some());
    put_config_map("faults-loop", bytes(plugins::HELLOWORLD)).await;
    let status = await_status("faults-loop", "new revision, no faults", |s| {
        s.digest == Some(Digest::of(&bytes(plugins::HELLOWORLD)).to_string())
            && s.faults.is_none()
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Degraded" && c.status == "False")
    })
    .await;
    assert_eq!(condition(&status, "Ready").status, "True");
    let objects = env
        .registry
        .require("faults-loop")
        .unwrap()
        .manifests(&c, &addon("faults-loop"), &[])
        .await
        .unwrap();
    assert!(!objects.is_empty());
}

/// A fixed ECDSA P-256 key pair (PKCS#8 private, SPKI public), as `cosign generate-key-pair`
/// would hand an admin, without random numbers in the test.
fn key_pair(seed: u8) -> (String, String) {
    use p256::pkcs8::{EncodePrivateKey as _, EncodePublicKey as _, LineEnding};
    let secret = p256::SecretKey::from_slice(&[seed; 32]).expect("test environment");
    let private = secret
        .to_pkcs8_pem(LineEnding::LF)
        .expect("test environment")
        .to_string();
    let public = secret
        .public_key()
        .to_public_key_pem(LineEnding::LF)
        .expect("test environment");
    (private, public)
}

fn verified(reference: &str, public_key: &str) -> AddOnPluginSpec {
    AddOnPluginSpec {
        source: oci_source(reference, None),
        verification: Some(flotilla_api::plugins::v1alpha1::PluginVerification {
            public_key: public_key.to_owned(),
        }),
        ..AddOnPluginSpec::default()
    }
}

/// `spec.verification` against the real registry: a signature by the key loads, a signature by
/// another key, no signature at all, and a ConfigMap source are refused with `Validated` False.
#[tokio::test]
async fn a_plugin_that_must_be_signed_loads_only_with_a_signature_by_the_key() {
    let env = env().await;
    let registry = Registry::start().await.unwrap();
    let anonymous = RegistryAuth::Anonymous;
    let (private, public) = key_pair(11);
    let (_, stranger) = key_pair(12);

    let signed = registry.reference("plugins/signed", "v1");
    let pushed = oci::push(&bytes(plugins::HELLOWORLD), &signed, &anonymous, true)
        .await
        .unwrap();
    let signature = oci::push_signature(&signed, &pushed.manifest_digest, &private, &anonymous, true)
        .await
        .unwrap();
    assert!(signature.ends_with(".sig"), "{signature}");
    let unsigned = registry.reference("plugins/unsigned", "v1");
    oci::push(&bytes(plugins::HELLOWORLD), &unsigned, &anonymous, true)
        .await
        .unwrap();

    apply_spec("signed-ok", verified(&signed, &public)).await;
    let status = await_condition("signed-ok", "Ready", "True", "Ready").await;
    assert_eq!(status.digest, Some(pushed.digest.to_string()));
    assert!(env.registry.require("signed-ok").is_ok());

    apply_spec("signed-by-stranger", verified(&signed, &stranger)).await;
    let status = await_condition("signed-by-stranger", "Validated", "False", "SignatureInvalid").await;
    assert!(
        condition(&status, "Validated")
            .message
            .contains("does not verify"),
        "{status:?}"
    );
    assert_eq!(condition(&status, "Ready").reason, "NotValidated");
    assert!(env.registry.get("signed-by-stranger").is_none());

    apply_spec("not-signed", verified(&unsigned, &public)).await;
    let status = await_condition("not-signed", "Validated", "False", "SignatureMissing").await;
    assert!(
        condition(&status, "Validated").message.contains("sha256-"),
        "names the tag it looked for: {status:?}"
    );
    assert!(env.registry.get("not-signed").is_none());

    put_config_map("signed-cm", bytes(plugins::HELLOWORLD)).await;
    apply_spec(
        "signed-cm",
        AddOnPluginSpec {
            source: cm_source("signed-cm"),
            verification: Some(flotilla_api::plugins::v1alpha1::PluginVerification { public_key: public }),
            ..AddOnPluginSpec::default()
        },
    )
    .await;
    let status = await_condition("signed-cm", "Validated", "False", "SignatureMissing").await;
    assert!(
        condition(&status, "Validated").message.contains("OCI"),
        "{status:?}"
    );
}
