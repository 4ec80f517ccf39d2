//! Unit tests of the hub's own sets; membership and conditions are tested in
//! `flotilla_core::registration::hub::clusterset` and end to end in `tests/hub_clustersets.rs`.

use flotilla_api::cluster::v1beta2::SelectorType;
use kube::ResourceExt;
use serde_json::json;

use super::reconcile::hub_sets;

#[test]
fn the_hub_creates_default_exclusive_and_global_selecting_everything() {
    let sets = hub_sets();
    let names: Vec<_> = sets.iter().map(ResourceExt::name_any).collect();
    assert_eq!(names, ["default", "global"]);
    assert_eq!(
        sets[0].spec.cluster_selector.selector_type,
        SelectorType::ExclusiveClusterSetLabel
    );
    assert_eq!(
        serde_json::to_value(&sets[1].spec.cluster_selector).unwrap(),
        json!({ "selectorType": "LabelSelector", "labelSelector": {} })
    );
}
