//! A native test harness: run an add-on's hooks with plain `cargo test` on the host target.
//!
//! The hooks are ordinary Rust functions over the SDK's plain types, so no wasm runtime is
//! needed; [`Harness`] calls them and [`Rendered`] makes assertions on manifests short. Inputs are
//! built with the types' builders (`Cluster::new("c1").label(..)`) and the fixtures here. What
//! this cannot show is sandbox behaviour (limits, faults): test that through `flotilla-wasm`.
//!
//! ```
//! use flotilla_addon_sdk::testing::{Harness, csr_for};
//! use flotilla_addon_sdk::{AddOn, Addon, AddonError, AddonOptions, Cluster, CsrDecision, Manifest,
//!     Registration, ResolvedConfig};
//!
//! struct Hello;
//! impl Addon for Hello {
//!     fn describe() -> AddonOptions {
//!         AddonOptions { registrations: vec![Registration::KubeClient { subject: None }], ..Default::default() }
//!     }
//!     fn manifests(c: &Cluster, a: &AddOn, _: &[ResolvedConfig]) -> Result<Vec<Manifest>, AddonError> {
//!         Ok(vec![serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
//!             "metadata": {"name": c.name, "namespace": a.install_namespace}})])
//!     }
//! }
//!
//! let (cluster, addon) = (Cluster::new("c1"), AddOn::new("hello", "agents"));
//! let rendered = Harness::<Hello>::new().manifests(&cluster, &addon, &[]).unwrap();
//! assert!(rendered.find("ConfigMap", "c1").is_some());
//! assert!(rendered.all_in_namespace("agents"));
//! assert_eq!(Harness::<Hello>::new().approve_csr(&cluster, &addon, &csr_for(&cluster, &addon)), CsrDecision::Approve);
//! ```

use std::marker::PhantomData;

use serde_json::Value;

use crate::Addon;
use crate::config::{ADDON_DEPLOYMENT_CONFIGS, ADDON_GROUP};
use crate::csr::{KUBE_CLIENT_SIGNER, default_subject_template, expand_subject};
use crate::types::{
    AddOn, AddonError, AddonOptions, Cluster, Csr, CsrDecision, FeedbackField, HealthResult, Manifest,
    ResolvedConfig,
};

/// Calls the hooks of add-on `A` directly.
#[derive(Debug)]
pub struct Harness<A>(PhantomData<fn() -> A>);

impl<A: Addon> Default for Harness<A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: Addon> Harness<A> {
    /// A harness for `A`.
    pub fn new() -> Self {
        Self(PhantomData)
    }

    /// `A::describe()`.
    pub fn describe(&self) -> AddonOptions {
        A::describe()
    }

    /// `A::manifests()`, wrapped for assertions.
    pub fn manifests(
        &self,
        cluster: &Cluster,
        addon: &AddOn,
        configs: &[ResolvedConfig],
    ) -> Result<Rendered, AddonError> {
        A::manifests(cluster, addon, configs).map(Rendered)
    }

    /// `A::approve_csr()`.
    pub fn approve_csr(&self, cluster: &Cluster, addon: &AddOn, csr: &Csr) -> CsrDecision {
        A::approve_csr(cluster, addon, csr)
    }

    /// `A::hub_permissions()`, wrapped for assertions.
    pub fn hub_permissions(&self, cluster: &Cluster, addon: &AddOn) -> Result<Rendered, AddonError> {
        A::hub_permissions(cluster, addon).map(Rendered)
    }

    /// `A::probe_health()`.
    pub fn probe_health(&self, cluster: &Cluster, addon: &AddOn, fields: &[FeedbackField]) -> HealthResult {
        A::probe_health(cluster, addon, fields)
    }
}

/// Manifests returned by a hook.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered(pub Vec<Manifest>);

impl Rendered {
    /// The object of `kind` named `name`.
    pub fn find(&self, kind: &str, name: &str) -> Option<&Value> {
        self.0
            .iter()
            .find(|m| m["kind"] == kind && m["metadata"]["name"] == name)
    }

    /// The kinds, in order.
    pub fn kinds(&self) -> Vec<&str> {
        self.0.iter().filter_map(|m| m["kind"].as_str()).collect()
    }

    /// Whether every namespaced object is in `namespace` (objects without a namespace, such as
    /// ClusterRoles, are not counted).
    pub fn all_in_namespace(&self, namespace: &str) -> bool {
        self.0.iter().all(|m| {
            m["metadata"]["namespace"]
                .as_str()
                .is_none_or(|ns| ns == namespace)
        })
    }

    /// Whether every object has `apiVersion`, `kind` and `metadata.name`, as the host requires.
    pub fn all_well_formed(&self) -> bool {
        self.0.iter().all(|m| {
            m["apiVersion"].as_str().is_some_and(|s| !s.is_empty())
                && m["kind"].as_str().is_some_and(|s| !s.is_empty())
                && m["metadata"]["name"].as_str().is_some_and(|s| !s.is_empty())
        })
    }
}

/// The CSR a cluster's registration agent files for `addon`'s kube-client registration with the
/// default subject (agent name = add-on name), as the host would pass it.
pub fn csr_for(cluster: &Cluster, addon: &AddOn) -> Csr {
    let subject = expand_subject(&default_subject_template(), &cluster.name, &addon.name);
    Csr {
        name: format!("addon-{}-{}-abcde", cluster.name, addon.name),
        signer_name: KUBE_CLIENT_SIGNER.to_owned(),
        username: format!("system:open-cluster-management:{}:agent1", cluster.name),
        groups: vec![
            format!("system:open-cluster-management:{}", cluster.name),
            "system:open-cluster-management:managed-clusters".to_owned(),
            "system:authenticated".to_owned(),
        ],
        common_name: subject.user,
        organizations: subject.groups,
        organizational_units: Vec::new(),
        dns_names: vec![format!("{}.addon.open-cluster-management.io", addon.name)],
        usages: vec![
            "digital signature".into(),
            "key encipherment".into(),
            "client auth".into(),
        ],
        request_pem: String::new(),
    }
}

/// A resolved `AddOnDeploymentConfig` `default/deploy-config` with `spec`.
pub fn addon_deployment_config(spec: Value) -> ResolvedConfig {
    ResolvedConfig {
        group: ADDON_GROUP.to_owned(),
        resource: ADDON_DEPLOYMENT_CONFIGS.to_owned(),
        namespace: "default".to_owned(),
        name: "deploy-config".to_owned(),
        spec_hash: String::new(),
        spec_json: spec.to_string(),
    }
}
