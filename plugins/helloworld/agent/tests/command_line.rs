//! The agent's command line as the helloworld plugin's Deployment passes it, run as a program.
//!
//! Its behaviour in a cluster is shown end to end by the tests that run it in pods on real nodes
//! (`host/cli/tests/nodes_e2e.rs`); here only what needs no cluster: the Deployment's arguments
//! parse, and without a cluster the agent stops with an error that says what it could not reach.

use std::process::{Command, Output};

/// The arguments of the plugin's Deployment (`plugins/helloworld/src/lib.rs`).
const DEPLOYMENT_ARGS: &[&str] = &[
    "--hub-kubeconfig=/var/run/hub/kubeconfig",
    "--cluster-name=cluster1",
    "--addon-namespace=open-cluster-management-agent-addon",
];

/// Runs the agent outside any cluster: no service account, no kubeconfig.
fn run_outside_a_cluster(args: &[&str]) -> Output {
    let home = std::env::temp_dir().join(format!("helloworld-agent-test-{}", std::process::id()));
    std::fs::create_dir_all(&home).expect("create an empty home directory");
    let output = Command::new(env!("CARGO_BIN_EXE_helloworld-agent"))
        .args(args)
        .env_clear()
        .env("HOME", &home)
        .env("KUBECONFIG", home.join("absent"))
        .output()
        .expect("run helloworld-agent");
    let _ = std::fs::remove_dir_all(&home);
    output
}

#[test]
fn the_deployments_arguments_parse_and_without_a_cluster_it_says_what_it_could_not_reach() {
    let output = run_outside_a_cluster(DEPLOYMENT_ARGS);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "it ran without a cluster: {stderr}");
    assert!(
        stderr.contains("connect to the managed cluster"),
        "the error does not name what failed: {stderr}"
    );
}

#[test]
fn a_missing_argument_is_a_usage_error_naming_it() {
    let output = run_outside_a_cluster(&DEPLOYMENT_ARGS[..2]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "not a usage error: {stderr}");
    assert!(
        stderr.contains("--addon-namespace"),
        "the missing argument is not named: {stderr}"
    );
}
