//! Helpers of the CLI tests that drive the real `flotilla` binary against a hub.

#![allow(
    clippy::unwrap_used,
    dead_code,
    reason = "test support: fail loudly; not every binary uses every helper"
)]

use std::{
    path::Path,
    process::{Child, Command, Output},
};

/// A background process (`flotilla hub`) killed and reaped when the test ends.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `flotilla ARGS --kubeconfig KUBECONFIG`.
pub fn flotilla(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap()
}

/// Runs the control plane's kubectl with `kubeconfig` and `args`: its standard output, or its
/// standard error when it fails.
pub fn kubectl_as(kubeconfig: &Path, args: &[&str]) -> Result<String, String> {
    let output = Command::new(flotilla_testing::binary::controlplane_binary().unwrap())
        .arg("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// The standard output of a command that must succeed.
pub fn ok(output: Output) -> String {
    assert!(
        output.status.success(),
        "flotilla failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs `flotilla ARGS --kubeconfig KUBECONFIG` with its local state (klusterlets started with
/// `join --local`, registry credentials) kept in `state`.
pub fn flotilla_at(state: &Path, kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("FLOTILLA_STATE_DIR", state)
        .env("HOME", state)
        .env_remove("KUBECONFIG")
        .env_remove("DOCKER_CONFIG")
        .output()
        .unwrap()
}

/// The token in the join command `flotilla init` printed.
pub fn hub_token(join_line: &str) -> String {
    join_line
        .split_whitespace()
        .skip_while(|w| *w != "--hub-token")
        .nth(1)
        .unwrap()
        .to_owned()
}

/// `flotilla join --local` of `cluster` on the control plane with admin kubeconfig `managed`.
pub fn join_local(
    state: &Path,
    managed: &Path,
    hub_server: &str,
    token: &str,
    cluster: &str,
    extra: &[&str],
) -> Output {
    let mut args = vec![
        "join",
        "--hub-token",
        token,
        "--hub-apiserver",
        hub_server,
        "--cluster-name",
        cluster,
        "--local",
    ];
    args.extend_from_slice(extra);
    flotilla_at(state, managed, &args)
}

/// The process id of the `--local` klusterlet of `cluster`.
pub fn klusterlet_pid(state: &Path, cluster: &str) -> u32 {
    let text = std::fs::read_to_string(state.join("klusterlets").join(cluster).join("state.json")).unwrap();
    let pid = serde_json::from_str::<serde_json::Value>(&text).unwrap()["pid"]
        .as_u64()
        .unwrap();
    u32::try_from(pid).unwrap()
}

/// Stops the `--local` klusterlets `flotilla join` started under a state directory, also when
/// the test fails: they run detached and would outlive it.
pub struct Klusterlets(pub std::path::PathBuf);

impl Drop for Klusterlets {
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir(self.0.join("klusterlets")) else {
            return;
        };
        for entry in entries.flatten() {
            let Some(cluster) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if std::fs::metadata(entry.path().join("state.json")).is_err() {
                continue;
            }
            let pid = klusterlet_pid(&self.0, &cluster);
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Applies deploy/hub to `hub` and writes a kubeconfig of the hub's service account there into
/// `state`: a hub started with it proves the ClusterRole of deploy/hub suffices.
pub fn hub_service_account(hub: &flotilla_testing::ControlPlane, state: &Path) -> std::path::PathBuf {
    let manifests = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/hub/hub.yaml");
    let applied = hub.kubectl().args(["apply", "-f", manifests]).output().unwrap();
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let path = state.join("hub-sa.kubeconfig");
    let kubeconfig = hub
        .kubeconfig_for(
            "system:serviceaccount:open-cluster-management-hub:flotilla-hub",
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:open-cluster-management-hub",
            ],
        )
        .unwrap();
    std::fs::write(&path, kubeconfig).unwrap();
    path
}

/// Applies deploy/klusterlet's service account and binding to `managed` and writes a
/// kubeconfig of that service account into `state`: a klusterlet started with it runs with
/// exactly the rights deploy/klusterlet grants.
pub fn klusterlet_service_account(
    managed: &flotilla_testing::ControlPlane,
    state: &Path,
    cluster: &str,
) -> std::path::PathBuf {
    use std::io::Write as _;
    let manifests = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/klusterlet/klusterlet.yaml"
    ))
    .unwrap();
    // The identity only: the Deployment would never run here (no kubelet).
    let mut identity =
        String::from("apiVersion: v1\nkind: Namespace\nmetadata: {name: open-cluster-management-agent}\n");
    for document in manifests.split("\n---\n") {
        if document.contains("kind: ServiceAccount") || document.contains("kind: ClusterRoleBinding") {
            identity.push_str("---\n");
            identity.push_str(document);
            identity.push('\n');
        }
    }
    let mut apply = managed
        .kubectl()
        .args(["apply", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    apply
        .stdin
        .take()
        .unwrap()
        .write_all(identity.as_bytes())
        .unwrap();
    let applied = apply.wait_with_output().unwrap();
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let path = state.join(format!("{cluster}-klusterlet-sa.kubeconfig"));
    let kubeconfig = managed
        .kubeconfig_for(
            "system:serviceaccount:open-cluster-management-agent:klusterlet",
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:open-cluster-management-agent",
            ],
        )
        .unwrap();
    std::fs::write(&path, kubeconfig).unwrap();
    path
}

/// Starts `flotilla hub --kubeconfig KUBECONFIG ARGS` with its output in `log`.
pub fn start_hub(kubeconfig: &Path, log: &Path, args: &[&str]) -> Running {
    spawn_hub(kubeconfig, log, &[&["--disable-leader-election"], args].concat())
}

/// Starts `flotilla hub --kubeconfig KUBECONFIG ARGS` with its output in `log`, electing a
/// leader through its Lease as a deployed replica does.
pub fn spawn_hub(kubeconfig: &Path, log: &Path, args: &[&str]) -> Running {
    let file = std::fs::File::create(log).unwrap();
    Running(
        Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .arg("hub")
            .args(args)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .env("RUST_LOG", "info")
            .stdin(std::process::Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap(),
    )
}

/// Kills `hub` (SIGKILL: no shutdown, whatever it was writing cut off) and starts `flotilla
/// hub` again as the fleets here start it (deploy/hub's identity and the plugin cache in
/// `state`), logging to `hub-restarted.log` in `state`.
pub fn kill_and_restart_hub(hub: &mut Running, state: &Path) {
    hub.0.kill().unwrap();
    hub.0.wait().unwrap();
    *hub = start_hub(
        &state.join("hub-sa.kubeconfig"),
        &state.join("hub-restarted.log"),
        &[
            "--plugin-cache-dir",
            state.join("plugin-artifacts").to_str().unwrap(),
        ],
    );
}

/// The digest `flotilla plugin push` printed (`digest: sha256:…`).
pub fn pushed_digest(pushed: &str) -> String {
    pushed
        .lines()
        .find_map(|l| l.strip_prefix("digest:"))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no digest in:\n{pushed}"))
        .to_owned()
}

/// Pushes helloworld to `registry` as its author does and registers the pushed digest as the
/// hub admin does; returns the reference and the digest.
pub fn register_helloworld(
    state: &Path,
    admin: &Path,
    registry: &flotilla_testing::registry::Registry,
) -> (String, String) {
    register_plugin(
        state,
        admin,
        registry,
        "helloworld",
        flotilla_test_plugins::HELLOWORLD,
    )
}

/// Pushes the component at `wasm` to `registry` as `addons/<name>:v1` and registers the pushed
/// digest as AddOnPlugin `name`; returns the reference and the digest.
pub fn register_plugin(
    state: &Path,
    admin: &Path,
    registry: &flotilla_testing::registry::Registry,
    name: &str,
    wasm: &str,
) -> (String, String) {
    let reference = registry.reference(&format!("addons/{name}"), "v1");
    let pushed = ok(flotilla_at(
        state,
        admin,
        &["plugin", "push", wasm, &reference, "--insecure"],
    ));
    let digest = pushed_digest(&pushed);
    ok(flotilla_at(
        state,
        admin,
        &[
            "plugin",
            "register",
            name,
            "--oci",
            &reference,
            "--digest",
            &digest,
            "--insecure",
        ],
    ));
    (reference, digest)
}

/// The `/metrics` of a `flotilla hub` or klusterlet at `ops` (`host:port`), parsed.
pub async fn scrape_metrics(ops: &str) -> prometheus_parse::Scrape {
    let text = reqwest::get(format!("http://{ops}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap()
}

/// What every add-on end-to-end test starts from: a hub and clusters `cluster1` and
/// `cluster2`, each on its own control plane; the real `flotilla hub` as deploy/hub's service
/// account and a real klusterlet per cluster (`join --local`, with `join_args`), both accepted;
/// a local OCI registry with helloworld pushed to it and registered by digest.
///
/// Fields drop in order: the processes stop before their control planes do.
pub struct Fleet {
    /// `flotilla hub`.
    pub hub_process: Running,
    klusterlets: Klusterlets,
    /// The nodes of the clusters that have one (`Fleet::start_on_nodes`), dropped before the
    /// control planes.
    pub nodes: Vec<flotilla_testing::Node>,
    /// The hub's control plane.
    pub hub: flotilla_testing::ControlPlane,
    /// `cluster1`'s control plane.
    pub one: flotilla_testing::ControlPlane,
    /// `cluster2`'s control plane.
    pub two: flotilla_testing::ControlPlane,
    /// The OCI registry.
    pub registry: flotilla_testing::registry::Registry,
    /// Where helloworld was pushed.
    pub reference: String,
    /// The digest it was registered with.
    pub digest: String,
    state: tempfile::TempDir,
}

impl Fleet {
    /// Starts it all; control planes are named `<prefix>-hub`, `<prefix>-cluster1`, ….
    pub async fn start(prefix: &str, join_args: &[&str]) -> Self {
        Self::start_with(prefix, join_args, false).await
    }

    /// [`Fleet::start`] where `cluster1` and `cluster2` each have a real node (so add-on
    /// agents run as pods, their images pulled from the fleet's registry) and the klusterlets
    /// join through the hub's `kubernetes` Service address, which the agents' pods reach.
    pub async fn start_on_nodes(prefix: &str, join_args: &[&str]) -> Self {
        Self::start_inner(prefix, join_args, false, true).await
    }

    /// [`Fleet::start`]; `as_deployed` also has the hub elect a leader through its Lease and
    /// the klusterlets run as deploy/klusterlet's service account, as deployed.
    pub async fn start_with(prefix: &str, join_args: &[&str], as_deployed: bool) -> Self {
        Self::start_inner(prefix, join_args, as_deployed, false).await
    }

    async fn start_inner(prefix: &str, join_args: &[&str], as_deployed: bool, with_nodes: bool) -> Self {
        use flotilla_testing::{ControlPlane, Node, registry::Registry};
        let (hub, one, two, registry) = tokio::join!(
            ControlPlane::start(format!("{prefix}-hub")),
            ControlPlane::start(format!("{prefix}-cluster1")),
            ControlPlane::start(format!("{prefix}-cluster2")),
            Registry::start()
        );
        let (hub, one, two, registry) = (hub.unwrap(), one.unwrap(), two.unwrap(), registry.unwrap());
        let mut nodes = Vec::new();
        let mut hub_server = hub.server().to_owned();
        if with_nodes {
            let (first, second) = tokio::join!(Node::start(&one, &registry), Node::start(&two, &registry));
            for mut node in [first.unwrap(), second.unwrap()] {
                node.route(&hub).unwrap();
                nodes.push(node);
            }
            hub_server = format!("https://{}:443", hub.service_address());
        }
        let state_dir = tempfile::tempdir().unwrap();
        let klusterlets = Klusterlets(state_dir.path().to_owned());
        let state = state_dir.path();
        let admin = hub.admin_kubeconfig();

        let token = hub_token(&ok(flotilla_at(state, admin, &["init"])));
        let identity = hub_service_account(&hub, state);
        let cache = state.join("plugin-artifacts");
        let hub_args = ["--plugin-cache-dir", cache.to_str().unwrap()];
        let hub_process = if as_deployed {
            spawn_hub(&identity, &state.join("hub.log"), &hub_args)
        } else {
            start_hub(&identity, &state.join("hub.log"), &hub_args)
        };
        for (name, cp) in [("cluster1", &one), ("cluster2", &two)] {
            let managed = if as_deployed {
                klusterlet_service_account(cp, state, name)
            } else {
                cp.admin_kubeconfig().to_owned()
            };
            ok(join_local(state, &managed, &hub_server, &token, name, join_args));
        }
        ok(flotilla_at(
            state,
            admin,
            &[
                "accept",
                "--wait",
                "--clusters",
                "cluster1,cluster2",
                "--timeout",
                "120s",
            ],
        ));
        let (reference, digest) = register_helloworld(state, admin, &registry);
        Self {
            hub_process,
            klusterlets,
            nodes,
            hub,
            one,
            two,
            registry,
            reference,
            digest,
            state: state_dir,
        }
    }

    /// The state directory of the CLI commands and the klusterlets.
    pub fn state(&self) -> &Path {
        self.state.path()
    }

    /// The hub's admin kubeconfig.
    pub fn admin(&self) -> &Path {
        self.hub.admin_kubeconfig()
    }

    /// The hub's metrics and health address (`host:port`), as its log announces it.
    pub async fn hub_ops(&self) -> String {
        ops_address(&self.state().join("hub.log")).await
    }

    /// The metrics and health address of `cluster`'s klusterlet.
    pub async fn klusterlet_ops(&self, cluster: &str) -> String {
        ops_address(
            &self
                .state()
                .join("klusterlets")
                .join(cluster)
                .join("klusterlet.log"),
        )
        .await
    }
}

/// The metrics and health address (`host:port`) a `flotilla hub` or `klusterlet` announced in
/// `log`, waiting for it.
pub async fn ops_address(log: &Path) -> String {
    for _ in 0..600 {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(rest) = text.split("metrics and health at http://").nth(1) {
            return rest.split_whitespace().next().unwrap().to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("{} never announced its metrics address", log.display());
}
