//! The agent's command line as the plugin's Deployment passes it, run as a program: the
//! arguments parse, and without a cluster the agent stops with an error that says what it
//! could not reach. Its behaviour against real clusters is in `tokens_on_a_real_hub.rs`.

use std::process::{Command, Output};

/// The arguments of the plugin's Deployment (`plugins/managed-serviceaccount/src/lib.rs`).
const DEPLOYMENT_ARGS: &[&str] = &[
    "--hub-kubeconfig=/var/run/hub/kubeconfig",
    "--cluster-name=cluster1",
    "--addon-namespace=open-cluster-management-agent-addon",
    "--addon-name=managed-serviceaccount",
    "--check-period=60",
];

/// Runs the agent outside any cluster: no service account, no kubeconfig.
fn run_outside_a_cluster(args: &[&str]) -> Output {
    let home = tempfile::tempdir().expect("create an empty home directory");
    Command::new(env!("CARGO_BIN_EXE_managed-serviceaccount-agent"))
        .args(args)
        .env_clear()
        .env("HOME", home.path())
        .env("KUBECONFIG", home.path().join("absent"))
        .output()
        .expect("run managed-serviceaccount-agent")
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

#[test]
fn a_zero_check_period_is_refused() {
    let mut args = DEPLOYMENT_ARGS[..4].to_vec();
    args.push("--check-period=0");
    let output = run_outside_a_cluster(&args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "not a usage error: {stderr}");
    assert!(
        stderr.contains("--check-period"),
        "the argument is not named: {stderr}"
    );
}
