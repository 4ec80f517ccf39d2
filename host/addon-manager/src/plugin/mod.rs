//! The plugin controller: a Ready AddOnPlugin ensures its ClusterManagementAddOn, with the
//! lifecycle annotation `addon-manager`, `addOnMeta` and the supported configs from the plugin's
//! `describe`. A ClusterManagementAddOn annotated `self` belongs to another manager and is left
//! alone, so a Go add-on manager and Flotilla can share a hub.
//!
//! ```text
//!  AddOnPlugin ──────────────────────────┐
//!  ClusterManagementAddOn (same name) ───┴─▶ reconcile(plugin)
//! ```

mod reconcile;

use std::sync::Arc;

use crate::plugins::Plugins;
use flotilla_api::addon::v1alpha1::ClusterManagementAddOn;
use flotilla_api::plugins::v1alpha1::AddOnPlugin;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, ResourceExt};

use crate::Options;

/// What one reconcile needs.
pub(crate) struct Context {
    pub(crate) client: Client,
    pub(crate) plugins: Arc<Plugins>,
    pub(crate) options: Options,
}

/// The add-on name an AddOnPlugin drives (`spec.addOnName`, else its own name).
pub(crate) fn addon_name(plugin: &AddOnPlugin) -> String {
    if plugin.spec.add_on_name.is_empty() {
        plugin.name_any()
    } else {
        plugin.spec.add_on_name.clone()
    }
}

/// The AddOnPlugins driving add-on `addon`.
fn driving(store: &Store<AddOnPlugin>, addon: &str) -> Vec<ObjectRef<AddOnPlugin>> {
    store
        .state()
        .iter()
        .filter(|p| addon_name(p) == addon)
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

/// Runs the controller until dropped.
pub(crate) async fn run(client: Client, plugins: Arc<Plugins>, options: Options) {
    let controller = Controller::new(
        Api::<AddOnPlugin>::all(client.clone()),
        watcher::Config::default(),
    );
    let store = controller.store();
    let controller = controller.watches(
        Api::<ClusterManagementAddOn>::all(client.clone()),
        watcher::Config::default(),
        move |cma| driving(&store, &cma.name_any()),
    );
    let context = Arc::new(Context {
        client,
        plugins,
        options,
    });
    flotilla_kube::controller::run("addon-plugin-cma", controller, reconcile::reconcile, context).await;
}
