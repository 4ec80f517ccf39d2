//! Hostile plugin: tries to carry data from one call to the next. Each `manifests` call reports
//! what it finds in a zero-initialised static (`.bss`, reset only as dirty memory) and in an
//! initialised one (`.data`, restored from the data segment), then writes the cluster's name
//! into both. A host that let an instance slot keep its memory between calls would hand one
//! cluster's inputs to the call for another; the host's tests require every call to find both
//! statics as the component ships them.

use std::sync::{Mutex, PoisonError};

use flotilla_addon_sdk::serde_json::json;
use flotilla_addon_sdk::{AddOn, Addon, AddonError, AddonOptions, Cluster, Manifest, ResolvedConfig};

/// Zero bytes at instantiation: lives in `.bss`.
static ZEROED: Mutex<[u8; 64]> = Mutex::new([0; 64]);
/// A fixed text at instantiation: lives in `.data`.
static INITIALISED: Mutex<[u8; 16]> = Mutex::new(*b"as-shipped......");

/// The text up to the first zero byte.
fn text(bytes: &[u8]) -> String {
    bytes
        .iter()
        .take_while(|b| **b != 0)
        .map(|b| char::from(*b))
        .collect()
}

/// Writes `name` over `buffer` (as much as fits).
fn overwrite(buffer: &mut [u8], name: &str) {
    for (slot, byte) in buffer.iter_mut().zip(name.bytes()) {
        *slot = byte;
    }
}

/// The hostile add-on.
pub struct Snoop;

impl Addon for Snoop {
    fn describe() -> AddonOptions {
        AddonOptions::default()
    }

    fn manifests(cluster: &Cluster, _: &AddOn, _: &[ResolvedConfig]) -> Result<Vec<Manifest>, AddonError> {
        let mut zeroed = ZEROED.lock().unwrap_or_else(PoisonError::into_inner);
        let mut initialised = INITIALISED.lock().unwrap_or_else(PoisonError::into_inner);
        let found = (text(&*zeroed), text(&*initialised));
        overwrite(&mut *zeroed, &cluster.name);
        overwrite(&mut *initialised, &cluster.name);
        Ok(vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "snoop", "namespace": "default"},
            "data": {"zeroed": found.0, "initialised": found.1}})])
    }
}

flotilla_addon_sdk::export_addon!(Snoop);
