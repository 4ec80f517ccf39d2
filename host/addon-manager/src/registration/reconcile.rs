//! One reconcile of a ManagedClusterAddOn's registration: read the cluster, CMA and plugin;
//! return early when the add-on is being deleted (its permissions go with it by garbage
//! collection), not ours, or its cluster is unknown; compute `status.namespace` and
//! `status.registrations` purely; ask the plugin for hub permissions, check them, apply them
//! and delete the ones it no longer returns; patch status once if it changed.
//!
//! A plugin fault or a refused registration leaves the permissions already applied as they are
//! and says why in `RegistrationApplied`. Permissions refused by the rules
//! (`flotilla_core::addon::permissions`) remove the add-on's applied ones too: what an earlier
//! answer (or an earlier, laxer hub) granted is not trusted once the add-on asks for more.

use std::collections::BTreeSet;
use std::sync::Arc;

use flotilla_api::addon::consts::{ADDON_NAME_LABEL, managed_cluster_addon as mca};
use flotilla_api::addon::v1alpha1::{ManagedClusterAddOn, ManagedClusterAddOnStatus, RegistrationConfig};
use flotilla_api::cluster::v1::ManagedCluster;
use flotilla_core::addon::configs::config_reference_from_v1alpha1;
use flotilla_core::addon::install::is_managed_by_addon_manager;
use flotilla_core::addon::permissions::{Permission, check_cluster_role, check_permissions};
use flotilla_core::addon::registration::{
    nil_registration, permission_applied, permission_failed, permission_pending,
};
use flotilla_core::conditions::{self, NewCondition};
use flotilla_wasm::inputs;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};

use super::{Context, expected_install_namespace, expected_registrations};
use crate::configs::ADC_RESOURCE;
use crate::error::{self, Result};
use crate::plugins::Served;

/// Field manager of the hub permissions the add-on manager applies.
pub(crate) const PERMISSIONS_FIELD_MANAGER: &str = "addon-manager-registration";

/// Registers one ManagedClusterAddOn (see the module docs).
pub(crate) async fn reconcile(addon: Arc<ManagedClusterAddOn>, ctx: Arc<Context>) -> Result<Action> {
    // As it is about to be: the other controllers' changes not written yet included.
    let addon = ctx.writer.view(addon);
    let _heard = ctx.writer.heard_on_return(crate::Writer::Registration, &addon);
    if addon.meta().deletion_timestamp.is_some() {
        if let Ok(mut applied) = ctx.applied.lock() {
            applied.remove(&addon.uid().unwrap_or_default());
        }
        return Ok(Action::await_change());
    }
    let (name, namespace) = (addon.name_any(), addon.namespace().unwrap_or_default());
    let client = &ctx.client;
    // The caches fill before their answers are trusted; a CMA or cluster that arrives later
    // brings the add-on back through its watch.
    if !crate::caches_ready(&ctx.clusters, &ctx.cmas) {
        return Ok(Action::requeue(crate::CACHE_WAIT));
    }
    let cma = ctx.cmas.get(&ObjectRef::new(&name));
    if !cma.is_some_and(|c| is_managed_by_addon_manager(c.metadata.annotations.as_ref())) {
        return Ok(Action::await_change());
    }
    let Some(cluster) = ctx.clusters.get(&ObjectRef::new(&namespace)) else {
        return Ok(Action::await_change());
    };
    let api: Api<ManagedClusterAddOn> = Api::namespaced(client.clone(), &namespace);
    let current = addon.status.clone().unwrap_or_default();
    let mut status = current.clone();
    let now = Timestamp::now();
    let plugin = match ctx.plugins.for_addon(client, &addon).await? {
        Served::By(plugin) => plugin,
        Served::Pending(message) | Served::Unavailable(message) => {
            set(&mut status, permission_pending(message), now);
            ctx.writer
                .submit(crate::Writer::Registration, &api, &addon, &status, &[])?;
            // The AddOnPlugin watch (or the rollout's configReferences) brings the add-on back
            // once something serves it; the retry covers a template created later.
            return Ok(Action::requeue(ctx.options.retry));
        }
    };

    status.namespace = expected_install_namespace(client, &ctx.configs, &addon, &plugin).await?;
    let mut outcome = Ok(());
    match expected_registrations(&plugin, &namespace, &name) {
        Err(refused) => {
            tracing::warn!(addon = %name, cluster = %namespace, %refused, "registration refused");
            status.registrations = Vec::new();
            set(&mut status, permission_failed(refused.to_string()), now);
        }
        Ok(regs) if regs.is_empty() => {
            status.registrations = regs;
            set(&mut status, nil_registration(), now);
            // Nothing to keep: pruned once per plugin revision and half resync, not at every
            // wake-up of the add-on (two LISTs each). An add-on never registered (no
            // registrations, no RegistrationApplied yet) has nothing of its own to prune.
            let uid = addon.uid().unwrap_or_default();
            let key = crate::fingerprint(&[&plugin.digest()]);
            let never_registered = current.registrations.is_empty()
                && conditions::find(&current.conditions, mca::CONDITION_REGISTRATION_APPLIED).is_none();
            if never_registered {
                remember_applied(&ctx, uid, key);
            } else if !applied_recently(&ctx, &uid, key) {
                outcome = prune(client, &namespace, &name, &BTreeSet::new()).await;
                if outcome.is_ok() {
                    remember_applied(&ctx, uid, key);
                }
            }
        }
        Ok(regs) => {
            let condition = match permissions(&ctx, &addon, &cluster, &plugin, &status.namespace, &regs).await
            {
                Ok(()) => permission_applied(),
                Err(Failure::Refused(message)) => {
                    tracing::warn!(addon = %name, cluster = %namespace, %message, "hub permissions not applied");
                    permission_failed(message)
                }
                Err(Failure::Forbidden(message)) => {
                    tracing::warn!(addon = %name, cluster = %namespace, %message,
                        "hub permissions refused; the add-on's applied ones are removed");
                    if let Ok(mut applied) = ctx.applied.lock() {
                        applied.remove(&addon.uid().unwrap_or_default());
                    }
                    outcome = prune(client, &namespace, &name, &BTreeSet::new()).await;
                    permission_failed(message)
                }
                Err(Failure::Kube(e)) => {
                    outcome = Err(e);
                    permission_failed("applying the hub permissions failed; retrying".to_owned())
                }
                Err(Failure::Denied { message, error }) => {
                    outcome = Err(error);
                    permission_failed(message)
                }
            };
            status.registrations = regs;
            set(&mut status, condition, now);
        }
    }
    ctx.writer
        .submit(crate::Writer::Registration, &api, &addon, &status, &[])?;
    outcome?;
    Ok(Action::requeue(ctx.options.resync))
}

