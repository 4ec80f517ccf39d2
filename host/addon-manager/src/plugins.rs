//! Which plugin serves an add-on: the one home of that decision for every controller.
//!
//! ```text
//!   ManagedClusterAddOn <name> on <cluster>
//!     ├─ an AddOnPlugin drives <name> and is loaded ─────────▶ that plugin (PluginRegistry)
//!     └─ else status.configReferences names an AddOnTemplate (addon.open-cluster-management.io
//!        addontemplates, released by the rollout: CMA default, placement or MCA override)
//!          ├─ template missing ──────────────────────────────▶ Unavailable (condition text)
//!          └─ (add-on, template name, spec hash) ─ cached ───▶ the built-in AddOnTemplate
//!                   or load the embedded component granting      component, one instance per
//!                   it the template (WASI env), same limits     template revision
//! ```
//!
//! The template name comes from `status.configReferences`, which the cluster's own agent may
//! write as well as the rollout; so a template is served to an add-on (and its signing CA used
//! for it) only when it is that add-on's: its `spec.addonName` names the add-on. An agent that
//! names another add-on's template gets nothing from it (Unavailable, with the rule in the
//! message and a warning).
//!
//! One instance per template revision because `describe` and `hub-permissions` take no configs
//! in the frozen contract: the template must be the instance's own (see
//! `plugins/addon-template`). A template whose spec changes gets a new instance; the previous
//! one is dropped once no call holds it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use flotilla_api::addon::v1alpha1::{AddOnTemplate, ManagedClusterAddOn};
use flotilla_api::addon::v1beta1::{ConfigGroupResource, ConfigReferent};
use flotilla_builtin_plugins::{ADDON_TEMPLATE, ADDON_TEMPLATE_ENV};
use flotilla_core::addon::configs::config_reference_from_v1alpha1;
use flotilla_core::addon::install::template_for_addon;
use flotilla_core::addon::spec_hash::spec_hash;
use flotilla_wasm::{Limits, Plugin, PluginRegistry};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::error::{self, Result};

/// Group of AddOnTemplates in config references.
pub(crate) const TEMPLATE_GROUP: &str = "addon.open-cluster-management.io";
/// Resource of AddOnTemplates in config references.
pub(crate) const TEMPLATE_RESOURCE: &str = "addontemplates";
/// Where a template's signing CA lives when it names no namespace (OCM: the add-on manager's).
const HUB_NAMESPACE: &str = "open-cluster-management-hub";

/// Template instances: (add-on, template name) → (spec hash, the instance or why the runtime
/// refused it). A refusal is kept too, so a broken template is not loaded again on every
/// reconcile; a new spec hash tries again.
type TemplateInstances = HashMap<(String, String), (String, Result<Arc<Plugin>, String>)>;

/// The answer of [`Plugins::for_addon`].
#[derive(Clone)]
pub(crate) enum Served {
    /// This plugin serves the add-on.
    By(Arc<Plugin>),
    /// Nothing serves it yet (no plugin loaded, no template released to it); worth a retry.
    Pending(String),
    /// Its AddOnTemplate cannot serve it (missing, or refused by the runtime): a message a
    /// person can act on, for a condition.
    Unavailable(String),
}

/// The AddOnTemplate the rollout released to `addon` (its desired config of type
/// addontemplates), if any: its name and the spec hash released.
fn template_of(addon: &ManagedClusterAddOn) -> Option<(String, String)> {
    addon
        .status
        .iter()
        .flat_map(|s| &s.config_references)
        .map(config_reference_from_v1alpha1)
        .find(|r| r.group_resource.group == TEMPLATE_GROUP && r.group_resource.resource == TEMPLATE_RESOURCE)
        .and_then(|r| r.desired_config)
        .map(|d| (d.referent.name, d.spec_hash))
}

/// The AddOnTemplates as the feed caches them, and the spec hash of each as the apiserver
/// serves it (what the rollout releases), by name: `(resourceVersion, hash)`. A typed
/// template serialises differently from the object served, so the hash is taken from the
/// object read once per resourceVersion.
#[derive(Debug)]
struct TemplateCache {
    store: Store<AddOnTemplate>,
    hashes: Mutex<HashMap<String, (String, String)>>,
}

