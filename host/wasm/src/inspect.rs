//! What a plugin file is, without compiling it: kind, digest, size, top-level imports and
//! exports, the contract version it targets, and whether the host's name-level checks accept it.
//!
//! Used by `flotilla plugin inspect` and `flotilla plugin push` (the CNCF Wasm OCI config lists a
//! component's imports and exports). Reading names with `wasmparser` takes milliseconds even for a
//! 10 MiB component, where compiling takes seconds; the full check (types, `describe`) is
//! [`crate::Runtime::load`].

use serde::Serialize;
use wasmparser::{Encoding, Parser, Payload};

use crate::validate::{SUPPORTED_WIT, check_names};
use crate::{Digest, ValidationError};

/// What kind of file it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WasmKind {
    /// A WebAssembly component (what plugins are).
    Component,
    /// A core WebAssembly module (refused as a plugin).
    CoreModule,
    /// Not WebAssembly.
    NotWasm,
}

/// The result of [`inspect`].
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inspection {
    /// `sha256:<hex>` of the bytes: the value for `spec.digest`.
    pub digest: String,
    /// Size in bytes.
    pub size: usize,
    /// Component, core module or not wasm.
    pub kind: WasmKind,
    /// The contract version from the `flotilla:addon/hooks@<v>` export, if there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wit_version: Option<String>,
    /// The window of contract versions this host runs.
    pub supported_wit: &'static str,
    /// Top-level import names (interfaces and functions), in file order.
    pub imports: Vec<String>,
    /// Top-level export names, in file order.
    pub exports: Vec<String>,
    /// Whether the host's name-level checks accept it, and if not why.
    pub accepted: bool,
    /// Why the host would refuse it, when it would.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
}

/// Reads `bytes` without compiling them. Malformed wasm is reported as a refusal, not an error.
pub fn inspect(bytes: &[u8]) -> Inspection {
    let digest = Digest::of(bytes).to_string();
    let mut out = Inspection {
        digest,
        size: bytes.len(),
        kind: WasmKind::NotWasm,
        wit_version: None,
        supported_wit: SUPPORTED_WIT,
        imports: Vec::new(),
        exports: Vec::new(),
        accepted: false,
        refusal: None,
    };
    match crate::validate::check_header(bytes) {
        Err(ValidationError::NotAComponent) => {
            out.kind = WasmKind::CoreModule;
            out.refusal = Some(ValidationError::NotAComponent.to_string());
            return out;
        }
        Err(e) => {
            out.refusal = Some(e.to_string());
            return out;
        }
        Ok(()) => out.kind = WasmKind::Component,
    }
    match names(bytes) {
        Ok((imports, exports)) => {
            out.imports = imports;
            out.exports = exports;
        }
        Err(e) => {
            out.refusal = Some(format!("malformed component: {e}"));
            return out;
        }
    }
    let hooks_prefix = format!("{}/hooks@", crate::validate::WIT_PACKAGE);
    out.wit_version = out
        .exports
        .iter()
        .find_map(|e| e.strip_prefix(&hooks_prefix))
        .map(str::to_owned);
    match check_names(&out.exports, &out.imports) {
        Ok(_) => out.accepted = true,
        Err(e) => out.refusal = Some(e.to_string()),
    }
    out
}

/// Top-level (depth 1) import and export names of a component.
fn names(bytes: &[u8]) -> Result<(Vec<String>, Vec<String>), wasmparser::BinaryReaderError> {
    let (mut imports, mut exports) = (Vec::new(), Vec::new());
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload? {
            Payload::Version { encoding, .. } => {
                depth += 1;
                if depth == 1 && encoding != Encoding::Component {
                    break;
                }
            }
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 1 => {
                for import in reader {
                    imports.push(import?.name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(reader) if depth == 1 => {
                for export in reader {
                    exports.push(export?.name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    Ok((imports, exports))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_modules_and_other_bytes_are_named_and_refused() {
        let module = b"\0asm\x01\0\0\0";
        let i = inspect(module);
        assert_eq!(i.kind, WasmKind::CoreModule);
        assert!(!i.accepted);
        let i = inspect(b"#!/bin/sh");
        assert_eq!(i.kind, WasmKind::NotWasm);
        assert!(i.refusal.unwrap().contains("not a WebAssembly"));
        assert_eq!(inspect(b"x").digest, Digest::of(b"x").to_string());
    }
}
