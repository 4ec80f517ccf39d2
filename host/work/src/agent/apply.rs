//! Writing one manifest to the managed cluster with its update strategy (ocm-reference §3):
//!
//! - `Update`: read, compare ([`merge_for_update`]), replace only when the manifest's fields
//!   differ; create when absent;
//! - `CreateOnly`: create when absent, else only add (or drop) this work's owner reference;
//! - `ServerSideApply`: apply under the field manager (`work-agent` by default), forced when
//!   asked, without the ignored fields once the object exists; a conflict fails the manifest;
//! - `ReadOnly`: only read; never written, never owned.

use flotilla_api::work::{
    consts::DEFAULT_FIELD_MANAGER,
    v1::{IgnoreFieldsCondition, ServerSideApplyConfig, UpdateStrategyType},
};
use flotilla_core::work::agent::{
    conditions::ApplyOutcome, feedback::to_query, ownership::merge_owner_references, update::merge_for_update,
};
use jsonpath_rust::{JsonPath as _, query::queryable::Queryable as _};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{
    Api,
    api::{DynamicObject, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

/// How applying failed, as the manifest's `Applied` condition tells it.
pub type ApplyFailure = ApplyOutcome;

fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.reason),
        other => other.to_string(),
    }
}

fn failed(action: &str) -> impl FnOnce(kube::Error) -> ApplyFailure + '_ {
    move |error| ApplyOutcome::Failed(format!("{action}: {}", describe(&error)))
}

fn to_object(value: Value) -> Result<DynamicObject, ApplyFailure> {
    serde_json::from_value(value).map_err(|e| ApplyOutcome::Failed(format!("not a Kubernetes object: {e}")))
}

fn with_owner(mut desired: Value, owner: &OwnerReference) -> Value {
    let owners: Vec<OwnerReference> = desired
        .pointer("/metadata/ownerReferences")
        .and_then(|o| serde_json::from_value(o.clone()).ok())
        .unwrap_or_default();
    if let Some(merged) = merge_owner_references(&owners, owner)
        && let Some(meta) = desired.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.insert(
            "ownerReferences".into(),
            serde_json::to_value(merged).unwrap_or(Value::Null),
        );
    }
    desired
}

async fn create(
    api: &Api<DynamicObject>,
    desired: Value,
    owner: &OwnerReference,
) -> Result<DynamicObject, ApplyFailure> {
    let object = to_object(with_owner(desired, owner))?;
    api.create(&PostParams::default(), &object)
        .await
        .map_err(failed("create"))
}

/// Applies `desired` (named `name`) through `api` with `strategy`, owned through `owner` (or
/// its removal marker). Returns the object as it now is. `recorded` says whether the work's
/// record already holds the object: if not, `Update` and `CreateOnly` try to create it first
/// (one request for a new object instead of a read and a create) and fall back to reading
/// it when it exists.
pub async fn apply(
    api: &Api<DynamicObject>,
    name: &str,
    desired: Value,
    strategy: UpdateStrategyType,
    ssa: Option<&ServerSideApplyConfig>,
    owner: &OwnerReference,
    recorded: bool,
) -> Result<DynamicObject, ApplyFailure> {
    if !recorded
        && matches!(
            strategy,
            UpdateStrategyType::Update | UpdateStrategyType::CreateOnly
        )
    {
        let object = to_object(with_owner(desired.clone(), owner))?;
        match api.create(&PostParams::default(), &object).await {
            Ok(created) => return Ok(created),
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(failed("create")(error)),
        }
    }
    match strategy {
        UpdateStrategyType::ReadOnly => api.get_opt(name).await.map_err(failed("read"))?.ok_or_else(|| {
            ApplyOutcome::Failed("the object does not exist; ReadOnly never creates it".into())
        }),
        UpdateStrategyType::CreateOnly => match api.get_opt(name).await.map_err(failed("read"))? {
            None => create(api, desired, owner).await,
            Some(live) => {
                let owners = live.metadata.owner_references.clone().unwrap_or_default();
                match merge_owner_references(&owners, owner) {
                    None => Ok(live),
                    Some(merged) => {
                        let patch = json!({"metadata": {
                            "resourceVersion": live.metadata.resource_version,
                            "ownerReferences": merged,
                        }});
                        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                            .await
                            .map_err(failed("update owner references"))
                    }
                }
            }
        },
        UpdateStrategyType::Update => match api.get_opt(name).await.map_err(failed("read"))? {
            None => create(api, desired, owner).await,
            Some(live) => {
                let live_value =
                    serde_json::to_value(&live).map_err(|e| ApplyOutcome::Failed(format!("encode: {e}")))?;
                match merge_for_update(&desired, &live_value, owner) {
                    None => Ok(live),
                    Some(merged) => api
                        .replace(name, &PostParams::default(), &to_object(merged)?)
                        .await
                        .map_err(failed("update")),
                }
            }
        },
        UpdateStrategyType::ServerSideApply => server_side_apply(api, name, desired, ssa, owner).await,
    }
}

