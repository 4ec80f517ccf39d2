use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::core::ObjectMeta;
use proptest::{collection::vec, option, prelude::*};
use serde_json::json;

use super::*;

fn word() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,6}"
}

fn words() -> impl Strategy<Value = Vec<String>> {
    vec(word(), 0..3)
}

fn referent() -> impl Strategy<Value = a1::ConfigReferent> {
    (prop_oneof![Just(String::new()), word()], word())
        .prop_map(|(namespace, name)| a1::ConfigReferent { namespace, name })
}

fn group_resource() -> impl Strategy<Value = a1::ConfigGroupResource> {
    (prop_oneof![Just(String::new()), word()], word())
        .prop_map(|(group, resource)| a1::ConfigGroupResource { group, resource })
}

fn spec_hash() -> impl Strategy<Value = a1::ConfigSpecHash> {
    (referent(), "[0-9a-f]{0,8}").prop_map(|(referent, spec_hash)| a1::ConfigSpecHash { referent, spec_hash })
}

fn addon_config() -> impl Strategy<Value = a1::AddOnConfig> {
    (group_resource(), referent()).prop_map(|(group_resource, referent)| a1::AddOnConfig {
        group_resource,
        referent,
    })
}

fn conditions() -> impl Strategy<Value = Vec<Condition>> {
    vec(
        (
            word(),
            prop_oneof![Just("True"), Just("False"), Just("Unknown")],
            word(),
            ".{0,12}",
        ),
        0..3,
    )
    .prop_map(|items| {
        items
            .into_iter()
            .map(|(type_, status, reason, message)| Condition {
                type_,
                status: status.to_owned(),
                reason,
                message,
                observed_generation: Some(1),
                last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            })
            .collect()
    })
}

fn coordinates() -> impl Strategy<Value = a1::ConfigCoordinates> {
    (
        prop_oneof![Just(String::new()), word()],
        prop_oneof![Just(String::new()), word()],
        0..3i64,
    )
        .prop_map(
            |(crd_name, cr_name, last_observed_generation)| a1::ConfigCoordinates {
                crd_name,
                cr_name,
                last_observed_generation,
            },
        )
}

/// Metadata whose annotations are absent or non-empty (the apiserver's own normal form),
/// without the annotations the conversion owns.
fn metadata() -> impl Strategy<Value = ObjectMeta> {
    (word(), option::of(vec((word(), ".{0,8}"), 1..3))).prop_map(|(name, annotations)| ObjectMeta {
        name: Some(name),
        namespace: Some("cluster1".into()),
        annotations: annotations.map(|pairs| {
            pairs
                .into_iter()
                .map(|(k, v)| (format!("example.com/{k}"), v))
                .collect()
        }),
        ..ObjectMeta::default()
    })
}

fn install_strategy() -> impl Strategy<Value = a1::InstallStrategy> {
    vec((word(), word(), vec(addon_config(), 0..2)), 0..2).prop_map(|placements| a1::InstallStrategy {
        type_: if placements.is_empty() {
            a1::InstallStrategyType::Manual
        } else {
            a1::InstallStrategyType::Placements
        },
        placements: placements
            .into_iter()
            .map(|(namespace, name, configs)| a1::PlacementStrategy {
                placement: a1::PlacementRef { namespace, name },
                configs,
                rollout_strategy: Default::default(),
            })
            .collect(),
    })
}

fn install_progressions() -> impl Strategy<Value = Vec<b1::InstallProgression>> {
    vec(
        (
            word(),
            word(),
            vec(
                (
                    group_resource(),
                    option::of(spec_hash()),
                    option::of(spec_hash()),
                    option::of(spec_hash()),
                ),
                0..2,
            ),
            conditions(),
        ),
        0..2,
    )
    .prop_map(|items| {
        items
            .into_iter()
            .map(|(namespace, name, refs, conditions)| b1::InstallProgression {
                placement: a1::PlacementRef { namespace, name },
                config_references: refs
                    .into_iter()
                    .map(
                        |(group_resource, desired, good, applied)| a1::InstallConfigReference {
                            group_resource,
                            desired_config: desired,
                            last_known_good_config: good,
                            last_applied_config: applied,
                        },
                    )
                    .collect(),
                conditions,
            })
            .collect()
    })
}

