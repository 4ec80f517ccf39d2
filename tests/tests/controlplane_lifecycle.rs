//! Local control planes: several run side by side without sharing anything, and every process
//! dies with its handle — on drop, on a panic, and when the harness itself disappears.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::{
    io::Write,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use flotilla_testing::{ControlPlane, binary::controlplane_binary};
use flotilla_tests::{port_is_listening, process_exists};
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, api::PostParams};

fn namespace(name: &str) -> Namespace {
    serde_json::from_value(serde_json::json!({ "metadata": { "name": name } })).unwrap()
}

#[tokio::test]
async fn two_control_planes_are_independent_and_dropping_one_leaves_nothing_behind() {
    let (alpha, beta) = tokio::join!(ControlPlane::start("alpha"), ControlPlane::start("beta"));
    let (alpha, beta) = (alpha.unwrap(), beta.unwrap());
    assert_ne!(alpha.port(), beta.port());
    assert_ne!(alpha.ca_pem(), beta.ca_pem(), "each control plane has its own CA");

    let alpha_ns: Api<Namespace> = Api::all(alpha.admin_client().await.unwrap());
    let beta_ns: Api<Namespace> = Api::all(beta.admin_client().await.unwrap());
    alpha_ns
        .create(&PostParams::default(), &namespace("only-in-alpha"))
        .await
        .unwrap();
    assert!(alpha_ns.get_opt("only-in-alpha").await.unwrap().is_some());
    assert!(
        beta_ns.get_opt("only-in-alpha").await.unwrap().is_none(),
        "beta must not see alpha's objects"
    );

    // alpha's credentials mean nothing to beta.
    let alpha_admin_yaml = std::fs::read_to_string(alpha.admin_kubeconfig()).unwrap();
    let crossed = alpha_admin_yaml.replace(alpha.server(), beta.server());
    let crossed = flotilla_testing::kubeconfig::client_from_yaml(&crossed)
        .await
        .unwrap();
    assert!(
        crossed.apiserver_version().await.is_err(),
        "beta must not trust alpha's CA"
    );

    let pids = alpha.pids();
    let port = alpha.port();
    assert_eq!(pids.len(), 3);
    drop(alpha);
    for pid in pids {
        assert!(!process_exists(pid), "process {pid} outlived its control plane");
    }
    assert!(!port_is_listening(port), "port {port} still listening after drop");
    assert!(
        beta_ns.get_opt("default").await.unwrap().is_some(),
        "beta must keep running"
    );
}

#[test]
fn a_panicking_test_leaves_no_processes() {
    let (sender, receiver) = std::sync::mpsc::channel();
    let outcome = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let cp = ControlPlane::start("doomed").await.unwrap();
            sender.send((cp.pids(), cp.port())).unwrap();
            panic!("deliberate panic while a control plane runs");
        })
    })
    .join();
    assert!(outcome.is_err(), "the thread was meant to panic");
    let (pids, port) = receiver.recv().unwrap();
    for pid in pids {
        assert!(!process_exists(pid), "process {pid} outlived a panicking test");
    }
    assert!(!port_is_listening(port));
}

/// The last line of defence: a harness killed outright (no unwinding, no Drop) closes the
/// components' stdin, and they exit on their own.
#[test]
fn components_exit_when_the_harness_closes_their_stdin() {
    let binary = controlplane_binary().unwrap();
    let dir = tempfile_dir();
    let mut child = Command::new(binary)
        .args(["etcd", &format!("--data-dir={}", dir.join("etcd").display())])
        .arg("--listen-client-url=http://127.0.0.1:0")
        .arg("--listen-peer-url=http://127.0.0.1:0")
        .env("FLOTILLA_EXIT_ON_STDIN_EOF", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"still here\n").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "etcd must run while its stdin is open"
    );
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "etcd did not exit after stdin closed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(dir);
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("flotilla-stdin-eof-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
