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
use flotilla_api::plugins::v1alpha1::AddOnPlugin;
use kube::runtime::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};

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

/// Subscribes the controller to the feeds; the returned future runs it until dropped.
pub(crate) fn run(
    feeds: &mut crate::feeds::Feeds<'_>,
    client: Client,
    plugins: Arc<Plugins>,
    options: Options,
) -> impl Future<Output = ()> + use<> {
    let (store, plugin_changes) = feeds.plugins().subscribe_all();
    let (_, cma_changes) = feeds.cmas().subscribe_all();
    let controller = Controller::for_stream(plugin_changes, store.clone())
        .watches_stream(cma_changes, move |cma| driving(&store, &cma.name_any()));
    let context = Arc::new(Context {
        client,
        plugins,
        options,
    });
    flotilla_kube::controller::run("addon-plugin-cma", controller, reconcile::reconcile, context)
}