prop_compose! {
    /// Any v1beta1 ClusterManagementAddOn the schema admits (a default config always has a name).
    fn v1beta1_cma()(
        metadata in metadata(),
        display_name in word(),
        defaults in vec((group_resource(), prop_oneof![referent(), Just(a1::ConfigReferent { namespace: String::new(), name: RESERVED_NO_DEFAULT_CONFIG_NAME.into() })]), 0..3),
        install_strategy in install_strategy(),
        stashed in option::of(coordinates()),
        status in option::of((vec((group_resource(), option::of(spec_hash())), 0..2), install_progressions())),
    ) -> b1::ClusterManagementAddOn {
        let mut metadata = metadata;
        if let Some(coordinates) = stashed.filter(|c| *c != a1::ConfigCoordinates::default()) {
            metadata.annotations.get_or_insert_default().insert(ADDON_CONFIGURATION_ANNOTATION.into(), serde_json::to_string(&coordinates).unwrap());
        }
        b1::ClusterManagementAddOn {
            metadata,
            spec: b1::ClusterManagementAddOnSpec {
                add_on_meta: a1::AddOnMeta { display_name, description: String::new() },
                default_configs: defaults.into_iter().map(|(group_resource, referent)| b1::AddOnConfig { group_resource, referent }).collect(),
                install_strategy,
            },
            status: status.map(|(defaults, install_progressions)| b1::ClusterManagementAddOnStatus {
                default_config_references: defaults.into_iter().map(|(group_resource, desired_config)| a1::DefaultConfigReference { group_resource, desired_config }).collect(),
                install_progressions,
            }),
        }
    }
}

fn v1beta1_registration() -> impl Strategy<Value = b1::RegistrationConfig> {
    (word(), words(), words(), "[a-z]{1,5}\\.io/[a-z]{1,5}").prop_map(
        |(user, groups, organization_units, signer_name)| b1::RegistrationConfig {
            type_: b1::RegistrationType::CustomSigner,
            kube_client: None,
            custom_signer: Some(b1::CustomSignerConfig {
                signer_name,
                subject: b1::Subject {
                    user,
                    groups,
                    organization_units,
                },
            }),
        },
    )
}

