//! The pre-delete example plugin in the real host runtime: it renders a deployable object and a
//! Job marked as a pre-delete hook (the hub's handling of the hook is tested in
//! host/addon-manager/tests/pre_delete.rs).

use crate::common;

use common::{addon, cluster, load};
use flotilla_test_plugins as plugins;
use flotilla_wasm::Limits;

#[tokio::test]
async fn the_pre_delete_plugin_marks_its_job_as_a_pre_delete_hook() {
    let plugin = load("pre-delete", plugins::PRE_DELETE, Limits::default())
        .await
        .unwrap();
    let manifests = plugin
        .manifests(&cluster("cluster1"), &addon("pre-delete"), &[])
        .await
        .unwrap();
    let manifests = crate::common::json_objects(manifests);
    let hook = manifests.iter().find(|m| m["kind"] == "Job").expect("a Job");
    assert!(
        hook.pointer("/metadata/annotations/addon.open-cluster-management.io~1addon-pre-delete")
            .is_some()
    );
    assert!(manifests.iter().any(|m| m["kind"] == "ConfigMap"));
}
