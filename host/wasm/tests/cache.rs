//! The compiled-artifact cache: a second load (after a restart) deserializes instead of
//! compiling; corrupted or foreign entries are detected, removed and recompiled, never trusted.

use std::path::Path;

// The smallest plugin that renders something: each test compiles it a few times.
use flotilla_test_plugins::REVISION_B as PLUGIN;
use flotilla_wasm::types::{Addon, Cluster};
use flotilla_wasm::{CacheResult, Digest, Limits, Runtime, RuntimeConfig};
use sha2::{Digest as _, Sha256};

fn runtime_with_cache(dir: &Path) -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_dir: Some(dir.to_owned()),
        ..RuntimeConfig::default()
    })
    .expect("runtime builds")
}

/// Loads the plugin on a fresh runtime (a "restart"), checks it works, returns the cache result.
async fn load_fresh(dir: &Path) -> (Runtime, CacheResult) {
    let runtime = runtime_with_cache(dir);
    let plugin = runtime
        .load(
            "hello",
            std::fs::read(PLUGIN).expect("plugin component was built"),
            Limits::default(),
        )
        .await
        .expect("the plugin loads");
    let cluster = Cluster {
        name: "c1".into(),
        labels: vec![],
        annotations: vec![],
        claims: vec![],
        kubernetes_version: String::new(),
    };
    let addon = Addon {
        name: "helloworld".into(),
        install_namespace: "ns".into(),
        annotations: vec![],
    };
    let objects = plugin
        .manifests(&cluster, &addon, &[])
        .await
        .expect("the plugin renders");
    assert_eq!(objects.len(), 1);
    let m = runtime.metrics();
    let result = [CacheResult::Hit, CacheResult::Miss, CacheResult::Invalid]
        .into_iter()
        .find(|r| m.cache_count("hello", *r) == 1)
        .expect("exactly one cache lookup");
    (runtime, result)
}

fn artifact(runtime: &Runtime) -> std::path::PathBuf {
    runtime
        .cache_entry_path(&Digest::of(
            &std::fs::read(PLUGIN).expect("plugin component was built"),
        ))
        .expect("the cache is enabled")
}

#[tokio::test]
async fn the_second_load_hits_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (first, result) = load_fresh(dir.path()).await;
    assert_eq!(result, CacheResult::Miss);
    assert!(artifact(&first).is_file());
    assert_eq!(load_fresh(dir.path()).await.1, CacheResult::Hit);
}

#[tokio::test]
async fn a_truncated_artifact_is_recompiled_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _) = load_fresh(dir.path()).await;
    let path = artifact(&first);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();

    assert_eq!(load_fresh(dir.path()).await.1, CacheResult::Invalid);
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "the entry was rewritten");
    assert_eq!(load_fresh(dir.path()).await.1, CacheResult::Hit);
}

#[tokio::test]
async fn a_flipped_byte_is_recompiled_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _) = load_fresh(dir.path()).await;
    let path = artifact(&first);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();

    assert_eq!(load_fresh(dir.path()).await.1, CacheResult::Invalid);
}

#[tokio::test]
async fn a_foreign_artifact_with_a_matching_sidecar_is_recompiled_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _) = load_fresh(dir.path()).await;
    let path = artifact(&first);
    let sidecar = path.with_extension("sha256");

    // Intact bytes another engine (different settings) produced, planted under this engine's
    // key with a correct checksum: the hash check passes, the engine check must not.
    let mut config = wasmtime::Config::new();
    config
        .epoch_interruption(false)
        .cranelift_opt_level(wasmtime::OptLevel::None);
    let foreign = wasmtime::Engine::new(&config)
        .unwrap()
        .precompile_component(&std::fs::read(PLUGIN).expect("plugin component was built"))
        .unwrap();
    std::fs::write(&path, &foreign).unwrap();
    std::fs::write(&sidecar, hex::encode(Sha256::digest(&foreign))).unwrap();
    assert_eq!(load_fresh(dir.path()).await.1, CacheResult::Invalid);

    // Not an artifact at all, with a matching checksum.
    let junk = b"\0asm\x0d\0\x01\0 not machine code".to_vec();
    std::fs::write(&path, &junk).unwrap();
    std::fs::write(&sidecar, hex::encode(Sha256::digest(&junk))).unwrap();
    assert_eq!(load_fresh(dir.path()).await.1, CacheResult::Invalid);
}

#[tokio::test]
async fn a_missing_sidecar_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _) = load_fresh(dir.path()).await;
    std::fs::remove_file(artifact(&first).with_extension("sha256")).unwrap();
    assert_eq!(load_fresh(dir.path()).await.1, CacheResult::Miss);
}