prop_compose! {
    /// Any v1beta1 ManagedClusterAddOn the schema admits, with at most one kube-client
    /// registration (an agent has one hub identity).
    fn v1beta1_mca()(
        metadata in metadata(),
        install_namespace in option::of(word()),
        stashed in option::of(coordinates()),
        configs in vec(addon_config(), 0..3),
        status in option::of((
            conditions(),
            vec((group_resource(), word(), word()), 0..2),
            vec(group_resource(), 0..2),
            vec((group_resource(), 0..4i64, option::of(spec_hash()), option::of(spec_hash())), 0..3),
            word(),
            option::of((word(), words(), prop_oneof![Just(None), Just(Some(b1::KubeClientDriver::Csr)), Just(Some(b1::KubeClientDriver::Token))])),
            vec(v1beta1_registration(), 0..2),
            option::of(prop_oneof![Just(a1::HealthCheckMode::Lease), Just(a1::HealthCheckMode::Customized)]),
        )),
    ) -> b1::ManagedClusterAddOn {
        let mut metadata = metadata;
        if let Some(namespace) = install_namespace {
            metadata.annotations.get_or_insert_default().insert(V1ALPHA1_INSTALL_NAMESPACE_ANNOTATION.into(), namespace);
        }
        // The stashed field belongs to the status: there is none to keep without one.
        if let Some(coordinates) = stashed.filter(|c| *c != a1::ConfigCoordinates::default() && status.is_some()) {
            metadata.annotations.get_or_insert_default().insert(ADDON_CONFIGURATION_ANNOTATION.into(), serde_json::to_string(&coordinates).unwrap());
        }
        b1::ManagedClusterAddOn {
            metadata,
            spec: b1::ManagedClusterAddOnSpec { configs },
            status: status.map(|(conditions, related, supported_configs, refs, namespace, kube_client, custom, mode)| {
                let mut registrations: Vec<_> = kube_client.into_iter().map(|(user, groups, driver)| b1::RegistrationConfig {
                    type_: b1::RegistrationType::KubeClient,
                    kube_client: Some(b1::KubeClientConfig { subject: b1::KubeClientSubject { user, groups }, driver }),
                    custom_signer: None,
                }).collect();
                registrations.extend(custom);
                b1::ManagedClusterAddOnStatus {
                    conditions,
                    related_objects: related.into_iter().map(|(gr, namespace, name)| a1::ObjectReference { group: gr.group, resource: gr.resource, namespace, name }).collect(),
                    add_on_meta: a1::AddOnMeta::default(),
                    supported_configs,
                    config_references: refs.into_iter().map(|(group_resource, last_observed_generation, desired_config, last_applied_config)| b1::ConfigReference { group_resource, last_observed_generation, desired_config, last_applied_config }).collect(),
                    namespace,
                    registrations,
                    health_check: a1::HealthCheck { mode },
                }
            }),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A v1beta1 write is stored as v1alpha1 and read back: nothing may be lost.
    #[test]
    fn a_v1beta1_cluster_management_addon_survives_storage_as_v1alpha1(cma in v1beta1_cma()) {
        prop_assert_eq!(cma_to_v1beta1(&cma_to_v1alpha1(&cma)), cma);
    }

    #[test]
    fn a_v1beta1_managed_cluster_addon_survives_storage_as_v1alpha1(mca in v1beta1_mca()) {
        prop_assert_eq!(mca_to_v1beta1(&mca_to_v1alpha1(&mca)), mca);
    }

    /// A stored object read as v1beta1 and written back (a read-modify-write by a v1beta1
    /// client) stores what it stored before, deprecated fields included.
    #[test]
    fn a_stored_cluster_management_addon_survives_a_v1beta1_round_trip(cma in v1beta1_cma()) {
        let stored = cma_to_v1alpha1(&cma);
        prop_assert_eq!(cma_to_v1alpha1(&cma_to_v1beta1(&stored)), stored);
    }

    #[test]
    fn a_stored_managed_cluster_addon_survives_a_v1beta1_round_trip(mca in v1beta1_mca()) {
        let stored = mca_to_v1alpha1(&mca);
        prop_assert_eq!(mca_to_v1alpha1(&mca_to_v1beta1(&stored)), stored);
    }

    /// Through JSON, as the webhook sees objects.
    #[test]
    fn json_conversion_round_trips_both_kinds(cma in v1beta1_cma(), mca in v1beta1_mca()) {
        let cma = serde_json::to_value(&cma).unwrap();
        let there = convert(cma.clone(), V1ALPHA1).unwrap();
        prop_assert_eq!(there["apiVersion"].as_str(), Some(V1ALPHA1));
        prop_assert_eq!(convert(there, V1BETA1).unwrap(), cma);
        let mca = serde_json::to_value(&mca).unwrap();
        let there = convert(mca.clone(), V1ALPHA1).unwrap();
        prop_assert_eq!(convert(there, V1BETA1).unwrap(), mca);
    }
}

#[test]
fn a_supported_config_without_default_is_the_reserved_name_in_v1beta1() {
    let cma: a1::ClusterManagementAddOn = serde_json::from_value(json!({
        "apiVersion": V1ALPHA1, "kind": "ClusterManagementAddOn", "metadata": {"name": "a"},
        "spec": {"supportedConfigs": [
            {"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs"},
            {"group": "addon.open-cluster-management.io", "resource": "addontemplates", "defaultConfig": {"name": "t"}},
        ]},
    }))
    .unwrap();
    let view = serde_json::to_value(cma_to_v1beta1(&cma)).unwrap();
    assert_eq!(
        view["spec"]["defaultConfigs"],
        json!([
            {"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs", "name": "__reserved_no_default__"},
            {"group": "addon.open-cluster-management.io", "resource": "addontemplates", "name": "t"},
        ])
    );
}

#[test]
fn install_namespace_moves_to_the_annotation_and_registrations_become_typed() {
    let mca: a1::ManagedClusterAddOn = serde_json::from_value(json!({
        "apiVersion": V1ALPHA1, "kind": "ManagedClusterAddOn", "metadata": {"name": "a", "namespace": "c1"},
        "spec": {"installNamespace": "agents"},
        "status": {
            "kubeClientDriver": "token",
            "configReferences": [{"group": "g", "resource": "r", "name": "n", "namespace": "ns",
                "desiredConfig": {"name": "n", "namespace": "ns", "specHash": "h"}}],
            "registrations": [
                {"signerName": "kubernetes.io/kube-apiserver-client", "subject": {"user": "u", "groups": ["g"]}},
                {"signerName": "example.com/s", "subject": {"user": "v", "organizationUnit": ["ou"]}},
            ],
        },
    }))
    .unwrap();
    let view = serde_json::to_value(mca_to_v1beta1(&mca)).unwrap();
    assert_eq!(
        view["metadata"]["annotations"],
        json!({"addon.open-cluster-management.io/v1alpha1-install-namespace": "agents"})
    );
    assert_eq!(view["spec"], json!({}));
    assert_eq!(
        view["status"]["registrations"],
        json!([
            {"type": "kubeClient", "kubeClient": {"subject": {"user": "u", "groups": ["g"]}, "driver": "token"}},
            {"type": "customSigner", "customSigner": {"signerName": "example.com/s", "subject": {"user": "v", "organizationUnits": ["ou"]}}},
        ])
    );
    assert_eq!(
        view["status"]["configReferences"],
        json!([{"group": "g", "resource": "r", "lastObservedGeneration": 0,
            "desiredConfig": {"name": "n", "namespace": "ns", "specHash": "h"}, "lastAppliedConfig": null}])
    );
    assert!(view["status"].get("kubeClientDriver").is_none());
}

#[test]
fn a_review_converts_every_object_or_fails_naming_the_bad_one() {
    let review = |objects: Vec<serde_json::Value>| -> ConversionReview {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u1", "desiredAPIVersion": V1BETA1, "objects": objects},
        }))
        .unwrap()
    };
    let good = json!({"apiVersion": V1ALPHA1, "kind": "ClusterManagementAddOn", "metadata": {"name": "a"}, "spec": {}});
    let answer = serde_json::to_value(super::review(review(vec![good.clone(), good.clone()]))).unwrap();
    assert_eq!(answer["response"]["uid"], "u1");
    assert_eq!(answer["response"]["result"]["status"], "Success");
    assert_eq!(
        answer["response"]["convertedObjects"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(answer["response"]["convertedObjects"][0]["apiVersion"], V1BETA1);

    let bad = json!({"apiVersion": V1ALPHA1, "kind": "ManagedClusterAddOn", "metadata": {"name": "broken"}, "spec": {"configs": "x"}});
    let answer = serde_json::to_value(super::review(review(vec![good, bad]))).unwrap();
    assert_eq!(answer["response"]["result"]["status"], "Failure");
    let message = answer["response"]["result"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("decode ManagedClusterAddOn \"broken\""),
        "{message}"
    );
    assert!(
        answer["response"]["convertedObjects"]
            .as_array()
            .is_none_or(Vec::is_empty)
    );

    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    assert_eq!(
        convert(other, V1BETA1),
        Err(ConversionError::Unsupported {
            kind: "ConfigMap".into(),
            api_version: "v1".into(),
            desired: V1BETA1.into()
        })
    );
}
