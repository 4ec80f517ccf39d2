//! Conversion of ClusterManagementAddOn and ManagedClusterAddOn between v1alpha1 (stored) and
//! v1beta1 (served), as the hub's conversion webhook answers the apiserver.
//!
//! ```text
//!  v1alpha1                                  v1beta1
//!  CMA spec.supportedConfigs[].defaultConfig ⇄ spec.defaultConfigs[] (no default ⇄ `__reserved_no_default__`)
//!  CMA status.defaultconfigReferences        ⇄ status.defaultConfigReferences
//!  MCA spec.installNamespace                 ⇄ annotation addon.open-cluster-management.io/v1alpha1-install-namespace
//!  MCA status.configReferences[] name/ns     ⇄ (from desiredConfig)
//!  MCA status.registrations[] signerName     ⇄ type kubeClient | customSigner
//!  MCA status.kubeClientDriver               ⇄ registrations[type kubeClient].kubeClient.driver
//!  addOnConfiguration (deprecated)           ⇄ annotation flotilla.dev/v1alpha1-addon-configuration
//! ```
//!
//! Every object is stored as v1alpha1, so a v1beta1 write is a v1beta1 → v1alpha1 → v1beta1
//! round trip: that direction must lose nothing. The deprecated `addOnConfiguration`, which
//! v1beta1 has no field for, rides in an annotation so that a v1beta1 client's
//! read-modify-write does not erase what a v1alpha1 client wrote.

use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use super::{
    consts::{
        KUBE_APISERVER_CLIENT_SIGNER, RESERVED_NO_DEFAULT_CONFIG_NAME, V1ALPHA1_INSTALL_NAMESPACE_ANNOTATION,
    },
    v1alpha1 as a1, v1beta1 as b1,
};

/// Annotation of a v1beta1 view holding the deprecated v1alpha1 `addOnConfiguration` (JSON).
pub const ADDON_CONFIGURATION_ANNOTATION: &str = "flotilla.dev/v1alpha1-addon-configuration";
/// The API versions converted between.
pub const V1ALPHA1: &str = "addon.open-cluster-management.io/v1alpha1";
/// See [`V1ALPHA1`].
pub const V1BETA1: &str = "addon.open-cluster-management.io/v1beta1";

/// Why an object could not be converted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConversionError {
    /// The object is not one of the two converted kinds in one of the two versions.
    #[error(
        "cannot convert {kind} {api_version} to {desired}: only ClusterManagementAddOn and ManagedClusterAddOn between {V1ALPHA1} and {V1BETA1}"
    )]
    Unsupported {
        /// Kind of the object.
        kind: String,
        /// apiVersion of the object.
        api_version: String,
        /// The requested apiVersion.
        desired: String,
    },
    /// The object does not decode as its kind.
    #[error("decode {kind} {name:?} as {api_version}: {message}")]
    Decode {
        /// Kind of the object.
        kind: String,
        /// apiVersion of the object.
        api_version: String,
        /// metadata.name, when present.
        name: String,
        /// The decoder's message.
        message: String,
    },
}

/// Answers a ConversionReview: every object converted, or a failure naming the first one that
/// could not be (the apiserver then fails the request; nothing is half-converted).
pub fn review(review: ConversionReview) -> ConversionReview {
    let request = match ConversionRequest::from_review(review) {
        Ok(request) => request,
        Err(_) => {
            return ConversionResponse::invalid(failure("the ConversionReview has no request")).into_review();
        }
    };
    let desired = request.desired_api_version.clone();
    let converted: Result<Vec<Value>, ConversionError> = request
        .objects
        .iter()
        .map(|object| convert(object.clone(), &desired))
        .collect();
    let response = ConversionResponse::for_request(request);
    match converted {
        Ok(objects) => response.success(objects),
        Err(error) => response.failure(failure(&error.to_string())),
    }
    .into_review()
}

fn failure(message: &str) -> kube::core::Status {
    kube::core::Status::failure(message, "Invalid")
}

