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
