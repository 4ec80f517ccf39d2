//! Engine-level behaviour: allocator choice and fallback, metrics exposition, and futures that
//! controllers can spawn.

use flotilla_wasm::{AllocatorChoice, AllocatorKind, Error, Runtime, RuntimeConfig};

#[test]
fn on_demand_can_be_chosen_explicitly() {
    let runtime = Runtime::new(RuntimeConfig {
        allocator: AllocatorChoice::OnDemand,
        ..RuntimeConfig::default()
    })
    .unwrap();
    assert_eq!(runtime.allocator(), AllocatorKind::OnDemand);
}

#[test]
fn pooling_falls_back_to_on_demand_when_the_pool_cannot_be_reserved() {
    // A pool of a million 1 TiB memories cannot be reserved anywhere.
    let greedy = RuntimeConfig {
        max_concurrent_calls: 1 << 20,
        memory_budget_bytes: 4 << 40,
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(RuntimeConfig {
        allocator: AllocatorChoice::Auto,
        ..greedy.clone()
    })
    .unwrap();
    assert_eq!(runtime.allocator(), AllocatorKind::OnDemand);

    let err = Runtime::new(RuntimeConfig {
        allocator: AllocatorChoice::Pooling,
        ..greedy
    })
    .unwrap_err();
    assert!(matches!(err, Error::Engine { .. }), "{err}");
}

#[test]
fn the_default_runtime_says_which_allocator_it_uses() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    // Either is correct, depending on the machine's address space; it must be stated.
    assert!(matches!(
        runtime.allocator(),
        AllocatorKind::Pooling | AllocatorKind::OnDemand
    ));
    assert!(format!("{runtime:?}").contains("allocator"));
}

#[test]
fn metrics_render_as_text_exposition_even_when_empty() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    // Families without series print nothing; the exposition is still well-formed.
    let text = runtime.render_metrics();
    assert!(text.ends_with("# EOF\n"), "{text}");
}

#[test]
fn hook_futures_are_send_so_controllers_can_spawn_them() {
    fn assert_send<T: Send>(_: &T) {}
    // Never polled: this only has to compile.
    let registry = flotilla_wasm::PluginRegistry::new(Runtime::new(RuntimeConfig::default()).unwrap());
    if let Some(plugin) = registry.get("none") {
        let (cluster, addon): (flotilla_wasm::types::Cluster, flotilla_wasm::types::Addon) =
            serde_json::from_str(
                r#"[{"name":"c","labels":[],"annotations":[],"claims":[],"kubernetes_version":""},
                                     {"name":"a","install_namespace":"n","annotations":[]}]"#,
            )
            .unwrap();
        assert_send(&plugin.manifests(&cluster, &addon, &[]));
        assert_send(&plugin.approve_csr(&cluster, &addon, &serde_json::from_str("null").unwrap()));
        assert_send(&plugin.probe_health(&cluster, &addon, &[]));
        assert_send(&plugin.hub_permissions(&cluster, &addon));
    }
    let runtime = registry.runtime().clone();
    assert_send(&runtime.load("x", Vec::new(), flotilla_wasm::Limits::default()));
    assert_send(&registry.install("x", Vec::new(), flotilla_wasm::Limits::default()));
}

#[test]
fn every_plugin_is_used_by_a_test() {
    // The tests of every host crate: plugins serve the add-on manager's and the loader's too.
    let host = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let sources: String = std::fs::read_dir(&host)
        .unwrap()
        .filter_map(|krate| std::fs::read_dir(krate.unwrap().path().join("tests")).ok())
        .flatten()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
        .collect();
    for (krate, path) in flotilla_test_plugins::ALL {
        assert!(std::path::Path::new(path).is_file(), "{krate} was built");
        let constant = krate.to_uppercase().replace('-', "_");
        assert!(
            sources.contains(&format!("::{constant}")),
            "plugin {krate} is not used by any test"
        );
    }
}
