//! Builders of API objects for the scheduler's unit tests.

use std::collections::BTreeMap;

use flotilla_api::cluster::{
    v1::{ManagedCluster, ManagedClusterClaim, ManagedClusterSpec, ManagedClusterStatus, Taint, TaintEffect},
    v1beta2::{
        ManagedClusterSelector, ManagedClusterSet, ManagedClusterSetBinding, ManagedClusterSetBindingSpec,
        ManagedClusterSetSpec, SelectorType,
    },
};
use k8s_openapi::apimachinery::pkg::{
    api::resource::Quantity,
    apis::meta::v1::{LabelSelector, ObjectMeta, Time},
};
use k8s_openapi::jiff::Timestamp;

/// A ManagedCluster under construction.
pub struct ClusterBuilder(ManagedCluster);

/// Starts a cluster named `name`.
pub fn cluster(name: &str) -> ClusterBuilder {
    ClusterBuilder(ManagedCluster {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: ManagedClusterSpec::default(),
        status: Some(ManagedClusterStatus::default()),
    })
}

impl ClusterBuilder {
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }

    pub fn claim(mut self, name: &str, value: &str) -> Self {
        if let Some(status) = self.0.status.as_mut() {
            status.cluster_claims.push(ManagedClusterClaim {
                name: name.into(),
                value: value.into(),
            });
        }
        self
    }

    pub fn taint(mut self, key: &str, effect: TaintEffect, added_second: i64) -> Self {
        self.0.spec.taints.push(Taint {
            key: key.into(),
            value: String::new(),
            effect,
            time_added: Some(Time(Timestamp::from_second(added_second).unwrap())),
        });
        self
    }

    pub fn resources(mut self, cpu: &str, memory: &str) -> Self {
        if let Some(status) = self.0.status.as_mut() {
            for map in [&mut status.allocatable, &mut status.capacity] {
                map.insert("cpu".into(), Quantity(cpu.into()));
                map.insert("memory".into(), Quantity(memory.into()));
            }
        }
        self
    }

    pub fn deleting(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(Time(Timestamp::from_second(1).unwrap()));
        self
    }

    pub fn build(self) -> ManagedCluster {
        self.0
    }
}

fn set(name: &str, selector: ManagedClusterSelector) -> ManagedClusterSet {
    ManagedClusterSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: ManagedClusterSetSpec {
            cluster_selector: selector,
            ..Default::default()
        },
        status: None,
    }
}

/// A set selecting clusters by the exclusive clusterset label.
pub fn exclusive_set(name: &str) -> ManagedClusterSet {
    set(
        name,
        ManagedClusterSelector {
            selector_type: SelectorType::ExclusiveClusterSetLabel,
            label_selector: None,
        },
    )
}

/// A set selecting every cluster (empty label selector).
pub fn label_set(name: &str) -> ManagedClusterSet {
    set(
        name,
        ManagedClusterSelector {
            selector_type: SelectorType::LabelSelector,
            label_selector: Some(LabelSelector::default()),
        },
    )
}

/// A binding of set `name` in namespace `default`.
pub fn binding(name: &str) -> ManagedClusterSetBinding {
    ManagedClusterSetBinding {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: ManagedClusterSetBindingSpec {
            cluster_set: name.into(),
        },
        status: None,
    }
}
