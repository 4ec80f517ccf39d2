//! `flotilla plugin run|inspect|push` end to end: the real binary, real plugin components, a real
//! OCI registry on loopback, exit codes and messages as a person sees them.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use flotilla_test_plugins as plugins;
use flotilla_testing::registry::Registry;
use serde_json::Value;

fn flotilla(args: &[&str]) -> Output {
    flotilla_with_stdin(args, None)
}

fn flotilla_with_stdin(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(args)
        .env("HOME", std::env::temp_dir().join("flotilla-plugin-cli-home"))
        .env_remove("DOCKER_CONFIG")
        .env_remove("FLOTILLA_REGISTRY_PASSWORD")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flotilla runs");
    {
        let mut input = child.stdin.take().expect("stdin piped");
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).expect("flotilla runs");
        }
    }
    child.wait_with_output().expect("flotilla runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

#[track_caller]
fn fails(o: Output, words: &str) {
    assert!(!o.status.success(), "succeeded:\n{}", stdout(&o));
    let err = stderr(&o);
    assert!(err.contains(words), "stderr lacks {words:?}:\n{err}");
}

/// Input files in a temporary directory: a ManagedCluster, a ManagedClusterAddOn, an
/// AddOnDeploymentConfig, a ConfigMap config, a CSR filed by cluster1's agent, and feedback.
struct Inputs {
    dir: tempfile::TempDir,
}

impl Inputs {
    fn new(addon: &str) -> Self {
        let dir = tempfile::tempdir().expect("input files are written");
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("input files are written")
        };
        write(
            "cluster.yaml",
            "apiVersion: cluster.open-cluster-management.io/v1\nkind: ManagedCluster\nmetadata:\n  name: cluster1\n  labels:\n    custom-signer.example.com/enabled: \"true\"\nspec:\n  hubAcceptsClient: true\nstatus:\n  version:\n    kubernetes: v1.33.1\n",
        );
        write(
            "addon.yaml",
            &format!(
                "apiVersion: addon.open-cluster-management.io/v1alpha1\nkind: ManagedClusterAddOn\nmetadata:\n  name: {addon}\n  namespace: cluster1\nspec: {{}}\n"
            ),
        );
        write(
            "configs.yaml",
            "apiVersion: addon.open-cluster-management.io/v1alpha1\nkind: AddOnDeploymentConfig\nmetadata:\n  name: deploy\n  namespace: default\nspec:\n  agentInstallNamespace: agents\n  customizedVariables:\n  - name: LOG_LEVEL\n    value: \"3\"\n  registries:\n  - source: flotilla.local/addons\n    mirror: mirror.local/addons\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\n  namespace: default\ndata:\n  replicas: \"2\"\n",
        );
        let subject = format!("system:open-cluster-management:cluster:cluster1:addon:{addon}:agent:{addon}");
        let groups = [
            format!("system:open-cluster-management:cluster:cluster1:addon:{addon}"),
            format!("system:open-cluster-management:addon:{addon}"),
        ];
        let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
        let request = flotilla_core::x509::client_request(&subject, &groups, &[], &[])
            .expect("input files are written");
        use base64::Engine as _;
        let pem = base64::engine::general_purpose::STANDARD.encode(request.request_pem);
        write(
            "csr.yaml",
            &format!(
                "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: addon-cluster1-{addon}-abcde\nspec:\n  signerName: kubernetes.io/kube-apiserver-client\n  username: system:open-cluster-management:cluster1:agent1\n  groups: [\"system:open-cluster-management:cluster1\", \"system:authenticated\"]\n  usages: [\"digital signature\", \"key encipherment\", \"client auth\"]\n  request: {pem}\n"
            ),
        );
        write(
            "feedback.yaml",
            "- resource: {group: apps, resource: deployments, name: helloworld-agent, namespace: open-cluster-management-agent-addon}\n  name: ReadyReplicas\n  value: 1\n",
        );
        Self { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

fn run_args<'a>(
    inputs: &'a Inputs,
    file: &'a str,
    hook: &'a str,
    owned: &'a mut Vec<String>,
) -> Vec<&'a str> {
    owned.clear();
    owned.extend([
        "--cluster".into(),
        inputs.path("cluster.yaml"),
        "--addon".into(),
        inputs.path("addon.yaml"),
    ]);
    let mut args = vec!["plugin", "run", file, hook];
    args.extend(owned.iter().map(String::as_str));
    args
}

#[test]
fn plugin_run_calls_every_hook_and_prints_the_result() {
    let inputs = Inputs::new("helloworld-config");
    let file = plugins::HELLOWORLD_CONFIG;
    let mut owned = Vec::new();

    let describe: Value =
        serde_json::from_str(&ok(flotilla(&["plugin", "run", file, "describe", "-o", "json"]))).unwrap();
    assert_eq!(describe["witVersion"], "0.1.0");
    assert!(describe["digest"].as_str().unwrap().starts_with("sha256:"));

    let mut args = run_args(&inputs, file, "manifests", &mut owned);
    let configs = inputs.path("configs.yaml");
    args.extend(["--config", &configs, "-o", "json"]);
    let objects: Vec<Value> = serde_json::from_str(&ok(flotilla(&args))).unwrap();
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(
        deployment["metadata"]["namespace"], "agents",
        "agentInstallNamespace applies"
    );
    assert_eq!(deployment["spec"]["replicas"], 2, "the ConfigMap config applies");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "mirror.local/addons/helloworld-agent:0.1.0"
    );

    // YAML by default.
    let yaml = ok(flotilla(&run_args(&inputs, file, "manifests", &mut owned)));
    assert!(yaml.contains("kind: Deployment"), "{yaml}");

    let mut args = run_args(&inputs, file, "approve-csr", &mut owned);
    let csr = inputs.path("csr.yaml");
    args.extend(["--csr", &csr]);
    assert_eq!(ok(flotilla(&args)).trim(), "decision: approve");

    let mut args = run_args(&inputs, file, "probe-health", &mut owned);
    let feedback = inputs.path("feedback.yaml");
    args.extend(["--feedback", &feedback]);
    assert!(ok(flotilla(&args)).contains("status: available"));

    let hub = ok(flotilla(&run_args(
        &inputs,
        plugins::HELLOWORLD,
        "hub-permissions",
        &mut owned,
    )));
    assert!(
        hub.contains("kind: Role") && hub.contains("namespace: cluster1"),
        "{hub}"
    );
}

