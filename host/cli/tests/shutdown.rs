//! `flotilla hub` and `flotilla klusterlet` stop cleanly on SIGTERM, which is how Kubernetes
//! stops a pod: exit status 0, promptly, rather than being killed after the grace period.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use flotilla_testing::ControlPlane;
use nix::{sys::signal, unistd::Pid};

/// Starts `flotilla ARGS --kubeconfig K`, waits until it prints a line containing `ready`, sends
/// SIGTERM and returns whether it exited with success within a minute.
fn stops_on_sigterm(kubeconfig: &std::path::Path, args: &[&str], ready: &str) -> bool {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let mut seen = Vec::new();
    loop {
        let Some(Ok(line)) = lines.next() else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} ended before {ready:?}:\n{}", seen.join("\n"));
        };
        let found = line.contains(ready);
        seen.push(line);
        if found {
            break;
        }
    }
    // Keep draining its output so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    signal::kill(Pid::from_raw(child.id() as i32), signal::Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status.success();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

#[tokio::test]
async fn hub_and_klusterlet_exit_with_success_on_sigterm() {
    let cp = ControlPlane::start("shutdown").await.unwrap();
    let kubeconfig = cp.admin_kubeconfig().to_owned();
    let hub = tokio::task::spawn_blocking({
        let kubeconfig = kubeconfig.clone();
        move || {
            stops_on_sigterm(
                &kubeconfig,
                &["hub", "--disable-leader-election", "--no-plugin-host"],
                "running registration",
            )
        }
    });
    assert!(
        hub.await.unwrap(),
        "flotilla hub did not exit with success on SIGTERM"
    );
    // Without a bootstrap kubeconfig the klusterlet waits for one; SIGTERM must still end it.
    let klusterlet = tokio::task::spawn_blocking(move || {
        stops_on_sigterm(
            &kubeconfig,
            &["klusterlet", "--cluster-name", "c1"],
            "running the registration agent",
        )
    });
    assert!(
        klusterlet.await.unwrap(),
        "flotilla klusterlet did not exit with success on SIGTERM"
    );
}
