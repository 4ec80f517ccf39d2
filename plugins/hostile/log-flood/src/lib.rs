//! Hostile plugin: floods every output channel — 20 000 lines through the `log` import, then
//! stdout and stderr until they refuse more — and still answers correctly. The host must keep
//! its own memory and logs bounded and return the answer.

use std::io::Write;

use flotilla_addon_sdk::serde_json::json;
use flotilla_addon_sdk::{AddOn, Addon, AddonError, AddonOptions, Cluster, Manifest, ResolvedConfig, log};

/// Lines sent through the `log` import per call.
pub const LOG_LINES: usize = 20_000;

fn flood(stream: &mut dyn Write) {
    let line = [b'y'; 1024];
    // Stops at the first refused write (the host's capture is bounded).
    for _ in 0..16_384 {
        if stream.write_all(&line).is_err() {
            break;
        }
    }
}

/// The hostile add-on.
pub struct LogFlood;

impl Addon for LogFlood {
    fn describe() -> AddonOptions {
        AddonOptions::default()
    }

    fn manifests(
        cluster: &Cluster,
        addon: &AddOn,
        _: &[ResolvedConfig],
    ) -> Result<Vec<Manifest>, AddonError> {
        let line = "z".repeat(1024);
        for _ in 0..LOG_LINES {
            log::warn(&line);
        }
        flood(&mut std::io::stdout());
        flood(&mut std::io::stderr());
        Ok(vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "still-here", "namespace": addon.install_namespace},
            "data": {"cluster": cluster.name}})])
    }
}

flotilla_addon_sdk::export_addon!(LogFlood);