impl TemplateCache {
    fn new(store: Store<AddOnTemplate>) -> Self {
        Self {
            store,
            hashes: Mutex::default(),
        }
    }

    /// The cached template `name` if it is the one released with spec hash `released`.
    fn released(&self, name: &str, released: &str) -> Option<AddOnTemplate> {
        let cached = self.store.get(&ObjectRef::new(name))?;
        let version = cached.metadata.resource_version.as_deref()?;
        let hashes = self.hashes.lock().unwrap_or_else(PoisonError::into_inner);
        let (known, hash) = hashes.get(name)?;
        (known == version && hash == released).then(|| AddOnTemplate::clone(&cached))
    }

    fn remember(&self, name: &str, version: String, hash: String) {
        self.hashes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), (version, hash));
    }
}

/// AddOnTemplate `name` as released with spec hash `released`: from the cache, when given and
/// holding that spec (every reconcile of every template add-on reads it), else from the
/// apiserver, which a cache still behind the rollout's release must not stand in for.
async fn read_template(
    client: &Client,
    cache: Option<&TemplateCache>,
    name: &str,
    released: &str,
) -> Result<Option<AddOnTemplate>> {
    if let Some(template) = cache.and_then(|c| c.released(name, released)) {
        return Ok(Some(template));
    }
    let resource = ConfigGroupResource {
        group: TEMPLATE_GROUP.to_owned(),
        resource: TEMPLATE_RESOURCE.to_owned(),
    };
    let referent = ConfigReferent {
        namespace: String::new(),
        name: name.to_owned(),
    };
    let Some(object) = crate::configs::config_object(client, &resource, &referent).await? else {
        return Ok(None);
    };
    let template: AddOnTemplate = serde_json::from_value(object.clone())
        .map_err(|e| error::read(format!("AddOnTemplate {name}"))(kube::Error::SerdeError(e)))?;
    if let (Some(cache), Some(version), Ok(hash)) = (
        cache,
        template.metadata.resource_version.clone(),
        spec_hash(&object),
    ) {
        cache.remember(name, version, hash);
    }
    Ok(Some(template))
}

/// What [`released_template`] found.
enum Released {
    /// No template released to the add-on.
    None,
    /// A template that may not serve the add-on: why, for a condition.
    Refused(String),
    /// The add-on's own template.
    Template(Box<AddOnTemplate>),
}

/// The AddOnTemplate released to `addon`, if it is the add-on's own: one whose `spec.addonName`
/// names the add-on. The name is read from `status.configReferences`, which the cluster's agent
/// may write, so another add-on's template (with its manifests, registrations and signing CA)
/// is refused, with a warning naming the rule.
async fn released_template(
    client: &Client,
    templates: Option<&TemplateCache>,
    addon: &ManagedClusterAddOn,
) -> Result<Released> {
    let Some((template_name, released)) = template_of(addon) else {
        return Ok(Released::None);
    };
    let name = addon.name_any();
    let Some(template) = read_template(client, templates, &template_name, &released).await? else {
        return Ok(Released::Refused(format!(
            "AddOnTemplate {template_name} (the config of add-on {name}) not found"
        )));
    };
    if let Err(refused) = template_for_addon(&template.spec.addon_name, &template_name, &name) {
        let cluster = addon.namespace().unwrap_or_default();
        tracing::warn!(addon = %name, %cluster, template = %template_name, %refused, "AddOnTemplate refused");
        return Ok(Released::Refused(refused));
    }
    Ok(Released::Template(Box::new(template)))
}

fn served(loaded: &Result<Arc<Plugin>, String>) -> Served {
    match loaded {
        Ok(plugin) => Served::By(Arc::clone(plugin)),
        Err(message) => Served::Unavailable(message.clone()),
    }
}

/// The plugins of the hub: AddOnPlugin revisions and built-in template instances.
#[derive(Debug)]
pub struct Plugins {
    registry: Arc<PluginRegistry>,
    /// Template instances by (add-on, template name): the spec hash they were loaded for.
    templates: Mutex<TemplateInstances>,
    /// The AddOnTemplates (the feed's cache).
    template_cache: TemplateCache,
}

