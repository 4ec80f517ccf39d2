//! The `flotilla` binary's integration tests, one module per scenario, in one test binary: one
//! link instead of one per file, and scenarios that mostly wait on control planes, leases and
//! pods overlap instead of running one after another (`cargo test` runs test binaries in turn,
//! the tests of one binary in parallel).
//!
//! Run one scenario with `cargo test -p flotilla --test integration <module>::`.

mod common;

mod accept_cli;
mod addon_cli;
mod addon_customized_health_e2e;
mod addon_e2e;
mod addon_faults_e2e;
mod addon_health_e2e;
mod addon_registration_e2e;
mod addon_rollout_e2e;
mod addon_template_e2e;
mod controlplane_cli;
mod everyday_cli;
mod faults_certificate;
mod faults_outage;
mod faults_restart;
mod gateway_e2e;
mod hosted_e2e;
mod hub_lifecycle_cli;
mod hub_ops;
mod init_deploy;
mod join_dry_run;
mod least_privilege;
mod multihub_e2e;
mod nodes_e2e;
mod placement_by_score_e2e;
mod placement_cli;
mod plugin_cli;
mod plugin_hub_e2e;
mod proxy_e2e;
mod registration_e2e;
mod shutdown;
mod up;
mod webhook_replicas;
mod work_cli;
