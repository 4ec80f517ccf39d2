//! Components the host must refuse at load, each with an error naming why: not a component,
//! a foreign contract version, undeclared imports, a lying or trapping `describe`, a digest that
//! does not match its pin. Inputs that are not plugin crates are built here, at test time.

use crate::common;

use common::{component_from_wit, contract_wit, hostile_limits, load, runtime};
use flotilla_test_plugins as plugins;
use flotilla_wasm::{Error, Fault, Limits, ValidationError};

async fn refuse(bytes: Vec<u8>) -> Error {
    runtime()
        .load("refused", bytes, Limits::default())
        .await
        .expect_err("the host refused the component")
}

#[tokio::test]
async fn a_core_module_is_refused_as_not_a_component() {
    let module = wat::parse_str(r#"(module (func (export "describe")))"#).unwrap();
    let err = refuse(module).await;
    assert!(
        matches!(err, Error::Validate(ValidationError::NotAComponent)),
        "{err}"
    );
    assert_eq!(err.fault(), Fault::Validation);
    assert!(err.to_string().contains("not a component"), "{err}");
}

#[tokio::test]
async fn bytes_that_are_not_wasm_are_refused() {
    let err = refuse(b"#!/bin/sh\nrm -rf /\n".to_vec()).await;
    assert!(matches!(err, Error::Validate(ValidationError::NotWasm)), "{err}");
}

#[tokio::test]
async fn a_component_for_an_unknown_contract_version_is_refused() {
    let wit = contract_wit().replace("flotilla:addon@0.1.0", "flotilla:addon@0.9.0");
    let err = refuse(component_from_wit(&[], &wit, "addon-plugin")).await;
    let Error::Validate(ValidationError::UnsupportedWitVersion { found, supported }) = &err else {
        panic!("not a version refusal: {err}");
    };
    assert_eq!(found, "0.9.0");
    assert_eq!(supported, flotilla_wasm::validate::SUPPORTED_WIT);
}

#[tokio::test]
async fn a_newer_patch_release_is_inside_the_window() {
    // 0.1.5 passes the version check and links against the 0.1.0 host; the dummy module then
    // traps in describe, which is what refuses it.
    let wit = contract_wit().replace("flotilla:addon@0.1.0", "flotilla:addon@0.1.5");
    let err = refuse(component_from_wit(&[], &wit, "addon-plugin")).await;
    assert!(
        matches!(err, Error::Validate(ValidationError::DescribeFailed { .. })),
        "{err}"
    );
}

#[tokio::test]
async fn a_component_needing_undeclared_imports_is_refused_with_their_names() {
    let acme = "package acme:net@1.0.0;\n/// Exfiltration.\ninterface exfil {\n  /// Sends.\n  send: func(data: string);\n}\n";
    let wit = contract_wit().replace("  import host;", "  import host;\n  import acme:net/exfil@1.0.0;");
    let err = refuse(component_from_wit(&[acme], &wit, "addon-plugin")).await;
    let Error::Validate(ValidationError::ForbiddenImports { imports }) = &err else {
        panic!("not an import refusal: {err}");
    };
    assert_eq!(imports, &["acme:net/exfil@1.0.0".to_owned()]);
}

#[tokio::test]
async fn a_component_without_the_hooks_export_is_refused() {
    let wit = "package acme:other@1.0.0;\n/// X.\ninterface x {\n  /// F.\n  f: func();\n}\n/// W.\nworld w {\n  export x;\n}\n";
    let err = refuse(component_from_wit(&[], wit, "w")).await;
    assert!(
        matches!(err, Error::Validate(ValidationError::MissingHooks { .. })),
        "{err}"
    );
}

#[tokio::test]
async fn a_describe_that_claims_a_kubernetes_signer_is_refused() {
    let err = load("liar", plugins::HOSTILE_LIAR, hostile_limits())
        .await
        .unwrap_err();
    let Error::Validate(ValidationError::InvalidDescribe { reason }) = &err else {
        panic!("not a describe refusal: {err}");
    };
    assert!(reason.contains("kubernetes.io/kube-apiserver-client"), "{reason}");
    assert_eq!(err.fault(), Fault::Validation);
}

#[tokio::test]
async fn a_describe_that_traps_is_refused_with_the_trap() {
    let err = load("describe-trap", plugins::HOSTILE_DESCRIBE_TRAP, hostile_limits())
        .await
        .unwrap_err();
    let Error::Validate(ValidationError::DescribeFailed { source }) = &err else {
        panic!("not a describe failure: {err}");
    };
    assert_eq!(source.fault(), Fault::Trap, "{source}");
}

#[tokio::test]
async fn limits_above_the_engine_ceilings_are_refused() {
    let bytes = std::fs::read(plugins::HELLOWORLD).unwrap();
    let limits = Limits {
        memory_bytes: 64 << 30,
        ..Limits::default()
    };
    let err = runtime().load("helloworld", bytes, limits).await.unwrap_err();
    assert!(matches!(err, Error::LimitsOutOfRange { .. }), "{err}");
}
