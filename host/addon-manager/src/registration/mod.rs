//! The registration controller: for each ManagedClusterAddOn driven by a plugin, writes
//! `status.registrations` and `status.namespace` from the plugin's `describe()` (expanded and
//! checked by `flotilla_core::addon::registration`), and applies the plugin's
//! `hub-permissions()` Roles and RoleBindings in the cluster namespace (owned by the add-on, so
//! garbage collection removes them with it), reporting `RegistrationApplied`.
//!
//! ```text
//!  ManagedClusterAddOn ─────────────────────────┐
//!  ClusterManagementAddOn, AddOnPlugin (name) ──┼─▶ reconcile(add-on) ─▶ status.registrations,
//!                                               │                        status.namespace,
//!                                               │                        RegistrationApplied
//!                                               └───────────────────────▶ Role/RoleBinding in <cluster>
//! ```
//!
//! The klusterlet reads `status.registrations` to make its CSRs; the CSR controller
//! (`crate::csr`) checks them against the same registrations.

mod reconcile;

pub(crate) use reconcile::plugin_inputs;

use std::sync::Arc;

use crate::plugins::Plugins;
use flotilla_api::addon::v1alpha1::{ClusterManagementAddOn, ManagedClusterAddOn, Subject};
use flotilla_api::plugins::v1alpha1::AddOnPlugin;
use flotilla_core::addon::registration::Declared;
use flotilla_wasm::types::Registration;
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, ResourceExt};

use crate::Options;

/// What one reconcile needs.
pub(crate) struct Context {
    pub(crate) client: Client,
    pub(crate) plugins: Arc<Plugins>,
    pub(crate) options: Options,
}

/// The plugin's declared registrations in the core's terms.
pub(crate) fn declared(registrations: &[Registration]) -> Vec<Declared> {
    let subject = |s: &flotilla_wasm::types::Subject| Subject {
        user: s.user.clone(),
        groups: s.groups.clone(),
        organization_units: s.organization_units.clone(),
    };
    registrations
        .iter()
        .map(|r| match r {
            Registration::KubeClient(kc) => Declared::KubeClient(kc.subject.as_ref().map(subject)),
            Registration::CustomSigner(cs) => Declared::CustomSigner {
                signer_name: cs.signer_name.clone(),
                subject: cs.subject.as_ref().map(subject),
            },
        })
        .collect()
}

/// Runs the controller until dropped.
pub(crate) async fn run(client: Client, plugins: Arc<Plugins>, options: Options) {
    let controller = Controller::new(
        Api::<ManagedClusterAddOn>::all(client.clone()),
        watcher::Config::default(),
    );
    let (by_cma, by_plugin) = (controller.store(), controller.store());
    let controller = controller
        .watches(
            Api::<ClusterManagementAddOn>::all(client.clone()),
            watcher::Config::default(),
            move |cma| crate::addons_named(&by_cma, &cma.name_any()),
        )
        .watches(
            Api::<AddOnPlugin>::all(client.clone()),
            watcher::Config::default(),
            move |plugin| crate::addons_named(&by_plugin, &crate::plugin::addon_name(&plugin)),
        );
    let context = Arc::new(Context {
        client,
        plugins,
        options,
    });
    flotilla_kube::controller::run("addon-registration", controller, reconcile::reconcile, context).await;
}
