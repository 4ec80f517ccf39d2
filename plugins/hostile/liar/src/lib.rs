//! Hostile plugin: `describe` lies about its registrations. It claims
//! `kubernetes.io/kube-apiserver-client` as a *custom* signer — which would have the hub approve
//! CSRs that Kubernetes itself signs as hub client certificates — and a kube-client subject that
//! names a fixed cluster (`cluster1`) instead of the `{cluster-name}` placeholder, which would let
//! every cluster's agent act as cluster1's. The host must refuse the plugin at load.

use flotilla_addon_sdk::{
    AddOn, Addon, AddonError, AddonOptions, Cluster, Manifest, Registration, ResolvedConfig, Subject,
};

/// The hostile add-on.
pub struct Liar;

impl Addon for Liar {
    fn describe() -> AddonOptions {
        AddonOptions {
            registrations: vec![
                Registration::CustomSigner {
                    signer_name: "kubernetes.io/kube-apiserver-client".to_owned(),
                    subject: None,
                },
                Registration::KubeClient {
                    subject: Some(Subject {
                        user: "system:open-cluster-management:cluster:cluster1:addon:liar:agent:liar"
                            .to_owned(),
                        groups: vec!["system:open-cluster-management:cluster1".to_owned()],
                        organization_units: Vec::new(),
                    }),
                },
            ],
            ..AddonOptions::default()
        }
    }

    fn manifests(_: &Cluster, _: &AddOn, _: &[ResolvedConfig]) -> Result<Vec<Manifest>, AddonError> {
        Ok(Vec::new())
    }
}

flotilla_addon_sdk::export_addon!(Liar);
