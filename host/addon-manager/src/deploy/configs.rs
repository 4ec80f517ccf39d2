//! First step: the configs the add-on renders with. Only configs the rollout released to this
//! cluster (`status.configReferences`) count, and only while each object still has the
//! released spec hash: a config that moved on since its release waits, its works staying as
//! they are, until the rollout releases the new hash here, so a config change reaches the
//! clusters batch by batch. An unsupported config type is refused before anything is looked
//! up, and a released config that is gone stops the deploy with a condition naming it.

use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_api::addon::v1beta1::{AddOnConfig, ConfigReference};
use flotilla_core::addon::configs::{first_unsupported, missing_configs_message};
use flotilla_core::addon::status::manifests_not_rendered;
use kube::Resource;
use serde_json::Value;

use super::Context;
use super::status::{Report, configs_released};
use super::works;
use crate::configs::observed;
use crate::error::Result;

/// A released config object, with the resource its reference names it by (the apiserver's).
pub(super) type Released = (Value, String);

/// The released config objects the add-on renders with, or `None` when the deploy stops here
/// (the report says why, or the rollout has released nothing to the add-on yet).
pub(super) async fn released(
    ctx: &Context,
    addon: &ManagedClusterAddOn,
    report: &mut Report<'_>,
) -> Result<Option<Vec<Released>>> {
    if let Some(gr) = first_unsupported(&addon.spec.configs, &report.status().supported_configs) {
        report.progress(&works::current(ctx, addon), Some(gr));
        return Ok(None);
    }
    if !configs_released(report.status()) {
        return Ok(None);
    }
    let Read {
        objects,
        missing,
        moved_on,
    } = read(ctx, report.references()).await?;
    if !missing.is_empty() {
        report.set(manifests_not_rendered(&missing_configs_message(&missing)));
        return Ok(None);
    }
    // Being deleted, the add-on leaves the rollout: its hooks render with the configs as they are.
    if moved_on && addon.meta().deletion_timestamp.is_none() {
        report.follow(&works::current(ctx, addon));
        return Ok(None);
    }
    Ok(Some(objects))
}

/// The released configs as read.
struct Read {
    /// Those found.
    objects: Vec<Released>,
    /// Those gone.
    missing: Vec<AddOnConfig>,
    /// Whether one found has moved on from the spec hash released.
    moved_on: bool,
}

/// Reads the config objects `references` released.
async fn read(ctx: &Context, references: &[ConfigReference]) -> Result<Read> {
    let mut read = Read {
        objects: Vec::new(),
        missing: Vec::new(),
        moved_on: false,
    };
    for reference in references {
        let Some(desired) = reference.desired_config.as_ref() else {
            continue;
        };
        match ctx
            .configs
            .get(
                &ctx.client,
                &reference.group_resource,
                &desired.referent,
                &desired.spec_hash,
            )
            .await?
        {
            None => read.missing.push(AddOnConfig {
                group_resource: reference.group_resource.clone(),
                referent: desired.referent.clone(),
            }),
            Some(object) => {
                read.moved_on |= observed(&object).is_none_or(|o| o.spec_hash != desired.spec_hash);
                read.objects
                    .push((object, reference.group_resource.resource.clone()));
            }
        }
    }
    Ok(read)
}
