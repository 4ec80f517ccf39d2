//! Hostile plugin: `describe` answers with 100 000 supported configs whose strings all point at
//! one 8 MiB buffer. That takes ~12 MiB of guest memory, but a host that copied every string
//! while lifting the answer would allocate 800 GB. It implements the generated `Guest` trait
//! directly, below the SDK, which never aliases; the generated bindings exist for wasm only.
#![cfg(target_arch = "wasm32")]

use flotilla_addon_sdk::bindings::exports::flotilla::addon::hooks::Guest;
use flotilla_addon_sdk::bindings::flotilla::addon::types as wit;

/// Strings in the answer.
const COUNT: usize = 100_000;
/// Bytes of the one buffer they share.
const LEN: usize = 8 << 20;

/// `COUNT` strings sharing one leaked buffer of `LEN` bytes. The canonical ABI lowering writes
/// each string's pointer and length without copying or freeing it.
fn aliased() -> Vec<String> {
    let buffer: &'static mut str = String::leak("x".repeat(LEN));
    let (ptr, len) = (buffer.as_mut_ptr(), buffer.len());
    (0..COUNT)
        // SAFETY: deliberately not: every String claims the same buffer. The guest never frees
        // them; the host refuses the answer before the post-return would.
        .map(|_| unsafe { String::from_raw_parts(ptr, len, len) })
        .collect()
}

/// The hostile add-on.
pub struct Aliased;

impl Guest for Aliased {
    fn describe() -> wit::AddonOptions {
        let configs = aliased()
            .into_iter()
            .map(|group| wit::ConfigType {
                group,
                resource: String::new(),
                default_config: None,
            })
            .collect();
        wit::AddonOptions {
            registrations: Vec::new(),
            health: wit::HealthMode::None,
            supported_configs: configs,
            default_install_namespace: None,
        }
    }

    fn manifests(
        _: wit::Cluster,
        _: wit::Addon,
        _: Vec<wit::ResolvedConfig>,
    ) -> Result<Vec<wit::Manifest>, wit::PluginError> {
        Ok(aliased())
    }

    fn approve_csr(_: wit::Cluster, _: wit::Addon, _: wit::Csr) -> wit::CsrDecision {
        wit::CsrDecision::Approve
    }

    fn hub_permissions(_: wit::Cluster, _: wit::Addon) -> Result<Vec<wit::Manifest>, wit::PluginError> {
        Ok(aliased())
    }

    fn probe_health(_: wit::Cluster, _: wit::Addon, _: Vec<wit::FeedbackField>) -> wit::HealthResult {
        wit::HealthResult {
            status: wit::HealthStatus::Unknown,
            message: String::new(),
        }
    }
}

flotilla_addon_sdk::bindings::__export_addon_plugin!(Aliased with_types_in flotilla_addon_sdk::bindings);