fn set(status: &mut ManagedClusterAddOnStatus, condition: NewCondition<'_>, now: Timestamp) {
    conditions::set(&mut status.conditions, condition, now);
}

/// The `agentInstallNamespace` of the AddOnDeploymentConfig released to the add-on, if any.
pub(super) async fn deployment_config_namespace(
    client: &kube::Client,
    configs: &crate::configs::ReleasedConfigs,
    status: &ManagedClusterAddOnStatus,
) -> Result<Option<String>> {
    for reference in status
        .config_references
        .iter()
        .map(config_reference_from_v1alpha1)
    {
        if reference.group_resource.resource != ADC_RESOURCE {
            continue;
        }
        let Some(desired) = &reference.desired_config else {
            continue;
        };
        if let Some(object) = configs
            .get(
                client,
                &reference.group_resource,
                &desired.referent,
                &desired.spec_hash,
            )
            .await?
        {
            return Ok(object
                .pointer("/spec/agentInstallNamespace")
                .and_then(Value::as_str)
                .filter(|ns| !ns.is_empty())
                .map(str::to_owned));
        }
    }
    Ok(None)
}

/// Why the hub permissions were not (all) applied.
enum Failure {
    /// The plugin failed: a condition, not a retry.
    Refused(String),
    /// The output breaks a permission rule: a condition, and the add-on's applied permissions
    /// are removed.
    Forbidden(String),
    /// A write failed: retried.
    Kube(error::Error),
    /// The apiserver forbade the hub a write: retried, and the condition says what to grant.
    Denied {
        /// For the condition.
        message: String,
        /// For the retry.
        error: error::Error,
    },
}

/// ClusterRole in which the admin grants the hub `bind` on the ClusterRoles add-ons reference,
/// one by one (deploy/hub).
pub(crate) const ADDON_ROLES_GRANT: &str = "flotilla:hub:addon-roles";