/// `object` in `desired` (an apiVersion); unchanged when it already is in that version.
pub fn convert(object: Value, desired: &str) -> Result<Value, ConversionError> {
    let field = |name: &str| {
        object
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (kind, api_version) = (field("kind"), field("apiVersion"));
    match (kind.as_str(), api_version.as_str(), desired) {
        (_, from, to) if from == to && [V1ALPHA1, V1BETA1].contains(&to) => Ok(object),
        ("ClusterManagementAddOn", V1ALPHA1, V1BETA1) => {
            encode(&cma_to_v1beta1(&decode::<a1::ClusterManagementAddOn>(object)?))
        }
        ("ClusterManagementAddOn", V1BETA1, V1ALPHA1) => {
            encode(&cma_to_v1alpha1(&decode::<b1::ClusterManagementAddOn>(object)?))
        }
        ("ManagedClusterAddOn", V1ALPHA1, V1BETA1) => {
            encode(&mca_to_v1beta1(&decode::<a1::ManagedClusterAddOn>(object)?))
        }
        ("ManagedClusterAddOn", V1BETA1, V1ALPHA1) => {
            encode(&mca_to_v1alpha1(&decode::<b1::ManagedClusterAddOn>(object)?))
        }
        _ => Err(ConversionError::Unsupported {
            kind,
            api_version,
            desired: desired.to_owned(),
        }),
    }
}

fn decode<K: DeserializeOwned + kube::Resource<DynamicType = ()>>(
    object: Value,
) -> Result<K, ConversionError> {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    serde_json::from_value(object).map_err(|e| ConversionError::Decode {
        kind: K::kind(&()).into_owned(),
        api_version: K::api_version(&()).into_owned(),
        name,
        message: e.to_string(),
    })
}

fn encode<K: Serialize>(object: &K) -> Result<Value, ConversionError> {
    // The types serialize to plain JSON maps; this cannot fail.
    Ok(serde_json::to_value(object).unwrap_or(Value::Null))
}

/// The v1beta1 view of a stored ClusterManagementAddOn.
pub fn cma_to_v1beta1(cma: &a1::ClusterManagementAddOn) -> b1::ClusterManagementAddOn {
    let mut metadata = cma.metadata.clone();
    stash_addon_configuration(&mut metadata, &cma.spec.add_on_configuration);
    b1::ClusterManagementAddOn {
        metadata,
        spec: b1::ClusterManagementAddOnSpec {
            add_on_meta: cma.spec.add_on_meta.clone(),
            default_configs: cma
                .spec
                .supported_configs
                .iter()
                .map(|config| b1::AddOnConfig {
                    group_resource: config.group_resource.clone(),
                    referent: config
                        .default_config
                        .clone()
                        .unwrap_or_else(|| a1::ConfigReferent {
                            namespace: String::new(),
                            name: RESERVED_NO_DEFAULT_CONFIG_NAME.to_owned(),
                        }),
                })
                .collect(),
            install_strategy: cma.spec.install_strategy.clone(),
        },
        status: cma
            .status
            .as_ref()
            .map(|status| b1::ClusterManagementAddOnStatus {
                default_config_references: status.default_config_references.clone(),
                install_progressions: status
                    .install_progressions
                    .iter()
                    .map(|p| b1::InstallProgression {
                        placement: p.placement.clone(),
                        config_references: p.config_references.clone(),
                        conditions: p.conditions.clone(),
                    })
                    .collect(),
            }),
    }
}

/// The stored (v1alpha1) form of a v1beta1 ClusterManagementAddOn.
pub fn cma_to_v1alpha1(cma: &b1::ClusterManagementAddOn) -> a1::ClusterManagementAddOn {
    let mut metadata = cma.metadata.clone();
    let add_on_configuration = unstash_addon_configuration(&mut metadata);
    a1::ClusterManagementAddOn {
        metadata,
        spec: a1::ClusterManagementAddOnSpec {
            add_on_meta: cma.spec.add_on_meta.clone(),
            add_on_configuration,
            supported_configs: cma
                .spec
                .default_configs
                .iter()
                .map(|config| a1::ConfigMeta {
                    group_resource: config.group_resource.clone(),
                    default_config: (!config.referent.name.is_empty()
                        && config.referent.name != RESERVED_NO_DEFAULT_CONFIG_NAME)
                        .then(|| config.referent.clone()),
                })
                .collect(),
            install_strategy: cma.spec.install_strategy.clone(),
        },
        status: cma
            .status
            .as_ref()
            .map(|status| a1::ClusterManagementAddOnStatus {
                default_config_references: status.default_config_references.clone(),
                install_progressions: status
                    .install_progressions
                    .iter()
                    .map(|p| a1::InstallProgression {
                        placement: p.placement.clone(),
                        config_references: p.config_references.clone(),
                        conditions: p.conditions.clone(),
                    })
                    .collect(),
            }),
    }
}

/// The v1beta1 view of a stored ManagedClusterAddOn.
pub fn mca_to_v1beta1(mca: &a1::ManagedClusterAddOn) -> b1::ManagedClusterAddOn {
    let mut metadata = mca.metadata.clone();
    if !mca.spec.install_namespace.is_empty() {
        metadata.annotations.get_or_insert_default().insert(
            V1ALPHA1_INSTALL_NAMESPACE_ANNOTATION.to_owned(),
            mca.spec.install_namespace.clone(),
        );
    }
    if let Some(status) = &mca.status {
        stash_addon_configuration(&mut metadata, &status.add_on_configuration);
    }
    b1::ManagedClusterAddOn {
        metadata,
        spec: b1::ManagedClusterAddOnSpec {
            configs: mca.spec.configs.clone(),
        },
        status: mca.status.as_ref().map(|status| {
            let driver = status.kube_client_driver;
            b1::ManagedClusterAddOnStatus {
                conditions: status.conditions.clone(),
                related_objects: status.related_objects.clone(),
                add_on_meta: status.add_on_meta.clone(),
                supported_configs: status.supported_configs.clone(),
                config_references: status
                    .config_references
                    .iter()
                    .map(|r| b1::ConfigReference {
                        group_resource: r.group_resource.clone(),
                        last_observed_generation: r.last_observed_generation,
                        desired_config: r.desired_config.clone(),
                        last_applied_config: r.last_applied_config.clone(),
                    })
                    .collect(),
                namespace: status.namespace.clone(),
                registrations: status
                    .registrations
                    .iter()
                    .map(|r| registration_to_v1beta1(r, driver))
                    .collect(),
                health_check: status.health_check.clone(),
            }
        }),
    }
}

/// The stored (v1alpha1) form of a v1beta1 ManagedClusterAddOn.
pub fn mca_to_v1alpha1(mca: &b1::ManagedClusterAddOn) -> a1::ManagedClusterAddOn {
    let mut metadata = mca.metadata.clone();
    let install_namespace = metadata
        .annotations
        .as_mut()
        .and_then(|a| a.remove(V1ALPHA1_INSTALL_NAMESPACE_ANNOTATION))
        .unwrap_or_default();
    let add_on_configuration = unstash_addon_configuration(&mut metadata);
    if metadata.annotations.as_ref().is_some_and(|a| a.is_empty()) {
        metadata.annotations = None;
    }
    a1::ManagedClusterAddOn {
        metadata,
        spec: a1::ManagedClusterAddOnSpec {
            install_namespace,
            configs: mca.spec.configs.clone(),
        },
        status: mca.status.as_ref().map(|status| a1::ManagedClusterAddOnStatus {
            conditions: status.conditions.clone(),
            related_objects: status.related_objects.clone(),
            add_on_meta: status.add_on_meta.clone(),
            add_on_configuration,
            supported_configs: status.supported_configs.clone(),
            config_references: status
                .config_references
                .iter()
                .map(|r| a1::ConfigReference {
                    group_resource: r.group_resource.clone(),
                    referent: r
                        .desired_config
                        .as_ref()
                        .map(|d| d.referent.clone())
                        .unwrap_or_default(),
                    last_observed_generation: r.last_observed_generation,
                    desired_config: r.desired_config.clone(),
                    last_applied_config: r.last_applied_config.clone(),
                })
                .collect(),
            namespace: status.namespace.clone(),
            registrations: status
                .registrations
                .iter()
                .map(registration_to_v1alpha1)
                .collect(),
            health_check: status.health_check.clone(),
            kube_client_driver: status
                .registrations
                .iter()
                .find(|r| r.type_ == b1::RegistrationType::KubeClient)
                .and_then(|r| r.kube_client.as_ref()?.driver),
        }),
    }
}

fn registration_to_v1beta1(
    registration: &a1::RegistrationConfig,
    driver: Option<b1::KubeClientDriver>,
) -> b1::RegistrationConfig {
    let subject = &registration.subject;
    if registration.signer_name == KUBE_APISERVER_CLIENT_SIGNER {
        b1::RegistrationConfig {
            type_: b1::RegistrationType::KubeClient,
            kube_client: Some(b1::KubeClientConfig {
                subject: b1::KubeClientSubject {
                    user: subject.user.clone(),
                    groups: subject.groups.clone(),
                },
                driver,
            }),
            custom_signer: None,
        }
    } else {
        b1::RegistrationConfig {
            type_: b1::RegistrationType::CustomSigner,
            kube_client: None,
            custom_signer: Some(b1::CustomSignerConfig {
                signer_name: registration.signer_name.clone(),
                subject: b1::Subject {
                    user: subject.user.clone(),
                    groups: subject.groups.clone(),
                    organization_units: subject.organization_units.clone(),
                },
            }),
        }
    }
}

fn registration_to_v1alpha1(registration: &b1::RegistrationConfig) -> a1::RegistrationConfig {
    match registration.type_ {
        b1::RegistrationType::KubeClient => a1::RegistrationConfig {
            signer_name: KUBE_APISERVER_CLIENT_SIGNER.to_owned(),
            subject: registration
                .kube_client
                .as_ref()
                .map(|k| a1::Subject {
                    user: k.subject.user.clone(),
                    groups: k.subject.groups.clone(),
                    organization_units: Vec::new(),
                })
                .unwrap_or_default(),
        },
        b1::RegistrationType::CustomSigner => registration
            .custom_signer
            .as_ref()
            .map(|c| a1::RegistrationConfig {
                signer_name: c.signer_name.clone(),
                subject: a1::Subject {
                    user: c.subject.user.clone(),
                    groups: c.subject.groups.clone(),
                    organization_units: c.subject.organization_units.clone(),
                },
            })
            .unwrap_or_default(),
    }
}

fn stash_addon_configuration(metadata: &mut kube::core::ObjectMeta, configuration: &a1::ConfigCoordinates) {
    if *configuration == a1::ConfigCoordinates::default() {
        return;
    }
    if let Ok(text) = serde_json::to_string(configuration) {
        metadata
            .annotations
            .get_or_insert_default()
            .insert(ADDON_CONFIGURATION_ANNOTATION.to_owned(), text);
    }
}

/// Takes the stashed `addOnConfiguration` out of `metadata`; an unreadable value is dropped
/// (it only ever holds what [`stash_addon_configuration`] wrote).
fn unstash_addon_configuration(metadata: &mut kube::core::ObjectMeta) -> a1::ConfigCoordinates {
    let text = metadata
        .annotations
        .as_mut()
        .and_then(|a| a.remove(ADDON_CONFIGURATION_ANNOTATION));
    if metadata.annotations.as_ref().is_some_and(|a| a.is_empty()) {
        metadata.annotations = None;
    }
    text.and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
