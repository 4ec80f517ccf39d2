//! `flotilla controlplane up|kubeconfig|down` against the real binary: a named control plane
//! runs in the background, serves kubectl, and `down` leaves no process or port behind — not even
//! a `join --local` klusterlet attached to it.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::{path::Path, process::Command};

fn flotilla(state_dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(args)
        .env("FLOTILLA_STATE_DIR", state_dir)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run flotilla")
}

fn stdout(output: &std::process::Output) -> String {
    assert!(
        output.status.success(),
        "flotilla failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Whether `pid` runs; a zombie counts as gone (init here may not reap detached processes).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_owned))
        })
        .is_some_and(|state| state != "Z" && state != "X")
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct State {
    server: String,
    binary: std::path::PathBuf,
    pids: Vec<(String, u32)>,
}

#[derive(serde::Deserialize)]
struct Klusterlet {
    pid: u32,
}

#[test]
fn controlplane_up_serves_kubectl_and_down_frees_everything() {
    let state_dir = tempfile::tempdir().unwrap();
    let kubeconfig = stdout(&flotilla(
        state_dir.path(),
        &["controlplane", "up", "--name", "cli-test"],
    ));
    assert!(
        Path::new(&kubeconfig).is_file(),
        "up must print the kubeconfig path, got {kubeconfig:?}"
    );

    // A second `up` finds the running one instead of starting another.
    let again = stdout(&flotilla(
        state_dir.path(),
        &["controlplane", "up", "--name", "cli-test"],
    ));
    assert_eq!(again, kubeconfig);
    let printed = stdout(&flotilla(
        state_dir.path(),
        &["controlplane", "kubeconfig", "--name", "cli-test"],
    ));
    assert_eq!(printed, kubeconfig);

    let state_file = state_dir.path().join("controlplanes/cli-test/state.json");
    let state: State = serde_json::from_str(&std::fs::read_to_string(&state_file).unwrap()).unwrap();
    let crds = Command::new(&state.binary)
        .args(["kubectl", "--kubeconfig", &kubeconfig, "get", "crd", "-o", "name"])
        .output()
        .unwrap();
    assert!(crds.status.success(), "{}", String::from_utf8_lossy(&crds.stderr));
    let crds = String::from_utf8_lossy(&crds.stdout);
    assert!(
        crds.contains("managedclusters.cluster.open-cluster-management.io"),
        "{crds}"
    );
    assert!(crds.contains("addonplugins.plugins.flotilla.dev"), "{crds}");

    // A local klusterlet of this cluster, joined to a hub that never answers: it retries until
    // `down` stops it with the control plane it serves.
    let ca = state_dir.path().join("controlplanes/cli-test/pki/ca.crt");
    stdout(&flotilla(
        state_dir.path(),
        &[
            "join",
            "--kubeconfig",
            &kubeconfig,
            "--hub-token",
            "abcdef.0123456789abcdef",
            "--hub-apiserver",
            "https://127.0.0.1:9",
            "--hub-ca-file",
            ca.to_str().unwrap(),
            "--cluster-name",
            "cluster1",
            "--local",
        ],
    ));
    let klusterlet: Klusterlet = serde_json::from_str(
        &std::fs::read_to_string(state_dir.path().join("klusterlets/cluster1/state.json")).unwrap(),
    )
    .unwrap();
    assert!(
        running(klusterlet.pid),
        "the local klusterlet must run after join"
    );

    let down = flotilla(state_dir.path(), &["controlplane", "down", "--name", "cli-test"]);
    stdout(&down);
    assert!(
        !running(klusterlet.pid),
        "the klusterlet ({}) of the stopped control plane still runs",
        klusterlet.pid
    );
    assert!(
        String::from_utf8_lossy(&down.stderr)
            .contains("stopped the local klusterlet of cluster \"cluster1\""),
        "down must say which klusterlet it stopped: {}",
        String::from_utf8_lossy(&down.stderr)
    );
    for (component, pid) in &state.pids {
        assert!(!running(*pid), "{component} ({pid}) still running after down");
    }
    // The port is free: nothing answers there with this control plane's credentials. (Another
    // process on a busy machine may bind the port again at once, so a bare connect would not say.)
    let gone = Command::new(&state.binary)
        .args([
            "kubectl",
            "--kubeconfig",
            &kubeconfig,
            "--request-timeout=5s",
            "get",
            "namespaces",
        ])
        .output()
        .unwrap();
    assert!(
        !gone.status.success(),
        "the control plane at {} still answers after down",
        state.server
    );
    assert!(!state_file.exists());

    let missing = flotilla(state_dir.path(), &["controlplane", "down", "--name", "cli-test"]);
    assert!(
        !missing.status.success(),
        "down of a stopped control plane must fail"
    );
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no control plane named"));
}

#[test]
fn an_invalid_control_plane_name_is_refused_with_a_reason() {
    let state_dir = tempfile::tempdir().unwrap();
    let output = flotilla(state_dir.path(), &["controlplane", "up", "--name", "Not_Valid"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a valid name"));
}