/// The condition message when the apiserver forbade applying `what`.
fn denied_message(what: &str, apiserver: &str) -> String {
    format!(
        "the hub may not apply {what}: {apiserver}. A RoleBinding to a ClusterRole whose rules the \
         hub does not hold needs `bind` on that ClusterRole, granted by name in ClusterRole \
         {ADDON_ROLES_GRANT}"
    )
}

/// Calls `hub-permissions`, checks the output (and the ClusterRoles it binds, read from the
/// hub) and applies it as checked; deletes what it no longer returns. Nothing is applied unless
/// every object passed.
async fn permissions(
    ctx: &Context,
    addon: &ManagedClusterAddOn,
    cluster: &ManagedCluster,
    plugin: &flotilla_wasm::Plugin,
    install_namespace: &str,
    regs: &[RegistrationConfig],
) -> std::result::Result<(), Failure> {
    let (name, namespace) = (addon.name_any(), addon.namespace().unwrap_or_default());
    let (cluster_input, addon_input) = plugin_inputs(cluster, addon, install_namespace);
    let objects = plugin
        .hub_permissions(&cluster_input, &addon_input)
        .await
        .map_err(|e| Failure::Refused(format!("hub-permissions: {e}")))?;
    let checked = check_permissions(objects, &namespace, &name, regs)
        .map_err(|e| Failure::Forbidden(format!("hub-permissions: {e}")))?;
    let objects: Vec<Value> = checked.objects.iter().map(Permission::to_value).collect();

    let owner = json!({
        "apiVersion": ManagedClusterAddOn::api_version(&()),
        "kind": ManagedClusterAddOn::kind(&()),
        "name": name,
        "uid": addon.uid().unwrap_or_default(),
    });
    let mut desired = Vec::with_capacity(objects.len());
    for mut object in objects {
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let object_name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let metadata = object
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .ok_or_else(|| Failure::Refused(format!("{kind} {object_name}: no metadata")))?;
        metadata.insert("namespace".into(), json!(namespace));
        metadata.insert("ownerReferences".into(), json!([owner]));
        let labels = metadata.entry("labels").or_insert_with(|| json!({}));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(ADDON_NAME_LABEL.into(), json!(name));
        }
        desired.push((kind, object_name, object));
    }
    // The same permissions are applied (and the stale ones pruned, two LISTs) again only when
    // the plugin's answer changed, or once they are half a resync old (which repairs a hand
    // edit at the next resync), not at every wake-up of the add-on: the inputs change with
    // every annotation the rollout and deploy write, the answer seldom does.
    let uid = addon.uid().unwrap_or_default();
    let key = crate::fingerprint(&[&desired]);
    if applied_recently(ctx, &uid, key) {
        return Ok(());
    }
    // A bound ClusterRole is checked by what it grants now; a later edit of it is checked at
    // the next periodic apply.
    for cluster_role in &checked.cluster_roles {
        let found = read_cluster_role(&ctx.client, cluster_role)
            .await
            .map_err(Failure::Kube)?;
        check_cluster_role(cluster_role, found.as_ref())
            .map_err(|e| Failure::Forbidden(format!("hub-permissions: {e}")))?;
    }
    // Applied together: one round trip per add-on, not one per object.
    let applies = desired.into_iter().map(|(kind, object_name, object)| {
        let (client, namespace) = (ctx.client.clone(), namespace.clone());
        async move {
            let params = PatchParams::apply(PERMISSIONS_FIELD_MANAGER).force();
            let mut what = format!("{kind} {namespace}/{object_name}");
            if let (Some(role_kind), Some(role)) = (
                object.pointer("/roleRef/kind").and_then(Value::as_str),
                object.pointer("/roleRef/name").and_then(Value::as_str),
            ) {
                what.push_str(&format!(" (to {role_kind} {role})"));
            }
            match kind.as_str() {
                "Role" => Api::<Role>::namespaced(client, &namespace)
                    .patch(&object_name, &params, &Patch::Apply(&object))
                    .await
                    .map(drop),
                _ => Api::<RoleBinding>::namespaced(client, &namespace)
                    .patch(&object_name, &params, &Patch::Apply(&object))
                    .await
                    .map(drop),
            }
            .map_err(|e| match &e {
                kube::Error::Api(status) if status.code == 403 => Failure::Denied {
                    message: denied_message(&what, &status.message),
                    error: error::write(what)(e),
                },
                _ => Failure::Kube(error::write(what)(e)),
            })?;
            Ok::<_, Failure>((kind, object_name))
        }
    });
    let keep: BTreeSet<(String, String)> = futures::future::join_all(applies)
        .await
        .into_iter()
        .collect::<std::result::Result<_, Failure>>()?;
    // An add-on never registered has no permissions of its own to prune but what this apply
    // just wrote (the two LISTs were a tenth of a new add-on's requests). One that wrote them
    // and failed before its status said so is pruned at the next periodic apply.
    let current = addon.status.as_ref().map_or(&[][..], |s| s.conditions.as_slice());
    let never_registered = conditions::find(current, mca::CONDITION_REGISTRATION_APPLIED).is_none();
    if !never_registered {
        prune(&ctx.client, &namespace, &name, &keep)
            .await
            .map_err(Failure::Kube)?;
    }
    remember_applied(ctx, uid, key);
    Ok(())
}