#[test]
fn plugin_run_fails_with_a_clear_message_and_a_non_zero_exit() {
    let inputs = Inputs::new("trap");
    let mut owned = Vec::new();
    // A hook that traps: the fault is the error, not a made-up answer.
    fails(
        flotilla(&run_args(&inputs, plugins::HOSTILE_TRAP, "manifests", &mut owned)),
        "trapped",
    );
    // A plugin the host refuses at load.
    fails(
        flotilla(&["plugin", "run", plugins::HOSTILE_LIAR, "describe"]),
        "describe refused",
    );
    // Missing inputs and files.
    fails(
        flotilla(&["plugin", "run", plugins::HELLOWORLD, "manifests"]),
        "--cluster",
    );
    fails(
        flotilla(&["plugin", "run", "/nonexistent.wasm", "describe"]),
        "/nonexistent.wasm",
    );
    fails(
        flotilla(&run_args(&inputs, plugins::HELLOWORLD, "approve-csr", &mut owned)),
        "--csr",
    );
    // A tight limit from the command line applies.
    let mut args = run_args(&inputs, plugins::HOSTILE_LOOP, "manifests", &mut owned);
    args.extend(["--timeout-millis", "200"]);
    fails(flotilla(&args), "timed out");
}

#[test]
fn plugin_inspect_shows_a_file() {
    let text = ok(flotilla(&["plugin", "inspect", plugins::HELLOWORLD]));
    assert!(text.contains("wit version: 0.1.0"), "{text}");
    assert!(text.contains("flotilla:addon/hooks@0.1.0"), "{text}");
    assert!(text.contains("flotilla:addon/host@0.1.0"), "{text}");
    assert!(text.contains("verdict:     accepted"), "{text}");

    let json: Value = serde_json::from_str(&ok(flotilla(&[
        "plugin",
        "inspect",
        plugins::HELLOWORLD,
        "-o",
        "json",
    ])))
    .unwrap();
    let bytes = std::fs::read(plugins::HELLOWORLD).unwrap();
    assert_eq!(json["size"], bytes.len());
    assert_eq!(json["kind"], "component");
    assert!(
        json["imports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i.as_str().unwrap().starts_with("wasi:"))
    );

    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("module.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
    let text = ok(flotilla(&["plugin", "inspect", module.to_str().unwrap()]));
    assert!(text.contains("core-module") && text.contains("refused"), "{text}");

    fails(
        flotilla(&["plugin", "inspect", "no-such-file.wasm"]),
        "no such file",
    );
}

fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime builds")
}

#[test]
fn plugin_push_then_inspect_the_oci_reference() {
    let rt = tokio();
    let registry = rt.block_on(Registry::start()).unwrap();
    let reference = registry.reference("plugins/helloworld", "v1");
    let out = ok(flotilla(&[
        "plugin",
        "push",
        plugins::HELLOWORLD,
        &reference,
        "--insecure",
    ]));
    let digest = sha256(Path::new(plugins::HELLOWORLD));
    assert!(out.contains(&digest), "{out}");
    assert!(out.contains("manifest:"), "{out}");

    let json: Value = serde_json::from_str(&ok(flotilla(&[
        "plugin",
        "inspect",
        &reference,
        "--insecure",
        "-o",
        "json",
    ])))
    .unwrap();
    assert_eq!(json["digest"], digest.as_str());
    assert_eq!(json["witVersion"], "0.1.0");
    assert!(json["source"].as_str().unwrap().contains(&reference));

    // Pushing something the host would refuse on sight is refused before any upload.
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("module.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
    fails(
        flotilla(&[
            "plugin",
            "push",
            module.to_str().unwrap(),
            &registry.reference("plugins/module", "v1"),
            "--insecure",
        ]),
        "not a component",
    );

    // A registry that is down.
    let mut registry = registry;
    registry.stop();
    fails(
        flotilla(&["plugin", "inspect", &reference, "--insecure"]),
        "unreachable",
    );
}

#[test]
fn plugin_push_and_inspect_with_registry_credentials() {
    let rt = tokio();
    let registry = rt
        .block_on(Registry::builder().htpasswd("alice", "s3cret").start())
        .unwrap();
    let reference = registry.reference("plugins/private", "v1");
    fails(
        flotilla(&["plugin", "push", plugins::REVISION_B, &reference, "--insecure"]),
        "refused the credentials",
    );
    fails(
        flotilla_with_stdin(
            &[
                "plugin",
                "push",
                plugins::REVISION_B,
                &reference,
                "--insecure",
                "-u",
                "alice",
                "--password-stdin",
            ],
            Some("wrong\n"),
        ),
        "refused the credentials",
    );
    ok(flotilla_with_stdin(
        &[
            "plugin",
            "push",
            plugins::REVISION_B,
            &reference,
            "--insecure",
            "-u",
            "alice",
            "--password-stdin",
        ],
        Some("s3cret\n"),
    ));

    // Credentials from a docker config file.
    let dir = tempfile::tempdir().unwrap();
    let config: PathBuf = dir.path().join("config.json");
    std::fs::write(&config, registry.docker_config_json("alice", "s3cret")).unwrap();
    let text = ok(flotilla(&[
        "plugin",
        "inspect",
        &reference,
        "--insecure",
        "--docker-config",
        config.to_str().unwrap(),
    ]));
    assert!(text.contains("wit version: 0.1.0"), "{text}");
    fails(
        flotilla(&["plugin", "inspect", &reference, "--insecure"]),
        "refused the credentials",
    );
}

fn sha256(path: &Path) -> String {
    flotilla_wasm::Digest::of(&std::fs::read(path).expect("plugin file reads")).to_string()
}
