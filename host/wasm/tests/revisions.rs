//! Revision swaps through the registry: a new digest is loaded beside the running one and
//! swapped in atomically; calls in flight finish on the revision they started with; a bad new
//! revision leaves the last good one serving.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::{addon, cluster, ends_within, runtime};
use flotilla_core::addon::works::AgentManifest;
use flotilla_test_plugins as plugins;
use flotilla_wasm::{Digest, Error, Limits, PluginRegistry, ValidationError};

fn bytes(path: &str) -> Vec<u8> {
    std::fs::read(path).expect("plugin component was built")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_under_load_during_a_swap_never_fail_and_never_mix() {
    let registry = Arc::new(PluginRegistry::new(runtime()));
    let (old_bytes, new_bytes) = (bytes(plugins::HELLOWORLD), bytes(plugins::REVISION_B));
    let (old_digest, new_digest) = (Digest::of(&old_bytes), Digest::of(&new_bytes));
    let (c, a) = (cluster("cluster1"), addon("swap"));

    let old = registry
        .install("swap", old_bytes, Limits::default())
        .await
        .unwrap();
    let expected_old = old.manifests(&c, &a, &[]).await.unwrap();
    drop(old);
    let probe = runtime()
        .load("swap-probe", new_bytes.clone(), Limits::default())
        .await
        .unwrap();
    let expected_new = probe.manifests(&c, &a, &[]).await.unwrap();
    assert_ne!(expected_old, expected_new);

    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let (registry, stop, done, c, a) =
                (registry.clone(), stop.clone(), done.clone(), c.clone(), a.clone());
            tokio::spawn(async move {
                let mut seen: Vec<(Digest, Result<Vec<AgentManifest>, String>)> = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    // One revision per call: taken once, held until the answer is in.
                    let plugin = registry.require("swap").unwrap();
                    let result = plugin.manifests(&c, &a, &[]).await.map_err(|e| e.to_string());
                    seen.push((plugin.digest(), result));
                    done.fetch_add(1, Ordering::Relaxed);
                }
                seen
            })
        })
        .collect();

    while done.load(Ordering::Relaxed) < 40 {
        tokio::task::yield_now().await;
    }
    let swapped = registry
        .install("swap", new_bytes, Limits::default())
        .await
        .unwrap();
    assert_eq!(swapped.digest(), new_digest);
    let after_swap = done.load(Ordering::Relaxed);
    while done.load(Ordering::Relaxed) < after_swap + 40 {
        tokio::task::yield_now().await;
    }
    stop.store(true, Ordering::Relaxed);

    let (mut from_old, mut from_new) = (0, 0);
    for worker in workers {
        for (digest, result) in ends_within(std::time::Duration::from_secs(60), worker)
            .await
            .unwrap()
        {
            let objects = result.expect("no call fails during a swap");
            if digest == old_digest {
                assert_eq!(
                    objects, expected_old,
                    "an old-revision call returned something else"
                );
                from_old += 1;
            } else {
                assert_eq!(digest, new_digest);
                assert_eq!(
                    objects, expected_new,
                    "a new-revision call returned something else"
                );
                from_new += 1;
            }
        }
    }
    assert!(from_old >= 40 && from_new >= 1, "old {from_old}, new {from_new}");
    assert_eq!(registry.get("swap").unwrap().digest(), new_digest);
}

#[tokio::test]
async fn a_bad_new_revision_leaves_the_last_good_one_serving() {
    let registry = PluginRegistry::new(runtime());
    let good = registry
        .install("keep", bytes(plugins::HELLOWORLD), Limits::default())
        .await
        .unwrap();
    let (c, a) = (cluster("cluster1"), addon("keep"));
    let expected = good.manifests(&c, &a, &[]).await.unwrap();

    // A component whose describe traps.
    let err = registry
        .install("keep", bytes(plugins::HOSTILE_DESCRIBE_TRAP), Limits::default())
        .await;
    assert!(
        matches!(err, Err(Error::Validate(ValidationError::DescribeFailed { .. }))),
        "{err:?}"
    );
    // Not a component at all.
    let err = registry
        .install("keep", wat::parse_str("(module)").unwrap(), Limits::default())
        .await;
    assert!(
        matches!(err, Err(Error::Validate(ValidationError::NotAComponent))),
        "{err:?}"
    );
    let serving = registry.get("keep").unwrap();
    assert_eq!(serving.digest(), good.digest());
    assert_eq!(serving.manifests(&c, &a, &[]).await.unwrap(), expected);
}

#[tokio::test]
async fn rollback_restores_the_previous_revision_and_reinstalling_is_a_no_op() {
    let registry = PluginRegistry::new(runtime());
    let a = registry
        .install("roll", bytes(plugins::HELLOWORLD), Limits::default())
        .await
        .unwrap();
    let again = registry
        .install("roll", bytes(plugins::HELLOWORLD), Limits::default())
        .await
        .unwrap();
    assert!(
        Arc::ptr_eq(&a, &again),
        "same digest and limits: the running revision is kept"
    );

    let b = registry
        .install("roll", bytes(plugins::REVISION_B), Limits::default())
        .await
        .unwrap();
    assert_eq!(registry.get("roll").unwrap().digest(), b.digest());
    let restored = registry.slot("roll").rollback().unwrap();
    assert_eq!(restored.digest(), a.digest());
    assert_eq!(registry.get("roll").unwrap().digest(), a.digest());
    assert!(registry.get("nothing").is_none());
    assert!(matches!(
        registry.require("nothing"),
        Err(Error::NotInstalled { .. })
    ));
}
