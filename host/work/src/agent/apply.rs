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
    v1::{ServerSideApplyConfig, UpdateStrategyType},
};
use flotilla_core::work::agent::{
    conditions::ApplyOutcome,
    ignore,
    ownership::{adoption_owner, merge_owner_references},
    update::merge_for_update,
};
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

/// How often a write that lost a race with another writer (409: created meanwhile, or changed
/// since it was read) is tried again from a fresh read, as client-go's `RetryOnConflict` does.
/// Several agents adding their owner reference to one shared object race this way.
const RACE_ATTEMPTS: usize = 5;

/// One attempt's result: done, or lost a race and worth trying again.
enum Attempt {
    Done(Box<DynamicObject>),
    Raced,
}

/// `result` as an [`Attempt`]: a 409 is a lost race, anything else fails as `action`.
fn attempt(result: kube::Result<DynamicObject>, action: &str) -> Result<Attempt, ApplyFailure> {
    match result {
        Ok(object) => Ok(Attempt::Done(Box::new(object))),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::Raced),
        Err(error) => Err(failed(action)(error)),
    }
}

async fn create(
    api: &Api<DynamicObject>,
    desired: Value,
    owner: &OwnerReference,
) -> Result<Attempt, ApplyFailure> {
    let object = to_object(with_owner(desired, owner))?;
    attempt(api.create(&PostParams::default(), &object).await, "create")
}

/// Applies `desired` (named `name`) through `api` with `strategy`, owned through `owner` (or
/// its removal marker). Returns the object as it now is. `recorded` says whether the work's
/// record already holds the object: if not, `Update` and `CreateOnly` try to create it first
/// (one request for a new object instead of a read and a create) and fall back to reading
/// it when it exists. A write that races another writer is tried again from a fresh read.
/// With `release_pre_existing`, an object found already there without `owner` is applied
/// under the removal marker instead ([`adoption_owner`]): released, never deleted, later.
#[allow(clippy::too_many_arguments)]
pub async fn apply(
    api: &Api<DynamicObject>,
    name: &str,
    desired: Value,
    strategy: UpdateStrategyType,
    ssa: Option<&ServerSideApplyConfig>,
    owner: &OwnerReference,
    recorded: bool,
    release_pre_existing: bool,
) -> Result<DynamicObject, ApplyFailure> {
    if strategy == UpdateStrategyType::ServerSideApply {
        let owner = if release_pre_existing && !owner.uid.ends_with('-') {
            let live = api.get_opt(name).await.map_err(failed("read"))?;
            let owners = live.map(|l| l.metadata.owner_references.unwrap_or_default());
            adoption_owner(owner, owners.as_deref(), true)
        } else {
            owner.clone()
        };
        return server_side_apply(api, name, desired, ssa, &owner).await;
    }
    if strategy == UpdateStrategyType::ReadOnly {
        return api.get_opt(name).await.map_err(failed("read"))?.ok_or_else(|| {
            ApplyOutcome::Failed("the object does not exist; ReadOnly never creates it".into())
        });
    }
    let mut create_first = !recorded;
    for _ in 0..RACE_ATTEMPTS {
        let outcome = if create_first {
            create_first = false;
            create(api, desired.clone(), owner).await?
        } else {
            read_and_write(api, name, desired.clone(), strategy, owner, release_pre_existing).await?
        };
        if let Attempt::Done(object) = outcome {
            return Ok(*object);
        }
    }
    Err(ApplyOutcome::Failed(format!(
        "another writer kept changing the object; gave up after {RACE_ATTEMPTS} attempts"
    )))
}

/// One read-compare-write of `Update` or `CreateOnly`.
async fn read_and_write(
    api: &Api<DynamicObject>,
    name: &str,
    desired: Value,
    strategy: UpdateStrategyType,
    owner: &OwnerReference,
    release_pre_existing: bool,
) -> Result<Attempt, ApplyFailure> {
    let Some(live) = api.get_opt(name).await.map_err(failed("read"))? else {
        return create(api, desired, owner).await;
    };
    let owner = &adoption_owner(
        owner,
        Some(live.metadata.owner_references.as_deref().unwrap_or_default()),
        release_pre_existing,
    );
    if strategy == UpdateStrategyType::CreateOnly {
        let owners = live.metadata.owner_references.clone().unwrap_or_default();
        return match merge_owner_references(&owners, owner) {
            None => Ok(Attempt::Done(Box::new(live))),
            Some(merged) => {
                let patch = json!({"metadata": {
                    "resourceVersion": live.metadata.resource_version,
                    "ownerReferences": merged,
                }});
                attempt(
                    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await,
                    "update owner references",
                )
            }
        };
    }
    let live_value = serde_json::to_value(&live).map_err(|e| ApplyOutcome::Failed(format!("encode: {e}")))?;
    match merge_for_update(&desired, &live_value, owner) {
        None => Ok(Attempt::Done(Box::new(live))),
        Some(merged) => attempt(
            api.replace(name, &PostParams::default(), &to_object(merged)?)
                .await,
            "update",
        ),
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
    if !ignore.is_empty() {
        let (stripped, hash) = ignore::strip(&desired, ignore).map_err(ApplyOutcome::IgnoreFieldError)?;
        match api.get_opt(name).await.map_err(failed("read"))? {
            // Created whole: the ignored fields get their first value from the hub.
            None => ignore::set_hash(&mut desired, &hash),
            Some(live) => {
                let owned_by = |uid: &str| {
                    live.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|r| r.uid == uid)
                };
                let live_json = serde_json::to_value(&live).unwrap_or(Value::Null);
                if ignore::unchanged(&live_json, &hash) && (owner.uid.ends_with('-') || owned_by(&owner.uid))
                {
                    return Ok(live);
                }
                desired = stripped;
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