/// ClusterRole `name`, if it exists. Read with a LIST by name: the hub may list ClusterRoles
/// (the registration's controllers watch them) and needs no `get` for this.
async fn read_cluster_role(client: &kube::Client, name: &str) -> Result<Option<ClusterRole>> {
    // Field selector values escape `\`, `,` and `=` (Kubernetes' fields.EscapeValue).
    let escaped = name.replace('\\', "\\\\").replace(',', "\\,").replace('=', "\\=");
    let list = Api::<ClusterRole>::all(client.clone())
        .list(&ListParams::default().fields(&format!("metadata.name={escaped}")))
        .await
        .map_err(error::read(format!("ClusterRole {name}")))?;
    Ok(list
        .items
        .into_iter()
        .find(|r| r.metadata.name.as_deref() == Some(name)))
}

/// Whether the add-on's hub permissions were applied from inputs with fingerprint `key` less
/// than half a resync ago.
fn applied_recently(ctx: &Context, uid: &str, key: u64) -> bool {
    let fresh = |(k, at): &(u64, std::time::Instant)| *k == key && at.elapsed() < ctx.options.resync / 2;
    ctx.applied
        .lock()
        .is_ok_and(|applied| applied.get(uid).is_some_and(fresh))
}

/// Records that the add-on's hub permissions were applied from inputs with fingerprint `key`.
fn remember_applied(ctx: &Context, uid: String, key: u64) {
    if let Ok(mut applied) = ctx.applied.lock() {
        applied.insert(uid, (key, std::time::Instant::now()));
    }
}

/// The hook inputs for this cluster and add-on, the add-on in `install_namespace`.
pub(crate) fn plugin_inputs(
    cluster: &ManagedCluster,
    addon: &ManagedClusterAddOn,
    install_namespace: &str,
) -> (flotilla_wasm::types::Cluster, flotilla_wasm::types::Addon) {
    let mut addon = inputs::addon(addon, &[], Some(install_namespace));
    addon.install_namespace = install_namespace.to_owned();
    (inputs::cluster(cluster), addon)
}

/// Deletes the add-on's Roles and RoleBindings in `namespace` that are not in `keep`.
async fn prune(
    client: &kube::Client,
    namespace: &str,
    addon: &str,
    keep: &BTreeSet<(String, String)>,
) -> Result<()> {
    // From the apiserver's watch cache: an object missing from a list a moment old is pruned
    // at the next apply, one already gone answers 404.
    let selector = ListParams::default()
        .labels(&format!("{ADDON_NAME_LABEL}={addon}"))
        .match_any();
    for (kind, plural) in [("Role", "roles"), ("RoleBinding", "rolebindings")] {
        let resource = kube::api::ApiResource {
            group: "rbac.authorization.k8s.io".into(),
            version: "v1".into(),
            api_version: "rbac.authorization.k8s.io/v1".into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
        let list = api
            .list_metadata(&selector)
            .await
            .map_err(error::read(format!("{kind}s of add-on {addon} in {namespace}")))?;
        for object in list.items {
            let object_name = object.name_any();
            // Only objects this manager applied for this add-on (owned by an add-on).
            let ours = object
                .owner_references()
                .iter()
                .any(|o| o.kind == "ManagedClusterAddOn" && o.name == addon);
            if !ours || keep.contains(&(kind.to_owned(), object_name.clone())) {
                continue;
            }
            match api.delete(&object_name, &DeleteParams::default()).await {
                Ok(_) => {
                    tracing::info!(%addon, %namespace, %kind, name = %object_name, "stale hub permission deleted")
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(error::write(format!("{kind} {namespace}/{object_name}"))(e)),
            }
        }
    }
    Ok(())
}