impl Plugins {
    /// Plugins from `registry` (filled by the AddOnPlugin controller) plus built-in templates,
    /// read from `template_cache`.
    pub(crate) fn new(registry: Arc<PluginRegistry>, template_cache: Store<AddOnTemplate>) -> Self {
        Self {
            registry,
            templates: Mutex::new(HashMap::new()),
            template_cache: TemplateCache::new(template_cache),
        }
    }

    /// The AddOnPlugin revision serving `addon`, if one is loaded (no template lookup).
    pub(crate) fn loaded(&self, addon: &str) -> Option<Arc<Plugin>> {
        self.registry.get(addon)
    }

    /// The `AddOnPlugin` that won the claim on add-on `addon`, if one did: the only one whose
    /// spec (signers' CAs) counts for it.
    pub(crate) fn owner(&self, addon: &str) -> Option<String> {
        self.registry.owner(addon)
    }

    /// The plugin that serves `addon` on its cluster (see the module docs).
    pub(crate) async fn for_addon(&self, client: &Client, addon: &ManagedClusterAddOn) -> Result<Served> {
        let name = addon.name_any();
        if let Some(plugin) = self.registry.get(&name) {
            return Ok(Served::By(plugin));
        }
        let template = match released_template(client, Some(&self.template_cache), addon).await? {
            Released::None => {
                return Ok(Served::Pending(format!(
                    "no AddOnPlugin drives add-on {name} and no AddOnTemplate has been resolved for it yet"
                )));
            }
            Released::Refused(message) => return Ok(Served::Unavailable(message)),
            Released::Template(template) => template,
        };
        let template_name = template.name_any();
        let object = serde_json::to_value(&template).unwrap_or_default();
        let hash = spec_hash(&object).unwrap_or_default();
        let key = (name.clone(), template_name.clone());
        if let Some((loaded_hash, loaded)) = self.cache().get(&key)
            && *loaded_hash == hash
        {
            return Ok(served(loaded));
        }
        let grant = json!({"name": template_name, "spec": object.get("spec")}).to_string();
        let loaded = self
            .registry
            .runtime()
            .load_granting(
                &name,
                ADDON_TEMPLATE.to_vec(),
                Limits::default(),
                vec![(ADDON_TEMPLATE_ENV.to_owned(), grant)],
            )
            .await;
        let loaded = match loaded {
            Ok(plugin) => {
                tracing::info!(addon = %name, template = %template_name, %hash, "AddOnTemplate plugin instance loaded");
                Ok(Arc::new(plugin))
            }
            Err(e) => Err(format!("AddOnTemplate {template_name} cannot be served: {e}")),
        };
        let answer = served(&loaded);
        self.cache().insert(key, (hash, loaded));
        Ok(answer)
    }

    /// The signing CA (`namespace`, `name` of a `kubernetes.io/tls` Secret) that the
    /// AddOnTemplate of `addon` names for custom signer `signer` (`registration[].customSigner
    /// .signingCA`; OCM's hub namespace when it names none); `None` when the add-on has no
    /// template or its template does not declare the signer.
    pub(crate) async fn template_signing_ca(
        client: &Client,
        addon: &ManagedClusterAddOn,
        signer: &str,
    ) -> Result<Option<(String, String)>> {
        // Read from the apiserver: a CSR is signed by what the template says now.
        let Released::Template(template) = released_template(client, None, addon).await? else {
            return Ok(None);
        };
        Ok(template
            .spec
            .registration
            .iter()
            .flatten()
            .filter_map(|r| r.custom_signer.as_ref())
            .find(|c| c.signer_name == signer)
            .map(|c| {
                let namespace = if c.signing_ca.namespace.is_empty() {
                    HUB_NAMESPACE.to_owned()
                } else {
                    c.signing_ca.namespace.clone()
                };
                (namespace, c.signing_ca.name.clone())
            }))
    }

    /// Drops the template instances of add-on names not in `live`; returns how many went.
    pub(crate) fn retain_templates_of(&self, live: &std::collections::BTreeSet<String>) -> usize {
        let mut cache = self.cache();
        let before = cache.len();
        cache.retain(|(addon, _), _| live.contains(addon));
        before - cache.len()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, TemplateInstances> {
        self.templates.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