async fn server_side_apply(
    api: &Api<DynamicObject>,
    name: &str,
    mut desired: Value,
    ssa: Option<&ServerSideApplyConfig>,
    owner: &OwnerReference,
) -> Result<DynamicObject, ApplyFailure> {
    let manager = ssa
        .map(|c| c.field_manager.as_str())
        .filter(|m| !m.is_empty())
        .unwrap_or(DEFAULT_FIELD_MANAGER);
    let ignore = ssa.map(|c| c.ignore_fields.as_slice()).unwrap_or_default();
    if !ignore.is_empty()
        && let Some(live) = api.get_opt(name).await.map_err(failed("read"))?
    {
        let live = serde_json::to_value(&live).unwrap_or(Value::Null);
        for field in ignore {
            for path in &field.json_paths {
                let query = to_query(path);
                let differs = match field.condition {
                    IgnoreFieldsCondition::OnSpokePresent => true,
                    // Leave the field alone only where someone changed it on the managed cluster.
                    IgnoreFieldsCondition::OnSpokeChange => {
                        let ours = desired.query(&query);
                        let theirs = live.query(&query);
                        match (ours, theirs) {
                            (Ok(a), Ok(b)) => a != b,
                            _ => true,
                        }
                    }
                };
                if differs {
                    desired
                        .delete_by_path(&query)
                        .map_err(|e| ApplyOutcome::IgnoreFieldError(format!("jsonPath {path:?}: {e}")))?;
                }
            }
            for pointer in &field.json_pointers {
                if !pointer.starts_with('/') {
                    return Err(ApplyOutcome::IgnoreFieldError(format!(
                        "jsonPointer {pointer:?} must start with /"
                    )));
                }
                if let Some((parent, key)) = pointer.rsplit_once('/')
                    && let Some(Value::Object(map)) = desired.pointer_mut(parent)
                {
                    map.remove(&key.replace("~1", "/").replace("~0", "~"));
                }
            }
            if !field.jq_path_expressions.is_empty() {
                return Err(ApplyOutcome::IgnoreFieldError(
                    "jqPathExpressions are not supported; use jsonPaths or jsonPointers".into(),
                ));
            }
        }
    }
    let owned = !owner.uid.ends_with('-');
    if let Some(meta) = desired.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        if owned {
            meta.insert("ownerReferences".into(), json!([owner]));
        }
    }
    let mut params = PatchParams::apply(manager);
    if ssa.is_some_and(|c| c.force) {
        params = params.force();
    }
    api.patch(name, &params, &Patch::Apply(&desired))
        .await
        .map_err(|error| match &error {
            kube::Error::Api(status) if status.code == 409 => ApplyOutcome::Failed(format!(
                "server-side apply conflict (set force: true to take the fields over): {}",
                status.message
            )),
            _ => failed("server-side apply")(error),
        })
}
