//! The one capability the host grants, and only to components it ships itself: a WASI
//! environment (`Runtime::load_granting`). The AddOnTemplate plugin reads its template from it;
//! loaded without the grant, the same bytes see nothing.

use flotilla_wasm::{Limits, Runtime, RuntimeConfig};

#[tokio::test]
async fn a_granted_environment_reaches_only_the_revision_it_was_granted_to() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let bytes = std::fs::read(flotilla_test_plugins::ADDON_TEMPLATE).unwrap();
    let template = serde_json::json!({"name": "t", "spec": {"addonName": "t",
        "registration": [{"type": "KubeClient"}]}})
    .to_string();
    let granted = runtime
        .load_granting(
            "t",
            bytes.clone(),
            Limits::default(),
            vec![("FLOTILLA_ADDON_TEMPLATE".to_owned(), template)],
        )
        .await
        .unwrap();
    let plain = runtime.load("t", bytes, Limits::default()).await.unwrap();
    assert_eq!(granted.options().registrations.len(), 1);
    assert!(plain.options().registrations.is_empty());
}
